"""Constraint rows: joint limits, point paths and joint rotations as rows of unit loads (paper §4).

A row is a unit load, a force along its direction at its point (a point path's) or a torque
about its axis on its joint (a joint limit's, a joint rotation's), with the bounds of its force
and the velocity it asks for at the step's end (:class:`Rows`). What a row asks for is measured
at the substep's start (:class:`ConstraintStart`, made by :func:`constraint_start`) and its
direction at the free step's end (:func:`limit_rows`, :func:`path_rows`, :func:`rotation_rows`).
The solver (:mod:`.constraints`) turns rows into an operator (:mod:`.delassus`) and an LCP.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics, spatial
from .dynamics import Data
from .errors import InvalidInputError
from .model import Model
from .spatial import cross, dot
from .state import State
from .validation import real_array, vector3


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


@dataclass(frozen=True, eq=False)
class Rows:
    """Constraint rows, one column each (device arrays, ``R`` rows).

    tree, link : (R,) int, level-major link; fraction : (R,) where the row's point lies along its
    link (0 for joint rows); direction : (3, R) world force direction,
    or the link-frame torque axis of a joint row; joint : (R,) bool; lower, upper : (R,) bounds;
    target : (R,) m/s or rad/s, the desired velocity at ``t + h`` along the row (of the point,
    world; of the joint, link frame); bounded rows stop pushing above it; initial : (R,) the
    force the row starts from (N or N·m): a path's force held from the last step
    (:class:`.constraints.HeldLoad`), 0 elsewhere.
    """

    tree: Any
    link: Any
    fraction: Any
    direction: Any
    joint: Any
    lower: Any
    upper: Any
    target: Any
    initial: Any

    def with_padding(self, xp: Any) -> Rows:
        """Each row followed by a padding row (no load, force held at 0), so that rows come in
        the pairs the LCP sweeps update together."""
        count = self.tree.shape[0]

        def paired(values: Any, padding: Any) -> Any:
            return xp.stack((values, padding), axis=-1).reshape(*values.shape[:-1], 2 * count)

        def zero(values: Any) -> Any:
            return paired(values, xp.zeros_like(values))

        return Rows(
            tree=paired(self.tree, self.tree),
            link=paired(self.link, self.link),
            fraction=zero(self.fraction),
            direction=zero(self.direction),
            joint=paired(self.joint, self.joint),
            lower=zero(self.lower),
            upper=zero(self.upper),
            target=zero(self.target),
            initial=zero(self.initial),
        )

    @staticmethod
    def concatenate(xp: Any, parts: list[Rows]) -> Rows:
        names = (
            "tree",
            "link",
            "fraction",
            "direction",
            "joint",
            "lower",
            "upper",
            "target",
            "initial",
        )
        return Rows(
            **{
                name: xp.concatenate([getattr(part, name) for part in parts], axis=-1)
                for name in names
            }
        )


@dataclass(frozen=True, eq=False)
class DeviceLimits:
    """:class:`JointLimits` checked and on the model's backend: (N,) rad each, level-major."""

    swing: Any
    twist_min: Any
    twist_max: Any

    def of_links(self, model: Model, part: Model, chosen: Any) -> JointLimits:
        """The limits of ``part``, a model of some of ``model``'s trees holding its level-major
        links ``chosen`` (device indices), as :class:`JointLimits` in ``part``'s strand order."""
        return JointLimits(
            *(
                part.to_strand_order(getattr(self, name)[chosen])
                for name in ("swing", "twist_min", "twist_max")
            )
        )


@dataclass(frozen=True, eq=False)
class SwingTwist:
    """Every joint's deviation from its rest rotation split ``twist ⊗ swing`` as for the springs:
    swing angle (N,), unit swing axis (3, N, link frame), signed twist angle (N,)."""

    swing: Any
    axis: Any
    twist: Any


@dataclass(frozen=True, eq=False)
class PathStart:
    """The active point paths at a substep's start: their level-major links (P,), where the
    points lie along them (P,), and the velocity each point is to have at ``t + h`` (3, P)."""

    links: Any
    fractions: Any
    desired: Any


@dataclass(frozen=True, eq=False)
class RotationStart:
    """The active joint rotations at a substep's start: their level-major links (R,) and the
    joint velocity each is to have at ``t + h`` (3, R), link frame."""

    links: Any
    desired: Any


@dataclass(frozen=True, eq=False)
class ConstraintStart:
    """What the rows of a substep measure at its start (None: nothing of that kind): the joints'
    deviations from rest where there are joint limits, the active paths and rotations."""

    limits: SwingTwist | None = None
    paths: PathStart | None = None
    rotations: RotationStart | None = None


def constraint_start(
    model: Model,
    data: Data,
    state: State,
    origin: Any,
    limits: DeviceLimits | None,
    paths: list[tuple[int, PointPath]],
    rotations: list[tuple[int, JointRotation]],
    time: float,
    h: float,
    stiffness: float,
    damping: float,
    path_speed: float,
) -> ConstraintStart:
    """What the rows of the substep from ``time`` over ``h`` measure at its start, from ``state``
    and the link velocities of it in ``data``: the joints' deviations where there are
    ``limits``; for each active path and rotation (with its level-major link) the velocity it
    asks for at ``t + h``.

    A path's point: eq. 15, ``a^d = a* + k_p (x* − x) + k_d (v* − v)`` at ``t``, ``v^d = v(t) + h
    a^d``, its velocity relative to its target's capped at ``path_speed``; a joint's likewise in
    rotation vectors. ``origin`` (3, N) is each link's base position (the trees' reference
    points); ``stiffness`` and ``damping`` are ``k_p`` and ``k_d``.
    """
    xp, device = model.xp, model.backend.from_host
    path_start = rotation_start = None
    if paths:
        links = device(np.array([link for link, _ in paths]))
        fractions = device(np.array([float(c.fraction) for _, c in paths]))
        relative, velocity = points(model, data, links, fractions)
        targets = np.array(
            [[checked_point(c, c.path(time + k * h)) for _, c in paths] for k in (-1, 0, 1)]
        )
        target_velocity = (targets[2] - targets[0]) / (2 * h)
        target_acceleration = (targets[2] - 2 * targets[1] + targets[0]) / (h * h)
        position = relative + origin[:, links]
        # The target's velocity at t + h, and eq. 15's velocity there relative to it: the
        # approach, capped at path_speed (the proportional term grows with the distance).
        ahead = device(target_velocity.T) + h * device(target_acceleration.T)
        approach = (
            velocity
            - device(target_velocity.T)
            + (h * stiffness) * (device(targets[1].T) - position)
            + (h * damping) * (device(target_velocity.T) - velocity)
        )
        speed = xp.sqrt(dot(approach, approach))
        approach = approach * xp.where(
            speed > path_speed, path_speed / xp.maximum(speed, 1e-300), 1.0
        )
        path_start = PathStart(links, fractions, ahead + approach)
    if rotations:
        links = device(np.array([link for link, _ in rotations]))
        targets = np.array(
            [
                [checked_rotation(c, c.rotation(time + k * h)) for _, c in rotations]
                for k in (-1, 0, 1)
            ]
        )
        back = log(relative_rotation(targets[0], targets[1])) / h
        ahead = log(relative_rotation(targets[1], targets[2])) / h
        q, w = state.q[:, links], state.w[:, links]
        error = spatial.quat_log(
            xp, spatial.quat_multiply(xp, spatial.quat_conjugate(xp, q), device(targets[1].T))
        )
        desired = (
            w
            + device((ahead - back).T)
            + (h * stiffness) * error
            + (h * damping) * (device((0.5 * (ahead + back)).T) - w)
        )
        rotation_start = RotationStart(links, desired)
    return ConstraintStart(
        None if limits is None else swing_and_twist(model, state.q), path_start, rotation_start
    )


def limit_rows(
    model: Model,
    limits: DeviceLimits,
    start: SwingTwist,
    out: State,
    h: float,
    margin: float,
    recovery_speed: float,
) -> Rows:
    """One row per joint whose swing or twist is within ``margin`` of its limit at the start or
    at the free end ``out`` of the step.

    The angle at ``t + h`` is linearised about the start, ``θ(t) + h b·w⁺`` (``b`` the swing
    axis, or the twist axis): a joint stopped at its limit ends with a small ``w⁺``, so this
    is accurate where it matters, whereas a linearisation about the free end is off by the
    square of the whole correction (a whipping tip overshot a 15° cone by 5°). A joint past
    its limit at the start returns to it within the step, at most at ``recovery_speed``."""
    xp = model.xp
    end = swing_and_twist(model, out.q)
    swing, twist = start.swing, start.twist
    # At rest the swing axis is undefined: take the one the free step turns about.
    axis = xp.where(swing > 1e-6, start.axis, end.axis)
    y = xp.zeros_like(axis)
    y[1] = 1.0
    parts = []
    # (which joints, torque axis, excess over the limit at t)
    for mask, direction, excess in (
        (
            xp.maximum(swing, end.swing) > limits.swing - margin,
            -axis,
            swing - limits.swing,
        ),
        (
            xp.maximum(twist, end.twist) > limits.twist_max - margin,
            -y,
            twist - limits.twist_max,
        ),
        (
            xp.minimum(twist, end.twist) < limits.twist_min + margin,
            y,
            limits.twist_min - twist,
        ),
    ):
        (link,) = xp.nonzero(mask)
        # The velocity into the limit: at least the excess over the step (negative: the gap
        # may close within it), a joint already past its limit returning at most so fast.
        inward = excess[link] / h
        inward = xp.where(inward > 0.0, xp.minimum(inward, recovery_speed), inward)
        parts.append(joint_rows(xp, model, link, direction[:, link], inward, True))
    return Rows.concatenate(xp, parts)


def limit_overshoot(
    model: Model, limits: DeviceLimits, start: SwingTwist, out: State, tolerance: float
) -> Any:
    """How far (rad) the step from ``start`` to ``out`` took each tree's joints beyond what
    they may reach: ``tolerance`` past their swing or twist limit, or, for a joint further out
    at the start, where it was; (n_trees,) on the host."""
    xp = model.xp
    end = swing_and_twist(model, out.q)

    def beyond(first: Any, last: Any, bound: Any) -> Any:
        return last - bound - xp.maximum(first - bound, tolerance)

    overshoot = xp.maximum(
        beyond(start.swing, end.swing, limits.swing),
        xp.maximum(
            beyond(start.twist, end.twist, limits.twist_max),
            beyond(-start.twist, -end.twist, -limits.twist_min),
        ),
    )
    return model.backend.to_host(dynamics.tree_max(model, overshoot))


def path_rows(model: Model, data: Data, start: PathStart, held: Any) -> Rows:
    """Three bilateral rows per point: along the line from its tree's root joint to the point,
    and two across it, starting from the point's ``held`` force (3, P), world, N. A chain
    stretched toward an unreachable target can hardly move its point along that line: in this
    basis that is one weak row, which the solver makes compliant
    (:func:`.delassus.weak_rows`), rather than a near-singular block of world-axis rows (each
    with a healthy diagonal) that asks for huge, nearly cancelling forces."""
    xp = model.xp
    links, fractions, desired = start.links, start.fractions, start.desired
    count = links.shape[0]
    reach = from_root(model, data, links, arms(model, data, links, fractions))
    length = xp.sqrt(dot(reach, reach))
    along = xp.where(length > 1e-12, reach / xp.where(length > 1e-12, length, 1.0), 0.0)
    along[0] = xp.where(length > 1e-12, along[0], 1.0)
    across = perpendicular(xp, along)
    basis = (along, across, cross(xp, along, across))
    direction = xp.concatenate(basis, axis=1)
    infinite = xp.full(3 * count, xp.inf, dtype=model.backend.float)
    false = xp.zeros(3 * count, dtype=bool)
    return Rows(
        tree=xp.tile(model.link_tree[links], 3),
        link=xp.tile(links, 3),
        fraction=xp.tile(fractions, 3),
        direction=direction,
        joint=false,
        lower=-infinite,
        upper=infinite,
        target=xp.concatenate([dot(axis, desired) for axis in basis]),
        initial=xp.concatenate([dot(axis, held) for axis in basis]),
    )


def rotation_rows(model: Model, start: RotationStart) -> Rows:
    """Three bilateral rows per joint, torques about its link-frame axes."""
    xp = model.xp
    links, desired = start.links, start.desired
    count = links.shape[0]
    eye = xp.eye(3, dtype=model.backend.float)
    parts = [
        joint_rows(
            xp,
            model,
            links,
            xp.repeat(eye[:, axis : axis + 1], count, axis=1),
            desired[axis],
            False,
        )
        for axis in range(3)
    ]
    return Rows.concatenate(xp, parts)


def swing_and_twist(model: Model, q: Any) -> SwingTwist:
    """Every joint's deviation from its rest rotation at joint rotations ``q``, split
    ``twist ⊗ swing`` as for the springs."""
    xp = model.xp
    deviation = spatial.quat_multiply(xp, spatial.quat_conjugate(xp, model.rest_rotation), q)
    deviation = deviation * xp.where(deviation[0] < 0.0, -1.0, 1.0)
    twist, swing = spatial.twist_swing(xp, deviation)
    sine = xp.sqrt(swing[1] ** 2 + swing[3] ** 2)
    axis = xp.stack((swing[1], xp.zeros_like(sine), swing[3]))
    axis = axis / xp.where(sine > 1e-12, sine, 1.0)
    return SwingTwist(2.0 * xp.arctan2(sine, swing[0]), axis, 2.0 * xp.arctan2(twist[2], twist[0]))


def arms(model: Model, data: Data, link: Any, fraction: Any) -> Any:
    """Points (3, ...) ``fraction`` along ``link`` relative to their tree's reference point, at
    the configuration of the last kinematics in ``data``."""
    return data.r[:, link] + (fraction * model.length[link]) * data.oR[:, 1, link]


def from_root(model: Model, data: Data, link: Any, arm: Any) -> Any:
    """Points ``arm`` (3, ...) relative to their tree's reference point, made relative to the
    tree's root joint (level-major link ``t`` is the root of tree ``t``)."""
    return arm - data.r[:, model.link_tree[link]]


def points(model: Model, data: Data, links: Any, fractions: Any) -> tuple[Any, Any]:
    """Positions relative to each tree's reference point and world velocities (3, P) of points
    ``fractions`` along ``links``, from the last :func:`.dynamics.link_velocities`."""
    xp = model.xp
    relative = arms(model, data, links, fractions)
    velocity = data.v[3:, links] + cross(xp, data.v[:3, links], relative)
    return relative, velocity


def joint_rows(
    xp: Any, model: Model, link: Any, direction: Any, target: Any, unilateral: bool
) -> Rows:
    """Rows of torques about link-frame ``direction`` (3, R) on the joints of ``link``, pushing
    only (``unilateral``) or both ways, toward joint velocities ``target`` along ``direction``."""
    count = link.shape[0]
    dtype = model.backend.float
    infinite = xp.full(count, xp.inf, dtype=dtype)
    return Rows(
        tree=model.link_tree[link],
        link=link,
        fraction=xp.zeros(count, dtype=dtype),
        direction=direction,
        joint=xp.ones(count, dtype=bool),
        lower=xp.zeros(count, dtype=dtype) if unilateral else -infinite,
        upper=infinite,
        target=target,
        initial=xp.zeros(count, dtype=dtype),
    )


def perpendicular(xp: Any, n: Any) -> Any:
    """A unit vector perpendicular to each unit vector (3, C)."""
    helper = xp.zeros_like(n)
    use_y = xp.abs(n[0]) > 0.9
    helper[0] = xp.where(use_y, 0.0, 1.0)
    helper[1] = xp.where(use_y, 1.0, 0.0)
    tangent = cross(xp, n, helper)
    return tangent / xp.sqrt(dot(tangent, tangent))


def device_limits(model: Model, limits: JointLimits) -> DeviceLimits:
    """``limits`` checked against ``model`` and on its backend, level-major."""
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
    return DeviceLimits(**values)


def checked_point(constraint: PointPath, value: Any) -> np.ndarray:
    """A path's value ``value``: three finite numbers, or an error naming the constraint."""
    return vector3(
        f"the path of the point constraint on strand {constraint.strand}, link {constraint.link}",
        value,
    )


def checked_rotation(constraint: JointRotation, value: Any) -> np.ndarray:
    """A joint rotation's value ``value``: a unit quaternion, or an error naming the
    constraint."""
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


def relative_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a⁻¹ ⊗ b`` of host quaternions (R, 4)."""
    return spatial.quat_multiply(np, spatial.quat_conjugate(np, a.T), b.T).T


def log(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (R, 3) of host unit quaternions (R, 4)."""
    return spatial.quat_log(np, q.T).T
