"""Contacts, friction, impacts, joint limits and animated constraints in the step (paper §4–5).

One substep with constraints
----------------------------
1. **At t** (:meth:`ConstraintSolver.begin`, before the control moves on to ``t + h``): link
   frames and velocities of the state, so every query point (``fractions`` along each colliding
   link), path point and joint has its position and velocity at ``t``; the animated targets are
   sampled at ``t − h``, ``t`` and ``t + h``.
2. **Free step**: the ordinary implicit (or explicit) step. Its result is the state
   extrapolated to ``t + h`` that the swept contact query looks ahead to. The only constraint
   forces in it are those of the points on paths at the end of the step before, held as loads
   at their points (:class:`HeldLoad`, ``Control.constraint_force``); the contacts' and joint
   limits' are left out, so for them the paper's "remove the effect of the previous step's
   constraint forces" (§4, last paragraph) holds by construction. A path's force is held
   because a free step without it runs to where the rows' linearisation no longer holds: a
   line pinned nearly taut and let go is flung centimetres along itself by its own tension
   within the step, and corrected from there its end sagged 25 cm out of its pin.
3. **Contacts** (:meth:`ConstraintSolver.resolve`, :mod:`.contacts`): contacts from
   :func:`.obstacles.find_contacts` between the points at ``t`` and at the free ``t + h``
   correct the free step first, in joint space: their regularised laws (normal force ``κ`` times
   the shortfall of the point's normal velocity at ``t + h`` from its target, Coulomb friction
   while it pushes) enter the Newton matrix as link-local blocks, and a line-searched Newton
   iteration over the contacts' pieces finds the correction (:meth:`.ObstacleContacts.correct`).
   The targets: a speculative contact closes at most its gap within the step (no tunnelling, no
   floating), a penetration is pushed out at ``β`` of its depth per step (at most
   ``recovery_speed``), a point arriving faster than ``impact_speed`` leaves with the obstacle's
   restitution of its arrival speed, or without restitution goes on with a surface that strikes
   it or closes its gap down to ``margin`` within the step. The cost does not grow with the
   contacts per strand.
4. **Rows** (:mod:`.rows`): joint limits near their swing cone or twist range (at ``t`` or the
   free end) give one row each; active point paths and joint rotations give three bilateral rows
   each. A row is a unit load, a force along its direction at its point (spatial force
   ``[(p − o) × n; n]`` on its link, as joint torques by :func:`.dynamics.joint_load`) or a
   torque about its axis on its joint. The operator (:mod:`.delassus`): through an articulated-body
   factorisation of the step's Newton matrix ``M + hD + h²K`` (with the contacts' blocks) at the
   free step's end (:func:`.dynamics.factorize`, :func:`.dynamics.solve`), a unit force held over
   the step changes the joint velocities at ``t + h`` by ``h Y``, ``Y = solve(g)``, and every row's
   velocity by ``h`` times its acceleration in that solve. Column ``c`` of every tree's operator
   comes from one solve: every tree loads its own ``c``-th row at once (trees are independent), and
   only over the levels down to the deepest row's (a load reaches only the levels above it). This
   factorisation leaves out the link-local derivative of the velocity forces that the free step's
   has: that term couples the tiny axial inertia of thin links to their bending (gyroscopic), so a
   load across a strand would set it spinning about its axis; without it the operator is symmetric
   up to the spring tangent's asymmetry (it is symmetrised). A tree that took constraint forces in
   the step before leaves the term out of its free step (``StepMemory.constrained``), whose
   factorisation, at the free step's first guess, then serves here; a tree coming under rows is
   factorised again at the free step's end, on a model of those trees only (so a tree's step depends
   only on the tree).
5. **LCP** per tree, all trees in one batch (:func:`.lcp.solve_lcp`): ``A = h G N⁻¹ Gᵀ``
   (row velocity per newton), ``b = v_desired − v_free + A x_held``, so ``w = A x − b`` is the
   row's velocity at ``t + h`` above its desired value (rows are paired with padding, blocks of
   two). ``x_held`` is the force a path's row starts from (0 for other rows): the LCP solves for
   the total force, from there, and the correction applies its change, so a compliant row's
   regularisation bounds its whole force (not just its change in a step, which would let the
   pull on a target out of reach grow without end). Desired
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
   residual with the forces (the contacts' held at their values, the paths' held ones in the
   control already) as a load, through the free
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics, integrators
from .contacts import ContactMemory, ObstacleContacts, StepContacts, link_sums
from .delassus import (
    DenseRows,
    buckling_directions,
    delassus_operator,
    joint_load,
    row_values,
    size_groups,
    weak_rows,
)
from .dynamics import Data
from .errors import InvalidInputError
from .lcp import solve_lcp
from .model import Model
from .obstacles import ObstacleMotion, Obstacles, Placement
from .rows import (
    ConstraintStart,
    JointLimits,
    JointRotation,
    PointPath,
    Rows,
    arms,
    constraint_start,
    device_limits,
    limit_overshoot,
    limit_rows,
    path_rows,
    rotation_rows,
)
from .state import Control, State, StepMemory
from .validation import (
    finite_number,
    is_real,
    positive_number,
    positive_whole,
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
        the obstacle's restitution times their arrival speed; without restitution they go on
        with a surface that strikes them (moves at them faster than this), and otherwise close
        their gap down to ``margin`` within the step (the steps after close the rest).
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
        steps (as for ``limit_tolerance``; ``inf``: never); at the deepest halving the tree is
        held rigid for that step where that leaves the point shallower (a :class:`.Fallback`;
        ``strict``: the simulation stops). The contact correction is linear in the joint
        velocities: a point that a fast obstacle swings far round its joint within a step ends
        off the line it was corrected along (a ball at 10 m/s left points 16 mm deep at 4
        substeps), while the error falls with the square of the step.
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
    penetration_tolerance: float = 0.1
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
class SolverSpec:
    """What a :class:`ConstraintSolver` is made of, but its model and animated constraints: its
    obstacles (on the model's backend), joint limits and settings (None: none)."""

    obstacles: Obstacles | None
    joint_limits: JointLimits | None
    settings: ConstraintSettings

    def solver(self, model: Model) -> ConstraintSolver:
        """The solver of ``model`` (whose links the joint limits are given for)."""
        return ConstraintSolver(model, self.obstacles, self.joint_limits, self.settings)


@dataclass(frozen=True, eq=False)
class HeldLoad:
    """The force (3, P), world, N, of each point on a path at the end of the last step (None:
    none yet), those paths (the active ones, in order), and which of them hold it ((P,) bool;
    the others' force is zero: their tree took joint-limit rows in that step)."""

    forces: Any = None
    paths: tuple = ()
    holding: Any = None


@dataclass(frozen=True, eq=False)
class SolverRecord:
    """What a :class:`ConstraintSolver` carries from one step to the next
    (:meth:`ConstraintSolver.kept`): how its contacts rubbed, where the obstacles' last motion
    put them, the last statistics and contacts, and the step start of its animated
    constraints."""

    memory: ContactMemory | None
    placement: Placement | None
    stats: ConstraintStats
    last_contacts: StepContacts | None
    start: ConstraintStart
    held: HeldLoad


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
        self._limits = None if joint_limits is None else device_limits(model, joint_limits)
        self.bilateral: list[PointPath | JointRotation] = []
        self.stats = ConstraintStats()
        # What the last substep's contact correction did (None without contacts in it).
        self.last_contacts: StepContacts | None = None
        self._start = ConstraintStart()
        self._held = HeldLoad()

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

    def spec_for(self, part: Model, links: np.ndarray) -> SolverSpec:
        """What a solver for ``part`` is made of, a model of some of this model's trees
        (:func:`.model.select_trees`; ``links``: the level-major links of this model that
        ``part`` holds, in its own order). Animated constraints are not passed on."""
        limits = None
        if self._limits is not None:
            limits = self._limits.of_links(self.model, part, self.model.backend.from_host(links))
        return SolverSpec(self.obstacles, limits, self.settings)

    @property
    def divisible(self) -> bool:
        """Whether a solver for some of the trees (:meth:`for_trees`) resolves them as this one
        does: not with animated constraints, which :meth:`spec_for` does not pass on."""
        return not self.bilateral

    def for_trees(
        self, part: Model, links: np.ndarray, memory: ContactMemory | None
    ) -> ConstraintSolver:
        """A solver for ``part``, a model of some of this model's trees (``links`` as in
        :meth:`spec_for`), its obstacles where these are, remembering what ``memory`` (one
        of this solver's, :attr:`memory`) holds of its contacts."""
        solver = self.spec_for(part, links).solver(part)
        if self.contacts is not None:
            solver.contacts.set_motion(self.contacts.placement)
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
            None if contacts is None else contacts.placement,
            self.stats,
            self.last_contacts,
            self._start,
            self._held,
        )

    def restore(self, record: SolverRecord) -> None:
        """Go back to what :meth:`kept` recorded."""
        if self.contacts is not None:
            self.contacts.memory = record.memory
            self.contacts.set_motion(record.placement)
        self.stats, self.last_contacts = record.stats, record.last_contacts
        self._start = record.start
        self._held = record.held

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
        self._start = ConstraintStart()
        self._held = HeldLoad()

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
        model = self.model
        dynamics.link_velocities(model, data, state.q, state.w, control)
        if self.contacts is not None:
            self.contacts.begin(data, control)
        active = [c for c in self.bilateral if c.active is None or bool(c.active(time + h))]
        settings = self.settings
        self._start = constraint_start(
            model,
            data,
            state,
            control.base_position[:, model.link_base],
            self._limits,
            [
                (self._level_major_link(c.strand, c.link), c)
                for c in active
                if isinstance(c, PointPath)
            ],
            [
                (self._level_major_link(c.strand, c.link), c)
                for c in active
                if isinstance(c, JointRotation)
            ],
            time,
            h,
            settings.path_stiffness,
            settings.path_damping,
            settings.path_speed,
        )
        paths = tuple(c for c in active if isinstance(c, PointPath))
        held = self._held
        if held.paths != paths:
            self._held = held = HeldLoad(paths=paths)
        control.constraint_force = control.constraint_lever = None
        if held.forces is not None:
            links, fractions = self._start.paths.links, self._start.paths.fractions
            lever = (fractions - 0.5) * model.length[links]
            both = model.xp.concatenate((held.forces, lever * held.forces))
            on_links = link_sums(model.xp, links, both, model.n_links)
            control.constraint_force, control.constraint_lever = on_links[:3], on_links[3:]

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
        parts: list[Rows] = []
        limit_count = bilateral_rows = contacts = 0
        touching = xp.zeros(model.n_trees, dtype=bool)
        # The trees with joint-limit rows in the step.
        limited = xp.zeros(model.n_trees, dtype=bool)
        self.last_contacts = None
        if self.contacts is not None:
            corrected = self.contacts.correct(
                data, state, control, h, out, self.settings.contact_tolerance
            )
            self.last_contacts, touching = corrected, corrected.touching
            contacts = len(corrected.found)
            dynamics.link_velocities(model, data, out.q, out.w, control)
        if self._limits is not None:
            settings = self.settings
            rows = limit_rows(
                model,
                self._limits,
                self._start.limits,
                out,
                h,
                settings.limit_margin,
                settings.limit_recovery_speed,
            )
            limit_count = rows.tree.shape[0]
            limited[rows.tree] = True
            parts.append(rows.with_padding(xp))
        paths = self._start.paths
        on_paths = slice(0)
        if paths is not None:
            held = self._held.forces
            if held is None:
                held = xp.zeros((3, paths.links.shape[0]), dtype=model.backend.float)
            rows = path_rows(model, data, paths, held)
            bilateral_rows += rows.tree.shape[0]
            first = sum(part.tree.shape[0] for part in parts)
            on_paths = slice(first, first + 2 * rows.tree.shape[0], 2)
            parts.append(rows.with_padding(xp))
        if self._start.rotations is not None:
            rows = rotation_rows(model, self._start.rotations)
            bilateral_rows += rows.tree.shape[0]
            parts.append(rows.with_padding(xp))
        rows = Rows.concatenate(xp, parts) if parts else None
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
            passes = 2 if limit_count else 1
            if limit_count:
                # Only the trees with joint-limit rows take the second pass, so that a tree's
                # step does not depend on the others (nor on how trees are grouped in workers).
                repeated = limited
        holding = self._held.holding
        if (
            passes > 1
            and paths is not None
            and (holding is None or not bool(model.backend.to_host(xp.all(holding))))
        ):
            # Paths starting from no force take one pass: their correction is their whole force,
            # and the Newton iteration after a correction that large does not converge (a line
            # pinned nearly taut and swaying diverged in its first frame; from its held force,
            # two passes hold it as one does).
            starting = xp.zeros(model.n_trees, dtype=bool)
            unheld = paths.links if holding is None else paths.links[~holding]
            starting[model.link_tree[unheld]] = True
            repeated = ~starting if repeated is None else repeated & ~starting
        dense = DenseRows.of(model, rows)
        force = self._apply(data, state, control, dense, h, out, int(passes), repeated)
        if paths is not None:
            # A path on a tree with joint-limit rows holds no force into the next step: the
            # limits' forces start each step from none, so a free step carrying the path's pull
            # without the limits' reaction ran away where the limits took the load (a line
            # pinned with swing limits of 0.05 rad: its held pull grew to 35 kN within a second
            # and the strand fell back).
            holding = ~limited[model.link_tree[paths.links]]
            self._hold(rows.direction[:, on_paths], dense.per_row(force)[on_paths], holding)
        self.stats = ConstraintStats(dense.size, contacts, limit_count, bilateral_rows)
        self._settle(memory, constrained | touching)

    def _hold(self, direction: Any, force: Any, holding: Any) -> None:
        """Hold the forces of the points on paths that the step ended with, from their rows'
        directions (3, 3P) and forces (3P,) (:func:`.rows.path_rows`: three rows a point), into
        the next step's free step (:attr:`.Control.constraint_force`) and rows, for the paths
        ``holding`` ((P,) bool; the others' are zero)."""
        xp = self.model.xp
        count = force.shape[0] // 3
        forces = xp.sum(direction.reshape(3, 3, count) * force.reshape(1, 3, count), axis=1)
        forces = xp.where(xp.isfinite(forces) & holding, forces, 0.0)
        self._held = HeldLoad(forces, self._held.paths, holding)

    def _settle(self, memory: StepMemory, constrained: Any) -> None:
        """Record the trees that took constraint forces in the step, contacts' or rows'
        (``memory.constrained``): their next free step leaves the velocity derivative out of its
        factorisation, as the constraint pass has it. Its first guess extrapolates the last two
        free steps' velocity changes as any tree's does (integrators.first_guess): these leave
        the constraint forces out, and follow the bases and the springs as smoothly (on hair
        lying on the benchmark's shaking head, repeating the last change instead started the
        Newton iteration 25 times farther off, 0.12 rad/s against 0.005)."""
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

    def penetration_excess(self, control: Control, q: Any, h: float) -> np.ndarray:
        """How much deeper (m) than it may each tree's points of the last :meth:`resolve`'s
        contacts go into their obstacles over a step of ``h`` from the state of the last
        :meth:`begin` to the rotations ``q``: beyond ``penetration_tolerance`` of their radius,
        or beyond their depth at the start (:meth:`.contacts.ObstacleContacts.overshoot`);
        (n_trees,) on the host, ``-inf`` for a tree without contacts."""
        if self.last_contacts is None:
            return np.full(self.model.n_trees, -np.inf)
        return self.contacts.overshoot(
            self.last_contacts.found, control, q, h, self.settings.penetration_tolerance
        )

    def overshooting_trees(self, control: Control, out: State, h: float) -> np.ndarray:
        """The trees (host indices) whose step of ``h`` from the state of the last :meth:`begin`
        to ``out`` went further than it may, and is halved (:mod:`.stepping`): a point of the
        last :meth:`resolve`'s contacts deeper than it may go (:meth:`penetration_excess`), or a
        joint more than ``limit_tolerance`` past its swing or twist limit, and further out than
        at the start."""
        beyond = self.penetration_excess(control, out.q, h) > 0.0
        if self._limits is not None:
            overshoot = limit_overshoot(
                self.model, self._limits, self._start.limits, out, self.settings.limit_tolerance
            )
            beyond |= overshoot > 0.0
        return np.nonzero(beyond)[0]

    # --- LCP and correction -----------------------------------------------------------------

    def _apply(
        self,
        data: Data,
        state: State,
        control: Control,
        dense: DenseRows,
        h: float,
        out: State,
        passes: int,
        repeated: Any = None,
    ) -> Any:
        """Solve the rows' LCP and correct ``out`` in ``passes`` passes (module docstring, steps
        4–6), the passes after the first for the trees ``repeated`` ((T,) bool; None: all);
        returns the rows' forces (T, m)."""
        model, xp, settings = self.model, self.model.xp, self.settings
        counts, n_trees, loaded = dense.counts, model.n_trees, dense.loaded
        groups = size_groups(model.backend, counts)
        link, fraction, direction, joint = dense.link, dense.fraction, dense.direction, dense.joint
        lower, upper, target = dense.lower, dense.upper, dense.target
        arm = arms(model, data, link, fraction)

        operator = delassus_operator(model, data, link, arm, direction, joint, h, counts)
        operator = 0.5 * (operator + operator.transpose(0, 2, 1))
        diagonal = xp.diagonal(operator, axis1=1, axis2=2)
        floor = 1e-12 * xp.max(diagonal, axis=1, keepdims=True) + 1e-30
        level, weakness = weak_rows(xp, link, fraction, joint, diagonal, settings.weak_row_ratio)
        # Weak rows are compliant: their diagonal is raised to the level of a healthy row.
        regularization = xp.maximum(settings.regularization * diagonal + floor, level - diagonal)
        applied = buckling_directions(
            model, data, link, arm, direction, lower >= 0.0, weakness, settings.buckling_tilt
        )

        # The forces held from the last step act in the free step already (begin).
        initial = dense.initial
        force = initial.copy()
        # The rows' trees take a first-order step (the operator and the rows' targets are
        # backward Euler's); the others keep their free step as it was.
        rowed = xp.zeros(n_trees, dtype=bool)
        rowed[dense.tree] = True
        rowed_links = rowed[model.link_tree]
        integrators.first_order_step(out, rowed)
        backward_euler = integrators.Scheme.backward_euler(state.w, h)

        def rotations() -> Any:
            return xp.where(rowed_links, backward_euler.rotations(xp, state.q, out.w), out.q)

        for correction in range(passes):
            if correction:
                dynamics.link_velocities(model, data, out.q, out.w, control)
                arm = arms(model, data, link, fraction)
            velocity = row_values(xp, data.v[:, link], out.w[:, link], arm, direction, joint)
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
            change = joint_load(model, data, link, arm, applied, joint, new_force - force, loaded)
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
                load = joint_load(
                    model,
                    data,
                    link,
                    arms(model, data, link, fraction),
                    applied,
                    joint,
                    force - initial,
                    loaded,
                )
                r[:, :loaded] -= load
                update = dynamics.solve(model, data, -h * r)
                if repeated is not None:
                    update = xp.where(repeated[model.link_tree], update, 0.0)
                out.w += update
                out.q[...] = rotations()
        return force
