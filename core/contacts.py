"""Contacts with obstacles: the correction of a free step by contact forces, solved in joint
space through the articulated-body factorisation (paper §5).

Why not the paper's operator and sweeps
---------------------------------------
A contact is a unilateral constraint on a point's velocity at the step's end, with Coulomb
friction. As a linear complementarity problem over the contact forces, its operator (the
Delassus matrix) costs one articulated-body solve per row of the busiest tree and its projected
Gauss–Seidel sweeps run row after row: hair lying on a head has 10–30 contacts per strand, and
the step's cost grew with them (30× the free step on 300 strands draped over a head). The same
problem is solved here over the joint velocities instead, with a cost that does not grow with
the contacts.

The correction
--------------
After the free step (velocities ``w_f``), the contacts along the points' sweep from the step's
start to the free step's end are found (:meth:`ObstacleContacts.find`), and the correction ``Δ``
of the joint velocities solves

    N Δ = h Jᵀ f(w_f + Δ),

``N = M + hD + h²K`` the step's Newton matrix at the free end (without the link-local velocity
derivative, whose gyroscopic coupling of thin links' twist to their bending set strands spinning
under contact loads), ``J`` the contacts' point Jacobians there and ``f`` their regularised
velocity-level laws (the LCP with its diagonal regularisation, solved exactly rather than by
sweeps):

- normal: ``λ = κ max(0, v_des − n·u)``: pushes only, and only while the point's normal velocity
  ``n·u`` relative to the surface is below what the contact asks for (``v_des``: close at most
  the gap within the step, push out of a penetration, bounce back from an impact); the point
  reaches ``v_des`` to within ``λ/κ``;
- friction, isotropic in the contact plane, while the contact pushes, in one of two modes
  through an iteration: sticking, ``f_t = −s κ u_t`` (``s`` = :data:`STICKING_SHARE`); sliding,
  ``f_t = −μ λ t`` along a fixed direction ``t``. Between iterations the modes are revised
  (*Friction*).

``κ = contact_stiffness · m/h`` (``m`` the contact's link mass): the force that stops that mass
``contact_stiffness`` times over within the step, so the error of the velocity target is
``1/contact_stiffness`` of the velocity change the contact makes.

Each contact acts on one link, so the derivative of its force is ``J_cᵀ T_c J_c`` with a 3×3
``T_c = −∂f_c/∂u_c`` at its point: a link-local spatial block ``Pᵀ T_c P`` (``P = [−[p]×, 1]``
maps the link's spatial velocity to the point's) that the articulated-body factorisation folds
into the link's inertia exactly (:func:`.dynamics.factorize`, ``link_block``). ``T_c`` is
``κ (a − μ t) nᵀ`` for a pushing contact (``a`` the direction its normal force is applied
along, ``μ t`` only while it slides), plus ``s κ (1 − n nᵀ)`` while it sticks. Through an
iteration each contact's piece (apart, sticking, sliding) is fixed, and the problem is then
linear in ``Δ``: one articulated-body solve gives the Newton step

    (N + h Jᵀ T J) Δ̂ = h Jᵀ f(w_f + Δ_k) + h Jᵀ T J Δ_k.

Where a contact's piece changes on the way from ``Δ_k`` to ``Δ̂`` the step can overshoot: a
contact that pushed at ``Δ_k`` pulls at ``Δ̂``, several such on one strand fight each other, and
a full step flung strands draped over a head at hundreds of rad/s. Without friction, and with
the normal force along the normal, the correction is the minimum of a strictly convex,
piecewise quadratic energy, ``½ Δᵀ N Δ + h Σ ½ κ max(0, v_des − n·u)²``, so each tree takes the
part ``α ∈ (0, 1]`` of its step where that energy's slope along it changes sign
(:func:`line_search`; with friction its modes held and the forces of the law, the same slope).
The energy decreases at every iteration and an unfinished tree keeps a sound iterate. The
contacts take their pieces at ``Δ_{k+1}``, the trees whose pieces changed are factorised again
(a tree's factors depend only on its own pieces), and a tree stops when its pieces held and its
step fell to ``contact_tolerance``, or when it took its whole Newton step and its pieces held:
with its pieces held the problem is linear, and that step solved it. The point velocities are
those of the free end's configuration, linear in the joint velocities (the linearisation the
operator of the paper's §4 takes).

Once fewer than half the trees iterate, or after ``contact_iterations`` iterations, the trees
unfinished go on, on a model of their own, for the iterations left of :data:`TAIL_ITERATIONS`
plus one times ``contact_iterations``, and again on a model of their own whenever fewer than
half of that model's trees iterate: a few trees' iterations then cost what those trees do,
not a whole-forest solve each. A model of a few small trees (such a tail, or the halves of a
failed step) iterates through dense per-tree blocks of the same matrix on the NumPy backend
(:func:`.dynamics.dense_pays`), which cost their arithmetic rather than a pass per level.
The contacts are found along the free sweep, and the correction
can turn a point toward an obstacle that sweep missed (a strand pushed off the head at one
point swings in at another): once every tree has finished, the points of the trees it moved
far enough to meet an obstacle their free sweep kept clear of are swept again from the start to
the corrected end, and the contacts found only there join, their trees iterating on, on a model
of their own, and sweeping their new corrected paths in turn (:data:`CORRECTED_SWEEPS`).

Friction
--------
The friction of a sliding contact turns with the sliding direction; in a Newton matrix that
makes the iteration overshoot rest. So through an iteration its direction is fixed, and the
modes are revised at the iteration's end (:func:`revised_friction`): a sticking contact whose
friction would exceed ``μ λ`` by more than ``HOLD`` slides along its tangential velocity, and a
sliding one whose velocity turned against its direction sticks. A sliding contact's bound
follows its normal force within the iteration (the ``μ t nᵀ`` of ``T_c``). The first iteration
takes each contact as it was at the end of the last step (:class:`ContactMemory`; sticking for a
new contact).

Weak contacts
-------------
A point pushed along its own straight chain cannot move that way: the contact asks for a
velocity that no joint velocity gives, and ``λ = κ (v_des − n·u)`` grows with ``κ`` while the
force has no lever on any joint; once rounding bends the chain the force flings it. A contact
whose normal points along the line from its tree's root joint to its point (``sin² θ`` of that
angle below ``weak_row_ratio``: the chain's mobility along ``n`` is then below
``weak_row_ratio`` of its mobility across) is compliant, its ``κ`` falling with the alignment
to ``m/(weak_row_ratio h)``, and, if it pushes toward the root, its force is applied up to
``buckling_tilt`` off its line, sideways from its link, so that a straight strand buckles to a
definite side at once (``docs/collisions.md``, *Weak contacts*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics, integrators
from .dynamics import Data
from .model import Model
from .obstacles import (
    ObstacleMotion,
    Obstacles,
    Placement,
    find_contacts,
    place,
    swept_distances,
)
from .spatial import cross, dot
from .state import Control, State

# A contact's state in the iteration: not pushing, pushing and sticking, pushing and sliding.
APART, STICKING, SLIDING = 0, 1, 2


@dataclass(eq=False)
class ContactSet:
    """The obstacle contacts of one step, described at its start (device arrays, ``C`` contacts).

    Attributes
    ----------
    key : (C,) int
        ``query point × n_obstacles + obstacle``: the same pair found again has the same key.
    tree, link : (C,) int
        The tree and level-major link the contact's point lies on.
    fraction : (C,) float
        Where the point lies along its link (1: the link's tip).
    arm : (3, C) float, m
        The point relative to its tree's reference point in the configuration the step's
        contacts are linearised about (module docstring, *The correction*).
    normal : (3, C) float, world
        Unit outward normal of the obstacle at the point's position at ``t``.
    applied : (3, C) float, world
        The direction the normal force is applied along: ``normal``, tilted for weak contacts
        that push toward their tree's root (module docstring).
    gap : (C,) float, m
        The gap at ``t`` between the point's collision sphere and the surface (negative: the
        depth it penetrates).
    target : (C,) float, m/s
        ``v_des``: the least normal velocity of the point relative to the obstacle's surface at
        ``t + h`` that the contact lets through without pushing.
    surface_velocity : (3, C) float, m/s, world
        Velocity of the obstacle's surface under the point (at ``t``).
    friction : (C,) float
        Coulomb coefficient: static while the point's tangential speed at ``t`` is below
        ``slip_speed``, else dynamic.
    stiffness : (C,) float, N·s/m
        ``κ`` of the regularised contact (module docstring).
    remembered : :class:`Friction`
        How the same contact rubbed at the end of the last step (sticking for a contact new in
        this one): the friction of the correction's first iteration (module docstring,
        *Friction*).
    """

    key: Any
    tree: Any
    link: Any
    fraction: Any
    arm: Any
    normal: Any
    applied: Any
    gap: Any
    target: Any
    surface_velocity: Any
    friction: Any
    stiffness: Any
    remembered: Friction

    FIELDS = (
        "key",
        "tree",
        "link",
        "fraction",
        "arm",
        "normal",
        "applied",
        "gap",
        "target",
        "surface_velocity",
        "friction",
        "stiffness",
    )

    def __len__(self) -> int:
        return int(self.key.shape[0])

    def joined(self, xp: Any, other: ContactSet) -> ContactSet:
        """These contacts followed by ``other``'s."""
        joined = {
            name: xp.concatenate((getattr(self, name), getattr(other, name)), axis=-1)
            for name in self.FIELDS
        }
        return ContactSet(**joined, remembered=self.remembered.joined(xp, other.remembered))

    def restricted(self, chosen: Any, link_number: Any, link_tree: Any) -> ContactSet:
        """The contacts ``chosen`` ((C,) bool) on a model of some of the trees: ``link_number``
        (N,) numbers this model's links in that one, ``link_tree`` is that model's."""
        picked = {name: getattr(self, name)[..., chosen] for name in self.FIELDS}
        picked["link"] = link_number[picked["link"]]
        picked["tree"] = link_tree[picked["link"]]
        return ContactSet(**picked, remembered=self.remembered.selected(chosen))


@dataclass(eq=False)
class Friction:
    """How each contact's friction acts through an iteration of the step's correction (``C``
    contacts, device arrays; module docstring, *Friction*).

    Attributes
    ----------
    sliding : (C,) bool
        Whether the contact slides (its friction is ``μ`` times its normal force against
        ``direction``) or sticks (its friction is ``−s κ u_t``, whatever that takes).
    direction : (3, C) float, world
        Unit direction of a sliding contact's tangential velocity (zero for sticking ones).
    """

    sliding: Any
    direction: Any

    @classmethod
    def none(cls, xp: Any, count: int, dtype: Any) -> Friction:
        """``count`` contacts sticking (new contacts)."""
        return cls(
            xp.zeros(count, dtype=bool),
            xp.zeros((3, count), dtype=dtype),
        )

    def selected(self, chosen: Any) -> Friction:
        return Friction(self.sliding[chosen], self.direction[:, chosen])

    def joined(self, xp: Any, other: Friction) -> Friction:
        """These contacts' friction followed by ``other``'s."""
        return Friction(
            xp.concatenate((self.sliding, other.sliding)),
            xp.concatenate((self.direction, other.direction), axis=1),
        )


@dataclass(eq=False)
class ContactResponse:
    """The contacts' forces at one iterate of the step.

    Attributes
    ----------
    load : (3, N) float, N·m
        The contacts' joint torques (``J_cᵀ f_c`` summed over the contacts).
    normal_force : (C,) float, N
        ``λ`` of each contact.
    piece : (C,) int8
        Each contact's state: :data:`APART`, :data:`STICKING` or :data:`SLIDING`.
    deficit : (C,) float, m/s
        ``v_des − n·u``: how far the point's normal velocity falls short of the target
        (positive while the contact pushes).
    tangential : (3, C) float, m/s
        The point's tangential velocity relative to the surface.
    """

    load: Any
    normal_force: Any
    piece: Any
    deficit: Any
    tangential: Any


@dataclass(frozen=True, eq=False)
class StepContacts:
    """What a step's contact correction did (device arrays).

    Attributes
    ----------
    found : ContactSet
    friction : Friction
        How the contacts rubbed at the step's end.
    touching : (T,) bool
        The trees with a contact pushing at the step's end.
    load : (3, N) float, N·m
        The joint torques of the contacts' forces at the step's end.
    link_block : (6, 6, N) float
        The contacts' part of the Newton matrix the correction ended with.
    """

    found: ContactSet
    friction: Friction
    touching: Any
    load: Any
    link_block: Any


@dataclass(frozen=True, eq=False)
class ContactMemory:
    """What a step leaves to the next about its contacts: their keys (sorted, :class:`ContactSet`)
    and how they rubbed at its end (device arrays, ``C`` contacts; empty before the first
    step)."""

    keys: Any
    friction: Friction

    @classmethod
    def empty(cls, xp: Any, dtype: Any) -> ContactMemory:
        return cls(xp.zeros(0, dtype=xp.int64), Friction.none(xp, 0, dtype))

    @classmethod
    def of(cls, xp: Any, contacts: ContactSet, response: ContactResponse) -> ContactMemory:
        """The contacts of a step and their response at its end."""
        order = xp.argsort(contacts.key)
        sliding = response.piece == SLIDING
        speed = xp.sqrt(dot(response.tangential, response.tangential))
        direction = xp.where(sliding, response.tangential / xp.where(sliding, speed, 1.0), 0.0)
        friction = Friction(sliding, direction)
        return cls(contacts.key[order], friction.selected(order))

    def renumbered(self, xp: Any, points: Any, n_points: int, n_obstacles: int) -> ContactMemory:
        """The memory of the query points ``points`` (device; ``n_points`` in all) alone, each
        numbered by its place in ``points``; keys stay sorted, as ``points`` is."""
        place = xp.full(n_points, -1, dtype=xp.int64)
        place[points] = xp.arange(points.shape[0])
        placed = place[self.keys // n_obstacles]
        kept = xp.nonzero(placed >= 0)[0]
        keys = placed[kept] * n_obstacles + self.keys[kept] % n_obstacles
        return ContactMemory(keys, self.friction.selected(kept))

    def recall(self, xp: Any, keys: Any, normal: Any) -> Friction:
        """How the contacts ``keys`` rubbed at the end of the last step (sticking for new
        ones), a sliding direction laid on the contacts' planes (``normal``,
        (3, C)); a contact whose direction vanishes there sticks."""
        count = keys.shape[0]
        dtype = self.friction.direction.dtype
        if not self.keys.shape[0]:
            return Friction.none(xp, count, dtype)
        where = xp.minimum(xp.searchsorted(self.keys, keys), self.keys.shape[0] - 1)
        known = self.keys[where] == keys
        last = self.friction.selected(where)
        direction = last.direction - dot(last.direction, normal) * normal
        size = xp.sqrt(dot(direction, direction))
        sliding = known & last.sliding & (size > 0.5)
        return Friction(
            sliding,
            xp.where(sliding, direction / xp.where(sliding, size, 1.0), 0.0),
        )


class ObstacleContacts:
    """The query points of a model's colliding links and the obstacles they meet.

    Parameters
    ----------
    model : Model
    obstacles : Obstacles
        On the model's backend.
    settings : :class:`.constraints.ConstraintSettings`
        ``fractions``, ``margin``, ``penetration_recovery``, ``recovery_speed``,
        ``impact_speed``, ``slip_speed``, ``contact_stiffness``, ``contact_iterations``,
        ``weak_row_ratio`` and ``buckling_tilt`` are used.
    """

    def __init__(self, model: Model, obstacles: Obstacles, settings: Any) -> None:
        self.model, self.obstacles, self.settings = model, obstacles, settings
        backend = model.backend
        colliding = np.nonzero(model.collides)[0]
        fractions = np.asarray(settings.fractions, dtype=np.float64)
        link = np.tile(colliding, len(fractions))
        fraction = np.repeat(fractions, len(colliding))
        # A point of a root link within its collision radius of the root joint never collides:
        # the root is prescribed, so no joint can take the point farther than that from a
        # surface through the root (hair grown on a scalp), and its contact would ask at every
        # step for what it cannot have, pushing a stiff root link sideways until its steps are
        # halved over and over.
        radius = backend.to_host(model.collision_radius)[link]
        length = backend.to_host(model.length)[link]
        near_root = (link < model.level_bounds[0][1]) & (fraction * length <= radius)
        self._query_link = backend.from_host(link[~near_root])
        self._query_fraction = backend.from_host(fraction[~near_root])
        self._query_radius = model.collision_radius[self._query_link]
        # The obstacles where the substep's motion puts them, placed once for its queries.
        self.placement = place(obstacles, still(obstacles))
        self.memory = ContactMemory.empty(model.xp, backend.float)
        # The link frames at the corrected end of a step (ObstacleContacts.correct).
        self._corrected = Data.for_model(model, kinematics_only=True)
        self._start_position: Any = None
        self._start_velocity: Any = None

    @property
    def n_points(self) -> int:
        """Number of query points."""
        return int(self._query_link.shape[0])

    def begin(self, data: Data, control: Control) -> None:
        """Record the query points' positions and velocities at a step's start, from the link
        velocities in ``data`` (:func:`.dynamics.link_velocities` at ``t``; ``control`` still
        describes the bases at ``t``)."""
        model = self.model
        relative, velocity = point_motion(model, data, self._query_link, self._query_fraction)
        self._start_position = world_position(model, control, relative, self._query_link)
        self._start_velocity = velocity

    def find(
        self,
        data: Data,
        control: Control,
        h: float,
        end_frames: Data | None = None,
        points: Any = None,
    ) -> ContactSet:
        """The contacts of the query points (all, or the indices ``points``) sweeping from their
        positions at the step's start to where the last kinematics in ``data`` (or the link
        frames ``end_frames``) puts them at its end (:func:`.obstacles.find_contacts`, with
        ``margin``), described at the start, their arms and weakness in ``data``'s
        configuration.

        The target normal velocity relative to the surface: ``−d/h`` for a gap ``d ≥ 0`` (a
        speculative contact closes at most its gap within the step: no tunnelling, no floating
        above the surface), ``min(−β d/h, recovery_speed)`` for a penetration (``β`` =
        ``penetration_recovery``), and for a point arriving faster than ``impact_speed``: with
        restitution ``ν > 0``, at least ``ν`` times its arrival speed; without, 0 where the
        surface strikes it (moves at it faster than ``impact_speed``), else ``−(d − margin)/h``
        for a gap beyond the margin and 0 within it.
        """
        model, xp, settings = self.model, self.model.xp, self.settings
        swept = xp.arange(len(self._query_link)) if points is None else points
        swept_link = self._query_link[swept]
        relative = point_position(
            model,
            data if end_frames is None else end_frames,
            swept_link,
            self._query_fraction[swept],
        )
        end = world_position(model, control, relative, swept_link)
        found = find_contacts(
            self.obstacles,
            self.placement,
            self._start_position[:, swept],
            end,
            self._query_radius[swept],
            h,
            settings.margin,
        )
        point, n = swept[found.point], found.normal
        link = self._query_link[point]
        arrival = dot(n, self._start_velocity[:, point] - found.obstacle_velocity)
        d = found.distance
        push_out = xp.minimum((-settings.penetration_recovery / h) * d, settings.recovery_speed)
        impact = arrival < -settings.impact_speed
        striking = dot(n, found.obstacle_velocity) > settings.impact_speed
        lands = impact & (found.restitution <= 0.0) & ~striking
        closing = xp.where(lands, xp.maximum(d - settings.margin, 0.0), xp.where(impact, 0.0, d))
        target = xp.where(d >= 0.0, -closing / h, push_out)
        # A point that bounces (ν > 0) leaves its obstacle at the impact, and the step's other
        # forces act on it in flight: the impulse takes (1 + ν) times the arrival speed off the
        # free step's end velocity (asking for ν times the arrival speed at the step's end threw
        # a bouncing rod higher by h ν v), and it never ends approaching. Without restitution a
        # point struck by a surface moving at it goes on with the surface from where it is (a
        # ball at 20 m/s carries the strands it meets without any passing through it). One
        # landing on a slower surface closes its gap down to the margin, and the steps after
        # it, arriving slower, close the rest: held where it is, a hair tip whipping onto the
        # drape benchmark's head stays up to 13 mm short of it, floating, and closing the whole
        # gap at its arrival speed overshoots (on a head turning at 360°/s, to 20 % of the
        # collision radius deep).
        fraction = self._query_fraction[point]
        _, end_velocity = point_motion(model, data, link, fraction)
        free_change = dot(n, end_velocity - self._start_velocity[:, point])
        rebound = xp.maximum(free_change - found.restitution * arrival, 0.0)
        bounces = impact & (found.restitution > 0.0)
        target = xp.where(bounces, xp.maximum(target, rebound), target)
        before = self._start_velocity[:, point] - found.obstacle_velocity
        slide = before - dot(before, n) * n
        friction = xp.where(
            dot(slide, slide) < settings.slip_speed**2,
            found.static_friction,
            found.dynamic_friction,
        )
        arm = point_position(model, data, link, fraction)
        weakness, lateral = _weakness(model, data, link, arm, n, settings.weak_row_ratio)
        # A weak contact's compliance makes up what its mobility lacks against the mobility
        # across its link's chain: 1/κ = (ratio − sin²θ) h/m, as the LCP's weak rows had it.
        least = xp.finfo(weakness.dtype).tiny
        stiffness_ratio = xp.where(
            weakness > 0.0,
            xp.minimum(
                settings.contact_stiffness,
                1.0 / (settings.weak_row_ratio * xp.maximum(weakness, least)),
            ),
            settings.contact_stiffness,
        )
        return ContactSet(
            key=point * self.obstacles.n_obstacles + found.obstacle,
            tree=model.link_tree[link],
            link=link,
            fraction=fraction,
            arm=arm,
            normal=n,
            applied=n + (settings.buckling_tilt * weakness) * lateral,
            gap=d,
            target=target,
            surface_velocity=found.obstacle_velocity,
            friction=friction,
            stiffness=stiffness_ratio * model.mass[link] / h,
            remembered=self.memory.recall(
                xp, point * self.obstacles.n_obstacles + found.obstacle, n
            ),
        )

    def correct(
        self, data: Data, state: State, control: Control, h: float, out: State, tolerance: float
    ) -> StepContacts:
        """Correct the free step ``out`` (from ``state`` over ``h``; the kinematics of ``out`` in
        ``data``) by the contacts' forces (module docstring, *The correction*): ``out``'s
        velocities and rotations are replaced. Leaves in ``data`` the factorisation of the
        Newton matrix at the free end with the contacts' blocks (every tree's), for the
        constraint pass after it.

        Each tree iterates until its contacts keep their pieces and its correction changes by at
        most ``tolerance`` (rad/s) or takes the whole Newton step: on the whole forest until
        fewer than half the trees iterate, for at most ``contact_iterations`` iterations, then
        the trees still unfinished go on, on a model of their own, up to
        :data:`TAIL_ITERATIONS` plus one times ``contact_iterations`` in all; a tree unfinished
        then keeps its last iterate, which has the least energy the iteration found.
        """
        model, xp, to_host = self.model, self.model.xp, self.model.backend.to_host
        found = self.find(data, control, h)
        w_free = out.w.copy()
        blocks = integrators.joint_block(model, control, out.q, h)
        dynamics.motion_subspaces(model, data)
        iterations = int(self.settings.contact_iterations)
        kind = _Dense if dynamics.dense_pays(model) else _Sweeps
        operator = kind(model, data, w_free, control, blocks, h)
        iterate = _start(model, data, found, found.remembered, operator, h)
        iterate = _iterate(
            model, data, found, operator, h, tolerance, iterations, iterate, model.n_trees / 2
        )

        def tail(contacts: ContactSet, iterations: int, iterate: _Iterate) -> _Iterate:
            return _finish_apart(
                model,
                data,
                contacts,
                w_free=w_free,
                control=control,
                blocks=blocks,
                h=h,
                tolerance=tolerance,
                iterations=iterations,
                iterate=iterate,
            )

        if bool(to_host(xp.any(iterate.iterating))):
            budget = (TAIL_ITERATIONS + 1) * iterations - iterate.taken
            iterate = tail(found, budget, iterate)
        # Points the correction turned toward an obstacle their free sweep missed: their
        # contacts join, and their trees go on, until their corrected paths meet no obstacle
        # more (a strand stopped at one point whips its tail round into the head).
        moving = _trees_of(model, found.tree)
        for _ in range(CORRECTED_SWEEPS):
            dynamics.forward_kinematics(
                model,
                self._corrected,
                integrators.integrate_rotation(xp, state.q, w_free + iterate.delta, h),
                control.base_rotation,
                control.base_position,
            )
            swept = self._sweep_turned(data, control, h, found, moving)
            new = ~xp.isin(swept.key, found.key)
            if not bool(to_host(xp.any(new))):
                break
            added = swept.restricted(new, xp.arange(model.n_links), model.link_tree)
            found = found.joined(xp, added)
            iterate.friction = iterate.friction.joined(xp, added.remembered)
            # Their trees all go on, and the tail takes their pieces anew.
            iterate.piece = xp.concatenate((iterate.piece, xp.full(len(added), APART, xp.int8)))
            moving = iterate.iterating = _trees_of(model, added.tree)
            iterate = tail(found, TAIL_ITERATIONS * iterations, iterate)
        operator.finish(iterate.link_block)
        out.w[...] = w_free + iterate.delta
        # The trees with contacts take a first-order step (the contacts' law and operator are
        # backward Euler's); the others keep their free step as it was.
        contacted = _trees_of(model, found.tree)
        out.q[...] = xp.where(
            contacted[model.link_tree], integrators.integrate_rotation(xp, state.q, out.w, h), out.q
        )
        integrators.first_order_step(out, contacted)
        response = iterate.response
        self.memory = ContactMemory.of(xp, found, response)
        data.plain_trees[...] = True
        return StepContacts(
            found=found,
            friction=iterate.friction,
            touching=_trees_of(model, found.tree[response.normal_force > 0.0]),
            load=response.load,
            link_block=iterate.link_block,
        )

    def _sweep_turned(
        self, data: Data, control: Control, h: float, found: ContactSet, trees: Any
    ) -> ContactSet:
        """The contacts of the points of ``trees`` ((T,) bool) that the correction may have
        turned into an obstacle, swept from the step's start to their corrected end in
        ``self._corrected`` (:meth:`find`): those whose corrected end lies more than half the
        ``margin`` from their free end in ``data``, and, for a tree that meets an obstacle
        ``found`` does not hold and so iterates on, all its points (those already within the
        margin join too).

        The others' straight paths moved by at most that at every point, and their free sweep
        found no obstacle within their radius plus the margin: a distance changes at most as
        much as the point moves (on a rigid mesh's trilinear grid at most √3 times as much), so
        they still end clear of their obstacles; a path that a shift that small turns across
        the edge of an open mesh ends within the shift of that edge, inside its radius, and
        the next step's sweep pushes it off. Over the benchmark's head the correction moves 7 %
        of the points of its trees more than half a millimetre, and 3 of 45,000 more than 1 mm."""
        model, xp, to_host = self.model, self.model.xp, self.model.backend.to_host
        moved = xp.nonzero(trees[model.link_tree[self._query_link]])[0]
        link, fraction = self._query_link[moved], self._query_fraction[moved]
        shift = point_position(model, self._corrected, link, fraction) - point_position(
            model, data, link, fraction
        )
        turned = dot(shift, shift) > (0.5 * self.settings.margin) ** 2
        swept = self.find(data, control, h, self._corrected, moved[turned])
        new = ~xp.isin(swept.key, found.key)
        if bool(to_host(xp.any(new))):
            going_on = _trees_of(model, swept.tree[new])
            rest = moved[~turned & going_on[model.link_tree[link]]]
            if rest.shape[0]:
                swept = swept.joined(xp, self.find(data, control, h, self._corrected, rest))
        return swept

    def overshoot(
        self, found: ContactSet, control: Control, q: Any, h: float, tolerance: float
    ) -> np.ndarray:
        """How much deeper (m) than it may each tree's points of the contacts ``found`` go into
        their obstacles on the straight path from their positions at the step's start to where
        the end rotations ``q`` put them: beyond ``tolerance`` times their collision radius, or,
        for a point deeper at the step's start, beyond that depth; (n_trees,) on the host,
        ``-inf`` for a tree without contacts. A tree with a positive overshoot has its step
        halved (:mod:`.stepping`): the correction is linear in the joint velocities, and a point
        that a fast obstacle swings far round its joint within the step leaves the line it was
        corrected along, to end inside the obstacle or behind it."""
        model, xp = self.model, self.model.xp
        largest = np.full(model.n_trees, -np.inf)
        if len(found) == 0:
            return largest
        point = found.key // self.obstacles.n_obstacles
        obstacle = found.key % self.obstacles.n_obstacles
        dynamics.forward_kinematics(
            model, self._corrected, q, control.base_rotation, control.base_position
        )
        relative = point_position(model, self._corrected, found.link, found.fraction)
        end = world_position(model, control, relative, found.link)
        radius = self._query_radius[point]
        start = self._start_position[:, point]
        smallest = swept_distances(self.obstacles, self.placement, start, end, radius, h)
        depth = radius - smallest[xp.arange(len(found)), obstacle]
        excess = depth - xp.maximum(-found.gap, tolerance * radius)
        excess, tree = model.backend.to_host(xp.stack((excess, found.tree * 1.0)))
        np.maximum.at(largest, tree.astype(np.int64), excess)
        return largest

    def points_of(self, part: ObstacleContacts, links: np.ndarray) -> Any:
        """The index here (device, ``part.n_points``) of each query point of ``part``, the
        contacts of a model of some of this model's trees holding its level-major ``links``
        (:func:`.model.select_trees`): points lie fraction-major over the colliding links, whose
        order a selection keeps."""
        colliding = np.nonzero(self.model.collides)[0]
        rank = np.full(self.model.n_links, -1, dtype=np.int64)
        rank[colliding] = np.arange(len(colliding))
        mine = rank[links[np.nonzero(part.model.collides)[0]]]
        fractions = np.arange(len(self.settings.fractions))
        return self.model.backend.from_host((fractions[:, None] * len(colliding) + mine).ravel())

    def remembered_for(self, part: ObstacleContacts, points: Any, memory: ContactMemory) -> None:
        """Give ``part`` (points: :meth:`points_of`) what ``memory``, one of this model's, holds
        of its points."""
        part.memory = memory.renumbered(
            self.model.xp, points, self.n_points, self.obstacles.n_obstacles
        )

    def take_memory(self, part: ObstacleContacts, points: Any) -> None:
        """Replace what this memory holds of ``part``'s points (:meth:`points_of`) by ``part``'s
        own."""
        xp, count = self.model.xp, self.obstacles.n_obstacles
        owned = xp.zeros(self.n_points, dtype=bool)
        owned[points] = True
        kept = xp.nonzero(~owned[self.memory.keys // count])[0]
        keys = xp.concatenate(
            (
                self.memory.keys[kept],
                points[part.memory.keys // count] * count + part.memory.keys % count,
            )
        )
        friction = self.memory.friction.selected(kept).joined(xp, part.memory.friction)
        order = xp.argsort(keys)
        self.memory = ContactMemory(keys[order], friction.selected(order))

    @property
    def motion(self) -> ObstacleMotion:
        """The obstacles' poses and velocities at the substep's start."""
        return self.placement.motion

    def set_motion(self, motion: ObstacleMotion | Placement) -> None:
        """Move the obstacles for the next substep (a placement of these obstacles' is kept as
        it is)."""
        self.placement = place(self.obstacles, motion)

    def reset(self) -> None:
        """Obstacles back at the identity pose, still; no contacts remembered."""
        self.set_motion(still(self.obstacles))
        self.memory = ContactMemory.empty(self.model.xp, self.model.backend.float)


@dataclass(eq=False)
class _Iterate:
    """The contact correction's iterate on one model (the whole forest, or some of its trees).

    Attributes
    ----------
    delta, n_delta : (3, N) float
        The correction ``Δ`` and ``N Δ``, kept along with it: the line search needs it, and a
        product with ``N`` costs a pass of inverse dynamics while the solves give it for free.
    friction : Friction
    piece : (C,) int8
        The contacts' pieces the factorisation in the model's ``Data`` holds.
    response : ContactResponse
        The contacts' response at ``Δ``.
    link_block : (6, 6, N) float
        The contacts' blocks of the pieces.
    iterating : (T,) bool
        The trees not finished yet.
    taken : int
        The iterations that led to it.
    """

    delta: Any
    n_delta: Any
    friction: Friction
    piece: Any
    response: ContactResponse
    link_block: Any
    iterating: Any
    taken: int = 0


class _Sweeps:
    """The correction's linear algebra through the articulated-body sweeps over the model's
    levels (:func:`.dynamics.factorize`, :func:`.dynamics.solve`): the factors in ``data``.

    ``w_free`` (3, N) is the free step's joint velocities, ``free_velocity`` (6, N) its links'
    spatial velocities; ``blocks`` the Newton matrix's joint-local blocks."""

    def __init__(
        self, model: Model, data: Data, w_free: Any, control: Control, blocks: Any, h: float
    ) -> None:
        self.model, self.data, self.control, self.blocks, self.h = model, data, control, blocks, h
        self.w_free = w_free
        self.free_velocity = dynamics.subspace_velocities(model, data.S, w_free, control)

    def factorize(self, trees: Any, link_block: Any) -> None:
        """Factorise the Newton matrix with the contacts' ``link_block`` (6, 6, N) for the
        trees ``trees`` ((T,) bool; None: all)."""
        model, data, blocks, h = self.model, self.data, self.blocks, self.h
        if trees is None:
            dynamics.factorize(model, data, blocks, link_block, tension_step=h)
        else:
            dynamics.factorize_trees(model, data, trees, blocks, link_block, tension_step=h)

    def link_motion(self, delta: Any) -> Any:
        """The links' spatial velocity change (6, N) that the correction ``delta`` makes."""
        velocity = dynamics.subspace_velocities(
            self.model, self.data.S, self.w_free + delta, self.control
        )
        return velocity - self.free_velocity

    def load(self, link_force: Any) -> Any:
        """Joint torques (3, N) of spatial forces (6, N) on the links."""
        return dynamics.subspace_load(self.model, self.data.S, link_force)

    def solve(self, load: Any) -> Any:
        """The joint velocity change (3, N) that the joint torques ``load`` make through the
        last factorisation."""
        return dynamics.solve(self.model, self.data, load).copy()

    def finish(self, link_block: Any) -> None:
        """Leave the factorisation with ``link_block`` in ``data``: it is there already."""


class _Dense(_Sweeps):
    """The correction's linear algebra as dense per-tree blocks (:class:`.dynamics.DenseTrees`),
    for a model of a few small trees: the same matrix, without a pass over the levels per
    iteration."""

    def __init__(
        self, model: Model, data: Data, w_free: Any, control: Control, blocks: Any, h: float
    ) -> None:
        super().__init__(model, data, w_free, control, blocks, h)
        layout = dynamics.DenseLayout.of(model)
        self.dense = dynamics.DenseTrees.of(model, data, layout, blocks, tension_step=h)

    def factorize(self, trees: Any, link_block: Any) -> None:
        self.dense.set_link_block(self.model, link_block)

    def link_motion(self, delta: Any) -> Any:
        return self.dense.motion(self.model, delta)

    def load(self, link_force: Any) -> Any:
        return self.dense.load(self.model, link_force)

    def solve(self, load: Any) -> Any:
        return self.dense.solve(self.model, load)

    def finish(self, link_block: Any) -> None:
        """Leave the articulated-body factorisation with ``link_block`` in ``data``, for the
        rows after the correction."""
        super().factorize(None, link_block)


def _start(
    model: Model,
    data: Data,
    contacts: ContactSet,
    friction: Friction,
    operator: _Sweeps,
    h: float,
    delta: Any = None,
    n_delta: Any = None,
) -> _Iterate:
    """The iterate at ``delta`` and ``n_delta = N delta`` (zero by default), its pieces
    factorised by ``operator`` (the link frames in ``data`` are the free end's)."""
    xp = model.xp
    delta = xp.zeros_like(operator.w_free) if delta is None else delta
    n_delta = xp.zeros_like(operator.w_free) if n_delta is None else n_delta
    velocity = operator.free_velocity + operator.link_motion(delta)
    response = respond(model, contacts, data.S, velocity, friction)
    link_block = newton_block(model, contacts, response.piece, friction, h)
    operator.factorize(None, link_block)
    return _Iterate(
        delta,
        n_delta,
        friction,
        response.piece,
        response,
        link_block,
        xp.ones(model.n_trees, dtype=bool),
    )


def _iterate(
    model: Model,
    data: Data,
    contacts: ContactSet,
    operator: _Sweeps,
    h: float,
    tolerance: float,
    iterations: int,
    iterate: _Iterate,
    until_fewer: float = 1.0,
) -> _Iterate:
    """At most ``iterations`` iterations of the correction (module docstring, *The
    correction*) from ``iterate`` for its trees still iterating, ending once fewer than
    ``until_fewer`` trees do; ``operator`` holds the factorisation of its pieces and keeps that
    of the pieces returned, but for the trees still iterating when it ends that way: their
    caller factorises them again on a model of their own (:func:`_finish_apart`), and their
    blocks in the returned ``link_block`` are stale. ``iterate`` is consumed: the one returned
    may share its arrays."""
    xp, to_host = model.xp, model.backend.to_host
    S = data.S
    free_velocity, link_motion = operator.free_velocity, operator.link_motion
    delta, n_delta, friction = iterate.delta, iterate.n_delta, iterate.friction
    piece, response, link_block = iterate.piece, iterate.response, iterate.link_block
    iterating, taken = iterate.iterating, iterate.taken
    # The links' velocity change that delta makes, carried along with it: the map is linear,
    # so each step adds its share instead of a pass over the levels.
    moved = link_motion(delta)
    for _ in range(iterations):
        taken += 1
        load = h * response.load + operator.load(xp.einsum("ijn,jn->in", link_block, moved))
        newton = operator.solve(load)
        newton_moved = link_motion(newton)
        n_newton = load - operator.load(xp.einsum("ijn,jn->in", link_block, newton_moved))
        on_links = iterating[model.link_tree]
        direction = xp.where(on_links, newton - delta, 0.0)
        n_direction = xp.where(on_links, n_newton - n_delta, 0.0)
        change = newton_moved - moved
        point_change = change[3:, contacts.link] + cross(
            xp, change[:3, contacts.link], contacts.arm
        )
        alpha = line_search(
            model, contacts, response, friction, n_delta, direction, n_direction, point_change, h
        )
        step = alpha[model.link_tree] * direction
        delta = delta + step
        n_delta = n_delta + alpha[model.link_tree] * n_direction
        moved = moved + xp.where(on_links, alpha[model.link_tree], 0.0) * change
        velocity = free_velocity + moved
        response = respond(model, contacts, S, velocity, friction)
        friction, revised = revised_friction(contacts, response, friction, xp)
        new_piece = _pieces(response.piece != APART, friction, xp)
        flipped = new_piece != piece
        # With its pieces held the problem is linear: a tree that took its whole Newton step
        # and kept its pieces has solved it.
        moving = (dynamics.tree_max(model, xp.max(xp.abs(step), axis=0)) > tolerance) & (
            alpha < 1.0
        )
        iterating = _trees_of(model, contacts.tree[flipped | revised]) | moving
        piece = new_piece
        if bool(to_host(xp.any(revised))):
            response = respond(model, contacts, S, velocity, friction)
        if int(to_host(xp.count_nonzero(iterating))) < until_fewer:
            # The trees still iterating go on, on a model of their own, which factorises them
            # (_finish_apart): the trees whose pieces flipped are among them.
            break
        refactored = _trees_of(model, contacts.tree[flipped])
        if bool(to_host(xp.any(refactored))):
            _renew_blocks(
                model, contacts, piece, friction, h, link_block, refactored[contacts.tree]
            )
            operator.factorize(refactored, link_block)
    return _Iterate(delta, n_delta, friction, piece, response, link_block, iterating, taken)


def _finish_apart(
    model: Model,
    data: Data,
    contacts: ContactSet,
    *,
    w_free: Any,
    control: Control,
    blocks: Any,
    h: float,
    tolerance: float,
    iterations: int,
    iterate: _Iterate,
) -> _Iterate:
    """:func:`_iterate` for the trees ``iterate`` leaves unfinished, on a model of just those
    trees (:func:`.model.select_trees`: a few trees' iterations then cost what those trees do,
    not a whole-forest solve each; solved densely where that pays, :class:`_Dense`), for at
    most ``iterations`` iterations, narrowed again whenever fewer than half of a swept model's
    trees iterate; its result and factors put back into the whole's. ``iterate`` is consumed,
    as :func:`_iterate`'s is."""
    xp, backend = model.xp, model.backend
    trees = np.nonzero(backend.to_host(iterate.iterating))[0]
    gathered = dynamics.tree_part(model, data, trees, ("oR", "r", "c", "tension"))
    part, part_data, chosen = gathered.model, gathered.data, gathered.chosen
    number = xp.full(model.n_links, -1, dtype=xp.int64)
    number[chosen] = xp.arange(part.n_links)
    in_part = iterate.iterating[contacts.tree]
    part_contacts = contacts.restricted(in_part, number, part.link_tree)
    dynamics.motion_subspaces(part, part_data)
    kind = _Dense if dynamics.dense_pays(part) else _Sweeps
    operator = kind(part, part_data, w_free[:, chosen], control, blocks[..., chosen], h)
    start = _start(
        part,
        part_data,
        part_contacts,
        iterate.friction.selected(in_part),
        operator,
        h,
        iterate.delta[:, chosen],
        iterate.n_delta[:, chosen],
    )
    # Sweeps pay a pass per level however few trees iterate: once fewer than half of the
    # model's do, those go on, on a model of their own again.
    until_fewer = part.n_trees / 2 if kind is _Sweeps else 1.0
    finished = _iterate(
        part, part_data, part_contacts, operator, h, tolerance, iterations, start, until_fewer
    )
    left = iterations - finished.taken
    if left > 0 and bool(backend.to_host(xp.any(finished.iterating))):
        finished = _finish_apart(
            part,
            part_data,
            part_contacts,
            w_free=w_free[:, chosen],
            control=control,
            blocks=blocks[..., chosen],
            h=h,
            tolerance=tolerance,
            iterations=left,
            iterate=finished,
        )
    operator.finish(finished.link_block)
    delta, n_delta = iterate.delta.copy(), iterate.n_delta.copy()
    delta[:, chosen], n_delta[:, chosen] = finished.delta, finished.n_delta
    friction = Friction(iterate.friction.sliding.copy(), iterate.friction.direction.copy())
    friction.sliding[in_part] = finished.friction.sliding
    friction.direction[:, in_part] = finished.friction.direction
    for name in dynamics.FACTORS:
        getattr(data, name)[..., chosen] = getattr(part_data, name)
    # The other trees' contacts keep their pieces and blocks: their trees no longer move.
    piece = iterate.piece.copy()
    piece[in_part] = finished.piece
    link_block = iterate.link_block
    link_block[..., chosen] = finished.link_block
    velocity = dynamics.subspace_velocities(model, data.S, w_free + delta, control)
    response = respond(model, contacts, data.S, velocity, friction)
    iterating = xp.zeros(model.n_trees, dtype=bool)
    iterating[backend.from_host(trees)] = finished.iterating
    return _Iterate(delta, n_delta, friction, piece, response, link_block, iterating)


def respond(
    model: Model,
    contacts: ContactSet,
    S: Any,
    link_velocity: Any,
    friction: Friction,
) -> ContactResponse:
    """The contacts' forces where the links move with spatial velocities ``link_velocity``
    (6, N, :func:`.dynamics.subspace_velocities` through the motion subspaces ``S``), their
    points as in the configuration of ``S`` and of ``contacts.arm`` (module docstring, *The
    correction*), rubbing as ``friction`` says.

    By the contact law, a contact pushes with ``κ`` times its deficit where that is positive and
    rubs while it pushes."""
    xp = model.xp
    n, kappa, arm = contacts.normal, contacts.stiffness, contacts.arm
    motion = link_velocity[:, contacts.link]
    u = motion[3:] + cross(xp, motion[:3], arm) - contacts.surface_velocity
    normal_speed = dot(n, u)
    deficit = contacts.target - normal_speed
    engaged = deficit > 0.0
    push = kappa * xp.maximum(deficit, 0.0)
    tangential = u - normal_speed * n
    sticking = engaged & ~friction.sliding
    sliding = engaged & friction.sliding
    force = (
        push * contacts.applied
        - xp.where(sticking, kappa * STICKING_SHARE, 0.0) * tangential
        - xp.where(sliding, contacts.friction * push, 0.0) * friction.direction
    )
    link_force = link_sums(
        xp, contacts.link, xp.concatenate((cross(xp, arm, force), force)), model.n_links
    )
    piece = xp.where(sticking, STICKING, xp.where(sliding, SLIDING, APART)).astype(xp.int8)
    return ContactResponse(
        load=dynamics.subspace_load(model, S, link_force),
        normal_force=push,
        piece=piece,
        deficit=deficit,
        tangential=tangential,
    )


def line_search(
    model: Model,
    contacts: ContactSet,
    response: ContactResponse,
    friction: Friction,
    n_delta: Any,
    direction: Any,
    n_direction: Any,
    point_change: Any,
    h: float,
) -> Any:
    """Each tree's step (T,) in [0, 1] along the Newton ``direction`` (3, N) from the iterate
    ``Δ``: where the directional derivative of the correction's energy,

        φ'(α) = pᵀ N Δ + α pᵀ N p − h Σ f_c(α) · e_c,

    changes sign (bisection; 1 where it is still negative there, or where it is not negative
    at 0: the direction does not descend). ``n_delta`` and
    ``n_direction`` are ``N Δ`` and ``N p``, ``point_change`` (3, C) the contact points' velocity
    change ``e_c = J_c p``; the contacts' forces ``f_c(α)`` follow the contact law at
    ``Δ + α p`` with the friction modes of ``friction``, from ``response`` at ``Δ``."""
    xp = model.xp
    n, kappa = contacts.normal, contacts.stiffness
    per_tree = dynamics.tree_sum(model, direction * n_delta).sum(axis=0)
    curvature = dynamics.tree_sum(model, direction * n_direction).sum(axis=0)
    normal_change = dot(n, point_change)
    tangential_change = point_change - normal_change * n
    along_applied = dot(contacts.applied, point_change)
    sticking_share = kappa * STICKING_SHARE * ~friction.sliding
    sliding_share = contacts.friction * friction.sliding * dot(friction.direction, point_change)
    tangential_rate = dot(response.tangential, tangential_change)
    tangential_curvature = dot(tangential_change, tangential_change)

    def slope(alpha: Any) -> Any:
        a = alpha[contacts.tree]
        push = kappa * xp.maximum(response.deficit - a * normal_change, 0.0)
        pushing = push > 0.0
        work = push * (along_applied - sliding_share) - xp.where(pushing, sticking_share, 0.0) * (
            tangential_rate + a * tangential_curvature
        )
        contact_work = xp.zeros(model.n_trees, dtype=work.dtype)
        contact_work[...] = xp.bincount(contacts.tree, weights=work, minlength=model.n_trees)
        return per_tree + alpha * curvature - h * contact_work

    low = xp.zeros(model.n_trees, dtype=model.backend.float)
    high = xp.ones_like(low)
    # Sliding friction makes the Newton matrix unsymmetric, so its direction need not descend
    # the energy at all; a step of 0 would then end the tree's iteration where it started, its
    # contacts unanswered. Such a tree takes the whole step.
    whole = (slope(high) <= 0.0) | (slope(low) >= 0.0)
    for _ in range(LINE_SEARCH_BISECTIONS):
        middle = 0.5 * (low + high)
        rising = slope(middle) > 0.0
        high = xp.where(rising, middle, high)
        low = xp.where(rising, low, middle)
    # The bisection's last interval reaching the whole step is the whole step, bar rounding.
    return xp.where(whole | (high == 1.0), 1.0, low)


def newton_block(
    model: Model, contacts: ContactSet, piece: Any, friction: Friction, h: float
) -> Any:
    """``h Σ Pᵀ T_c P`` (6, 6, N): the contacts' part of the Newton matrix, each contact taken in
    the state ``piece`` (C,): ``T_c = κ (a − μ t) nᵀ`` while it pushes (``a`` the direction its
    normal force is applied along, ``μ t`` while it slides along ``t``), plus
    ``s κ (1 − n nᵀ)`` while it sticks (module docstring)."""
    xp = model.xp
    link_block = xp.zeros((6, 6, model.n_links), dtype=model.backend.float)
    _renew_blocks(model, contacts, piece, friction, h, link_block, xp.ones(len(contacts), bool))
    return link_block


def _renew_blocks(
    model: Model,
    contacts: ContactSet,
    piece: Any,
    friction: Friction,
    h: float,
    link_block: Any,
    renewed: Any,
) -> None:
    """Write into ``link_block`` (:func:`newton_block`) the blocks of the links of the contacts
    ``renewed`` (C,) bool, summed over all their contacts, which ``renewed`` must hold: the
    other links' blocks are left as they are."""
    xp = model.xp
    chosen = xp.nonzero(renewed)[0]
    links, link_of = xp.unique(contacts.link[chosen], return_inverse=True)
    contacts = contacts.restricted(renewed, xp.arange(model.n_links), model.link_tree)
    piece, friction = piece[chosen], friction.selected(chosen)
    n, kappa = contacts.normal, contacts.stiffness
    across = xp.eye(3, dtype=model.backend.float)[:, :, None] - n[:, None] * n[None]
    # T = -df/du (3, 3, C): rows are force components, columns velocity components.
    pushed_along = (
        contacts.applied - xp.where(piece == SLIDING, contacts.friction, 0.0) * friction.direction
    )
    block = (
        xp.where(piece != APART, kappa, 0.0) * pushed_along[:, None] * n[None]
        + xp.where(piece == STICKING, kappa * STICKING_SHARE, 0.0) * across
    )
    spatial_block = h * _spatial_block(xp, contacts.arm, block).reshape(36, -1)
    link_block[..., links] = link_sums(xp, link_of, spatial_block, len(links)).reshape(6, 6, -1)


def _pieces(engaged: Any, friction: Friction, xp: Any) -> Any:
    """The contacts' pieces (C,) int8: apart where not ``engaged``, else sticking or sliding as
    ``friction`` says."""
    return xp.where(engaged, xp.where(friction.sliding, SLIDING, STICKING), APART).astype(xp.int8)


def revised_friction(
    contacts: ContactSet, response: ContactResponse, friction: Friction, xp: Any
) -> tuple[Friction, Any]:
    """The friction of the next iteration from the response at the end of one, and the
    contacts (C,) bool whose friction changed: a sticking contact whose friction would exceed
    ``μ`` times its normal force by more than ``HOLD`` slides along its tangential velocity, and
    a sliding contact whose tangential velocity turned against its direction sticks (the
    friction it slid with stops it within the step)."""
    pushing = response.piece != APART
    tangential = response.tangential
    speed = xp.sqrt(dot(tangential, tangential))
    bound = contacts.friction * response.normal_force
    needed = STICKING_SHARE * contacts.stiffness * speed
    slips = pushing & ~friction.sliding & (needed > (1.0 + HOLD) * bound)
    stops = pushing & friction.sliding & (dot(tangential, friction.direction) < 0.0)
    sliding = (friction.sliding | slips) & ~stops
    direction = xp.where(slips, tangential / xp.where(slips, speed, 1.0), friction.direction)
    return (
        Friction(sliding, xp.where(sliding, direction, 0.0)),
        slips | stops,
    )


# A sticking contact's friction is this share of its normal stiffness: the two are penalties of
# velocities, and as stiff as each other the friction held back the normal velocity a contact
# needs (a pinned rod pushed out of a floor rose at 83% of its recovery speed); a hundredth
# leaves the normal its target within half a percent.
STICKING_SHARE = 0.01
# The trees the contact correction leaves unfinished on the whole forest go on, on a model of
# their own, for this many times ``contact_iterations`` more than the whole forest's at most.
TAIL_ITERATIONS = 2
# At most this many sweeps of the points the correction turned, each followed by the iterations
# of the trees that met new obstacles on it.
CORRECTED_SWEEPS = 3
# Bisections of the line search: its step is found to within 2⁻²⁰.
LINE_SEARCH_BISECTIONS = 20
# How far (relative) a sticking contact's friction may exceed its bound before it slides
# (revised_friction): without the band, rounding flips a contact at its bound back and forth.
HOLD = 0.01


def _trees_of(model: Model, tree: Any) -> Any:
    """(T,) bool: the trees with any contact (on ``tree``)."""
    marked = model.xp.zeros(model.n_trees, dtype=bool)
    marked[tree] = True
    return marked


def point_position(model: Model, data: Data, links: Any, fractions: Any) -> Any:
    """Positions (3, P) relative to each tree's reference point of points ``fractions`` along
    ``links``, from the link frames in ``data``."""
    return data.r[:, links] + (fractions * model.length[links]) * data.oR[:, 1, links]


def world_position(model: Model, control: Control, relative: Any, links: Any) -> Any:
    """World positions (3, P) of points on ``links`` given relative to their trees' reference
    points (:func:`point_position`): moved by their bases' positions in ``control``."""
    return relative + control.base_position[:, model.link_base[links]]


def point_motion(model: Model, data: Data, links: Any, fractions: Any) -> tuple[Any, Any]:
    """:func:`point_position` and the points' world velocities (3, P), from the link frames and
    velocities in ``data``."""
    relative = point_position(model, data, links, fractions)
    velocity = data.v[3:, links] + cross(model.xp, data.v[:3, links], relative)
    return relative, velocity


def still(obstacles: Obstacles) -> ObstacleMotion:
    """Every obstacle at the identity pose, at rest."""
    return ObstacleMotion.from_host(
        obstacles, np.broadcast_to(np.eye(4), (obstacles.n_obstacles, 4, 4))
    )


def _weakness(
    model: Model, data: Data, link: Any, arm: Any, normal: Any, ratio: float
) -> tuple[Any, Any]:
    """How weak each contact is (C,), in [0, 1], and the unit direction (3, C) across its link
    that its force tilts along if it pushes toward its tree's root (zero otherwise); ``arm``
    (3, C) is each contact's point relative to its tree's reference point.

    A point moves across its own link by that link's joint, and along the line from its tree's
    root joint to it only by bending the chain: a push along both hardly moves it. With ``θ``
    the larger of the push's angles to the link and to that line, the chain's mobility along
    the push falls with ``sin²θ``: ``weakness = 1 − sin²θ / ratio`` where that is positive (a
    straight strand pushed along itself; not a folded strand lying across the push)."""
    xp = model.xp
    reach = arm - data.r[:, model.link_tree[link]]
    length = xp.sqrt(dot(reach, reach))
    along = dot(normal, reach) / xp.where(length > 1e-12, length, 1.0)
    axis = data.oR[:, 1, link]
    along_link = dot(normal, axis)
    sine_squared = xp.where(
        length > 1e-12, 1.0 - xp.minimum(along * along, along_link * along_link), 1.0
    )
    weakness = xp.clip(1.0 - sine_squared / ratio, 0.0, 1.0)
    lateral = normal - along_link * axis
    size = xp.sqrt(dot(lateral, lateral))
    lateral = xp.where(size > 1e-9, lateral / xp.where(size > 1e-9, size, 1.0), data.oR[:, 0, link])
    toward_root = along < 0.0
    return weakness, lateral * toward_root


def _spatial_block(xp: Any, arm: Any, block: Any) -> Any:
    """``Pᵀ T P`` (6, 6, C) for points ``arm`` (3, C) and 3×3 blocks ``T`` (3, 3, C), with
    ``P = [−[p]×, 1]`` (point velocity from a ``[angular; linear]`` spatial velocity)."""
    skew = _skew(xp, arm)
    right = -xp.einsum("ijc,jkc->ikc", block, skew)  # T (-[p]x)
    out = xp.empty((6, 6, arm.shape[1]), dtype=block.dtype)
    out[:3, :3] = xp.einsum("ijc,jkc->ikc", skew, right)
    out[:3, 3:] = xp.einsum("ijc,jkc->ikc", skew, block)
    out[3:, :3] = right
    out[3:, 3:] = block
    return out


def _skew(xp: Any, p: Any) -> Any:
    """Cross-product matrices (3, 3, C) of vectors (3, C)."""
    zero = xp.zeros_like(p[0])
    return xp.stack(
        (
            xp.stack((zero, -p[2], p[1])),
            xp.stack((p[2], zero, -p[0])),
            xp.stack((-p[1], p[0], zero)),
        )
    )


def link_sums(xp: Any, link: Any, values: Any, count: int) -> Any:
    """Per-link sums (K, count) of per-item values (K, C) on ``link`` (C,) (contacts, or the
    points on paths): one bincount, so the items of a link add up in the order they come in."""
    components = values.shape[0]
    index = (xp.arange(components)[:, None] * count + link[None]).reshape(-1)
    sums = xp.bincount(index, weights=values.reshape(-1), minlength=components * count)
    return sums.reshape(components, count).astype(values.dtype, copy=False)
