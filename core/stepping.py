"""Stepping a model over a frame: substeps, adaptive subdivision and the constraint pass.

A simulation's advance is one :class:`AdvanceRequest` taken by one of two steppings with the
same interface (``advance``, ``forget``, ``close``, ``memory``, ``processes``): :class:`InProcess`
steps the whole model here, :class:`.workers.Workers` steps groups of its trees in worker
processes. Both take the substeps through a :class:`Stepper`.

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
the square of the step), and accepted as it is at the deepest halving. A step that leaves a
contact's point more than ``ConstraintSettings.penetration_tolerance`` of its collision radius
inside its obstacle, and deeper than it started, is halved too; at the deepest halving that tree
falls back for the step where holding it rigid leaves it shallower (or, ``strict``, the
simulation stops): the correction is linear in the joint velocities, and a strand whipping at
hundreds of rad/s ended frames several millimetres inside a head. (An obstacle moving into a
strand gets in either way, and there the strand keeps its step.) Substeps that do not fail are
computed exactly as without this safeguard.

Only the trees whose step failed are redone: the others keep the attempt's step (trees are
independent: a tree's step, its constraint correction included, depends only on the tree), and
the failing ones take their halves on a model of their own (:func:`.model.select_trees`, with a
workspace, control and constraint solver of their own), their memory of the step put back
afterwards (velocity changes, constraint forces, how their contacts rubbed). A tree therefore
steps as it would alone, halvings included, in one process or in a worker's group (but for a
failure in the first step after a start: the count of velocity changes its next first guess
extrapolates is the model's, one, where alone it would be two). A free step whose unfinished
trees are to be redone corrects the other trees by the constraint forces with the unfinished
ones put back at the step's start. Halves start from what the step before left (velocity
changes, which trees took constraint forces, how their contacts rubbed), not from what the
failed attempt overwrote. A tree whose Newton iteration runs away to non-finite
velocities ends the attempt at its start velocities, failed
(:func:`.integrators.step_implicit`), and is redone the same way. The whole model is redone
where every tree failed, or the simulation has animated constraints (a model of some trees does
not take them). With strand interaction the halves, of some trees or of all, keep the
interaction forces of the step's start: the grid couples every tree, the others have stepped
already, and the groups of trees in worker processes meet on the grid once a substep (a group
halving its step meets no others).

Constraints
-----------
A simulation with obstacles, joint limits or animated constraints
(:class:`.constraints.ConstraintSolver`) steps all its trees in one process. Each substep records
its start (:meth:`.constraints.ConstraintSolver.begin`, with the obstacles' motion and the bases
sampled at the substep's start), takes the free implicit step, and corrects it by the constraint
forces (:meth:`.constraints.ConstraintSolver.resolve`) unless the whole step is to be redone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import integrators
from .base_motion import BaseMotion
from .constraints import ConstraintSolver, SolverRecord
from .contacts import ContactMemory
from .dynamics import Data, tree_part
from .errors import SimulationDivergedError
from .integrators import Fallback, SolverSettings, StepStats, non_finite_trees, step
from .interaction import Interaction, InteractionStats
from .model import Model
from .obstacles import ObstacleMotion
from .pose import Pose
from .state import Control, State, StepMemory

if TYPE_CHECKING:
    from .fields import ForceFields

BaseSource = BaseMotion | Callable[[float], BaseMotion]
PoseSource = Pose | Callable[[float], Pose]
ObstacleSource = ObstacleMotion | Callable[[float], ObstacleMotion]


@dataclass(frozen=True, eq=False)
class StepSnapshot:
    """A stepped model (or a worker's group of trees) as an advance finds it, to put back where
    the advance fails: its state, what the steps before left for the next (the step memory, None
    where worker processes hold it, and the constraint solver's), the control (copies of the
    fields the steps fill in place) and the strand interaction's statistics."""

    state: State
    memory: StepMemory | None
    control: Control
    constraints: SolverRecord | None
    interaction_stats: InteractionStats | None

    @classmethod
    def of(
        cls,
        state: State,
        memory: StepMemory | None,
        control: Control,
        constraints: ConstraintSolver | None,
        interaction: Interaction | None,
    ) -> StepSnapshot:
        return cls(
            state.copy(),
            None if memory is None else memory.copy(),
            replace(
                control,
                **{name: getattr(control, name).copy() for name in Control.FILLED_IN_PLACE},
            ),
            None if constraints is None else constraints.kept(),
            None if interaction is None else interaction.stats,
        )

    def restore(
        self,
        memory: StepMemory | None,
        control: Control,
        constraints: ConstraintSolver | None,
        interaction: Interaction | None,
    ) -> State:
        """Put the memory, the control, the solver's record and the interaction's statistics
        back in place; returns the state to step on from (the snapshot's own)."""
        if self.memory is not None:
            memory.restore(self.memory)
        for item in dataclasses.fields(Control):
            if item.name in Control.FILLED_IN_PLACE:
                getattr(control, item.name)[...] = getattr(self.control, item.name)
            else:
                setattr(control, item.name, getattr(self.control, item.name))
        if self.constraints is not None:
            constraints.restore(self.constraints)
        if self.interaction_stats is not None:
            interaction.stats = self.interaction_stats
        return self.state


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


def fields_at_links(updates: dict[str, Any], links: Any) -> dict[str, Any]:
    """The animated control fields ``updates`` (a model's, by name) of some of its ``links``:
    the per-link ones at those links, gravity as it is."""
    return {
        name: value if name == "gravity" else value[..., links] for name, value in updates.items()
    }


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
        memory: StepMemory,
        control: Control,
        solver: ConstraintSolver,
        base: BaseSource,
        obstacle_motion: ObstacleSource | None,
    ) -> None:
        self._model, self._data, self._control, self._solver = model, data, control, solver
        self._memory = memory
        self._base, self._obstacle_motion = base, obstacle_motion

    def begin(self, state: State, time: float, h: float) -> None:
        if self._obstacle_motion is not None:
            motion = self._obstacle_motion
            self._solver.set_obstacle_motion(motion(time) if callable(motion) else motion)
        base = self._base(time) if callable(self._base) else self._base
        self._control.set_base_motion(self._model, base)
        self._solver.begin(self._data, state, self._control, time, h)

    def resolve(
        self, state: State, h: float, out: State, fall_back: bool
    ) -> tuple[tuple[Fallback, ...], np.ndarray]:
        """Correct the free step ``out``. Trees the correction gives non-finite velocities fall
        back (:func:`.integrators.fall_back`) with ``fall_back``; otherwise they are returned
        (host tree indices), for their step to be halved."""
        model, data = self._model, self._data
        self._solver.resolve(data, self._memory, state, self._control, h, out)
        failing = non_finite_trees(model, out.w, out.q)
        if not len(failing) or not fall_back:
            return (), failing
        reason = "the constraint forces gave it non-finite velocities"
        return self.fall_back(state, out, failing, reason), failing[:0]

    def fall_back(
        self, state: State, out: State, trees: np.ndarray, reason: str
    ) -> tuple[Fallback, ...]:
        """Hold ``trees`` (host indices) rigid with their bases through the step from ``state``
        into ``out`` (:func:`.integrators.fall_back`), for ``reason``."""
        if not len(trees):
            return ()
        reasons = dict.fromkeys(trees.tolist(), reason)
        return integrators.fall_back(self._model, self._memory, state, reasons, out)

    def overshooting_trees(self, out: State, h: float) -> np.ndarray:
        """The trees (host indices) whose step of ``h`` from the last :meth:`begin` to ``out``
        left a joint more than ``limit_tolerance`` past its limit, or a contact's point more
        than ``penetration_tolerance`` of its radius inside its obstacle, either further than at
        the start (:meth:`.constraints.ConstraintSolver.overshooting_trees`)."""
        return self._solver.overshooting_trees(self._control, out, h)

    def sunk_trees(self, state: State, out: State, h: float) -> np.ndarray:
        """The trees (host indices) whose step of ``h`` from ``state`` (the last :meth:`begin`'s)
        to ``out`` took a contact's point deeper into its obstacle than it may
        (:meth:`.constraints.ConstraintSolver.penetration_excess`) and deeper than holding the
        tree rigid with its base would have left it (an obstacle moving into a strand sinks
        into it either way; one that stands still does not)."""
        model, xp, solver = self._model, self._model.xp, self._solver
        excess = solver.penetration_excess(self._control, out.q, h)
        deep = np.nonzero(excess > 0.0)[0]
        if not len(deep):
            return deep
        held = integrators.tree_mask(model, deep)[model.link_tree]
        rigid = solver.penetration_excess(self._control, xp.where(held, state.q, out.q), h)
        return deep[rigid[deep] < excess[deep]]

    @property
    def divisible(self) -> bool:
        """Whether some trees can be corrected on a model of their own (:meth:`for_trees`)."""
        return self._solver.divisible

    @property
    def memory(self) -> ContactMemory | None:
        """What the last step left to the next about its contacts."""
        return self._solver.memory

    def for_trees(
        self,
        part: Model,
        data: Data,
        step_memory: StepMemory,
        control: Control,
        links: np.ndarray,
        memory: ContactMemory | None,
    ) -> Constrain:
        """The correction of ``part``, a model of some of the trees (``links``: this model's
        level-major links it holds), with its own workspace, step memory and control,
        remembering what ``memory`` (a :attr:`memory` of this one) holds of its contacts."""
        solver = self._solver.for_trees(part, links, memory)
        return Constrain(
            part, data, step_memory, control, solver, self._base, self._obstacle_motion
        )

    def remember(self, memory: ContactMemory | None) -> None:
        """Take back a :attr:`memory` of this one (what a failed step found is forgotten)."""
        self._solver.remember(memory)

    def take_back(self, part: Constrain, links: np.ndarray) -> None:
        """After ``part`` (:meth:`for_trees`) corrected its trees' step: remember its contacts."""
        self._solver.take_back(part._solver, links)


@dataclass(frozen=True, eq=False)
class _StepStart:
    """What a step reads of the steps before it and overwrites even where it fails: its step
    memory (a copy) and how its contacts rubbed."""

    memory: StepMemory
    contacts: ContactMemory | None

    @classmethod
    def of(cls, memory: StepMemory, constrain: Constrain | None) -> _StepStart:
        return cls(memory.copy(), None if constrain is None else constrain.memory)


def _failed(stats: StepStats, settings: SolverSettings) -> bool:
    return stats.largest_update > settings.subdivision_threshold


def _unfinished_trees(
    model: Model, data: Data, stats: StepStats, settings: SolverSettings
) -> np.ndarray:
    """The trees (host indices) whose free step failed: their Newton iteration stopped with an
    update above ``subdivision_threshold`` (every tree where no single one is to blame)."""
    if not _failed(stats, settings):
        return np.zeros(0, dtype=np.int64)
    update = model.backend.to_host(data.tree_update)
    trees = np.nonzero(~(update <= settings.subdivision_threshold))[0]
    return trees if len(trees) else np.arange(model.n_trees)


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
    start (:mod:`.interaction`). ``memory`` is what each step leaves for the next besides the
    state; ``data`` a workspace.
    """

    model: Model
    data: Data
    memory: StepMemory
    control: Control
    inputs: Callable[[float], tuple[BaseMotion, dict[str, Any]]]
    fields: ForceFields | None
    settings: SolverSettings
    constrain: Constrain | None = None
    interaction: Interaction | None = None

    def _drive(self, state: State, time: float, depth: int) -> None:
        """Set the control for a step from ``state`` to ``time``, ``depth`` halvings deep (the
        halves keep the strand interaction of the whole step's start)."""
        set_inputs(self.model, self.control, self.inputs, time)
        if self.fields is not None:
            self.fields.apply(self.model, self.data, state, self.control, time)
        if self.interaction is not None and depth == 0:
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
        tolerance = self.settings.tolerance
        local_error, hint = (None, None) if tolerance is None else (0.0, math.inf)
        for k in range(substeps):
            # Only the last substep's statistics are kept, so only its residual is evaluated.
            *states, stats = self._step(states, start + (k + 1) * h, h, k == substeps - 1)
            subdivisions += stats.subdivisions
            fallbacks += stats.fallbacks
            if tolerance is not None:
                error, asked = integrators.next_step(self.model, states[0].previous, tolerance)
                local_error, hint = max(local_error, error), min(hint, asked)
        previous = states[0].previous
        second_order = 0
        if previous is not None:
            second_order = int(self.model.backend.to_host(self.model.xp.sum(previous.second_order)))
        return (
            *states,
            StepStats(
                stats.iterations,
                stats.residual_norm,
                stats.largest_update,
                subdivisions,
                fallbacks,
                second_order,
                substeps,
                local_error,
                hint,
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
        """One step of ``h`` ending at time ``end`` from ``states[0]`` into ``states[1]``; the
        trees whose step fails are redone as two half steps, on a model of their own where the
        others can keep theirs (module docstring); returns ``(current, spare, stats)``."""
        model, data, settings, constrain = self.model, self.data, self.settings, self.constrain
        state, spare = states
        if constrain is not None:
            constrain.begin(state, end - h, h)
        self._drive(state, end, depth)
        start = _StepStart.of(self.memory, constrain)
        deepest = depth >= settings.max_subdivision_depth
        failing: np.ndarray | None = None  # None: the whole model's step is redone
        # The trees whose step failed (None: every tree), not only missed the tolerance: their
        # halves restart in first order (StepMemory.restart).
        failed: np.ndarray | None = None
        try:
            # An attempt that diverges may overflow on its way; it is found out by its
            # non-finite values or its Newton updates and redone, so NumPy's warnings would only
            # fill the console (a worker's goes to Blender's).
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                stats = step(
                    model,
                    data,
                    self.memory,
                    state,
                    self.control,
                    h,
                    settings,
                    spare,
                    report_residual,
                    deepest,
                )
                if settings.tolerance is not None:
                    # The free step's error: the constraint pass zeroes that of the trees it
                    # corrects.
                    spare.previous.error[...] = integrators.local_errors(
                        model, self._estimates, state, spare
                    )
                failing = _unfinished_trees(model, data, stats, settings)
                if len(failing) and deepest:
                    _raise_unconverged(model, data, stats, depth)
                if len(failing) and not self._divisible(failing):
                    failing = None
                elif constrain is not None:
                    fallen, failing = self._constrain(state, h, spare, failing, deepest)
                    stats = replace(stats, fallbacks=stats.fallbacks + fallen)
                failed = failing
                if failing is not None and settings.tolerance is not None and not deepest:
                    failing = np.union1d(failing, self._inaccurate_trees(spare))
                    if len(failing) and not self._divisible(failing):
                        failing = None
        except SimulationDivergedError:
            if deepest:
                raise
            failing = failed = None
        if failing is not None and not len(failing):
            return spare, state, stats
        if failing is not None and self._divisible(failing):
            first, second = self._redo_alone(failing, failed, state, spare, end, h, start, depth)
            largest = float(model.backend.to_host(model.xp.max(data.tree_update)))
            return (
                spare,
                state,
                StepStats(
                    max(stats.iterations, first.iterations, second.iterations),
                    math.nan,
                    largest,
                    1 + first.subdivisions + second.subdivisions,
                    stats.fallbacks + first.fallbacks + second.fallbacks,
                ),
            )
        restart = self.model.xp.ones(model.n_trees, dtype=bool)
        if failed is not None:
            restart = integrators.tree_mask(model, failed)
        state, spare, first, second = self._in_halves(
            (state, spare), end, h, report_residual, depth, start, restart
        )
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

    def _in_halves(
        self,
        states: tuple[State, State],
        end: float,
        h: float,
        report_residual: bool,
        depth: int,
        start: _StepStart,
        restart: Any,
    ) -> tuple[State, State, StepStats, StepStats]:
        """The step of ``h`` ending at ``end`` taken as two half steps from what the steps before
        left (``start``: what the failed attempt overwrote is forgotten); returns ``(current,
        spare, first half's stats, second's)``.

        The ``restart`` trees ((T,) bool) failed: their first half and the step after the halves
        are of first order (the history carried them into the failure; backward Euler damps
        what BDF2 keeps). The others (which only missed the tolerance) go on in second order
        with the halves' step ratios."""
        memory = self.memory
        memory.restore(start.memory)
        memory.restart |= restart
        # A half step changes the velocity by about half as much. The last two changes are a
        # whole step apart, too far apart for the first half step to extrapolate them.
        memory.dw *= 0.5
        memory.dw_count = min(memory.dw_count, 1)
        if self.constrain is not None:
            self.constrain.remember(start.contacts)
        half = 0.5 * h
        state, spare, first = self._step(states, end - half, half, False, depth + 1)
        state, spare, second = self._step((state, spare), end, half, report_residual, depth + 1)
        # The halves' changes, as whole steps' (half a step apart, so the next step's
        # extrapolation is damped).
        memory.dw *= 2.0
        memory.dw_previous *= 2.0
        memory.restart |= restart
        return state, spare, first, second

    @functools.cached_property
    def _estimates(self) -> Data:
        """The workspace of the local error estimates (:func:`.integrators.local_errors`)."""
        return Data.for_model(self.model, kinematics_only=True)

    def _inaccurate_trees(self, out: State) -> np.ndarray:
        """The trees (host indices) whose step into ``out`` missed ``SolverSettings.tolerance``
        (by the local error estimate it recorded)."""
        error = self.model.backend.to_host(out.previous.error)
        return np.nonzero(error > self.settings.tolerance)[0]

    def _divisible(self, trees: np.ndarray) -> bool:
        """Whether ``trees`` can be redone on a model of their own while the others keep their
        step: not every tree, and no animated constraint (which a model of some trees does not
        take)."""
        return len(trees) < self.model.n_trees and (
            self.constrain is None or self.constrain.divisible
        )

    def _constrain(
        self, state: State, h: float, out: State, unfinished: np.ndarray, deepest: bool
    ) -> tuple[tuple[Fallback, ...], np.ndarray]:
        """Correct the free step ``out`` by the constraint forces, the ``unfinished`` trees put
        back at the step's start first (their step is redone; there their contacts cost
        little). Returns the trees that fell back, and the trees (host indices) whose step
        failed: the unfinished ones, those the correction gave non-finite values and, short of
        the deepest halving, those it left past a limit or inside an obstacle; at the deepest
        halving those it sank into an obstacle (:meth:`Constrain.sunk_trees`) fall back for the
        step (``strict``: raise)."""
        model, xp, settings, constrain = self.model, self.model.xp, self.settings, self.constrain
        if len(unfinished):
            on_links = integrators.tree_mask(model, unfinished)[model.link_tree]
            out.q[...] = xp.where(on_links, state.q, out.q)
            out.w[...] = xp.where(on_links, state.w, out.w)
        fallen, diverged = constrain.resolve(state, h, out, deepest and not settings.strict)
        if len(diverged) and deepest:
            raise SimulationDivergedError(
                "the simulation diverged: the constraint forces gave non-finite velocities; "
                "use more substeps, or check for contacts that push a straight strand along "
                "its length"
            )
        failing = np.union1d(unfinished, diverged)
        if not deepest:
            return fallen, np.union1d(failing, constrain.overshooting_trees(out, h))
        # Halving no further, a step that sinks a point into its obstacle is not kept: the
        # correction is linear in the joint velocities, and a strand whipping at hundreds of
        # rad/s swings its points far off the line they were corrected along.
        inside = constrain.sunk_trees(state, out, h)
        if len(inside) and settings.strict:
            strand, _ = model.link_strand_and_index(int(inside[0]))
            name = model.describe_strand(strand)
            raise SimulationDivergedError(
                f"the simulation diverged: the contact correction left {name} "
                f"inside an obstacle even with the step halved {settings.max_subdivision_depth} "
                "times; use more substeps"
            )
        reason = "the contact correction left it inside an obstacle"
        return fallen + constrain.fall_back(state, out, inside, reason), failing

    def _redo_alone(
        self,
        trees: np.ndarray,
        failed: np.ndarray,
        state: State,
        out: State,
        end: float,
        h: float,
        start: _StepStart,
        depth: int,
    ) -> tuple[StepStats, StepStats]:
        """Redo the step of ``trees`` (host indices) from ``state`` as two half steps on a model
        of their own (:func:`.model.select_trees`), into their part of ``out``, where the other
        trees' step stays; their memory of the step (velocity changes, constraint forces,
        contacts) goes back into this stepper's. Those of them in ``failed`` (host indices)
        restart in first order (:meth:`_in_halves`). Returns the halves' statistics.

        The halves are driven as the whole model's would be (the base and the animated control
        sampled at their ends, the force fields evaluated at their starts); the strand
        interaction's forces stay those of the whole step's start (:mod:`.interaction`: the
        grid couples every tree, and the others have stepped already)."""
        model, data, backend = self.model, self.data, self.model.backend
        gathered = tree_part(model, data, trees)
        part, part_data, links = gathered.model, gathered.data, gathered.links
        chosen, rows = gathered.chosen, backend.from_host(trees)
        part_memory = start.memory.of_trees(chosen, rows)
        part_control = self.control.at_links(chosen)
        inputs = self.inputs

        def part_inputs(time: float) -> tuple[BaseMotion, dict[str, Any]]:
            motion, updates = inputs(time)
            return motion, fields_at_links(updates, chosen)

        constrain = None
        if self.constrain is not None:
            constrain = self.constrain.for_trees(
                part, part_data, part_memory, part_control, links, start.contacts
            )
        part_stepper = Stepper(
            part,
            part_data,
            part_memory,
            part_control,
            part_inputs,
            self.fields,
            self.settings,
            constrain,
        )
        part_states = tuple(
            State(
                state.q[:, chosen],
                state.w[:, chosen],
                state.base_rotation.copy(),
                state.base_position.copy(),
                state.time,
                None if state.previous is None or spare else state.previous.of_trees(chosen, rows),
            )
            for spare in (False, True)
        )
        part_start = _StepStart(part_memory.copy(), None if constrain is None else constrain.memory)
        restart = backend.from_host(np.isin(trees, failed))
        current, _, first, second = part_stepper._in_halves(
            part_states, end, h, False, depth, part_start, restart
        )
        out.q[:, chosen] = current.q
        out.w[:, chosen] = current.w
        if out.previous is not None and current.previous is not None:
            out.previous.put(current.previous, chosen, rows)
        else:
            integrators.first_order_step(out, integrators.tree_mask(model, trees))
        self.memory.put(part_memory, chosen, rows)
        data.tree_update[rows] = part_data.tree_update
        if constrain is not None:
            self.constrain.take_back(constrain, links)
        # The halves sampled the animated control at their ends into the whole control.
        set_inputs(model, self.control, inputs, end)
        return first, second


@dataclass(frozen=True, eq=False)
class AdvanceRequest:
    """One advance of a simulation, as its stepping (:class:`InProcess` or
    :class:`.workers.Workers`) takes it: substeps of ``h`` ending at ``times`` from ``state``
    under ``control``, driven by ``inputs`` (which samples ``base``), ``fields``, the
    ``constraints`` (None: none) with the obstacles moving as ``obstacle_motion`` (None: as the
    solver holds them) and the strand ``interaction`` (None: none)."""

    state: State
    control: Control
    inputs: Inputs
    base: BaseSource
    fields: ForceFields | None
    h: float
    times: list[float]
    constraints: ConstraintSolver | None
    obstacle_motion: ObstacleSource | None
    interaction: Interaction | None


class InProcess:
    """Steps the whole model in this process (the other stepping is :class:`.workers.Workers`).

    Owns the step memory (:attr:`memory`), what each step leaves for the next besides the state;
    ``data`` is the simulation's workspace, shared with it.
    """

    def __init__(self, model: Model, data: Data, settings: SolverSettings) -> None:
        self._model, self._data, self._settings = model, data, settings
        self.memory = StepMemory.for_model(model)

    processes = 1
    closed = False

    def advance(self, request: AdvanceRequest) -> tuple[State, StepStats]:
        """Take the request's substeps; returns the new state and the last substep's statistics
        (the constraint solver and the interaction keep theirs)."""
        model, data, control = self._model, self._data, request.control
        constraints = request.constraints
        constrain = (
            None
            if constraints is None
            else Constrain(
                model,
                data,
                self.memory,
                control,
                constraints,
                request.base,
                request.obstacle_motion,
            )
        )
        stepper = Stepper(
            model,
            data,
            self.memory,
            control,
            request.inputs,
            request.fields,
            self._settings,
            constrain,
            request.interaction,
        )
        start, substeps = request.state.time, len(request.times)
        # The substeps step into the state and a spare by turns (made here, so that a
        # simulation stepped by worker processes keeps none).
        state, _, stats = stepper.advance(
            (request.state, request.state.copy()), start, request.h, substeps
        )
        return state, stats

    def forget(self) -> None:
        """Let the next step start as after a reset (:meth:`.StepMemory.forget`)."""
        self.memory.forget()

    def close(self) -> None:
        """Nothing to end: this process steps on."""
