"""The scripting entry point: a model with its workspace, state and control, stepped per frame.

How a frame is stepped (substeps, adaptive subdivision, the constraint pass) is
:mod:`.stepping`'s; a large model on the NumPy backend is split into groups of trees stepped in
worker processes side by side (``SolverSettings.workers``, :mod:`.workers`), with the same result
up to rounding, obstacles and joint limits included. A simulation with animated constraints
(:meth:`Simulation.add_constraint`) steps all its trees in one process.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from . import dynamics
from .base_motion import BaseMotion
from .constraints import ConstraintSettings, ConstraintSolver, ConstraintStats
from .dynamics import Data
from .errors import InvalidInputError
from .fields import FieldLike, ForceFields
from .integrators import SolverSettings, StepStats
from .interaction import Interaction, InteractionStats, StrandInteraction
from .model import Model
from .obstacles import Obstacles
from .pose import Pose
from .rows import JointLimits, JointRotation, PointPath
from .state import Control, State, StepMemory
from .stepping import (
    AdvanceRequest,
    BaseSource,
    InProcess,
    Inputs,
    ObstacleSource,
    PoseSource,
    StepSnapshot,
)
from .validation import finite_number, is_real, real_array, vector3
from .workers import Workers, worker_count

__all__ = ["BaseSource", "ObstacleSource", "PoseSource", "Simulation", "apply_fields"]


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
    interaction : StrandInteraction, optional
        Strand–strand interaction through a grid (:mod:`.interaction`): hair keeps its volume
        and moves as one mass. The grid couples every tree with its neighbours at every
        substep: worker processes meet on it once a substep (:mod:`.workers`).

    Notes
    -----
    Arrays returned by :meth:`points` and :meth:`link_frames` are host NumPy copies in strand
    order; everything else stays on the model's backend. ``settings.workers`` decides how many
    processes step the trees (:func:`.workers.worker_count`), obstacles and joint limits
    included; animated constraints (:meth:`add_constraint`) bring the simulation back into one
    process. Worker processes end with :meth:`close`, or when the simulation is
    garbage-collected.
    """

    def __init__(
        self,
        model: Model,
        settings: SolverSettings | None = None,
        gravity: Any = (0.0, 0.0, -9.81),
        obstacles: Obstacles | None = None,
        joint_limits: JointLimits | None = None,
        constraint_settings: ConstraintSettings | None = None,
        interaction: StrandInteraction | None = None,
    ) -> None:
        if not isinstance(model, Model):
            raise InvalidInputError(f"model must be a Model, got {type(model).__name__}")
        for name, value, kind in (
            ("settings", settings, SolverSettings),
            ("obstacles", obstacles, Obstacles),
            ("joint_limits", joint_limits, JointLimits),
            ("constraint_settings", constraint_settings, ConstraintSettings),
            ("interaction", interaction, StrandInteraction),
        ):
            if value is not None and not isinstance(value, kind):
                raise InvalidInputError(
                    f"{name} must be a {kind.__name__} or None, got {type(value).__name__}"
                )
        self.model = model
        self.settings = settings or SolverSettings()
        self.control = Control.from_model(model, gravity)
        self.state = State.at_rest(model)
        self.stats = StepStats(0, 0.0)
        # Parameters animated by callables of time (set_parameter), sampled at every substep.
        self._animated: dict[str, Callable[[float], Any]] = {}
        self.constraints = (
            ConstraintSolver(model, obstacles, joint_limits, constraint_settings)
            if obstacles is not None or joint_limits is not None or constraint_settings is not None
            else None
        )
        self.interaction = (
            None if interaction is None else Interaction.for_model(model, interaction)
        )
        count = worker_count(model, self.settings)
        self._stepping: InProcess | Workers
        if count > 1:
            self._stepping = Workers(model, count, self.control, self.settings, self.constraints)
            self._finalizer = weakref.finalize(self, self._stepping.close)
        # Stepped by worker processes, this process only computes the links' frames. Allocated
        # once the groups' models have gone to the workers, so that they are not here together.
        self.data = Data.for_model(model, kinematics_only=count > 1)
        if count == 1:
            self._stepping = InProcess(model, self.data, self.settings)
        backend = model.backend
        self._point_link = backend.from_host(model.point_link)
        self._point_is_tip = backend.from_host(model.point_is_tip.astype(np.float64))
        self._link_order = backend.from_host(model.link_order)

    @property
    def time(self) -> float:
        """Simulated time of the current state, s."""
        return self.state.time

    @property
    def processes(self) -> int:
        """How many processes step this simulation: its worker processes, or 1 (this one)."""
        return self._stepping.processes

    @property
    def memory(self) -> StepMemory | None:
        """What each step leaves for the next besides the state (None where worker processes
        hold it)."""
        return self._stepping.memory

    @property
    def interaction_settings(self) -> StrandInteraction | None:
        """The strand interaction's settings (None without one)."""
        return None if self.interaction is None else self.interaction.settings

    @property
    def interaction_stats(self) -> InteractionStats:
        """What the last substep's strand interaction did (all zero without one)."""
        return InteractionStats() if self.interaction is None else self.interaction.stats

    def set_interaction(self, interaction: StrandInteraction | None) -> None:
        """Change the strand interaction from the next substep on (None removes it): its
        settings may be animated from frame to frame."""
        if interaction is None:
            self.interaction = None
            self.control.set_interaction(None, None, None)
            return
        if self.interaction is not None and self.interaction.keeps_grid(interaction):
            self.interaction.renew(interaction)
            return
        self.interaction = Interaction.for_model(self.model, interaction)

    @property
    def constraint_stats(self) -> ConstraintStats:
        """What the last substep's constraint pass did (all zero without constraints)."""
        return ConstraintStats() if self.constraints is None else self.constraints.stats

    def add_constraint(self, constraint: PointPath | JointRotation) -> None:
        """Make a point of a link follow a path, or a joint follow a rotation, from the next
        substep on, while its ``active(t)`` says so."""
        if self.constraints is None:
            self.constraints = ConstraintSolver(self.model)
        self.constraints.add(constraint)
        # It calls back into this process's script: the trees step here from now on.
        self.close()

    def close(self) -> None:
        """End the worker processes, if any; the simulation steps on in this process."""
        if isinstance(self._stepping, Workers):
            self._finalizer()
            self.data = Data.for_model(self.model)
            self._stepping = InProcess(self.model, self.data, self.settings)

    def reset(self, base_poses: Any = None, time: float = 0.0) -> None:
        """Back to the rest shape, motionless, with the bases at ``base_poses`` (T, 4, 4), at
        ``time`` (s)."""
        # Both checked before anything changes.
        state = State.at_rest(self.model, base_poses, finite_number("time", time))
        still = BaseMotion.still(self.model.base_rest_poses if base_poses is None else base_poses)
        self.state = state
        self._stepping.forget()
        self.control.set_base_motion(self.model, still)
        self.control.set_pose(self.model, None)
        self.control.set_interaction(None, None, None)
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
            self.control.gravity = model.backend.from_host(vector3("gravity", value)[:, None])
            return
        if name in ("wind_velocity", "external_force"):
            host = real_array(name, value)
            if host.shape == (3,):
                host = np.broadcast_to(host, (model.n_links, 3))
            if host.shape != (model.n_links, 3) or not np.isfinite(host).all():
                raise InvalidInputError(
                    f"{name} must be finite, shape (3,) or ({model.n_links}, 3), got {host.shape}"
                )
            setattr(self.control, name, model.from_strand_order(host, name))
            return
        if not isinstance(name, str) or name not in Control.PARAMETERS:
            raise InvalidInputError(
                f"unknown parameter {name!r}; animatable: {', '.join(Control.PARAMETERS)}, "
                "gravity, wind_velocity, external_force"
            )
        current = getattr(self.control, name)
        columns = tuple(current.shape[:-1])
        host = real_array(name, value)
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
        external forces for that substep (what :func:`apply_fields` does once); the
        values of the last substep hold after the call.

        ``obstacle_motion`` is an :class:`ObstacleMotion` held from now on, or a callable giving
        the obstacles' poses and velocities at time ``t``, sampled at each substep's start (where
        contacts are looked for); None keeps the last one.

        Every argument is checked before the simulation changes, and what a callable returns
        when it is sampled: a call refused with :class:`.InvalidInputError` (a ``dt`` that is
        not a finite number > 0, a source of the wrong kind or returning one) leaves the
        simulation as it was.
        """
        if not (is_real(dt) and np.isfinite(dt) and dt > 0):
            raise InvalidInputError(f"dt must be a positive number, got {dt!r}")
        dt = float(dt)
        base = _checked_base(base)
        if fields is not None and not isinstance(fields, ForceFields):
            raise InvalidInputError(
                f"fields must be a ForceFields or None, got {type(fields).__name__}"
            )
        # A call that fails, interrupted ones included, leaves the simulation as it found it:
        # the next call steps as if it had never been made (worker processes put their groups
        # back themselves; an exchange cut short ends them, see Workers.advance).
        before = StepSnapshot.of(
            self.state, self.memory, self.control, self.constraints, self.interaction
        )
        stats = self.stats
        try:
            return self._advance(dt, base, pose, fields, obstacle_motion)
        except BaseException:
            self.state = before.restore(
                self.memory, self.control, self.constraints, self.interaction
            )
            self.stats = stats
            raise

    def _advance(
        self,
        dt: float,
        base: BaseSource,
        pose: PoseSource | None,
        fields: ForceFields | None,
        obstacle_motion: ObstacleSource | None,
    ) -> StepStats:
        substeps = self._substeps(dt)
        h = dt / substeps
        start = self.state.time
        if pose is not None and not callable(pose):
            self.control.set_pose(self.model, pose)
        animated_pose = pose if callable(pose) else None
        constraints = self.constraints
        if obstacle_motion is not None and (constraints is None or constraints.obstacles is None):
            raise InvalidInputError("obstacle_motion given, but the simulation has no obstacles")
        times = [start + k * h for k in range(1, substeps + 1)]
        inputs = Inputs(
            base, lambda t: self._sample_animation(t, animated_pose), self.control, times
        )
        request = AdvanceRequest(
            self.state,
            self.control,
            inputs,
            base,
            fields,
            h,
            times,
            constraints,
            obstacle_motion,
            self.interaction,
        )
        try:
            self.state, self.stats = self._stepping.advance(request)
        except BaseException:
            if self._stepping.closed:
                # Cut short, the exchange ended the workers: step on in this process.
                self.close()
            raise
        # Land exactly on the requested time despite the substeps' rounding.
        self.state.time = start + dt
        self.stats = replace(self.stats, substeps=substeps)
        self.state.next_step = self.stats.next_step
        return self.stats

    def _substeps(self, dt: float) -> int:
        """How many equal steps an advance of ``dt`` takes: ``settings.substeps``, or with a
        tolerance as many as the step size the last steps' error estimates ask for
        (``State.next_step``) needs, between 1 and ``settings.max_substeps``."""
        settings, hint = self.settings, self.state.next_step
        if settings.tolerance is None or hint is None:
            return int(settings.substeps)
        return max(1, min(int(settings.max_substeps), math.ceil(dt / hint - 1e-6)))

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


def _checked_base(base: Any) -> BaseSource:
    """``base`` if it is a :class:`BaseMotion`, else a callable of time that checks that what
    ``base`` returns is one (the steps sample it; the error then undoes the call). A pose and
    an obstacle motion, given or returned, are checked where the steps take them."""
    if isinstance(base, BaseMotion):
        return base
    if not callable(base):
        raise InvalidInputError(
            f"base must be a BaseMotion or a callable base(t) returning one, got "
            f"{type(base).__name__}"
        )

    def sampled(t: float) -> BaseMotion:
        motion = base(t)
        if not isinstance(motion, BaseMotion):
            raise InvalidInputError(
                f"base({t!r}) must return a BaseMotion, got {type(motion).__name__}"
            )
        return motion

    return sampled


def apply_fields(
    simulation: Simulation,
    wind: Sequence[FieldLike] = (),
    force: Sequence[FieldLike] = (),
    time: float | None = None,
) -> None:
    """Set a simulation's air velocity and external forces from fields at its current state.

    ``wind`` fields are summed into ``simulation.control.wind_velocity`` (m/s; drag acts
    relative to it), ``force`` fields (strength in N/m) into ``control.external_force`` as
    ``field x link length`` at each link's centre of mass. Both replace what was set before
    and hold until the next call. Fields that change within a frame (turbulence, moving or
    animated fields) are better evaluated at every substep: pass them to
    ``simulation.advance(dt, base, fields=ForceFields(wind, force))`` instead.

    Parameters
    ----------
    simulation : Simulation
    wind, force : sequences of Wind, PointField or VortexField
    time : float, s
        Time at which time-varying fields are evaluated; default ``simulation.time``.
    """
    if not isinstance(simulation, Simulation):
        raise InvalidInputError(f"simulation must be a Simulation, got {type(simulation).__name__}")
    time = simulation.time if time is None else finite_number("time", time)
    ForceFields(wind, force).apply(
        simulation.model, simulation.data, simulation.state, simulation.control, time
    )
