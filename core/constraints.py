"""Contacts, friction, impacts, joint limits and animated constraints in the step (paper §4–5).

One substep with constraints
----------------------------
1. **At t** (:meth:`ConstraintSolver.begin`, before the control moves on to ``t + h``): link
   frames and velocities of the state, so every query point (``fractions`` along each colliding
   link), path point and joint has its position and velocity at ``t``; the animated targets are
   sampled at ``t − h``, ``t`` and ``t + h``.
2. **Free step**: the ordinary implicit (or explicit) step, without any constraint force. Its
   result is the state extrapolated to ``t + h`` that the swept contact query looks ahead to, and
   it holds nothing of the previous step's constraint forces: the paper's "remove the effect of
   the previous step's constraint forces" (§4, last paragraph) holds by construction.
3. **Contacts** (:meth:`ConstraintSolver.resolve`, :mod:`.contacts`): contacts from
   :func:`.obstacles.find_contacts` between the points at ``t`` and at the free ``t + h``
   correct the free step first, in joint space: their regularised laws (normal force ``κ`` times
   the shortfall of the point's normal velocity at ``t + h`` from its target, Coulomb friction
   while it pushes) enter the Newton matrix as link-local blocks, and a line-searched Newton
   iteration over the contacts' pieces finds the correction (:meth:`.ObstacleContacts.correct`).
   The targets: a speculative contact closes at most its gap within the step (no tunnelling, no
   floating), a penetration is pushed out at ``β`` of its depth per step (at most
   ``recovery_speed``), a point arriving faster than ``impact_speed`` leaves with the obstacle's
   restitution of its arrival speed. The cost does not grow with the contacts per strand.
4. **Rows**: joint limits near their swing cone or twist range (at ``t`` or the free end) give
   one row each; active point paths and joint rotations give three bilateral rows each. A row
   is a unit load, a force along its direction at its point (spatial force ``[(p − o) × n; n]``
   on its link, as joint torques by :func:`.dynamics.joint_load`) or a torque about its axis on
   its joint. Through an articulated-body factorisation of the step's Newton matrix
   ``M + hD + h²K`` (with the contacts' blocks) at the free step's end (:func:`.dynamics.factorize`,
   :func:`.dynamics.solve`), a unit force held over the step changes the joint velocities at
   ``t + h`` by ``h Y``, ``Y = solve(g)``, and every row's velocity by ``h`` times its
   acceleration in that solve. Column ``c`` of every tree's operator comes from one solve: every
   tree loads its own ``c``-th row at once (trees are independent), and only over the levels
   down to the deepest row's (a load reaches only the levels above it). This factorisation
   leaves out the link-local derivative of the velocity forces that the free step's has: that
   term couples the tiny axial inertia of thin links to their bending (gyroscopic), so a load
   across a strand would set it spinning about its axis; without it the operator is symmetric
   up to the spring tangent's asymmetry (it is symmetrised). A tree that took constraint forces
   in the step before leaves the term out of its free step (``StepMemory.constrained``), whose
   factorisation, at the free step's first guess, then serves here; a tree coming under rows is
   factorised again at the free step's end, on a model of those trees only (so a tree's step
   depends only on the tree).
5. **LCP** per tree, all trees in one batch (:func:`.lcp.solve_lcp`): ``A = h G N⁻¹ Gᵀ``
   (row velocity per newton), ``b = v_desired − v_free``, so ``w = A x − b`` is the row's velocity
   at ``t + h`` above its desired value (rows are paired with padding, blocks of two). Desired
   velocities at ``t + h`` (the velocity form of eq. 14–17 that backward Euler calls for):

   - joint limit, ``[0, ∞)``: the swing (or twist) angle at ``t + h``, linearised about the start
     of the step, stays within the limit; a joint past its limit at ``t`` returns to it within
     the step, at most at ``limit_recovery_speed``;
   - point on a path, joint following a rotation, ``(−∞, ∞)``: eq. 15, ``a^d = a* + k_p (x* − x)
     + k_d (v* − v)`` at ``t``, ``v^d = v(t) + h a^d``; a point's velocity relative to its
     target's is capped at ``path_speed``. A point's three rows lie along the line from its
     tree's root joint to the point and across it.

   **Weak rows.** A point pulled along its own straight chain cannot move that way to first
   order: its diagonal of ``A`` is nearly zero and the force that row asks for is bounded only
   by the regularisation (10⁹ N on a hair). A point row whose diagonal is below
   ``weak_row_ratio`` of the most mobile row at the same point is compliant: its diagonal is
   raised to that level, which bounds its force by what a healthy row would need. (Contacts
   pushed along their chain get the same compliance and a ``buckling_tilt``, :mod:`.contacts`.)
6. **Apply**: the joint torques of all forces, one solve, ``w⁺ += h solve(Gᵀ x)``,
   ``q⁺ = q ⊗ exp(h w⁺)``. With two or more passes (by default for the trees with joint-limit
   rows in the substep, see :class:`ConstraintSettings`) a Newton iteration of the backward-Euler
   residual with the forces (the contacts' held at their values) as a load, through the free
   step's own kind of factorisation, makes the state consistent with the forces (the operator
   is linear; it misses the Coriolis coupling and the geometric stiffness of the forces
   themselves, though not that of the links' tension), and each further pass measures the rows
   again, removes the effect of the forces found so far (the paper's §4 correction:
   ``b = v^d − v + A x``) and solves the LCP for
   the total, warm-started. The last pass ends with its linear correction, so the rows hold to
   the accuracy of the LCP.

Host transfers: the contact query reads back its count (compaction), the contact correction one
flag per iteration and a few per refactorisation, joint limits one count per kind of limit, and
the assembly the row count of every tree (the LCP runs on groups of trees of
similar size, each padded to its own). Animated targets are copied in per substep.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics, integrators, spatial
from .contacts import ContactMemory, ObstacleContacts, StepContacts
from .dynamics import Data
from .errors import InvalidInputError
from .lcp import solve_lcp
from .model import Model
from .obstacles import ObstacleMotion, Obstacles
from .spatial import cross, dot
from .state import Control, State, StepMemory
from .validation import (
    finite_number,
    is_real,
    positive_number,
    positive_whole,
    real_array,
    vector3,
)


@dataclass(frozen=True)
class ConstraintSettings:
    """How constraints are resolved (SI units).

    Attributes
    ----------
    iterations : int
        Projected Gauss–Seidel sweeps of the LCP (joint limits, paths, rotations) per substep
        (Algorithm 2's ``K_iter``).
    relaxation : float in (0, 2)
        ``ω`` of the sweeps.
    regularization : float > 0
        ``ε`` added to each row's diagonal, relative to that diagonal.
    fractions : tuple of floats in (0, 1]
        Where each colliding link is sampled for contacts (1 is its tip, the next link's joint);
        one point per fraction and link, so several contacts per link.
    margin : m
        Contacts are also made for points whose swept path comes within this of an obstacle.
    penetration_recovery : float in (0, 1]
        ``β``: the fraction of a penetration removed per substep.
    recovery_speed : m/s
        The fastest a penetration is pushed out. A strand that starts deep inside an obstacle,
        pushed along itself, needs huge forces to leave at ``β d/h`` (a row a chain can hardly
        move along); capped, it leaves gently.
    impact_speed : m/s
        Points approaching an obstacle faster than this at ``t`` are impacts: they leave with
        the obstacle's restitution times their arrival speed.
    slip_speed : m/s
        Below this tangential speed a contact holds by static friction, above it slides with
        dynamic friction.
    limit_margin : rad
        Joint-limit rows are made for joints within this of their limit at ``t`` or at the free
        step's end.
    limit_tolerance : rad
        A step that leaves a joint more than this past its swing or twist limit, and further
        past than it was at the step's start, is redone as two half steps (the adaptive
        subdivision of :mod:`.stepping`; accepted as it is at the deepest halving; ``inf``:
        never). Measured against the limit rather than against the start, so that the excesses
        of successive steps cannot add up. The rows are linear in the joint velocity, and a
        joint sliding round its cone turns the cone's normal: a fast strand in a tight cone
        leaves it by about ``(h w)² / 2θ`` per step (4.5° at a 6° cone, 12 rad/s and 4
        substeps at 24 fps).
    penetration_tolerance : float > 0
        A step that leaves a contact's point inside its obstacle deeper than this share of its
        collision radius, and deeper than it was at the step's start, is redone as two half
        steps (as for ``limit_tolerance``; ``inf``: never). The contact correction is linear in
        the joint velocities: a point that a fast obstacle swings far round its joint within a
        step ends off the line it was corrected along (a ball at 10 m/s left points 16 mm deep
        at 4 substeps), while the error falls with the square of the step.
    limit_recovery_speed : rad/s
        The fastest a joint past its limit at a step's start is turned back to it. Unbounded, the
        return over one step asks for the excess divided by the step: each halving of a step
        that left a tight cone doubled that speed, and a whipping strand in 6° cones reached
        120 rad/s at 1/16 of a substep, where the next step's Newton iteration failed.
    path_stiffness : 1/s²
        ``k_p`` of eq. 15 for points on paths and joints following rotations.
    path_damping : 1/s
        ``k_d`` of eq. 15; ``k_d h ≤ 1`` keeps the tracking free of overshoot.
    path_speed : m/s
        The fastest a point on a path is asked to approach its target, relative to the target's
        own motion: a target far away (or out of reach) is approached at this speed rather than
        with a force growing with the distance.
    contact_stiffness : float >= 1
        How stiff a contact with an obstacle is, as ``κ h / m``: its force ``κ`` per m/s that
        its point falls short of the contact's target velocity, relative to the force that
        stops the contact's link mass ``m`` within the step (:mod:`.contacts`). The target is
        missed by ``1/contact_stiffness`` of the velocity change the contact makes.
    contact_tolerance : float > 0, rad/s
        The contact correction (:mod:`.contacts`) of a tree ends once its contacts keep their
        pieces and it changes the tree's joint velocities by at most this in an iteration.
    contact_iterations : int
        The most iterations of a substep's contact correction; a tree unfinished then keeps its
        last iterate (most finish in two or three).
    weak_row_ratio : float in (0, 1]
        ``κ``: a point row that moves its point less than ``κ`` times as easily as the most
        mobile row of the same point (its diagonal of ``A`` below ``κ`` times theirs: a point
        pushed or pulled along its own straight chain) is compliant: its diagonal is raised to
        that level, so it pushes at most with the force a row of ``κ`` times that mobility would
        need, not with the force unbounded by a near-zero diagonal. Contacts with obstacles
        whose normal lies within that mobility of the line from their tree's root joint to
        their point are compliant alike (:mod:`.contacts`, *Weak contacts*).
    buckling_tilt : float >= 0
        ``η``: the force of a weak row that pushes its point toward its tree's root is applied up
        to ``η`` off its line, sideways from the point's link (the imperfection that lets a
        straight strand pushed along itself buckle; see ``docs/collisions.md``).
    passes : int or None
        LCP solves per substep, each but the last followed by a Newton iteration with the forces
        found (see :meth:`ConstraintSolver._apply`). ``None`` (the default): two for the trees
        with joint-limit rows in the substep, one for the others (so a tree's step does not
        depend on the other trees). A second pass measures the rows again after the Newton
        iteration: a joint limit's angle is not linear in the joint velocity, and at one pass a
        whipping strand in 15° cones diverged within four frames; contacts and paths hold as
        well at one pass as at two (``docs/collisions.md``), and one pass halves the constraint
        work of a substep.
    """

    iterations: int = 40
    relaxation: float = 1.0
    regularization: float = 1e-6
    fractions: tuple = (0.5, 1.0)
    margin: float = 1e-3
    penetration_recovery: float = 0.2
    recovery_speed: float = 0.02
    impact_speed: float = 0.1
    slip_speed: float = 1e-3
    limit_margin: float = 0.02
    limit_tolerance: float = math.radians(0.5)
    penetration_tolerance: float = 0.5
    limit_recovery_speed: float = 5.0
    path_stiffness: float = 2000.0
    path_damping: float = 80.0
    path_speed: float = 0.5
    contact_stiffness: float = 1e5
    contact_tolerance: float = 3e-3
    contact_iterations: int = 8
    weak_row_ratio: float = 0.1
    buckling_tilt: float = 0.05
    passes: int | None = None

    def __post_init__(self) -> None:
        counts = ("iterations", "contact_iterations", *(() if self.passes is None else ("passes",)))
        for name in counts:
            positive_whole(name, getattr(self, name))
        for name, low, high, closed in (
            ("relaxation", 0.0, 2.0, False),
            ("weak_row_ratio", 0.0, 1.0, True),
            ("penetration_recovery", 0.0, 1.0, True),
        ):
            value = finite_number(name, getattr(self, name))
            if not (low < value < high or (closed and value == high)):
                interval = f"({low:g}, {high:g}{']' if closed else ')'}"
                raise InvalidInputError(f"{name} must lie in {interval}, got {value}")
        for name in ("regularization", "contact_tolerance"):
            positive_number(name, getattr(self, name))
        if finite_number("contact_stiffness", self.contact_stiffness) < 1.0:
            raise InvalidInputError(
                f"contact_stiffness must be a number >= 1, got {self.contact_stiffness!r}"
            )
        for name in (
            "margin",
            "recovery_speed",
            "impact_speed",
            "slip_speed",
            "limit_margin",
            "limit_recovery_speed",
            "path_stiffness",
            "path_damping",
            "path_speed",
            "buckling_tilt",
        ):
            value = finite_number(name, getattr(self, name))
            if value < 0.0:
                raise InvalidInputError(f"{name} must be a number >= 0, got {value!r}")
        for name in ("limit_tolerance", "penetration_tolerance"):
            tolerance = getattr(self, name)
            if not (is_real(tolerance) and tolerance > 0):  # inf: never halve
                raise InvalidInputError(f"{name} must be a number > 0, got {tolerance!r}")
        fractions = self.fractions
        if not (
            isinstance(fractions, tuple | list)
            and fractions
            and all(is_real(f) and 0.0 < f <= 1.0 for f in fractions)
        ):
            raise InvalidInputError(f"fractions must be numbers in (0, 1], got {fractions!r}")


@dataclass(frozen=True)
class JointLimits:
    """Limits of every joint relative to its rest rotation (rad; scalars or per-link values in
    strand order; ``inf`` leaves a joint free).

    The deviation from rest is split ``twist ⊗ swing`` as for the springs (see
    ``docs/physics.md``): ``swing`` bounds the swing angle (a cone about the rest direction),
    ``twist_min ≤ twist ≤ twist_max`` the twist about the link's axis.
    """

    swing: Any = math.inf
    twist_min: Any = -math.inf
    twist_max: Any = math.inf


@dataclass(frozen=True)
class PointPath:
    """A point of a link follows an animated path.

    Attributes
    ----------
    strand, link : int
        The link (its index within the strand, 0 at the root).
    path : callable ``path(t) -> (3,)``
        World position (m) the point should be at, at time ``t``; differenced for its velocity
        and acceleration.
    fraction : float in [0, 1]
        Where the point lies along the link (1: its tip).
    active : callable ``active(t) -> bool`` or None (always)
    """

    strand: int
    link: int
    path: Callable[[float], Any]
    fraction: float = 1.0
    active: Callable[[float], bool] | None = None


@dataclass(frozen=True)
class JointRotation:
    """A joint follows an animated rotation.

    Attributes
    ----------
    strand, link : int
        The link whose joint is driven (its index within the strand).
    rotation : callable ``rotation(t) -> (4,)``
        The joint's rotation relative to its parent (unit quaternion ``(w, x, y, z)``, like
        ``State.q``) at time ``t``.
    active : callable ``active(t) -> bool`` or None (always)
    """

    strand: int
    link: int
    rotation: Callable[[float], Any]
    active: Callable[[float], bool] | None = None


@dataclass(frozen=True)
class ConstraintStats:
    """What the last substep's constraint pass did: rows of the largest tree problem, contacts
    found, joint-limit rows, bilateral rows."""

    largest_problem: int = 0
    contacts: int = 0
    limit_rows: int = 0
    bilateral_rows: int = 0

    @classmethod
    def combined(cls, parts: list[ConstraintStats]) -> ConstraintStats:
        """The statistics of a model stepped in groups of trees, from each group's."""
        return cls(
            max(part.largest_problem for part in parts),
            sum(part.contacts for part in parts),
            sum(part.limit_rows for part in parts),
            sum(part.bilateral_rows for part in parts),
        )


@dataclass(frozen=True, eq=False)
class SolverRecord:
    """What a :class:`ConstraintSolver` carries from one step to the next
    (:meth:`ConstraintSolver.kept`): how its contacts rubbed, the obstacles' last motion, the
    last statistics and contacts, and the step start of its animated constraints."""

    memory: ContactMemory | None
    obstacle_motion: ObstacleMotion | None
    stats: ConstraintStats
    last_contacts: StepContacts | None
    start: dict


@dataclass(eq=False)
class _Rows:
    """Constraint rows, one column each (device arrays, ``R`` rows).

    tree, link : (R,) int, level-major link; fraction : (R,) where the row's point lies along its
    link (0 for joint rows); direction : (3, R) world force direction,
    or the link-frame torque axis of a joint row; joint : (R,) bool; lower, upper : (R,) bounds;
    target : (R,) m/s or rad/s, the desired velocity at ``t + h`` along the row (of the point,
    world; of the joint, link frame); bounded rows stop pushing above it.
    """

    tree: Any
    link: Any
    fraction: Any
    direction: Any
    joint: Any
    lower: Any
    upper: Any
    target: Any

    def with_padding(self, xp: Any) -> _Rows:
        """Each row followed by a padding row (no load, force held at 0), so that rows come in
        the pairs the LCP sweeps update together."""
        count = self.tree.shape[0]

        def paired(values: Any, padding: Any) -> Any:
            return xp.stack((values, padding), axis=-1).reshape(*values.shape[:-1], 2 * count)

        def zero(values: Any) -> Any:
            return paired(values, xp.zeros_like(values))

        return _Rows(
            tree=paired(self.tree, self.tree),
            link=paired(self.link, self.link),
            fraction=zero(self.fraction),
            direction=zero(self.direction),
            joint=paired(self.joint, self.joint),
            lower=zero(self.lower),
            upper=zero(self.upper),
            target=zero(self.target),
        )

    @staticmethod
    def concatenate(xp: Any, parts: list[_Rows]) -> _Rows:
        names = (
            "tree",
            "link",
            "fraction",
            "direction",
            "joint",
            "lower",
            "upper",
            "target",
        )
        return _Rows(
            **{
                name: xp.concatenate([getattr(part, name) for part in parts], axis=-1)
                for name in names
            }
        )


class ConstraintSolver:
    """Obstacles, joint limits and animated constraints of one model, resolved in every substep.

    Parameters
    ----------
    model : Model
    obstacles : Obstacles or None
        On the model's backend.
    joint_limits : JointLimits or None
    settings : ConstraintSettings
    """

    def __init__(
        self,
        model: Model,
        obstacles: Obstacles | None = None,
        joint_limits: JointLimits | None = None,
        settings: ConstraintSettings | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or ConstraintSettings()
        backend = model.backend
        if obstacles is not None and (
            obstacles.backend.name != backend.name or obstacles.backend.dtype != backend.dtype
        ):
            raise InvalidInputError(
                f"obstacles are on backend {obstacles.backend.name}/{obstacles.backend.dtype}, the "
                f"model on {backend.name}/{backend.dtype}; build both on the same backend"
            )
        self.obstacles = obstacles
        # Contacts with obstacles correct the free step in joint space (contacts module), before
        # the rows of the joint limits and animated constraints.
        self.contacts = (
            None if obstacles is None else ObstacleContacts(model, obstacles, self.settings)
        )
        self._limits = None if joint_limits is None else _device_limits(model, joint_limits)
        self.bilateral: list[PointPath | JointRotation] = []
        self.stats = ConstraintStats()
        # What the last substep's contact correction did (None without contacts in it).
        self.last_contacts: StepContacts | None = None
        self._start: dict = {}

    # --- configuration ---------------------------------------------------------------------

    def add(self, constraint: PointPath | JointRotation) -> None:
        """Add an animated point path or joint rotation (checked against the model)."""
        if not isinstance(constraint, PointPath | JointRotation):
            raise InvalidInputError(
                f"expected a PointPath or JointRotation, got {type(constraint).__name__}"
            )
        self._level_major_link(constraint.strand, constraint.link)
        if isinstance(constraint, PointPath) and not 0.0 <= float(constraint.fraction) <= 1.0:
            raise InvalidInputError(f"PointPath.fraction must lie in [0, 1], got {constraint}")
        self.bilateral.append(constraint)

    def arguments_for(self, part: Model, links: np.ndarray) -> tuple:
        """``(obstacles, joint_limits, settings)`` of a solver for ``part``, a model of some of
        this model's trees (:func:`.model.select_trees`; ``links``: the level-major links of
        this model that ``part`` holds, in its own order). Animated constraints are not
        passed on."""
        limits = None
        if self._limits is not None:
            chosen = self.model.backend.from_host(links)
            limits = JointLimits(
                *(
                    part.to_strand_order(self._limits[name][chosen])
                    for name in ("swing", "twist_min", "twist_max")
                )
            )
        return self.obstacles, limits, self.settings

    @property
    def divisible(self) -> bool:
        """Whether a solver for some of the trees (:meth:`for_trees`) resolves them as this one
        does: not with animated constraints, which :meth:`arguments_for` does not pass on."""
        return not self.bilateral

    def for_trees(
        self, part: Model, links: np.ndarray, memory: ContactMemory | None
    ) -> ConstraintSolver:
        """A solver for ``part``, a model of some of this model's trees (``links`` as in
        :meth:`arguments_for`), its obstacles where these are, remembering what ``memory`` (one
        of this solver's, :attr:`memory`) holds of its contacts."""
        solver = ConstraintSolver(part, *self.arguments_for(part, links))
        if self.contacts is not None:
            solver.contacts.set_motion(self.contacts.motion)
            points = self.contacts.points_of(solver.contacts, links)
            self.contacts.remembered_for(solver.contacts, points, memory)
        return solver

    def take_back(self, part: ConstraintSolver, links: np.ndarray) -> None:
        """After ``part`` (:meth:`for_trees`) stepped its trees in this solver's stead: remember
        its contacts for them."""
        if self.contacts is not None:
            self.contacts.take_memory(part.contacts, self.contacts.points_of(part.contacts, links))

    @property
    def memory(self) -> ContactMemory | None:
        """What the last step left to the next about its contacts (None without obstacles)."""
        return None if self.contacts is None else self.contacts.memory

    def remember(self, memory: ContactMemory | None) -> None:
        """Go back to a :attr:`memory` of this solver's: what a step that failed left is
        forgotten."""
        if self.contacts is not None:
            self.contacts.memory = memory

    def kept(self) -> SolverRecord:
        """What this solver carries from one step to the next, to :meth:`restore` after a
        failed advance."""
        contacts = self.contacts
        return SolverRecord(
            None if contacts is None else contacts.memory,
            None if contacts is None else contacts.motion,
            self.stats,
            self.last_contacts,
            dict(self._start),
        )

    def restore(self, record: SolverRecord) -> None:
        """Go back to what :meth:`kept` recorded."""
        if self.contacts is not None:
            self.contacts.memory, self.contacts.motion = record.memory, record.obstacle_motion
        self.stats, self.last_contacts = record.stats, record.last_contacts
        self._start = dict(record.start)

    @property
    def obstacle_motion(self) -> ObstacleMotion | None:
        """The obstacles' poses and velocities of the last substep (None without obstacles)."""
        return None if self.contacts is None else self.contacts.motion

    def reset(self) -> None:
        """Forget the last run: obstacles back at the identity pose, still; no statistics, no
        contacts remembered."""
        if self.contacts is not None:
            self.contacts.reset()
        self.stats = ConstraintStats()
        self._start = {}

    def set_obstacle_motion(self, motion: ObstacleMotion) -> None:
        """Obstacle poses and velocities for the next substep."""
        if self.contacts is None:
            raise InvalidInputError("this simulation has no obstacles to move")
        if not isinstance(motion, ObstacleMotion):
            raise InvalidInputError(
                f"obstacle motion must be an ObstacleMotion, got {type(motion).__name__}"
            )
        self.contacts.set_motion(motion)

    def _level_major_link(self, strand: int, link: int) -> int:
        model = self.model
        matches = np.nonzero(model.strand_index == int(strand))[0]
        if len(matches) != 1:
            raise InvalidInputError(f"strand {strand} does not exist in this model")
        s = int(matches[0])
        count = int(model.link_offsets[s + 1] - model.link_offsets[s])
        if not 0 <= int(link) < count:
            raise InvalidInputError(
                f"{model.describe_strand(s)} has no link {link} (it has {count})"
            )
        return int(model.link_order[model.link_offsets[s] + int(link)])

    # --- the substep -----------------------------------------------------------------------

    def begin(self, data: Data, state: State, control: Control, time: float, h: float) -> None:
        """Record the state at ``t``; ``control`` must still describe the bases at ``t``."""
        model, xp = self.model, self.model.xp
        dynamics.link_velocities(model, data, state.q, state.w, control)
        origin = control.base_position[:, model.link_base]
        start: dict = {}
        if self.contacts is not None:
            self.contacts.begin(data, control)
        if self._limits is not None:
            start["limits"] = _swing_and_twist(model, state.q)
        active = [c for c in self.bilateral if c.active is None or bool(c.active(time + h))]
        paths = [c for c in active if isinstance(c, PointPath)]
        rotations = [c for c in active if isinstance(c, JointRotation)]
        device = model.backend.from_host
        if paths:
            links = device(np.array([self._level_major_link(c.strand, c.link) for c in paths]))
            fractions = device(np.array([float(c.fraction) for c in paths]))
            relative, velocity = _points(model, data, links, fractions)
            targets = np.array(
                [[_checked_point(c, c.path(time + k * h)) for c in paths] for k in (-1, 0, 1)]
            )
            kp, kd = self.settings.path_stiffness, self.settings.path_damping
            target_velocity = (targets[2] - targets[0]) / (2 * h)
            target_acceleration = (targets[2] - 2 * targets[1] + targets[0]) / (h * h)
            position = relative + origin[:, links]
            # The target's velocity at t + h, and eq. 15's velocity there relative to it: the
            # approach, capped at path_speed (the proportional term grows with the distance).
            ahead = device(target_velocity.T) + h * device(target_acceleration.T)
            approach = (
                velocity
                - device(target_velocity.T)
                + (h * kp) * (device(targets[1].T) - position)
                + (h * kd) * (device(target_velocity.T) - velocity)
            )
            speed = xp.sqrt(dot(approach, approach))
            limit = self.settings.path_speed
            approach = approach * xp.where(speed > limit, limit / xp.maximum(speed, 1e-300), 1.0)
            start["paths"] = (links, fractions, ahead + approach)
        if rotations:
            links = device(np.array([self._level_major_link(c.strand, c.link) for c in rotations]))
            targets = np.array(
                [
                    [_checked_rotation(c, c.rotation(time + k * h)) for c in rotations]
                    for k in (-1, 0, 1)
                ]
            )
            back = _log(_relative(targets[0], targets[1])) / h
            ahead = _log(_relative(targets[1], targets[2])) / h
            q, w = state.q[:, links], state.w[:, links]
            error = spatial.quat_log(
                xp, spatial.quat_multiply(xp, spatial.quat_conjugate(xp, q), device(targets[1].T))
            )
            kp, kd = self.settings.path_stiffness, self.settings.path_damping
            desired = (
                w
                + device((ahead - back).T)
                + (h * kp) * error
                + (h * kd) * (device((0.5 * (ahead + back)).T) - w)
            )
            start["rotations"] = (links, desired)
        self._start = start

    def resolve(
        self,
        data: Data,
        memory: StepMemory,
        state: State,
        control: Control,
        h: float,
        out: State,
    ) -> None:
        """Correct the free step ``out`` (from ``state`` over ``h``) by the constraint forces;
        record in ``memory`` which trees took them."""
        model, xp = self.model, self.model.xp
        dynamics.link_velocities(model, data, out.q, out.w, control)
        parts: list[_Rows] = []
        limit_rows = bilateral_rows = contacts = 0
        touching = xp.zeros(model.n_trees, dtype=bool)
        self.last_contacts = None
        if self.contacts is not None:
            corrected = self.contacts.correct(
                data, state, control, h, out, self.settings.contact_tolerance
            )
            self.last_contacts, touching = corrected, corrected.touching
            contacts = len(corrected.found)
            dynamics.link_velocities(model, data, out.q, out.w, control)
        if self._limits is not None:
            rows = self._limit_rows(out, h)
            limit_rows = rows.tree.shape[0]
            limited_trees = rows.tree
            parts.append(rows.with_padding(xp))
        if "paths" in self._start:
            rows = self._path_rows(data)
            bilateral_rows += rows.tree.shape[0]
            parts.append(rows.with_padding(xp))
        if "rotations" in self._start:
            rows = self._rotation_rows()
            bilateral_rows += rows.tree.shape[0]
            parts.append(rows.with_padding(xp))
        rows = _Rows.concatenate(xp, parts) if parts else None
        count = 0 if rows is None else rows.tree.shape[0]
        constrained = xp.zeros(model.n_trees, dtype=bool)
        if count == 0:
            self.stats = ConstraintStats(contacts=contacts)
            self._settle(memory, touching)
            return
        constrained[rows.tree] = True
        self._factorize_plain(data, control, out.q, h, constrained)
        passes, repeated = self.settings.passes, None
        if passes is None:
            passes = 2 if limit_rows else 1
            if limit_rows:
                # Only the trees with joint-limit rows take the second pass, so that a tree's
                # step does not depend on the others (nor on how trees are grouped in workers).
                repeated = xp.zeros(model.n_trees, dtype=bool)
                repeated[limited_trees] = True
        largest = self._apply(data, state, control, rows, h, out, int(passes), repeated)
        self.stats = ConstraintStats(largest, contacts, limit_rows, bilateral_rows)
        self._settle(memory, constrained | touching)

    def _settle(self, memory: StepMemory, constrained: Any) -> None:
        """Record the trees that took constraint forces in the step, contacts' or rows'
        (``memory.constrained``): their next free step leaves the velocity derivative out of its
        factorisation, as the constraint pass has it. Between its free steps such a tree takes
        constraint forces, which change its next free step's velocity change unpredictably:
        that step's first guess repeats the last change instead of extrapolating the last two
        (integrators.first_guess)."""
        model, xp = self.model, self.model.xp
        memory.dw_previous[...] = xp.where(
            constrained[model.link_tree], memory.dw, memory.dw_previous
        )
        memory.constrained[...] = constrained

    def _factorize_plain(
        self, data: Data, control: Control, q: Any, h: float, constrained: Any
    ) -> None:
        """Make the last factorisation the Newton matrix without the velocity derivative (module
        docstring, step 4) for the ``constrained`` trees ((T,) bool).

        Those whose free step factorised it (``data.plain_trees``: they took constraint forces
        in the step before) keep it. The others get it at the free step's end rotations ``q``
        (:func:`.dynamics.factorize_trees`: a tree's factorisation depends only on the tree).
        """
        model = self.model
        missing = constrained & ~data.plain_trees
        dynamics.factorize_trees(
            model, data, missing, integrators.joint_block(model, control, q, h), tension_step=h
        )
        data.plain_trees |= missing

    def overshooting_trees(self, control: Control, out: State, h: float) -> np.ndarray:
        """The trees (host indices) whose step of ``h`` from the state of the last :meth:`begin`
        to ``out`` went further than it may, and is halved (:mod:`.stepping`): a point of the
        last :meth:`resolve`'s contacts more than ``penetration_tolerance`` of its radius inside
        its obstacle, and deeper than at the start
        (:meth:`.contacts.ObstacleContacts.overshoot`), or a joint more than
        ``limit_tolerance`` past its swing or twist limit, and further out than at the start."""
        beyond = np.zeros(self.model.n_trees, dtype=bool)
        if self.last_contacts is not None:
            depth = self.contacts.overshoot(
                self.last_contacts.found, control, out.q, h, self.settings.penetration_tolerance
            )
            beyond |= depth > 0.0
        if self._limits is not None:
            beyond |= self._limit_overshoot(out) > 0.0
        return np.nonzero(beyond)[0]

    def _limit_overshoot(self, out: State) -> np.ndarray:
        """How far (rad) the step from the state of the last :meth:`begin` to ``out`` took each
        tree's joints beyond what they may reach: ``limit_tolerance`` past their swing or twist
        limit, or, for a joint further out at the start, where it was; (n_trees,) on the
        host."""
        xp, limits = self.model.xp, self._limits
        tolerance = self.settings.limit_tolerance
        swing_end, _, twist_end = _swing_and_twist(self.model, out.q)
        swing, _, twist = self._start["limits"]

        def beyond(start: Any, end: Any, bound: Any) -> Any:
            return end - bound - xp.maximum(start - bound, tolerance)

        overshoot = xp.maximum(
            beyond(swing, swing_end, limits["swing"]),
            xp.maximum(
                beyond(twist, twist_end, limits["twist_max"]),
                beyond(-twist, -twist_end, -limits["twist_min"]),
            ),
        )
        return self.model.backend.to_host(dynamics.tree_max(self.model, overshoot))

    # --- rows ------------------------------------------------------------------------------

    def _limit_rows(self, out: State, h: float) -> _Rows:
        """One row per joint whose swing or twist is within ``limit_margin`` of its limit at the
        start or at the free end of the step.

        The angle at ``t + h`` is linearised about the start, ``θ(t) + h b·w⁺`` (``b`` the swing
        axis, or the twist axis): a joint stopped at its limit ends with a small ``w⁺``, so this
        is accurate where it matters, whereas a linearisation about the free end is off by the
        square of the whole correction (a whipping tip overshot a 15° cone by 5°). A joint past
        its limit at the start returns to it within the step, at most at
        ``limit_recovery_speed``."""
        model, xp = self.model, self.model.xp
        limits, margin = self._limits, self.settings.limit_margin
        swing_end, axis_end, twist_end = _swing_and_twist(model, out.q)
        swing, axis, twist = self._start["limits"]
        # At rest the swing axis is undefined: take the one the free step turns about.
        axis = xp.where(swing > 1e-6, axis, axis_end)
        y = xp.zeros_like(axis)
        y[1] = 1.0
        parts = []
        # (which joints, torque axis, excess over the limit at t)
        for mask, direction, excess in (
            (
                xp.maximum(swing, swing_end) > limits["swing"] - margin,
                -axis,
                swing - limits["swing"],
            ),
            (
                xp.maximum(twist, twist_end) > limits["twist_max"] - margin,
                -y,
                twist - limits["twist_max"],
            ),
            (
                xp.minimum(twist, twist_end) < limits["twist_min"] + margin,
                y,
                limits["twist_min"] - twist,
            ),
        ):
            (link,) = xp.nonzero(mask)
            # The velocity into the limit: at least the excess over the step (negative: the gap
            # may close within it), a joint already past its limit returning at most so fast.
            inward = excess[link] / h
            inward = xp.where(
                inward > 0.0, xp.minimum(inward, self.settings.limit_recovery_speed), inward
            )
            parts.append(_joint_rows(xp, model, link, direction[:, link], inward, True))
        return _Rows.concatenate(xp, parts)

    def _path_rows(self, data: Data) -> _Rows:
        """Three bilateral rows per point: along the line from its tree's root joint to the point,
        and two across it. A chain stretched toward an unreachable target
        can hardly move its point along that line: in this basis that is one weak row, which
        :meth:`_apply` makes compliant, rather than a near-singular block of world-axis rows
        (each with a healthy diagonal) that asks for huge, nearly cancelling forces."""
        model, xp = self.model, self.model.xp
        links, fractions, desired = self._start["paths"]
        count = links.shape[0]
        reach = _from_root(model, data, links, _arms(model, data, links, fractions))
        length = xp.sqrt(dot(reach, reach))
        along = xp.where(length > 1e-12, reach / xp.where(length > 1e-12, length, 1.0), 0.0)
        along[0] = xp.where(length > 1e-12, along[0], 1.0)
        across = _perpendicular(xp, along)
        basis = (along, across, cross(xp, along, across))
        direction = xp.concatenate(basis, axis=1)
        infinite = xp.full(3 * count, xp.inf, dtype=model.backend.float)
        false = xp.zeros(3 * count, dtype=bool)
        return _Rows(
            tree=xp.tile(model.link_tree[links], 3),
            link=xp.tile(links, 3),
            fraction=xp.tile(fractions, 3),
            direction=direction,
            joint=false,
            lower=-infinite,
            upper=infinite,
            target=xp.concatenate([dot(axis, desired) for axis in basis]),
        )

    def _rotation_rows(self) -> _Rows:
        model, xp = self.model, self.model.xp
        links, desired = self._start["rotations"]
        count = links.shape[0]
        eye = xp.eye(3, dtype=model.backend.float)
        parts = [
            _joint_rows(
                xp,
                model,
                links,
                xp.repeat(eye[:, axis : axis + 1], count, axis=1),
                desired[axis],
                False,
            )
            for axis in range(3)
        ]
        return _Rows.concatenate(xp, parts)

    # --- operator, LCP and correction ------------------------------------------------------

    def _apply(
        self,
        data: Data,
        state: State,
        control: Control,
        rows: _Rows,
        h: float,
        out: State,
        passes: int,
        repeated: Any = None,
    ) -> int:
        """Solve the rows' LCP and correct ``out`` in ``passes`` passes (module docstring, steps
        4–6), the passes after the first for the trees ``repeated`` ((T,) bool; None: all);
        returns the largest tree's row count."""
        model, xp, settings = self.model, self.model.xp, self.settings
        to_host = model.backend.to_host
        order = xp.argsort(rows.tree, kind="stable")
        tree = rows.tree[order]
        rank = xp.arange(tree.shape[0]) - xp.searchsorted(tree, tree, side="left")
        n_trees = model.n_trees
        # The row count of every tree, read back once (n_trees integers): the LCP groups trees by
        # it, so that each group is padded to its own size rather than the largest tree's.
        counts = to_host(xp.bincount(tree, minlength=n_trees))
        m = int(counts.max())
        groups = _size_groups(model.backend, counts)
        dtype = model.backend.float

        def dense(values: Any, fill: Any, kind: Any = dtype) -> Any:
            target = xp.full((*values.shape[:-1], n_trees, m), fill, dtype=kind)
            target[..., tree, rank] = values[..., order]
            return target

        link = xp.broadcast_to(xp.arange(n_trees)[:, None], (n_trees, m)).copy()
        link[tree, rank] = rows.link[order]
        # Every pass loads the links down to the deepest row's level (one number read back).
        loaded = model.level_bounds[model.depth_of(to_host(xp.max(link)))][1]
        fraction = dense(rows.fraction, 0.0)
        arm = _arms(model, data, link, fraction)
        direction = dense(rows.direction, 0.0)
        joint = dense(rows.joint, False, bool)
        lower = dense(rows.lower, 0.0)
        upper = dense(rows.upper, 0.0)
        target = dense(rows.target, 0.0)

        operator = delassus_operator(model, data, link, arm, direction, joint, h, counts)
        operator = 0.5 * (operator + operator.transpose(0, 2, 1))
        diagonal = xp.diagonal(operator, axis1=1, axis2=2)
        floor = 1e-12 * xp.max(diagonal, axis=1, keepdims=True) + 1e-30
        level, weakness = _weak_rows(xp, link, fraction, joint, diagonal, settings.weak_row_ratio)
        # Weak rows are compliant: their diagonal is raised to the level of a healthy row.
        regularization = xp.maximum(settings.regularization * diagonal + floor, level - diagonal)
        applied = _buckling_directions(
            model, data, link, arm, direction, lower >= 0.0, weakness, settings.buckling_tilt
        )

        force = xp.zeros((n_trees, m), dtype=dtype)
        # The rows' trees take a first-order step (the operator and the rows' targets are
        # backward Euler's); the others keep their free step as it was.
        rowed = xp.zeros(n_trees, dtype=bool)
        rowed[rows.tree] = True
        rowed_links = rowed[model.link_tree]
        integrators.first_order_step(out, rowed)
        backward_euler = integrators.Scheme.backward_euler(state.w, h)

        def rotations() -> Any:
            return xp.where(rowed_links, backward_euler.rotations(xp, state.q, out.w), out.q)

        for correction in range(passes):
            if correction:
                dynamics.link_velocities(model, data, out.q, out.w, control)
                arm = _arms(model, data, link, fraction)
            velocity = _row_values(xp, data.v[:, link], out.w[:, link], arm, direction, joint)
            rhs = target - velocity + (operator @ force[:, :, None])[:, :, 0]
            new_force = force.copy()
            for trees, size in groups:
                part = (trees, slice(0, size))
                new_force[part] = solve_lcp(
                    xp,
                    operator[trees, :size, :size],
                    rhs[part],
                    lower[part],
                    upper[part],
                    iterations=int(settings.iterations),
                    regularization=regularization[part],
                    relaxation=settings.relaxation,
                    block_size=2,
                    initial=force[part],
                )
            if correction and repeated is not None:
                new_force = xp.where(repeated[:, None], new_force, force)
            change = self._joint_load(data, link, arm, applied, joint, new_force - force, loaded)
            force = new_force
            out.w += h * dynamics.solve(model, data, change)
            out.q[...] = rotations()
            if correction + 1 < passes:
                r = integrators.residual(model, data, backward_euler, out.q, out.w, control)
                # The contacts' forces of the correction are loads here, held at their values,
                # and their blocks stay in the matrix.
                contacts = self.last_contacts
                if contacts is not None:
                    r = r - contacts.load
                dynamics.factorize(
                    model,
                    data,
                    integrators.joint_block(model, control, out.q, h),
                    None if contacts is None else contacts.link_block,
                    velocity_step=h,
                    control=control,
                    tension_step=h,
                )
                data.plain_trees[...] = False
                load = self._joint_load(
                    data, link, _arms(model, data, link, fraction), applied, joint, force, loaded
                )
                r[:, :loaded] -= load
                update = dynamics.solve(model, data, -h * r)
                if repeated is not None:
                    update = xp.where(repeated[model.link_tree], update, 0.0)
                out.w += update
                out.q[...] = rotations()
        return m

    def _joint_load(
        self,
        data: Data,
        link: Any,
        arm: Any,
        direction: Any,
        joint: Any,
        force: Any,
        loaded: int,
    ) -> Any:
        """Joint torques (3, loaded) of row forces (T, m) on the dense rows (at the free step's
        end), on the first ``loaded`` links: the levels down to the deepest row's (see
        :func:`.dynamics.joint_load`)."""
        model, xp = self.model, self.model.xp
        dtype = model.backend.float
        torque = xp.zeros((3, loaded), dtype=dtype)
        link_force = xp.zeros((6, loaded), dtype=dtype)
        # A column holds at most one row per tree, so its links never repeat.
        for c in range(link.shape[1]):
            point_force = direction[:, :, c] * (force[:, c] * ~joint[:, c])
            link_force[:3, link[:, c]] += cross(xp, arm[:, :, c], point_force)
            link_force[3:, link[:, c]] += point_force
            torque[:, link[:, c]] += direction[:, :, c] * (force[:, c] * joint[:, c])
        return torque + dynamics.joint_load(model, data, link_force)


def delassus_operator(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    joint: Any,
    h: float,
    counts: np.ndarray | None = None,
) -> Any:
    """The constraint operator ``A = h G N⁻¹ Gᵀ`` (T, m, m) of every tree's rows, by test solves
    through the last :func:`.dynamics.factorize` (of ``N``).

    Row ``i`` of tree ``t`` acts on level-major link ``link[t, i]``: a force along the world
    ``direction[:, t, i]`` at the point ``arm[:, t, i]`` (relative to the tree's reference point),
    or, where ``joint[t, i]``, a torque about the link-frame axis ``direction[:, t, i]`` on the
    link's joint. ``A[t, i, j]`` is the change of row ``i``'s velocity (m/s or rad/s) at the end
    of a step of ``h`` by a unit force (N or N·m) of row ``j`` held over it. Padding rows have a
    zero direction. Column ``c`` of every tree comes from one solve, every tree loading its own
    ``c``-th row (trees are independent; a tree's rows of one column are on one link, so no link
    is loaded twice). Uses the link frames of the last kinematics in ``data``.

    ``counts`` (host ints, (T,)) is every tree's row count (its rows from ``counts[t]`` on are
    padding), read from ``direction`` with one transfer if not given. Only trees with more than
    ``c`` rows need column ``c``: columns ``[2, 4)``, ``[4, 8)``, … are solved on a model of just
    those trees (:func:`.model.select_trees`, with the factorisation gathered from ``data`` once
    per range) when they are fewer than half the forest, so that the many columns of the few
    trees with many rows cost those trees' links only.
    """
    xp = model.xp
    n_trees, m = link.shape
    operator = xp.zeros((n_trees, m, m), dtype=model.backend.float)
    if counts is None:
        loaded = xp.any(direction != 0.0, axis=0)
        counts = model.backend.to_host(xp.max(xp.where(loaded, xp.arange(1, m + 1), 0), axis=1))
    start, stop = 0, min(2, m)
    while start < m:
        trees = np.nonzero(counts > start)[0]
        if not len(trees):
            break
        columns = range(start, stop)
        if 2 * len(trees) >= n_trees:
            _operator_columns(model, data, link, arm, direction, joint, h, columns, operator)
        else:
            sub = dynamics.tree_part(model, data, trees, (*dynamics.FACTORS, "oR", "r"))
            device = model.backend.from_host
            renumber = np.full(model.n_links, -1, dtype=np.int64)
            renumber[sub.links] = np.arange(len(sub.links))
            picked = device(trees)
            part = xp.zeros((len(trees), m, m), dtype=model.backend.float)
            _operator_columns(
                sub.model,
                sub.data,
                device(renumber)[link[picked]],
                arm[:, picked],
                direction[:, picked],
                joint[picked],
                h,
                columns,
                part,
            )
            operator[picked, :, start:stop] = part[:, :, start:stop]
        start, stop = stop, min(2 * stop, m)
    return operator


def _operator_columns(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    joint: Any,
    h: float,
    columns: range,
    operator: Any,
) -> None:
    """Columns ``columns`` of :func:`delassus_operator` into ``operator`` (T, m, m), one solve
    each over the whole of ``model`` (down to the deepest row's level)."""
    xp, to_host = model.xp, model.backend.to_host
    # Level-major links are ordered by depth: each column's deepest link bounds the levels its
    # load reaches, the deepest of all the levels whose answers are read.
    loaded_depth = model.depth_of(to_host(xp.max(link, axis=0)))
    answered_depth = int(loaded_depth.max())
    for c in columns:
        loaded = model.level_bounds[loaded_depth[c]][1]
        point = direction[:, :, c] * ~joint[:, c]
        link_force = xp.zeros((6, loaded), dtype=model.backend.float)
        link_force[:3, link[:, c]] = cross(xp, arm[:, :, c], point)
        link_force[3:, link[:, c]] = point
        torque = dynamics.joint_load(model, data, link_force)
        torque[:, link[:, c]] += direction[:, :, c] * joint[:, c]
        dynamics.solve(model, data, torque, answered_depth)
        operator[:, :, c] = h * _row_values(
            xp, data.solve_a[:, link], data.x[:, link], arm, direction, joint
        )


def _swing_and_twist(model: Model, q: Any) -> tuple[Any, Any, Any]:
    """Swing angle (N,), unit swing axis (3, N, link frame) and signed twist angle (N,) of every
    joint's deviation from its rest rotation, split ``twist ⊗ swing`` as for the springs."""
    xp = model.xp
    deviation = spatial.quat_multiply(xp, spatial.quat_conjugate(xp, model.rest_rotation), q)
    deviation = deviation * xp.where(deviation[0] < 0.0, -1.0, 1.0)
    twist, swing = spatial.twist_swing(xp, deviation)
    sine = xp.sqrt(swing[1] ** 2 + swing[3] ** 2)
    axis = xp.stack((swing[1], xp.zeros_like(sine), swing[3]))
    axis = axis / xp.where(sine > 1e-12, sine, 1.0)
    return 2.0 * xp.arctan2(sine, swing[0]), axis, 2.0 * xp.arctan2(twist[2], twist[0])


def _size_groups(backend: Any, counts: np.ndarray) -> list[tuple[Any, int]]:
    """Trees with rows grouped by row count: ``(device tree indices, padded size)`` for counts in
    ``(s/2, s]``, ``s`` = 2, 4, 8, … (capped at the largest count; counts are even)."""
    largest = int(counts.max())
    groups, size = [], 2
    while size // 2 < largest:
        members = np.nonzero((counts > size // 2) & (counts <= size))[0]
        if len(members):
            groups.append((backend.from_host(members), min(size, largest)))
        size *= 2
    return groups


def _arms(model: Model, data: Data, link: Any, fraction: Any) -> Any:
    """Points (3, ...) ``fraction`` along ``link`` relative to their tree's reference point, at
    the configuration of the last kinematics in ``data``."""
    return data.r[:, link] + (fraction * model.length[link]) * data.oR[:, 1, link]


def _weak_rows(
    xp: Any, link: Any, fraction: Any, joint: Any, diagonal: Any, ratio: float
) -> tuple[Any, Any]:
    """The diagonal level below which a row is weak, and how weak each row is (T, m).

    A point row is compared with the most mobile row at the same point (same link and fraction:
    a path's three rows): ``level = ratio × best``, and
    ``weakness = 1 − diagonal / level`` where the diagonal is below it (0 elsewhere, and for
    joint rows, whose torque always turns their own joint).
    """
    point = ~joint
    same = (link[:, :, None] == link[:, None, :]) & (fraction[:, :, None] == fraction[:, None, :])
    same &= point[:, :, None] & point[:, None, :]
    level = ratio * xp.max(xp.where(same, diagonal[:, None, :], 0.0), axis=2)
    weak = point & (diagonal < level)
    return level, xp.where(weak, 1.0 - diagonal / xp.where(weak, level, 1.0), 0.0)


def _buckling_directions(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    pushing: Any,
    weakness: Any,
    tilt: float,
) -> Any:
    """Directions (3, T, m) the rows' forces are applied along: their own, except for weak rows
    that only push (``pushing``: lower bound 0) toward their tree's root, tilted by up to
    ``tilt × weakness`` sideways from their link.

    Such a row pushes a (nearly) straight chain along itself: the chain can only give way by
    buckling, and a perfectly straight one has no side to buckle to (the force has no lever on
    any joint, so the buckle would grow from rounding errors, frames later). The tilt is the
    imperfection that picks the side: the side the row already leans to across the link, or
    the link's own x axis when it leans to none.
    """
    xp = model.xp
    axis = data.oR[:, 1, link]
    lateral = direction - dot(direction, axis) * axis
    size = xp.sqrt(dot(lateral, lateral))
    lateral = xp.where(size > 1e-9, lateral / xp.where(size > 1e-9, size, 1.0), data.oR[:, 0, link])
    compressing = pushing & (dot(direction, _from_root(model, data, link, arm)) < 0.0)
    return direction + (tilt * weakness * compressing) * lateral


def _from_root(model: Model, data: Data, link: Any, arm: Any) -> Any:
    """Points ``arm`` (3, ...) relative to their tree's reference point, made relative to the
    tree's root joint (level-major link ``t`` is the root of tree ``t``)."""
    return arm - data.r[:, model.link_tree[link]]


def _row_values(
    xp: Any, spatial_motion: Any, joint_motion: Any, arm: Any, direction: Any, joint: Any
) -> Any:
    """Rows' velocities (or accelerations), (T, m): of their points along their direction from
    the spatial motion (6, T, m) of their links, or of their joints about their axis from joint
    motion (3, T, m)."""
    point = spatial_motion[3:] + cross(xp, spatial_motion[:3], arm)
    return xp.where(joint, dot(direction, joint_motion), dot(direction, point))


# --- helpers -------------------------------------------------------------------------------


def _points(model: Model, data: Data, links: Any, fractions: Any) -> tuple[Any, Any]:
    """Positions relative to each tree's reference point and world velocities (3, P) of points
    ``fractions`` along ``links``, from the last :func:`.dynamics.link_velocities`."""
    xp = model.xp
    relative = _arms(model, data, links, fractions)
    velocity = data.v[3:, links] + cross(xp, data.v[:3, links], relative)
    return relative, velocity


def _joint_rows(
    xp: Any, model: Model, link: Any, direction: Any, target: Any, unilateral: bool
) -> _Rows:
    """Rows of torques about link-frame ``direction`` (3, R) on the joints of ``link``, pushing
    only (``unilateral``) or both ways, toward joint velocities ``target`` along ``direction``."""
    count = link.shape[0]
    dtype = model.backend.float
    infinite = xp.full(count, xp.inf, dtype=dtype)
    return _Rows(
        tree=model.link_tree[link],
        link=link,
        fraction=xp.zeros(count, dtype=dtype),
        direction=direction,
        joint=xp.ones(count, dtype=bool),
        lower=xp.zeros(count, dtype=dtype) if unilateral else -infinite,
        upper=infinite,
        target=target,
    )


def _perpendicular(xp: Any, n: Any) -> Any:
    """A unit vector perpendicular to each unit vector (3, C)."""
    helper = xp.zeros_like(n)
    use_y = xp.abs(n[0]) > 0.9
    helper[0] = xp.where(use_y, 0.0, 1.0)
    helper[1] = xp.where(use_y, 1.0, 0.0)
    tangent = cross(xp, n, helper)
    return tangent / xp.sqrt(dot(tangent, tangent))


def _device_limits(model: Model, limits: JointLimits) -> dict:
    values = {}
    for name in ("swing", "twist_min", "twist_max"):
        host = real_array(f"JointLimits.{name}", getattr(limits, name))
        try:
            host = np.broadcast_to(host, (model.n_links,))
        except ValueError as error:
            raise InvalidInputError(
                f"JointLimits.{name}: expected a scalar or {model.n_links} per-link values in "
                f"strand order, got shape {host.shape}"
            ) from error
        if np.isnan(host).any():
            raise InvalidInputError(f"JointLimits.{name} has NaN values")
        values[name] = model.from_strand_order(host, f"JointLimits.{name}")
    host_swing = model.to_strand_order(values["swing"])
    if (host_swing < 0).any():
        raise InvalidInputError("JointLimits.swing must not be negative")
    if (
        model.to_strand_order(values["twist_min"]) > model.to_strand_order(values["twist_max"])
    ).any():
        raise InvalidInputError("JointLimits.twist_min must not exceed twist_max")
    return values


def _checked_point(constraint: PointPath, value: Any) -> np.ndarray:
    return vector3(
        f"the path of the point constraint on strand {constraint.strand}, link {constraint.link}",
        value,
    )


def _checked_rotation(constraint: JointRotation, value: Any) -> np.ndarray:
    q = real_array(
        f"the rotation of the joint constraint on strand {constraint.strand}, link "
        f"{constraint.link}",
        value,
    )
    if q.shape != (4,) or not np.isfinite(q).all() or abs(np.linalg.norm(q) - 1.0) > 1e-6:
        raise InvalidInputError(
            f"the rotation of the joint constraint on strand {constraint.strand}, link "
            f"{constraint.link} must return a unit quaternion (w, x, y, z), got {value!r}"
        )
    return q


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a⁻¹ ⊗ b`` of host quaternions (R, 4)."""
    return spatial.quat_multiply(np, spatial.quat_conjugate(np, a.T), b.T).T


def _log(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (R, 3) of host unit quaternions (R, 4)."""
    return spatial.quat_log(np, q.T).T
