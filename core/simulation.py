"""The scripting entry point: a model with its workspace, state and control, stepped per frame.

On the NumPy backend a large model is stepped in several groups of trees at once, one thread each
(``SolverSettings.threads``): every group is a model of its own (:func:`.model.select_trees`) with
its own state and control, working in views of the whole model's workspace (only its Newton
predictor is its own), loaded from the whole at the start of :meth:`advance` and stored back at
its end. NumPy releases the interpreter lock inside its array kernels, so the groups'
whole-forest operations overlap. Trees are independent and the implicit step treats each tree on
its own (:func:`.integrators.step_implicit`), so the result does not depend on the grouping: it
is the same with any number of threads, up to rounding (NumPy's vectorised kernels may sum in
another order on arrays of another length).

Adaptive subdivision
--------------------
A substep that fails — its Newton iteration stops at the cap with an update still above
``SolverSettings.subdivision_threshold``, or it produces non-finite values (constraint forces
included) — is redone as two half steps, the base motion and everything animated sampled at the
midpoint through the same sources, and so on recursively down to ``max_subdivision_depth``
halvings; only a step that still fails there raises :class:`.SimulationDivergedError`, naming the
strand. Substeps that do not fail are computed exactly as without this safeguard. The whole model
(or, when stepped in threads, the whole group of trees) is redone, not only the trees that
failed: trees are independent, so the others merely take smaller steps, and a failing step is
rare enough that redoing only some trees (a model of them, :func:`.model.select_trees`, built on
the spot) would not pay for itself.

Constraints
-----------
A simulation with obstacles, joint limits or animated constraints
(:class:`.constraints.ConstraintSolver`) steps all its trees in one thread. Each substep records
its start (:meth:`.constraints.ConstraintSolver.begin`, with the obstacles' motion and the bases
sampled at the substep's start), takes the free implicit step, and corrects it by the constraint
forces (:meth:`.constraints.ConstraintSolver.resolve`) unless the free step failed.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dynamics
from .base_motion import BaseMotion
from .constraints import (
    ConstraintSettings,
    ConstraintSolver,
    ConstraintStats,
    JointLimits,
    JointRotation,
    PointPath,
)
from .dynamics import Data
from .errors import InvalidInputError, SimulationDivergedError
from .integrators import SolverSettings, StepStats, step
from .model import Model, select_trees
from .obstacles import ObstacleMotion, Obstacles
from .pose import Pose
from .state import Control, State, _checked_vector

if TYPE_CHECKING:
    from .fields import ForceFields

BaseSource = BaseMotion | Callable[[float], BaseMotion]
PoseSource = Pose | Callable[[float], Pose]
ObstacleSource = ObstacleMotion | Callable[[float], ObstacleMotion]

# A thread's per-level operations hold the interpreter lock for their call overhead, which does
# not shrink with the number of links they handle: below about this many links per depth level
# and thread, two threads step slower than one (measured: 1,000 strands of 25 or 32 links are
# 15-25 % slower in two threads, 2,000 of 16 or 25 links 12-27 % faster; docs/performance.md),
# so automatic threading keeps narrower models in one piece.
MIN_LEVEL_WIDTH_PER_THREAD = 1000
# Automatic threading uses at most this many: beyond two, the groups mostly wait for each other
# on the interpreter lock and on memory bandwidth (see docs/performance.md).
MAX_AUTOMATIC_THREADS = 2

# Per-link fields of a control that a group takes from the whole model's control (the target
# pose may be None).
_PER_LINK_CONTROL = (
    "wind_velocity",
    "external_force",
    *Control.PARAMETERS,
    "pose_rotation",
    "pose_velocity",
)
# Per-link fields that force fields evaluated in a group write, and the group stores back.
_FIELD_CONTROL = ("wind_velocity", "external_force")


class _Inputs:
    """What drives the steps at a time: the base motion and the control fields animated by
    callables (parameters, the target pose).

    The substeps' end ``times`` are sampled once each and kept, as every group of trees steps to
    them; other times (the halves of a subdivided step) are sampled whenever asked. Samples are
    taken one at a time, from whichever thread steps a group: the sources need not be
    thread-safe, but must not need one particular thread.
    """

    def __init__(
        self,
        base: BaseSource,
        animate: Callable[[float], list[str]],
        control: Control,
        times: list[float],
    ) -> None:
        self._base, self._animate, self._control = base, animate, control
        self._lock = threading.Lock()
        self._kept: dict[float, tuple[BaseMotion, dict[str, Any]] | None] = dict.fromkeys(times)

    def __call__(self, time: float) -> tuple[BaseMotion, dict[str, Any]]:
        """The base motion and the animated control fields (the whole model's) at ``time``."""
        with self._lock:
            sample = self._kept.get(time)
            if sample is None:
                motion = self._base(time) if callable(self._base) else self._base
                names = self._animate(time)
                sample = (motion, {name: getattr(self._control, name) for name in names})
                if time in self._kept:
                    self._kept[time] = sample
            return sample


def _drive(
    model: Model,
    data: Data,
    control: Control,
    links: Any,
    inputs: _Inputs,
    fields: ForceFields | None,
    state: State,
    time: float,
) -> None:
    """Set ``control`` for a step from ``state`` to ``time``: the base motion and animated fields
    at ``time`` (the whole model's per-link fields taken at ``links``, all of them for None), then
    the force ``fields`` at the links' current positions."""
    motion, updates = inputs(time)
    control.set_base_motion(model, motion)
    for name, value in updates.items():
        setattr(control, name, value if name == "gravity" or links is None else value[..., links])
    if fields is not None:
        fields.apply(model, data, state, control, time)


class _Constrain:
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

    def resolve(self, state: State, h: float, out: State) -> None:
        """Correct the free step ``out``; raises :class:`.SimulationDivergedError` if the
        correction gives non-finite velocities (so the step is subdivided)."""
        self._solver.resolve(self._data, state, self._control, h, out)
        xp, to_host = self._model.xp, self._model.backend.to_host
        if not np.isfinite(float(to_host(xp.max(xp.abs(out.w))))):
            raise SimulationDivergedError(
                "the simulation diverged: the constraint forces gave non-finite velocities; "
                "use more substeps, or check for contacts that push a straight strand along "
                "its length"
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
class _Stepper:
    """Steps a model with adaptive subdivision (see the module docstring).

    ``drive(state, t)`` sets ``control`` for a step from ``state`` to time ``t``; ``constrain``
    corrects each step by the constraint forces.
    """

    model: Model
    data: Data
    control: Control
    drive: Callable[[State, float], None]
    settings: SolverSettings
    constrain: _Constrain | None = None

    def advance(
        self, states: tuple[State, State], start: float, h: float, substeps: int
    ) -> tuple[State, State, StepStats]:
        """``substeps`` steps of ``h`` from ``states[0]`` (at ``start``), each subdivided on
        failure.

        ``states`` is the current state and a spare to step into; returns them swapped as many
        times as steps were taken (current first), with the last step's statistics and the
        number of subdivisions.
        """
        subdivisions = 0
        for k in range(substeps):
            # Only the last substep's statistics are kept, so only its residual is evaluated.
            *states, stats = self._step(states, start + (k + 1) * h, h, k == substeps - 1)
            subdivisions += stats.subdivisions
        return (
            *states,
            StepStats(stats.iterations, stats.residual_norm, stats.largest_update, subdivisions),
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
        self.drive(state, end)
        # The step's first guess is the last velocity change; a failed step overwrites it.
        predictor = data.dw.copy()
        try:
            stats = step(model, data, state, self.control, h, settings, spare, report_residual)
            failed = _failed(stats, settings)
            if constrain is not None and not failed:
                constrain.resolve(state, h, spare)
        except SimulationDivergedError:
            if depth >= settings.max_subdivision_depth:
                raise
        else:
            if not failed:
                return spare, state, stats
            if depth >= settings.max_subdivision_depth:
                _raise_unconverged(model, data, stats, depth)
        # A half step changes the velocity by about half as much.
        data.dw[...] = 0.5 * predictor
        half = 0.5 * h
        state, spare, first = self._step((state, spare), end - half, half, False, depth + 1)
        state, spare, second = self._step((state, spare), end, half, report_residual, depth + 1)
        data.dw *= 2.0
        subdivisions = 1 + first.subdivisions + second.subdivisions
        return (
            state,
            spare,
            StepStats(second.iterations, second.residual_norm, second.largest_update, subdivisions),
        )


def thread_count(model: Model, settings: SolverSettings) -> int:
    """How many groups of trees ``model`` is stepped in under ``settings``.

    ``settings.threads`` if given (at most one per tree); otherwise one per processor core up to
    :data:`MAX_AUTOMATIC_THREADS` on the NumPy backend for models whose depth levels hold on
    average at least :data:`MIN_LEVEL_WIDTH_PER_THREAD` links per thread, and one elsewhere (a
    GPU runs one stream).
    """
    if settings.threads is not None:
        return max(1, min(int(settings.threads), model.n_trees))
    if model.backend.name != "numpy":
        return 1
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    cores = min(cores, MAX_AUTOMATIC_THREADS)
    width = model.n_links // model.n_levels
    return max(1, min(cores, width // MIN_LEVEL_WIDTH_PER_THREAD, model.n_trees))


def _tree_groups(model: Model, count: int) -> list[np.ndarray]:
    """``count`` groups of tree indices with about equal numbers of links (largest trees first,
    each to the lightest group), each sorted."""
    sizes = np.bincount(model.backend.to_host(model.link_tree), minlength=model.n_trees)
    groups: list[list[int]] = [[] for _ in range(count)]
    totals = np.zeros(count, dtype=np.int64)
    for tree in np.argsort(-sizes, kind="stable"):
        lightest = int(np.argmin(totals))
        groups[lightest].append(int(tree))
        totals[lightest] += sizes[tree]
    return [np.sort(np.asarray(group, dtype=np.int64)) for group in groups]


@dataclass(eq=False)
class _Group:
    """Some trees of the model, stepped on their own.

    Attributes
    ----------
    model, data, state, spare, control
        A model of these trees (:func:`.model.select_trees`) with its workspace, current and
        spare state, and control.
    links : device int (n,)
        Level-major index in the whole model of each of the group's links.
    """

    model: Model
    data: Data
    state: State
    spare: State
    control: Control
    links: Any

    @classmethod
    def of(cls, model: Model, trees: np.ndarray, gravity: Any, data: Data, start: int) -> _Group:
        """The group of ``trees``; its workspace is links ``start:`` of the whole model's
        workspace ``data`` (see :meth:`.Data.sharing`)."""
        part, links = select_trees(model, trees)
        state = State.at_rest(part)
        return cls(
            part,
            Data.sharing(part, data, start),
            state,
            state.copy(),
            Control.from_model(part, gravity),
            model.backend.from_host(links),
        )

    def load(self, state: State, control: Control) -> None:
        """Take this group's part of the whole model's state and control."""
        links = self.links
        self.state.q[...] = state.q[:, links]
        self.state.w[...] = state.w[:, links]
        self.state.base_rotation[...] = state.base_rotation
        self.state.base_position[...] = state.base_position
        self.state.time = state.time
        self.control.gravity = control.gravity
        for name in _PER_LINK_CONTROL:
            value = getattr(control, name)
            setattr(self.control, name, None if value is None else value[..., links])

    def store(self, state: State, control: Control, fields: ForceFields | None) -> None:
        """Write this group's joint state back into the whole model's, and with ``fields`` the
        air velocity and forces they gave at the last substep."""
        state.q[:, self.links] = self.state.q
        state.w[:, self.links] = self.state.w
        if fields is not None:
            for name in _FIELD_CONTROL:
                getattr(control, name)[..., self.links] = getattr(self.control, name)

    def advance(
        self,
        inputs: _Inputs,
        fields: ForceFields | None,
        start: float,
        h: float,
        substeps: int,
        settings: SolverSettings,
    ) -> StepStats:
        """Take ``substeps`` steps of ``h`` from ``start``, driven by ``inputs`` and force
        ``fields`` (evaluated on this group's trees); the last step's statistics."""
        drive = functools.partial(
            _drive, self.model, self.data, self.control, self.links, inputs, fields
        )
        stepper = _Stepper(self.model, self.data, self.control, drive, settings)
        self.state, self.spare, stats = stepper.advance(
            (self.state, self.spare), start, h, substeps
        )
        return stats


class Simulation:
    """A strand model being simulated: owns the workspace, the state and the control.

    Parameters
    ----------
    model : Model
    settings : SolverSettings
    gravity : (3,) m/s², world
    obstacles : Obstacles, optional
        Collision shapes (:func:`.obstacles.build_obstacles`, on the model's backend); they stay
        at the identity pose until :meth:`advance` is given their motion.
    joint_limits : JointLimits, optional
    constraint_settings : ConstraintSettings, optional

    Notes
    -----
    Arrays returned by :meth:`points` and :meth:`link_frames` are host NumPy copies in strand
    order; everything else stays on the model's backend. A simulation with constraints
    (obstacles, joint limits, :meth:`add_constraint`) steps all trees together in one thread.
    """

    def __init__(
        self,
        model: Model,
        settings: SolverSettings | None = None,
        gravity: Any = (0.0, 0.0, -9.81),
        obstacles: Obstacles | None = None,
        joint_limits: JointLimits | None = None,
        constraint_settings: ConstraintSettings | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or SolverSettings()
        self.data = Data.for_model(model)
        self.control = Control.from_model(model, gravity)
        self.state = State.at_rest(model)
        self._spare = self.state.copy()
        self.stats = StepStats(0, 0.0)
        # Parameters animated by callables of time (set_parameter), sampled at every substep.
        self._animated: dict[str, Callable[[float], Any]] = {}
        self.constraints = (
            ConstraintSolver(model, obstacles, joint_limits, constraint_settings)
            if obstacles is not None or joint_limits is not None or constraint_settings is not None
            else None
        )
        count = 1 if self.constraints is not None else thread_count(model, self.settings)
        self._groups = []
        if count > 1:
            # The groups step while the whole model's workspace lies idle, so they share it.
            start = 0
            for trees in _tree_groups(model, count):
                self._groups.append(_Group.of(model, trees, gravity, self.data, start))
                start += self._groups[-1].model.n_links
        backend = model.backend
        self._point_link = backend.from_host(model.point_link)
        self._point_is_tip = backend.from_host(model.point_is_tip.astype(np.float64))
        self._link_order = backend.from_host(model.link_order)

    @property
    def time(self) -> float:
        """Simulated time of the current state, s."""
        return self.state.time

    @property
    def constraint_stats(self) -> ConstraintStats:
        """What the last substep's constraint pass did (all zero without constraints)."""
        return ConstraintStats() if self.constraints is None else self.constraints.stats

    def add_constraint(self, constraint: PointPath | JointRotation) -> None:
        """Make a point of a link follow a path, or a joint follow a rotation, from the next
        substep on, while its ``active(t)`` says so."""
        if self.constraints is None:
            self.constraints = ConstraintSolver(self.model)
            self._groups = []
        self.constraints.add(constraint)

    def reset(self, base_poses: Any = None, time: float = 0.0) -> None:
        """Back to the rest shape, motionless, with the bases at ``base_poses`` (T, 4, 4)."""
        self.state = State.at_rest(self.model, base_poses, time)
        self._spare = self.state.copy()
        for data in [self.data] + [group.data for group in self._groups]:
            data.dw[...] = 0.0
        poses = self.model.base_rest_poses if base_poses is None else base_poses
        self.control.set_base_motion(self.model, BaseMotion.still(poses))
        self.control.set_pose(self.model, None)
        if self.constraints is not None:
            self.constraints.reset()
        self.stats = StepStats(0, 0.0)

    def set_parameter(self, name: str, value: Any) -> None:
        """Animate a parameter from the next substep on.

        ``name`` is a field of :class:`~.model.StrandParameters` other than mass and radius
        (scalar or per-link values in strand order; ``pose_strength`` and ``pose_damping`` act
        while a target pose is given, see :meth:`advance`), ``gravity`` (3,), or
        ``wind_velocity`` / ``external_force`` ((3,) for all links or (n_links, 3) in strand
        order; force fields given to :meth:`advance` replace them).

        ``value`` may also be a callable ``value(t)`` of the time (s) returning such a value: it
        is then sampled at each substep's end, like the base, until the parameter is set again.
        It is checked at once, at the current time.
        """
        if callable(value):
            self._set_parameter(name, value(self.time))
            self._animated[name] = value
            return
        self._set_parameter(name, value)
        self._animated.pop(name, None)

    def _set_parameter(self, name: str, value: Any) -> None:
        """Check one value of a parameter and copy it into the control."""
        model = self.model
        if name == "gravity":
            self.control.gravity = model.backend.from_host(
                _checked_vector("gravity", value)[:, None]
            )
            return
        if name in ("wind_velocity", "external_force"):
            host = np.asarray(value, dtype=np.float64)
            if host.shape == (3,):
                host = np.broadcast_to(host, (model.n_links, 3))
            if host.shape != (model.n_links, 3) or not np.isfinite(host).all():
                raise InvalidInputError(
                    f"{name} must be finite, shape (3,) or ({model.n_links}, 3), got {host.shape}"
                )
            setattr(self.control, name, model.from_strand_order(host, name))
            return
        if name not in Control.PARAMETERS:
            raise InvalidInputError(
                f"unknown parameter {name!r}; animatable: {', '.join(Control.PARAMETERS)}, "
                "gravity, wind_velocity, external_force"
            )
        current = getattr(self.control, name)
        columns = tuple(current.shape[:-1])
        host = np.asarray(value, dtype=np.float64)
        if host.ndim == 0 or (columns and host.shape == columns):
            host = np.broadcast_to(host, (model.n_links, *columns))
        elif columns and host.shape == (model.n_links,):
            host = np.broadcast_to(host[:, None], (model.n_links, *columns))
        if (
            host.shape != (model.n_links, *columns)
            or not np.isfinite(host).all()
            or (host < 0).any()
        ):
            raise InvalidInputError(
                f"{name} must be non-negative and finite: a scalar or per-link values in strand "
                f"order of shape {(model.n_links, *columns)}, got shape {np.shape(value)}"
            )
        setattr(self.control, name, model.from_strand_order(host, name))

    def advance(
        self,
        dt: float,
        base: BaseSource,
        *,
        pose: PoseSource | None = None,
        fields: ForceFields | None = None,
        obstacle_motion: ObstacleSource | None = None,
    ) -> StepStats:
        """Advance by ``dt`` seconds in ``settings.substeps`` substeps, bases moving as ``base``.

        ``base`` is a :class:`BaseMotion` held for the interval, or a callable ``base(t)`` giving
        the motion at time ``t`` (e.g. a :class:`BaseTrajectory`), sampled at each substep's end,
        as are parameters animated by callables (:meth:`set_parameter`).

        ``pose`` is the target pose of posable dynamics: a :class:`.pose.Pose`, or a callable
        ``pose(t)`` (e.g. a :class:`.pose.PoseTrajectory`) sampled at each substep's end. It
        holds after the call until another is given; None keeps the current one (none after
        construction and :meth:`reset`).

        ``fields`` (:class:`.fields.ForceFields`) are evaluated at the start of every substep, at
        the links' current positions and the substep's end time, and set the air velocity and
        external forces for that substep (what :func:`.fields.apply_fields` does once); the
        values of the last substep hold after the call.

        ``obstacle_motion`` is an :class:`ObstacleMotion` held from now on, or a callable giving
        the obstacles' poses and velocities at time ``t``, sampled at each substep's start (where
        contacts are looked for); None keeps the last one.
        """
        dt = float(dt)
        if not (np.isfinite(dt) and dt > 0):
            raise InvalidInputError(f"dt must be a positive number, got {dt}")
        substeps = int(self.settings.substeps)
        h = dt / substeps
        start = self.state.time
        if pose is not None and not callable(pose):
            self.control.set_pose(self.model, pose)
        animated_pose = pose if callable(pose) else None
        constraints = self.constraints
        if obstacle_motion is not None and (constraints is None or constraints.obstacles is None):
            raise InvalidInputError("obstacle_motion given, but the simulation has no obstacles")
        times = [start + k * h for k in range(1, substeps + 1)]
        inputs = _Inputs(
            base, lambda t: self._sample_animation(t, animated_pose), self.control, times
        )
        if self._groups:
            return self._advance_groups(dt, inputs, fields, times)
        drive = functools.partial(_drive, self.model, self.data, self.control, None, inputs, fields)
        constrain = (
            None
            if constraints is None
            else _Constrain(self.model, self.data, self.control, constraints, base, obstacle_motion)
        )
        stepper = _Stepper(self.model, self.data, self.control, drive, self.settings, constrain)
        self.state, self._spare, self.stats = stepper.advance(
            (self.state, self._spare), start, h, substeps
        )
        # Land exactly on the requested time despite the substeps' rounding.
        self.state.time = start + dt
        return self.stats

    def _advance_groups(
        self, dt: float, inputs: _Inputs, fields: ForceFields | None, times: list[float]
    ) -> StepStats:
        """:meth:`advance` with the groups of trees stepped concurrently, one thread each.

        The bases, the animated parameters and the animated pose are sampled here for every
        substep (a subdivided step's halves are sampled from the group's thread); force fields
        depend on the links' positions, so each group evaluates them on its own trees.
        """
        substeps = len(times)
        h = dt / substeps
        start = self.state.time
        for t in times:
            inputs(t)
        for group in self._groups:
            group.load(self.state, self.control)
        first, *others = self._groups
        arguments = (inputs, fields, start, h, substeps, self.settings)
        with ThreadPoolExecutor(len(others)) as pool:
            pending = [pool.submit(group.advance, *arguments) for group in others]
            results = [first.advance(*arguments)]
            results += [future.result() for future in pending]
        # The control is left as the last substep saw it, whatever was sampled in between, and
        # then takes the force fields' values the groups computed.
        motion, updates = inputs(times[-1])
        self.control.set_base_motion(self.model, motion)
        for name, value in updates.items():
            setattr(self.control, name, value)
        for group in self._groups:
            group.store(self.state, self.control, fields)
        self.state.base_rotation[...] = self.control.base_rotation
        self.state.base_position[...] = self.control.base_position
        self.state.time = start + dt
        self.stats = StepStats(
            max(result.iterations for result in results),
            max(result.residual_norm for result in results),
            max(result.largest_update for result in results),
            sum(result.subdivisions for result in results),
        )
        return self.stats

    def _sample_animation(self, t: float, pose: Callable[[float], Pose] | None) -> list[str]:
        """Set the animated parameters and, if given, the animated ``pose`` at time ``t`` (s) in
        the control; returns the names of the control fields set."""
        for name, source in self._animated.items():
            self._set_parameter(name, source(t))
        names = list(self._animated)
        if pose is not None:
            self.control.set_pose(self.model, pose(t))
            names += ["pose_rotation", "pose_velocity"]
        return names

    def _kinematics(self) -> None:
        dynamics.forward_kinematics(
            self.model, self.data, self.state.q, self.state.base_rotation, self.state.base_position
        )

    def points(self) -> np.ndarray:
        """World positions (n_points, 3) of every strand's root and link tips, strand order, m."""
        self._kinematics()
        data, model = self.data, self.model
        links = self._point_link
        along = (self._point_is_tip * model.length[links]) * data.oR[:, 1, links]
        return model.backend.to_host(data.op[:, links] + along).T.astype(np.float64)

    def link_frames(self) -> tuple[np.ndarray, np.ndarray]:
        """World rotation (n_links, 3, 3) and joint position (n_links, 3) per link, strand order.

        The link's local y axis runs along its segment; x and z are its cross-section axes.
        """
        self._kinematics()
        to_host, order = self.model.backend.to_host, self._link_order
        rotation = to_host(self.data.oR[:, :, order]).transpose(2, 0, 1)
        position = to_host(self.data.op[:, order]).T
        return rotation.astype(np.float64), position.astype(np.float64)

    def energy(self) -> tuple[float, float]:
        """Kinetic and gravitational potential energy (J) of the current state."""
        kinetic, potential = dynamics.energy(
            self.model, self.data, self.state.q, self.state.w, self.control
        )
        to_host = self.model.backend.to_host
        return float(to_host(kinetic)), float(to_host(potential))
