"""What the integrator advances (:class:`State`) and what drives each substep (:class:`Control`).

Both are plain containers of arrays on the model's backend, level-major per link
(see :mod:`.model`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .base_motion import BaseMotion
from .errors import InvalidInputError
from .model import Model
from .pose import Pose
from .validation import finite_array, vector3


@dataclass(eq=False)
class PreviousStep:
    """What a second-order step needs of the step before it (:class:`.integrators.Scheme`).

    Attributes
    ----------
    q : (4, N) float
        Joint rotations at the start of the last step.
    w : (3, N) float, rad/s
        Joint velocities at the start of the last step.
    h : (T,) float, s
        The last step's size, per tree (a tree whose step was halved on a model of its own
        took smaller steps than the others).
    usable : (T,) bool
        The trees whose last step leaves a history a second-order step can go on from: not
        those that took constraint forces in it (impacts, contacts, limits change the
        velocities outside the integration formula) or fell back.
    second_order : (T,) bool
        The trees that took the last step in second order.
    error : (T,) float, m
        The last step's estimated local error: the largest distance by which it moved a point of
        the tree away from where the step's own history extrapolates, scaled to the method's
        error (:func:`.integrators.local_errors`); zero where not estimated (no tolerance set) or
        where the tree took constraint forces.
    """

    q: Any
    w: Any
    h: Any
    usable: Any
    second_order: Any
    error: Any

    def copy(self) -> PreviousStep:
        return PreviousStep(
            self.q.copy(),
            self.w.copy(),
            self.h.copy(),
            self.usable.copy(),
            self.second_order.copy(),
            self.error.copy(),
        )

    def of_trees(self, links: Any, trees: Any) -> PreviousStep:
        """A copy of the part of some trees: their level-major ``links`` and ``trees``
        (device index arrays)."""
        return PreviousStep(
            self.q[:, links],
            self.w[:, links],
            self.h[trees],
            self.usable[trees],
            self.second_order[trees],
            self.error[trees],
        )

    def put(self, part: PreviousStep, links: Any, trees: Any) -> None:
        """Write ``part`` (of the trees ``trees``, links ``links``) back into this one."""
        self.q[:, links] = part.q
        self.w[:, links] = part.w
        self.h[trees] = part.h
        self.usable[trees] = part.usable
        self.second_order[trees] = part.second_order
        self.error[trees] = part.error


@dataclass(eq=False)
class StepMemory:
    """What the implicit steps leave for the next besides the state: the last velocity changes
    that the Newton iteration's first guess extrapolates (:func:`.integrators.first_guess`) and
    which trees took constraint forces. The stepper owns it and passes it from step to step
    (:class:`.stepping.Stepper`); :class:`.dynamics.Data` is a workspace of each call.

    Attributes
    ----------
    dw : (3, N) float, rad/s
        The joint-velocity change of the last implicit step (its free step's).
    dw_previous : (3, N) float, rad/s
        The change of the step before it.
    dw_count : int
        How many of ``dw`` and ``dw_previous`` hold a step's change (0 to 2).
    constrained : (T,) bool
        The trees that took constraint forces in the last step
        (:meth:`.constraints.ConstraintSolver.resolve`): their next free step is of first order
        and leaves the velocity derivative out of its factorisation, as the constraint pass
        needs it.
    restart : (T,) bool
        The trees whose next step is of first order whatever their history: the first half of
        a step redone because it failed, and the step after its halves
        (:class:`.stepping.Stepper`). Their next step clears it.
    """

    dw: Any
    dw_previous: Any
    constrained: Any
    restart: Any
    dw_count: int = 0

    @classmethod
    def for_model(cls, model: Model) -> StepMemory:
        xp, dtype = model.xp, model.backend.float
        return cls(
            xp.zeros((3, model.n_links), dtype=dtype),
            xp.zeros((3, model.n_links), dtype=dtype),
            xp.zeros(model.n_trees, dtype=bool),
            xp.zeros(model.n_trees, dtype=bool),
        )

    def copy(self) -> StepMemory:
        return StepMemory(
            self.dw.copy(),
            self.dw_previous.copy(),
            self.constrained.copy(),
            self.restart.copy(),
            self.dw_count,
        )

    def restore(self, other: StepMemory) -> None:
        """Take ``other``'s values, in place."""
        self.dw[...] = other.dw
        self.dw_previous[...] = other.dw_previous
        self.constrained[...] = other.constrained
        self.restart[...] = other.restart
        self.dw_count = other.dw_count

    def forget(self) -> None:
        """Forget the last steps: the next starts from the current velocities, as after a
        reset."""
        self.dw_count = 0
        self.constrained[...] = False
        self.restart[...] = False

    def of_trees(self, links: Any, trees: Any) -> StepMemory:
        """A copy of the part of some trees (their level-major ``links`` and ``trees``)."""
        return StepMemory(
            self.dw[:, links],
            self.dw_previous[:, links],
            self.constrained[trees],
            self.restart[trees],
            self.dw_count,
        )

    def put(self, part: StepMemory, links: Any, trees: Any) -> None:
        """Write ``part`` (of the trees ``trees``, links ``links``) back into this one."""
        self.dw[:, links] = part.dw
        self.dw_previous[:, links] = part.dw_previous
        self.constrained[trees] = part.constrained
        self.restart[trees] = part.restart


@dataclass
class State:
    """Joint configuration and velocity at one instant, and what the step that reached it
    leaves for the next.

    Attributes
    ----------
    q : (4, N) float
        Joint rotation of each link relative to its parent's frame (the base frame for depth-0
        links), unit quaternion ``(w, x, y, z)``.
    w : (3, N) float, rad/s
        Joint angular velocity of each link relative to its parent, in the link's own frame:
        ``dq/dt = q ⊗ (0, w) / 2``.
    base_rotation : (3, 3, T) float
        World rotation of each base at ``time``.
    base_position : (3, T) float, m
        World position of each base origin at ``time``.
    time : float, s (host)
    previous : PreviousStep or None
        The start of the step that reached this state, for a second-order step after it; None
        where there was none (the first step, after a reset, after an explicit step), and the
        next step is of first order.
    next_step : float or None, s
        With an error tolerance (``SolverSettings.tolerance``), the step size the error
        estimates of the steps that reached this state ask for next; None where none was
        estimated (the next advance takes ``SolverSettings.substeps`` steps).
    """

    q: Any
    w: Any
    base_rotation: Any
    base_position: Any
    time: float = 0.0
    previous: PreviousStep | None = None
    next_step: float | None = None

    @classmethod
    def at_rest(cls, model: Model, base_poses: Any = None, time: float = 0.0) -> State:
        """The rest shape, motionless, with bases at ``base_poses`` (T, 4, 4) (default: rest)."""
        poses = model.base_rest_poses if base_poses is None else _checked_poses(model, base_poses)
        xp = model.xp
        return cls(
            q=model.rest_rotation.copy(),
            w=xp.zeros((3, model.n_links), dtype=model.backend.float),
            base_rotation=model.backend.from_host(poses[:, :3, :3].transpose(1, 2, 0)),
            base_position=model.backend.from_host(poses[:, :3, 3].T),
            time=float(time),
        )

    def copy(self) -> State:
        """A deep copy (new device arrays)."""
        return State(
            self.q.copy(),
            self.w.copy(),
            self.base_rotation.copy(),
            self.base_position.copy(),
            self.time,
            None if self.previous is None else self.previous.copy(),
            self.next_step,
        )


@dataclass
class Control:
    """What drives one substep: base motion at its end, forces and animated parameters.

    Attributes (component-major, level-major; see :mod:`.model`)
    ----------
    base_rotation : (3, 3, T) float
    base_position : (3, T) float, m
    base_angular_velocity : (3, T) float, rad/s, world
    base_linear_velocity : (3, T) float, m/s, world, of the base origin
    base_angular_acceleration : (3, T) float, rad/s², world
    base_linear_acceleration : (3, T) float, m/s², world, of the base origin
    gravity : (3, 1) float, m/s², world
    wind_velocity : (3, N) float, m/s, world: the air's velocity at each link (drag is relative
        to it)
    external_force : (3, N) float, N, world: extra force on each link's centre of mass
        (force fields)
    bend_stiffness : (2, N) float, N·m², bending rigidity about the link's x and z axes
    twist_stiffness, bend_damping, twist_damping, drag, pose_strength, pose_damping : (N,) float
        (see ``StrandParameters``)
    pose_rotation : (4, N) float or None
        Target joint rotation of each link relative to its parent's frame, unit quaternion
        ``(w, x, y, z)`` (as ``State.q``), for posable dynamics; None: no target pose, and the
        pose strength and damping have no effect.
    pose_velocity : (3, N) float or None, rad/s
        Target joint angular velocity in the link's own frame (as ``State.w``): pose damping
        acts on ``w - pose_velocity``. Set together with ``pose_rotation``.
    interaction_damping : (N,) float or None, N·s/m
        Strand–strand interaction (:mod:`.interaction`, evaluated at the substep's start): each
        link's centre of mass is damped toward ``interaction_velocity`` (3, N), m/s, world, with
        this coefficient, and pushed by ``interaction_force`` (3, N), N, world. None (all
        three): no interaction.
    constraint_force : (3, N) float or None, N, world
        The forces of the points on animated paths at the end of the last step, held through
        this one (:mod:`.constraints`), summed per link at its centre of mass, with
        ``constraint_lever`` (3, N), N·m: the sum of each force times its point's distance from
        the centre of mass along the link's axis ``y``, so that their moment about it is
        ``y × constraint_lever``. None (both): none held.

    The per-link fields are replaced, never written into, except ``wind_velocity`` and
    ``external_force``, which force fields fill in place: so the parameters of
    :meth:`from_model` are the model's own arrays, not copies. Each replacement of a per-link
    field counts as a new :meth:`revision` of it.
    """

    base_rotation: Any
    base_position: Any
    base_angular_velocity: Any
    base_linear_velocity: Any
    base_angular_acceleration: Any
    base_linear_acceleration: Any
    gravity: Any
    wind_velocity: Any
    external_force: Any
    bend_stiffness: Any
    twist_stiffness: Any
    bend_damping: Any
    twist_damping: Any
    drag: Any
    pose_strength: Any
    pose_damping: Any
    pose_rotation: Any = None
    pose_velocity: Any = None
    interaction_damping: Any = None
    interaction_velocity: Any = None
    interaction_force: Any = None
    constraint_force: Any = None
    constraint_lever: Any = None

    # The fields that force fields fill in place (:mod:`.fields`); every other field is replaced,
    # never written into.
    FILLED_IN_PLACE = ("wind_velocity", "external_force")
    PARAMETERS = (
        "bend_stiffness",
        "twist_stiffness",
        "bend_damping",
        "twist_damping",
        "drag",
        "pose_strength",
        "pose_damping",
    )
    # The per-link fields (the target pose's and the interaction's may be None).
    PER_LINK = (
        "wind_velocity",
        "external_force",
        *PARAMETERS,
        "pose_rotation",
        "pose_velocity",
        "interaction_damping",
        "interaction_velocity",
        "interaction_force",
        "constraint_force",
        "constraint_lever",
    )

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in Control.PER_LINK:
            revisions = self.__dict__.setdefault("_revisions", dict.fromkeys(Control.PER_LINK, 0))
            revisions[name] += 1

    def revision(self, name: str) -> int:
        """How many times the per-link field ``name`` has been replaced (set) in this control:
        worker processes are sent a field again when its revision has moved on."""
        return self.__dict__["_revisions"][name]

    def at_links(self, links: Any) -> Control:
        """A control of some links (device indices) for link-local computations, such as the
        Newton matrix's joint block of a model of some trees (:func:`.model.select_trees`): its
        per-link fields are this one's at ``links``, the others are shared."""
        return replace(
            self,
            **{
                name: None if getattr(self, name) is None else getattr(self, name)[..., links]
                for name in self.PER_LINK
            },
        )

    @classmethod
    def from_model(cls, model: Model, gravity: Any = (0.0, 0.0, -9.81)) -> Control:
        """Model defaults, bases still at their rest poses, no wind."""
        xp, backend = model.xp, model.backend
        zeros_links = xp.zeros((3, model.n_links), dtype=backend.float)
        still = BaseMotion.still(model.base_rest_poses)
        control = cls(
            **{name: None for name in _BASE_FIELDS},
            gravity=backend.from_host(vector3("gravity", gravity)[:, None]),
            wind_velocity=zeros_links,
            external_force=zeros_links.copy(),
            **{name: model.parameters[name] for name in cls.PARAMETERS},
        )
        control.set_base_motion(model, still)
        return control

    def set_base_motion(self, model: Model, motion: BaseMotion) -> None:
        """Copy host base motion (one explicit host-to-device transfer per field)."""
        if motion.rotation.shape[0] != model.n_bases:
            raise InvalidInputError(
                f"base motion has {motion.rotation.shape[0]} base(s), the model has {model.n_bases}"
            )
        for name, source in zip(_BASE_FIELDS, _motion_fields(motion), strict=False):
            setattr(self, name, model.backend.from_host(np.moveaxis(source, 0, -1)))

    def set_interaction(self, damping: Any, velocity: Any, force: Any) -> None:
        """Set the strand interaction's damping (N,), velocity (3, N) and push (3, N) of the next
        substep (None, None, None: no interaction)."""
        self.interaction_damping = damping
        self.interaction_velocity = velocity
        self.interaction_force = force

    def set_pose(self, model: Model, pose: Pose | None) -> None:
        """Copy a host target pose in (two explicit host-to-device transfers); None removes it."""
        if pose is None:
            self.pose_rotation = self.pose_velocity = None
            return
        if not isinstance(pose, Pose):
            raise InvalidInputError(f"pose must be a Pose (or None), got {type(pose).__name__}")
        if pose.n_links != model.n_links:
            raise InvalidInputError(
                f"pose has {pose.n_links} link(s), the model has {model.n_links}"
            )
        self.pose_rotation = model.from_strand_order(pose.rotation, "pose rotation")
        self.pose_velocity = model.from_strand_order(pose.angular_velocity, "pose velocity")


_BASE_FIELDS = (
    "base_rotation",
    "base_position",
    "base_angular_velocity",
    "base_linear_velocity",
    "base_angular_acceleration",
    "base_linear_acceleration",
)


def _motion_fields(motion: BaseMotion) -> tuple:
    return (
        motion.rotation,
        motion.position,
        motion.angular_velocity,
        motion.linear_velocity,
        motion.angular_acceleration,
        motion.linear_acceleration,
    )


def _checked_poses(model: Model, poses: Any) -> np.ndarray:
    return finite_array("base poses", poses, (model.n_bases, 4, 4))
