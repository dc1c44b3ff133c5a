"""Stepping a model over a frame: substeps, adaptive subdivision and the constraint pass.

Adaptive subdivision
--------------------
A substep that fails — its Newton iteration stops at the cap with an update still above
``SolverSettings.subdivision_threshold``, or it produces non-finite values (constraint forces
included) — is redone as two half steps, the base motion and everything animated sampled at the
midpoint through the same sources, and so on recursively down to ``max_subdivision_depth``
halvings. There, trees that the Newton iteration leaves unfinished go on with Newton's method
and their exact Jacobian (:func:`.integrators.step_implicit`, ``finish_exactly``): the iteration
matrix leaves out the Coriolis coupling between links, which can slow the iteration more than a
smaller step helps. Trees whose step still fails then fall back for that step
(:class:`.integrators.Fallback`: carried rigidly with their bases, their velocities zero) while
the others keep theirs, and the step's statistics name them; with ``SolverSettings.strict`` the
simulation stops with :class:`.SimulationDivergedError` instead, naming the strand. A step that
leaves a joint more than ``ConstraintSettings.limit_tolerance`` past its limit, and further past
than it was at the step's start, is halved the same way (the error of the limit rows falls with
the square of the step), and accepted as it is at the deepest halving. Substeps that do not fail
are computed exactly as without this safeguard. The whole model (or, when stepped in worker
processes, the worker's whole group of trees) is redone, not only the trees that failed: trees
are independent, so the others merely take smaller steps. On soft hair thrown about by contacts
steps fail often (695 halvings in 52 frames of 300 strands draped over a shaking head, most for
a few strands each), and redoing only the failing trees on a model of their own
(:func:`.model.select_trees`) is the larger speed-up left there (``docs/performance.md``).

Constraints
-----------
A simulation with obstacles, joint limits or animated constraints
(:class:`.constraints.ConstraintSolver`) steps all its trees in one process. Each substep records
its start (:meth:`.constraints.ConstraintSolver.begin`, with the obstacles' motion and the bases
sampled at the substep's start), takes the free implicit step, and corrects it by the constraint
forces (:meth:`.constraints.ConstraintSolver.resolve`) unless the free step failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import integrators
from .base_motion import BaseMotion
from .constraints import ConstraintSolver
from .dynamics import Data
from .errors import SimulationDivergedError
from .integrators import Fallback, SolverSettings, StepStats, non_finite_trees, step
from .interaction import Interaction
from .model import Model
from .obstacles import ObstacleMotion
from .pose import Pose
from .state import Control, State

if TYPE_CHECKING:
    from .fields import ForceFields

BaseSource = BaseMotion | Callable[[float], BaseMotion]
PoseSource = Pose | Callable[[float], Pose]
ObstacleSource = ObstacleMotion | Callable[[float], ObstacleMotion]


class Inputs:
    """What drives the steps at a time: the base motion and the control fields animated by
    callables (parameters, the target pose).

    The substeps' end ``times`` are sampled once each and kept, as every group of trees steps to
    them (:mod:`.workers`); other times (the halves of a subdivided step) are sampled whenever
    asked.
    """

    def __init__(
        self,
        base: BaseSource,
        animate: Callable[[float], list[str]],
        control: Control,
        times: list[float],
    ) -> None:
        self._base, self._animate, self._control = base, animate, control
        self._kept: dict[float, tuple[BaseMotion, dict[str, Any]] | None] = dict.fromkeys(times)

    def __call__(self, time: float) -> tuple[BaseMotion, dict[str, Any]]:
        """The base motion and the animated control fields (the whole model's) at ``time``."""
        sample = self._kept.get(time)
        if sample is None:
            motion = self._base(time) if callable(self._base) else self._base
            names = self._animate(time)
            sample = (motion, {name: getattr(self._control, name) for name in names})
            if time in self._kept:
                self._kept[time] = sample
        return sample


def set_inputs(
    model: Model,
    control: Control,
    inputs: Callable[[float], tuple[BaseMotion, dict[str, Any]]],
    time: float,
) -> None:
    """Set in ``control`` the base motion and the animated control fields that ``inputs`` gives
    at ``time``."""
    motion, updates = inputs(time)
    control.set_base_motion(model, motion)
    for name, value in updates.items():
        setattr(control, name, value)


class Constrain:
    """Corrects each step by the constraint forces (:class:`.constraints.ConstraintSolver`):
    :meth:`begin` records the state a step starts from, :meth:`resolve` corrects the free step.

    The solver reads the bases' motion at the step's start from the control, so :meth:`begin`
    sets it there: after a failed step the control holds its end.
    """

    def __init__(
        self,
        model: Model,
        data: Data,
        control: Control,
        solver: ConstraintSolver,
        base: BaseSource,
        obstacle_motion: ObstacleSource | None,
    ) -> None:
        self._model, self._data, self._control, self._solver = model, data, control, solver
        self._base, self._obstacle_motion = base, obstacle_motion

    def begin(self, state: State, time: float, h: float) -> None:
        if self._obstacle_motion is not None:
            motion = self._obstacle_motion
            self._solver.set_obstacle_motion(motion(time) if callable(motion) else motion)
        base = self._base(time) if callable(self._base) else self._base
        self._control.set_base_motion(self._model, base)
        self._solver.begin(self._data, state, self._control, time, h)

    def resolve(self, state: State, h: float, out: State, fall_back: bool) -> tuple[Fallback, ...]:
        """Correct the free step ``out``. Trees the correction gives non-finite velocities fall
        back (:func:`.integrators.fall_back`) with ``fall_back``; otherwise that raises
        :class:`.SimulationDivergedError` (so the step is subdivided)."""
        model, data = self._model, self._data
        self._solver.resolve(data, state, self._control, h, out)
        failing = non_finite_trees(model, out.w, out.q)
        if not len(failing):
            return ()
        if not fall_back:
            raise SimulationDivergedError(
                "the simulation diverged: the constraint forces gave non-finite velocities; "
                "use more substeps, or check for contacts that push a straight strand along "
                "its length"
            )
        reason = "the constraint forces gave it non-finite velocities"
        return integrators.fall_back(
            model, data, state, dict.fromkeys(failing.tolist(), reason), out
        )

    def held(self, out: State, h: float) -> bool:
        """Whether the step of ``h`` from the last :meth:`begin` to ``out`` kept the joint
        limits and the obstacles: no joint left more than ``limit_tolerance`` past its limit,
        no contact's point more than ``penetration_tolerance`` of its radius inside its
        obstacle, either further than at the start."""
        solver = self._solver
        return (
            solver.limit_overshoot(out) <= 0.0
            and solver.contact_overshoot(self._control, out, h) <= 0.0
        )


def _failed(stats: StepStats, settings: SolverSettings) -> bool:
    return stats.largest_update > settings.subdivision_threshold


def _raise_unconverged(model: Model, data: Data, stats: StepStats, depth: int) -> None:
    tree = int(np.argmax(model.backend.to_host(data.tree_update)))
    strand, _ = model.link_strand_and_index(tree)
    raise SimulationDivergedError(
        f"the simulation diverged: the Newton iteration of {model.describe_strand(strand)} did not "
        f"converge (last update {stats.largest_update:.3g} rad/s) even with the step halved "
        f"{depth} times; use more substeps, more Newton iterations, or check for extreme parameters"
    )


@dataclass(eq=False)
class Stepper:
    """Steps a model with adaptive subdivision (see the module docstring).

    Before a step to time ``t`` the control takes the base motion and the animated control
    fields that ``inputs(t)`` gives (an :class:`Inputs`, or a worker's share of one), then the
    force ``fields`` at the links' current positions; ``constrain`` corrects each step by the
    constraint forces; ``interaction`` sets the strand-interaction force of each step at its
    start (:mod:`.interaction`).
    """

    model: Model
    data: Data
    control: Control
    inputs: Callable[[float], tuple[BaseMotion, dict[str, Any]]]
    fields: ForceFields | None
    settings: SolverSettings
    constrain: Constrain | None = None
    interaction: Interaction | None = None

    def _drive(self, state: State, time: float) -> None:
        """Set the control for a step from ``state`` to ``time``."""
        set_inputs(self.model, self.control, self.inputs, time)
        if self.fields is not None:
            self.fields.apply(self.model, self.data, state, self.control, time)
        if self.interaction is not None:
            self.interaction.drive(self.data, state, self.control)

    def advance(
        self, states: tuple[State, State], start: float, h: float, substeps: int
    ) -> tuple[State, State, StepStats]:
        """``substeps`` steps of ``h`` from ``states[0]`` (at ``start``), each subdivided on
        failure.

        ``states`` is the current state and a spare to step into; returns them swapped as many
        times as steps were taken (current first), with the last step's statistics and the
        number of subdivisions.
        """
        subdivisions, fallbacks = 0, ()
        for k in range(substeps):
            # Only the last substep's statistics are kept, so only its residual is evaluated.
            *states, stats = self._step(states, start + (k + 1) * h, h, k == substeps - 1)
            subdivisions += stats.subdivisions
            fallbacks += stats.fallbacks
        return (
            *states,
            StepStats(
                stats.iterations, stats.residual_norm, stats.largest_update, subdivisions, fallbacks
            ),
        )

    def _step(
        self,
        states: tuple[State, State],
        end: float,
        h: float,
        report_residual: bool,
        depth: int = 0,
    ) -> tuple[State, State, StepStats]:
        """One step of ``h`` ending at time ``end`` from ``states[0]`` into ``states[1]``, redone
        as two half steps if it fails; returns ``(current, spare, stats)``."""
        model, data, settings, constrain = self.model, self.data, self.settings, self.constrain
        state, spare = states
        if constrain is not None:
            constrain.begin(state, end - h, h)
        self._drive(state, end)
        # The step's first guess comes from the last velocity changes; a failed step
        # overwrites them.
        predictor = (data.dw.copy(), data.dw_count)
        deepest = depth >= settings.max_subdivision_depth
        try:
            # An attempt that diverges may overflow on its way; it is found out by its
            # non-finite values or its Newton updates and redone, so NumPy's warnings would only
            # fill the console (a worker's goes to Blender's).
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                stats = step(
                    model, data, state, self.control, h, settings, spare, report_residual, deepest
                )
                failed = _failed(stats, settings)
                held = True
                if constrain is not None and not failed:
                    fallen = constrain.resolve(state, h, spare, deepest and not settings.strict)
                    stats = replace(stats, fallbacks=stats.fallbacks + fallen)
                    held = constrain.held(spare, h)
        except SimulationDivergedError:
            if deepest:
                raise
        else:
            if not failed and (held or deepest):
                return spare, state, stats
            if failed and deepest:
                _raise_unconverged(model, data, stats, depth)
        # A half step changes the velocity by about half as much. The last two changes are a
        # whole step apart, too far apart for the first half step to extrapolate them.
        dw, count = predictor
        data.dw[...] = 0.5 * dw
        data.dw_count = min(count, 1)
        half = 0.5 * h
        state, spare, first = self._step((state, spare), end - half, half, False, depth + 1)
        state, spare, second = self._step((state, spare), end, half, report_residual, depth + 1)
        # The halves' changes, as whole steps' (half a step apart, so the next step's
        # extrapolation is damped).
        data.dw *= 2.0
        data.dw_previous *= 2.0
        subdivisions = 1 + first.subdivisions + second.subdivisions
        return (
            state,
            spare,
            StepStats(
                second.iterations,
                second.residual_norm,
                second.largest_update,
                subdivisions,
                first.fallbacks + second.fallbacks,
            ),
        )
