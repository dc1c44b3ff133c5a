"""Recursive multi-body dynamics of strand forests: kinematics, residual, articulated-body solve.

Every pass runs one vectorised operation per depth level over all strands (see :mod:`.model`).
Spatial quantities of a tree are world-oriented and referred to the tree's base origin at the
end of the step (see the glossary in :mod:`.spatial`), so a spatial vector moves from a link to
its parent unchanged: forward passes are prefix sums down the tree and backward passes are sums
up the tree. Arrays are component-major: ``(6, N)``, ``(3, 3, N)``, …

What does not depend on a link's parent is computed for the whole forest at once; the loops over
depth levels keep only the truly sequential steps, few operations each, on parents addressed by
slices where the layout allows (``Model.level_parent_slice``). Per-level operations on a thousand
strands cost NumPy about as much in call overhead as in arithmetic, so the operation count of the
level loops, not the arithmetic, sets the speed.

Contracts
---------
- :func:`forward_kinematics` — joint rotations and base poses -> link frames (``oR``, ``op``).
- :func:`inverse_dynamics` — the residual of the paper's Algorithm 1 (recursive Newton–Euler,
  spherical joints, branches): joint torques ``M(q) wdot + c(q, w) - tau_external``.
- :func:`joint_torques` — spring (paper eq. 18), damping and pose (posable dynamics) torques at
  the joints.
- :func:`factorize` / :func:`solve` — articulated-body solution of ``(M(q) + A) x = b`` with
  joint-local 3x3 blocks ``A`` folded into each joint's articulated inertia; linear time.
- :func:`link_velocities` — link frames and spatial velocities at a configuration.
- :func:`joint_load` — joint torques equivalent to spatial forces on links (constraint loads).
- :func:`tree_sum` / :func:`tree_max` — per-tree reductions (the Newton iteration's per-tree
  convergence test and acceleration).
- :func:`tree_part` — a model of some trees with a workspace of its own, gathered from the
  whole's (a few trees' iterations then cost what those trees do).
- :class:`DenseTrees` — the matrix that :func:`factorize` factorises, as one dense block per
  tree, for models of a few small trees (:func:`dense_pays`), whose level passes cost more
  than their arithmetic.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import spatial
from .model import Model, select_trees
from .spatial import add_cross, cross, dot, matmul, matTvec, matvec, small_batch
from .state import Control


@dataclass(eq=False)
class Data:
    """Preallocated workspace of one model; results of every pass land here. What a step leaves
    for the next lives in :class:`.state.State` and :class:`.state.StepMemory`, not here.

    Attributes (component-major, level-major, ``N = n_links``)
    ----------
    orientation : (4, N) world orientation of each link frame, unit quaternion
    oR : (3, 3, N) world rotation of each link frame
    op : (3, N) world position of each joint, m (after :func:`forward_kinematics`)
    r : (3, N) joint position relative to the tree's reference point, m
    c : (3, N) centre of mass relative to the tree's reference point, m
    v, a, f : (6, N) spatial velocity, acceleration and force ``[angular; linear]``; after
        :func:`inverse_dynamics`, ``f`` is the force each link's subtree receives through its joint
    tau : (3, N) joint torques of inverse dynamics, link frame, N·m
    joint_velocity : (6, N) ``S w`` of the last :func:`inverse_dynamics`
    S : (6, 3, N) joint motion subspaces
    UDinv : (6, 3, N) ``U Dinv = IA S Dinv`` (``IA`` need not be symmetric)
    DinvWt : (3, 6, N) ``Dinv Wᵀ = Dinv Sᵀ IA``
    Dinv : (3, 3, N) inverse joint-space articulated inertias
    IA : (6, 6, N) articulated inertias, in the memory of ``UDinv`` and ``DinvWt``:
        :func:`factorize` consumes them level by level from the tips and writes each level's
        factors over them (36 floats a link fewer, a quarter of the workspace)
    pA : (6, N) articulated bias forces of a solve
    u : (3, N) joint-space bias of a solve
    x : (3, N) solution of a solve
    solve_a : (6, N) spatial accelerations of a solve
    tree_update : (n_trees,) largest joint-velocity update of each tree in the last Newton
        iteration of the last implicit step, rad/s
    plain_trees : (n_trees,) bool, the trees whose part of the last factorisation is the
        implicit step's Newton matrix without the velocity derivative (the constrained ones of
        the last implicit step), which the constraint pass reuses
    tension : (N,) geometric stiffness of each link's tension, N·m/rad
        (:func:`tension_stiffness`), as the implicit step last took it into a link's Newton
        matrix; the constraint pass's factorisations take the same
    """

    orientation: Any
    oR: Any
    op: Any
    r: Any
    c: Any
    v: Any
    a: Any
    f: Any
    tau: Any
    joint_velocity: Any
    S: Any
    UDinv: Any
    DinvWt: Any
    Dinv: Any
    IA: Any
    pA: Any
    u: Any
    x: Any
    solve_a: Any
    tree_update: Any
    plain_trees: Any
    tension: Any

    # The fields that forward kinematics, link velocities and energy use: all of the workspace
    # that a simulation stepped by worker processes keeps.
    KINEMATICS = ("orientation", "oR", "op", "r", "c", "v", "tree_update")

    @classmethod
    def for_model(cls, model: Model, kinematics_only: bool = False) -> Data:
        """Allocate the workspace once per model; with ``kinematics_only`` only the fields in
        :attr:`KINEMATICS` (the others are None), a fifth of the memory."""
        xp, dtype, n = model.xp, model.backend.float, model.n_links

        def empty(*shape: int) -> Any:
            return xp.zeros((*shape, n), dtype=dtype)

        shapes = {
            "orientation": (4,), "oR": (3, 3), "op": (3,), "r": (3,), "c": (3,), "v": (6,),
            "a": (6,), "f": (6,), "tau": (3,), "joint_velocity": (6,), "S": (6, 3),
            "Dinv": (3, 3), "pA": (6,), "u": (3,), "x": (3,), "solve_a": (6,), "tension": (),
        }  # fmt: skip
        kept = cls.KINEMATICS if kinematics_only else (*shapes, "tree_update")
        fields = {name: empty(*shape) if name in kept else None for name, shape in shapes.items()}
        factors = None if kinematics_only else empty(36)
        fields["IA"] = None if factors is None else factors.reshape(6, 6, n)
        fields["UDinv"] = None if factors is None else factors[:18].reshape(6, 3, n)
        fields["DinvWt"] = None if factors is None else factors[18:].reshape(3, 6, n)
        fields["tree_update"] = xp.zeros(model.n_trees, dtype=dtype)
        fields["plain_trees"] = xp.zeros(model.n_trees, dtype=bool)
        return cls(**fields)


# --- addressing parents -------------------------------------------------------------------------


def _base_values(model: Model, values: Any) -> Any:
    """Per depth-0 link, its base's entry of ``values`` (..., T); broadcastable (..., n_trees)."""
    if model.n_bases == 1:
        return values[..., :1]
    return values[..., model.level_base]


def _parent_values(model: Model, values: Any, depth: int) -> Any:
    """``values`` (..., N) at the parents of the links of level ``depth >= 1``."""
    parents = model.level_parent_slice[depth]
    if parents is None:
        parents = model.level_parent[depth]
    return values[..., parents]


def _tail_parent_values(model: Model, values: Any) -> Any:
    """``values`` (..., N) at the parent of every link below depth 0: (..., N - n_trees)."""
    if model.parent_shift:
        return values[..., : model.n_links - model.n_trees]
    return values[..., model.link_parent_tail]


def _accumulate_down(model: Model, increments: Any, root_values: Any, out: Any) -> None:
    """Prefix sum down the forest: ``out[:, i] = out[:, parent(i)] + increments[:, i]``.

    ``root_values`` (C, T) is each base's value, or None for zero; ``out`` may be ``increments``.
    """
    xp = model.xp
    level = model.level_slices[0]
    if root_values is not None:
        xp.add(_base_values(model, root_values), increments[..., level], out=out[..., level])
    elif out is not increments:
        out[..., level] = increments[..., level]
    for depth in range(1, model.n_levels):
        level = model.level_slices[depth]
        xp.add(_parent_values(model, out, depth), increments[..., level], out=out[..., level])


def _accumulate_up(model: Model, values: Any, combine: Any = None) -> None:
    """Combine every link's value into its ancestors', in place (deepest level first).

    ``values`` (..., n) holds the first ``n`` links, a whole number of levels (the links below
    hold nothing to combine). ``combine`` is a binary ufunc of the backend (default ``add``;
    ``maximum`` for tree maxima).
    """
    xp = model.xp
    combine = xp.add if combine is None else combine
    for depth in range(model.depth_of(values.shape[-1] - 1), 0, -1):
        level = model.level_slices[depth]
        parents = model.level_parent_slice[depth]
        if parents is not None:
            target = values[..., parents]
            combine(target, values[..., level], out=target)
            continue
        children_values = values[..., level]
        for children, parents in model.child_rounds[depth]:
            values[..., parents] = combine(values[..., parents], children_values[..., children])


def tree_sum(model: Model, values: Any) -> Any:
    """Sum of ``values`` (C, N) over the links of each tree: (C, n_trees).

    The order of summation depends only on the tree itself (from its tips to its root), so a
    tree's sums do not change when other trees are added to or removed from the model, nor with
    the model's layout.
    """
    if model.parent_shift and model.n_links % model.n_trees == 0:
        # Tip first, a level at a time, as _accumulate_up adds up a chain: a sum along the
        # levels would add a lone tree's (contiguous) values in another order than many trees'.
        levels = values.reshape(values.shape[0], -1, model.n_trees)
        total = levels[:, -1].copy()
        for level in range(levels.shape[1] - 2, -1, -1):
            total += levels[:, level]
        return total
    total = values.copy()
    _accumulate_up(model, total)
    return total[:, : model.n_trees]


def tree_max(model: Model, values: Any) -> Any:
    """Largest of ``values`` (N,) over the links of each tree: (n_trees,)."""
    if model.parent_shift and model.n_links % model.n_trees == 0:
        return values.reshape(-1, model.n_trees).max(axis=0)
    largest = values.copy()
    _accumulate_up(model, largest, model.xp.maximum)
    return largest[: model.n_trees]


# --- kinematics and inverse dynamics ------------------------------------------------------------


def _link_frames(model: Model, data: Data, q: Any, base_rotation: Any) -> None:
    """World frames of all links -> ``data.oR``, and joint positions relative to their tree's base
    origin -> ``data.r``.

    Orientations are composed as quaternions level by level (a quarter of the work of 3x3
    products) and turned into matrices once; joint positions are then a prefix sum of each
    parent's rotation applied to the joint offset.
    """
    xp = model.xp
    orientation = data.orientation
    level = model.level_slices[0]
    base_orientation = _base_values(model, spatial.matrix_to_quat(xp, base_rotation))
    spatial.quat_multiply(xp, base_orientation, q[:, level], out=orientation[:, level])
    for depth in range(1, model.n_levels):
        level = model.level_slices[depth]
        parent = _parent_values(model, orientation, depth)
        spatial.quat_multiply(xp, parent, q[:, level], out=orientation[:, level])
    spatial.quat_to_matrix(xp, orientation, out=data.oR)
    n_trees = model.n_trees
    offset = model.joint_offset
    data.r[:, :n_trees] = matvec(xp, base_rotation[:, :, model.level_base], offset[:, :n_trees])
    data.r[:, n_trees:] = matvec(xp, _tail_parent_values(model, data.oR), offset[:, n_trees:])
    _accumulate_down(model, data.r, None, data.r)


def forward_kinematics(
    model: Model, data: Data, q: Any, base_rotation: Any, base_position: Any
) -> None:
    """World frames of all links from joint rotations and base poses -> ``data.oR``, ``data.op``
    (and ``data.r``, the joint positions relative to each tree's base origin)."""
    _link_frames(model, data, q, base_rotation)
    data.op[...] = data.r + base_position[:, model.link_base]


def end_displacements(model: Model, data: Data, turns: Any) -> Any:
    """How far each link's end (3, N), m, moves to first order when every joint turns further
    by the small rotation ``turns`` (3, N), rad, in its link's frame, at the configuration of
    the last kinematics in ``data``: the sum over the link and its ancestors ``j`` of
    ``e_j × (end − r_j)``, ``e_j`` the turn in world axes and ``r_j`` the joint's position."""
    xp = model.xp
    world = matvec(xp, data.oR, turns)
    ends = data.r + data.oR[:, 1] * model.length
    moments = cross(xp, world, data.r)
    _accumulate_down(model, world, None, world)
    _accumulate_down(model, moments, None, moments)
    return cross(xp, world, ends) - moments


def _centres_of_mass(model: Model, data: Data) -> None:
    """Centres of mass relative to each tree's reference point -> ``data.c``."""
    data.c[...] = data.r + data.oR[:, 1] * (0.5 * model.length)


def base_spatial_motion(model: Model, control: Control) -> tuple[Any, Any]:
    """Spatial velocity and acceleration (6, T) of each base about its own origin, gravity included.

    Gravity enters once, as an upward acceleration of every base (as in Pinocchio's RNEA), so no
    per-link gravity force is needed. The spatial acceleration's linear part is the time
    derivative of the velocity field at the fixed reference point: ``a_origin - omega × v_origin``.
    """
    xp = model.xp
    omega, velocity = control.base_angular_velocity, control.base_linear_velocity
    v0 = xp.concatenate((omega, velocity))
    linear = control.base_linear_acceleration - cross(xp, omega, velocity) - control.gravity
    return v0, xp.concatenate((control.base_angular_acceleration, linear))


def _joint_motion(model: Model, data: Data, w: Any) -> Any:
    """``S w`` (6, N) for joint velocities ``w`` (3, N) in link frames."""
    xp = model.xp
    omega = matvec(xp, data.oR, w)
    return xp.concatenate((omega, cross(xp, data.r, omega)))


def inverse_dynamics(model: Model, data: Data, q: Any, w: Any, wdot: Any, control: Control) -> Any:
    """Joint torques that realise ``wdot`` at ``(q, w)`` under the control's base motion and forces.

    The paper's Algorithm 1 for spherical joints and branches: forward pass for spatial
    velocities and accelerations, link forces, backward pass summing forces into parents,
    projection onto each joint. Returns ``data.tau`` (3, N), link frames, N·m; it equals
    ``M(q) wdot + c(q, w) - tau_gravity - tau_drag - tau_external`` (with the strand
    interaction's damping and push, :mod:`.interaction`, and the constraint forces held from the
    last step, :mod:`.constraints`, among the external forces).
    """
    xp = model.xp
    _link_frames(model, data, q, control.base_rotation)
    _centres_of_mass(model, data)
    oR, r, c, v, a, f = data.oR, data.r, data.c, data.v, data.a, data.f
    v0, a0 = base_spatial_motion(model, control)

    # Joint velocities S w = [omega_j; r × omega_j], summed down the tree into v.
    joint_velocity = data.joint_velocity
    joint_velocity[:3] = matvec(xp, oR, w)
    cross(xp, r, joint_velocity[:3], out=joint_velocity[3:])
    _accumulate_down(model, joint_velocity, v0, v)
    omega, u = v[:3], v[3:]
    # Acceleration increments S wdot + v × S w, with alpha_j = R wdot:
    # [alpha_j + omega × omega_j; r × alpha_j + omega × u_j + u × omega_j], summed in place.
    a[:3] = matvec(xp, oR, wdot)
    cross(xp, r, a[:3], out=a[3:])
    add_cross(xp, a[:3], omega, joint_velocity[:3])
    add_cross(xp, a[3:], omega, joint_velocity[3:])
    add_cross(xp, a[3:], u, joint_velocity[:3])
    _accumulate_down(model, a, a0, a)
    alpha, a_linear = a[:3], a[3:]

    # Link forces at the centres of mass: m a_c + drag·ℓ (v_c - wind) - f_external.
    com_velocity = cross(xp, omega, c)
    com_velocity += u
    force = f[3:]
    cross(xp, alpha, c, out=force)
    force += a_linear
    add_cross(xp, force, omega, com_velocity)
    force *= model.mass
    if control.interaction_damping is not None:
        # Strand interaction: damping toward the hair's velocity around the link, and the push.
        force += control.interaction_damping * (com_velocity - control.interaction_velocity)
        force -= control.interaction_force
    com_velocity -= control.wind_velocity
    com_velocity *= control.drag * model.length
    force += com_velocity
    force -= control.external_force
    if control.constraint_force is not None:
        # Held constraint forces (constraints module): at the centre of mass, and their moment
        # about it from the points they act at along the link.
        force -= control.constraint_force
    # Moment about the centre of mass, I_c alpha + omega × I_c omega, in the principal frame,
    # then about the reference point.
    moment = matTvec(xp, oR, alpha)
    moment *= model.inertia
    omega_local = matTvec(xp, oR, omega)
    add_cross(xp, moment, omega_local, model.inertia * omega_local)
    f[:3] = matvec(xp, oR, moment)
    add_cross(xp, f[:3], c, force)
    if control.constraint_force is not None:
        f[:3] -= cross(xp, oR[:, 1], control.constraint_lever)

    _accumulate_up(model, f)
    data.tau[...] = _project_on_joints(model, data, f)
    return data.tau


def _project_on_joints(model: Model, data: Data, subtree_force: Any) -> Any:
    """``Sᵀ f`` (3, n): the moment of each subtree's force (6, n) about its joint, link frame, for
    the first ``n`` links."""
    xp = model.xp
    n = subtree_force.shape[-1]
    moment = cross(xp, subtree_force[3:], data.r[:, :n])
    moment += subtree_force[:3]
    return matTvec(xp, data.oR[..., :n], moment)


def joint_load(model: Model, data: Data, link_force: Any) -> Any:
    """Joint torques (3, n), link frames, N·m, equivalent to spatial forces (6, n) on the first
    ``n`` links, a whole number of levels (``n = N``, or fewer when the deeper links carry no
    force: their torques are zero and are left out).

    ``link_force`` is world-oriented about each tree's reference point (``[moment; force]``); each
    joint carries the forces on its link and all links below it. Uses the link frames of the last
    :func:`forward_kinematics` (or :func:`inverse_dynamics`). The power of the forces on joint
    velocities ``w`` is ``Σ joint_load · w``, so it is also the transpose of the map from joint
    velocities to the links' spatial velocities.
    """
    subtree_force = link_force.copy()
    _accumulate_up(model, subtree_force)
    return _project_on_joints(model, data, subtree_force)


# --- joint springs and damping ------------------------------------------------------------------


def joint_damping(model: Model, control: Control) -> Any:
    """Joint damping coefficients (3, N) about the link-frame axes, N·m·s/rad: the strand's own,
    plus the pose damping while a target pose is set."""
    bend = control.bend_damping / model.joint_length
    twist = control.twist_damping / model.joint_length
    if control.pose_rotation is not None:
        pose = control.pose_damping / model.joint_length
        bend = bend + pose
        twist = twist + pose
    return model.xp.stack((bend, twist, bend))


def _springs(model: Model, control: Control) -> list[tuple[Any, Any, Any, Any]]:
    """Every spring acting at the joints as ``(reference rotation (4, N), K_x, K_z, K_t)``, the
    stiffnesses (N,) in N·m/rad: the strand's elasticity towards its rest rotation and, while a
    target pose is set, the pose spring towards it (the same law, isotropic)."""
    length = model.joint_length
    springs = [
        (
            model.rest_rotation,
            control.bend_stiffness[0] / length,
            control.bend_stiffness[1] / length,
            control.twist_stiffness / length,
        )
    ]
    if control.pose_rotation is not None:
        pose = control.pose_strength / length
        springs.append((control.pose_rotation, pose, pose, pose))
    return springs


def _deviation(xp: Any, reference: Any, q: Any) -> Any:
    """Rotation of each joint away from a reference rotation, ``reference⁻¹ ⊗ q`` (4, N)."""
    return spatial.quat_multiply(xp, spatial.quat_conjugate(xp, reference), q)


def _spring_torque(xp: Any, deviation: Any, k_x: Any, k_z: Any, k_t: Any) -> Any:
    """Spring torques (3, ..., N) of joint deviations (4, ..., N), link frame, N·m (paper eq. 18).

    The deviation is split ``twist ⊗ swing`` (twist about y, then swing about an axis ``b`` in
    the cross-section). With ``p = (w, x, y, z)`` the deviation (unit, ``w >= 0``) and
    ``n = |(w, y)|``, the twist is ``(w, 0, y, 0) / n`` and the swing ``(n, (wx - yz)/n, 0,
    (wz + xy)/n)``, so both are written out here instead of being formed as quaternions. Bend
    ``-2 (K_x b_x, 0, K_z b_z) tan(theta_b/2)``, twist ``-2 K_t tan(theta_t/2)``; the factor 2
    makes each ``K`` (N,), N·m/rad, the small-angle stiffness. With isotropic bending the torque
    is minus the gradient of the energy ``-4 K_b ln cos(theta_b/2) - 4 K_t ln cos(theta_t/2)``.
    """
    p = spatial.quat_normalize(xp, deviation)
    w, x, y, z = p[0], p[1], p[2], p[3]
    norm = xp.sqrt(w * w + y * y)
    # A swing of exactly pi leaves the twist undefined; any twist is then as good as another, and
    # the swing is the whole deviation.
    degenerate = norm < 1e-12
    safe = xp.where(degenerate, 1.0, norm)
    sw = xp.where(degenerate, w, norm)
    sx = xp.where(degenerate, x, (w * x - y * z) / safe)
    sz = xp.where(degenerate, z, (w * z + x * y) / safe)
    # tan(theta/2) = |vector part| / scalar part; the clamps keep a half-turn finite (the torque
    # is huge there by design: the model resists folding back on itself).
    tan_twist = xp.where(degenerate, 0.0, y / xp.maximum(w, 1e-6 * safe))
    swing_w = xp.maximum(sw, 1e-6)
    twist_scale = (-2.0 * k_t) * tan_twist
    # The twist torque is minus the gradient of the twist energy -4 K_t ln cos(theta_t/2) (the
    # integral of eq. 18) with respect to the joint's rotation: theta_t changes by (sz/n, 1,
    # -sx/n) per unit rotation about the child's axes. Applying tan(theta_t/2) about the twist
    # axis R(swing)^T y instead, as a torque, is not a gradient once the joint also bends: past
    # a quarter turn of swing its axial part even reverses, and it feeds energy into a bent and
    # twisted strand until it blows up, at any step size.
    return xp.stack(
        (
            (-2.0 / swing_w) * k_x * sx + twist_scale * (sz / swing_w),
            twist_scale,
            (-2.0 / swing_w) * k_z * sz - twist_scale * (sx / swing_w),
        )
    )


def joint_torques(model: Model, control: Control, q: Any, w: Any) -> Any:
    """Spring and damping torques (3, N) acting on each link at its joint, link frame, N·m.

    Springs follow the paper's eq. 18 on the deviation from the rest rotation, split as
    ``twist ⊗ swing`` (twist about y, then swing about an axis ``b`` in the cross-section): bend
    ``-2 K_b(b) tan(theta_b/2)``, twist ``-2 K_t tan(theta_t/2)``; the factor 2 makes ``K`` the
    small-angle stiffness, ``K = rigidity / joint_length``. While a target pose is set, posable
    dynamics adds the same law on the deviation from the target rotation with
    ``K = pose_strength / joint_length`` about every axis, and the pose damping
    ``-(pose_damping / joint_length) (w - pose_velocity)``.
    """
    torque = -joint_damping(model, control) * w
    # In pieces: the closed form makes about twenty-five floats of temporaries per link, and a
    # residual is evaluated while the Newton iteration holds its own.
    _add_springs(model, control, q, _spring_torque, torque)
    if control.pose_rotation is not None:
        torque += (control.pose_damping / model.joint_length) * control.pose_velocity
    return torque


def spring_tangent_stiffness(model: Model, control: Control, q: Any) -> Any:
    """``-dQ_spring/dtheta`` (3, 3, N) for rotations ``q ⊗ exp(theta)``, N·m/rad.

    Each joint's springs depend on its own rotation only, so the tangent is joint-local: entry
    ``[i, k]`` is minus the derivative of torque component ``i`` along rotation axis ``k``. It is
    computed over ``SPRING_CHUNK`` links at a time: its closed form makes about seventy floats of
    temporaries per link, the largest of any pass of the step.
    """
    stiffness = model.xp.zeros((3, 3, model.n_links), dtype=model.backend.float)
    _add_springs(model, control, q, _spring_tangent, stiffness)
    return stiffness


def _add_springs(
    model: Model, control: Control, q: Any, term: Callable[..., Any], out: Any
) -> None:
    """Add ``term(xp, deviation, k_x, k_z, k_t)`` of every spring (the rest shape's, and the
    target pose's while one is set) at rotations ``q`` into ``out`` (..., N), over
    :data:`SPRING_CHUNK` links at a time."""
    xp = model.xp
    springs = _springs(model, control)
    for start in range(0, model.n_links, SPRING_CHUNK):
        links = slice(start, start + SPRING_CHUNK)
        for reference, k_x, k_z, k_t in springs:
            deviation = _deviation(xp, reference[:, links], q[:, links])
            out[..., links] += term(xp, deviation, k_x[links], k_z[links], k_t[links])


# Links per piece of the spring torques and their tangent: the tangent's temporaries stay near
# 20 MB (float64), and pieces this large keep the per-call cost of the array operations
# negligible.
SPRING_CHUNK = 1 << 15


def _spring_tangent(xp: Any, deviation: Any, k_x: Any, k_z: Any, k_t: Any) -> Any:
    """Minus the derivative (3, 3, N) of :func:`_spring_torque` with respect to rotations of the
    child, ``deviation ⊗ exp(theta)``, in closed form.

    The quaternion moves along ``dp/dtheta_k = p ⊗ (0, e_k) / 2`` (tangent to the unit sphere,
    so the normalisation does not move); the three directions are carried through every
    intermediate of the torque at once, with its clamps and its degenerate branch.
    """
    p = spatial.quat_normalize(xp, deviation)
    w, x, y, z = p[0], p[1], p[2], p[3]
    # d(w, x, y, z) along theta_x, theta_y, theta_z: each (3, N).
    dw = -0.5 * xp.stack((x, y, z))
    dx = 0.5 * xp.stack((w, -z, y))
    dy = 0.5 * xp.stack((z, w, -x))
    dz = 0.5 * xp.stack((-y, x, w))
    norm = xp.sqrt(w * w + y * y)
    degenerate = norm < 1e-12
    safe = xp.where(degenerate, 1.0, norm)
    d_norm = (w * dw + y * dy) / safe
    sw = xp.where(degenerate, w, norm)
    sx = xp.where(degenerate, x, (w * x - y * z) / safe)
    sz = xp.where(degenerate, z, (w * z + x * y) / safe)
    d_sw = xp.where(degenerate, dw, d_norm)
    d_sx = xp.where(degenerate, dx, (dw * x + w * dx - dy * z - y * dz - sx * d_norm) / safe)
    d_sz = xp.where(degenerate, dz, (dw * z + w * dz + dx * y + x * dy - sz * d_norm) / safe)
    clamped = w < 1e-6 * safe
    denominator = xp.where(clamped, 1e-6 * safe, w)
    tan_twist = xp.where(degenerate, 0.0, y / denominator)
    d_denominator = xp.where(clamped, 1e-6 * d_norm, dw)
    d_tan_twist = xp.where(degenerate, 0.0, (dy - tan_twist * d_denominator) / denominator)
    swing_w = xp.maximum(sw, 1e-6)
    d_swing_w = xp.where(sw > 1e-6, d_sw, 0.0)
    twist_scale = (-2.0 * k_t) * tan_twist
    d_twist_scale = (-2.0 * k_t) * d_tan_twist
    torque_x = ((-2.0 * k_x) * sx + twist_scale * sz) / swing_w
    torque_z = ((-2.0 * k_z) * sz - twist_scale * sx) / swing_w
    d_torque_x = (
        (-2.0 * k_x) * d_sx + d_twist_scale * sz + twist_scale * d_sz - torque_x * d_swing_w
    ) / swing_w
    d_torque_z = (
        (-2.0 * k_z) * d_sz - d_twist_scale * sx - twist_scale * d_sx - torque_z * d_swing_w
    ) / swing_w
    return -xp.stack((d_torque_x, d_twist_scale, d_torque_z))


# --- the articulated-body factorisation and solve -----------------------------------------------


def inverse3(xp: Any, m: Any) -> Any:
    """Inverses of (3, 3, ...) matrices by the adjugate (exact, branch-free, any backend); at
    once for a few matrices on NumPy (:func:`.spatial.small_batch`), else entry by entry, which
    rounds alike."""
    if small_batch(xp, m[0, 0].size):
        cofactors = _cofactors(xp, xp.moveaxis(m, (0, 1), (-2, -1)))
        determinant = xp.add.reduce(m[0] * xp.moveaxis(cofactors[..., 0, :], -1, 0), axis=0)
        return xp.moveaxis(cofactors, (-1, -2), (0, 1)) * (1.0 / determinant)
    a, b, c = m[0, 0], m[0, 1], m[0, 2]
    d, e, f = m[1, 0], m[1, 1], m[1, 2]
    g, h, i = m[2, 0], m[2, 1], m[2, 2]
    minor_a, minor_b, minor_c = e * i - f * h, f * g - d * i, d * h - e * g
    adjugate = xp.stack(
        (
            xp.stack((minor_a, c * h - b * i, b * f - c * e)),
            xp.stack((minor_b, a * i - c * g, c * d - a * f)),
            xp.stack((minor_c, b * g - a * h, a * e - b * d)),
        )
    )
    return adjugate * (1.0 / (a * minor_a + b * minor_b + c * minor_c))


def _cofactors(xp: Any, a: Any) -> Any:
    """Cofactors of (..., 3, 3) matrices, read off the matrix extended cyclically to 5 × 5 (the
    cyclic order carries the signs)."""
    wide = xp.concatenate((a, a[..., :2, :]), axis=-2)
    wide = xp.concatenate((wide, wide[..., :2]), axis=-1)
    return wide[..., 1:4, 1:4] * wide[..., 2:5, 2:5] - wide[..., 1:4, 2:5] * wide[..., 2:5, 1:4]


def _link_inertia(
    model: Model,
    data: Data,
    control: Control | None,
    h: float | Any,
    out: Any,
    tension: Any = None,
) -> None:
    """Each link's world spatial inertia about its tree's reference point, plus ``h`` times the
    derivative of its velocity-dependent spatial force with respect to its spatial velocity
    -> ``out`` (6, 6, N).

    The velocity-dependent forces are the gyroscopic ``omega × I omega``, the centripetal
    ``m omega × v_c`` and air drag. Thin strands have a tiny axial inertia, so the gyroscopic
    coupling is stiff; adding ``h`` times its derivative to each link's inertia in the implicit
    step's factorisation (a link-local term, so it enters the articulated-body recursion exactly)
    keeps Newton converging fast on fast-spinning strands. Uses ``data.v``, ``data.c`` and
    ``data.oR`` of the last :func:`inverse_dynamics`; ``h`` is a float or per link (N,), and
    ``h = 0.0`` gives the plain inertia.

    With ``ĉ`` the cross-product matrix of the centre of mass, ``a = m + h·drag`` and
    ``B = a 1 + h m ω̂`` the blocks are ``[[I_c + h (ω̂ I_c - [I_c ω]×) + ĉ C, ĉ B], [C, B]]``,
    ``C = -B ĉ - h m [v_c]×``. The cross section is round, so with the link axis ``y`` the
    inertia about the centre of mass is ``I_c = I_b 1 + (I_a - I_b) y yᵀ`` (bending and axial
    moments) and the gyroscopic term reduces to ``(I_a - I_b) ((ω × y) yᵀ - (y·ω) ŷ)``.
    Expanding the products of cross-product matrices with ``[x]×[y]× = y xᵀ - (x·y) 1`` leaves
    each block an outer product, a cross-product matrix and a diagonal, with ``g = h m ω``,
    ``e = a c + h m v_c``, ``u = (I_a - I_b)(y + h ω × y)`` and
    ``k = (g·c) c - h (I_a - I_b)(y·ω) y``:
    ``[[u yᵀ - e cᵀ + k̂ + (I_b + e·c) 1, g cᵀ + a ĉ - (g·c) 1], [-c gᵀ - ê + (g·c) 1, ĝ + a 1]]``.
    ``tension`` (N,), optional, adds ``tension (1 - y yᵀ)`` to the angular block (the geometric
    stiffness of :func:`tension_stiffness`, times ``h²``): ``u -= tension y``,
    ``I_b += tension``.
    The blocks are assembled in ``out`` directly.
    """
    xp = model.xp
    mass, c, axis = model.mass, data.c, data.oR[:, 1]
    bend, axial = model.inertia[0], model.inertia[1]
    if not isinstance(h, float) or h:
        omega = data.v[:3]
        com_velocity = data.v[3:] + cross(xp, omega, c)
        a = mass + (h * control.drag) * model.length
        if control.interaction_damping is not None:
            a = a + h * control.interaction_damping
    else:
        # The plain inertia does not read the velocities (nor need them to be set).
        omega = com_velocity = xp.zeros_like(c)
        a = mass
    g = (h * mass) * omega
    gc = dot(g, c)
    spin = axial - bend
    u = spin * (axis + h * cross(xp, omega, axis))
    if tension is not None:
        u -= tension * axis
        bend = bend + tension
    e = a * c + (h * mass) * com_velocity
    k = gc * c - (h * spin * dot(axis, omega)) * axis
    angular, linear = slice(0, 3), slice(3, 6)
    xp.subtract(u[:, None] * axis[None], e[:, None] * c[None], out=out[angular, angular])
    _add_skew(out[angular, angular], k)
    _add_diagonal(out[angular, angular], bend + dot(e, c))
    xp.multiply(g[:, None], c[None], out=out[angular, linear])
    _add_skew(out[angular, linear], a * c)
    _add_diagonal(out[angular, linear], -gc)
    xp.multiply(c[:, None], -g[None], out=out[linear, angular])
    _add_skew(out[linear, angular], -e)
    _add_diagonal(out[linear, angular], gc)
    out[linear, linear] = 0.0
    _add_skew(out[linear, linear], g)
    _add_diagonal(out[linear, linear], a)


def tension_stiffness(model: Model, data: Data) -> Any:
    """The geometric stiffness of the loads each link carries, N·m/rad (N,): the tension of the
    strand at the link times its length, from the forces of the last :func:`inverse_dynamics`.

    The joints turn their links, and every load on a link that does not act at its joint (the
    pull of the links below at the child joint, the link's own weight and inertia at its centre
    of mass) turns with it. A load ``F`` at ``ρ`` from the joint, held fixed while the link turns
    by ``δφ``, changes the link's moment about its joint by ``H δφ``, ``H = (F·ρ) 1 -
    ½ (F ρᵀ + ρ Fᵀ)`` (the Hessian of ``-F·exp(δφ) ρ``). On a strand every such ``ρ`` lies along
    the link's axis ``y`` and the loads add up to a pull ``s = Σ F·ρ`` along it, so ``H = s (1 -
    y yᵀ)`` but for the share of each load across the axis, which is left out: a link in
    tension resists turning off its line like a taut string. Compression (``s < 0``, a strand
    standing up, or pushed along its length) would make the Newton matrix indefinite and is left
    out too, so the stiffness is never negative.

    The positions of a strand's links, as a function of their world rotations, are a sum of one
    term per link, so the Hessian of the potential of constant loads in those rotations is this
    block per link; the articulated-body factorisation adds it to each link's inertia exactly
    (:func:`factorize`, ``tension_step``). It is what lets the implicit step's Newton iteration
    converge on soft strands: a hanging chain's tension gives it stiffness ``s/ℓ²`` per unit
    inertia, and for 16 links of soft hair at 96 steps per second ``h² s / (m ℓ²)`` is about 10,
    so a Newton matrix without it leaves an iteration whose updates grow tenfold each time.

    ``data.f`` holds each subtree's force through its joint (what the parent applies), so the
    loads on link ``k`` are ``-f_c`` at each child's joint and ``-(f_k - Σ f_c)`` (its own) at
    its centre of mass: ``s_k = -f_k·(c_k - r_k) - Σ_c f_c·(r_c - c_k)``.
    """
    xp = model.xp
    force, joint, centre = data.f[3:], data.r, data.c
    first = model.n_trees
    from_children = dot(force[:, first:], joint[:, first:] - _tail_parent_values(model, centre))
    pull = -dot(force, centre - joint)
    if model.parent_shift:
        # Each link has at most one child, the link parent_shift places after it.
        pull[: model.n_links - first] -= from_children
    else:
        pull -= xp.bincount(model.link_parent_tail, weights=from_children, minlength=model.n_links)
    return xp.maximum(pull, 0.0)


def _add_skew(block: Any, k: Any) -> None:
    """``block += k̂`` for (3, 3, N) blocks and vectors ``k`` (3, N)."""
    block[0, 1] -= k[2]
    block[0, 2] += k[1]
    block[1, 0] += k[2]
    block[1, 2] -= k[0]
    block[2, 0] -= k[1]
    block[2, 1] += k[0]


def _add_diagonal(block: Any, value: Any) -> None:
    """``block += value 1`` for (3, 3, N) blocks and values (N,)."""
    for axis in range(3):
        block[axis, axis] += value


def factorize(
    model: Model,
    data: Data,
    joint_block: Any,
    link_block: Any = None,
    *,
    velocity_step: float | Any = 0.0,
    control: Control | None = None,
    tension_step: float | Any = 0.0,
) -> None:
    """Articulated-body factorisation of ``M(q) + A + Σ Jᵀ B J`` at the last kinematics.

    ``joint_block`` (3, 3, N) is the joint-local part ``A`` (``h D + h² K`` in the implicit step,
    zeros for forward dynamics), added to each joint's articulated inertia ``Sᵀ IA S``;
    ``link_block`` (6, 6, N), optional, is a link-local part ``B`` added to each link's spatial
    inertia. ``velocity_step = h > 0`` adds ``h`` times the derivative of each link's
    velocity-dependent forces (see :func:`_link_inertia`; needs ``control`` for drag) as such a
    part; it may be given per link (N,), zero where the derivative is left out.
    ``tension_step = h > 0`` adds ``h²`` times the geometric stiffness of the links' tension
    in ``data.tension`` (:func:`tension_stiffness`); it too may be given per link. All enter the
    articulated-body recursion exactly. ``IA`` may then be unsymmetric, so the left and right
    projections ``W = IAᵀ S`` and ``U = IA S`` are kept apart. Fills
    ``data.S``, ``UDinv``, ``DinvWt`` and ``Dinv``; ``data.IA`` is consumed.
    """
    xp = model.xp
    motion_subspaces(model, data)
    IA_links = data.IA
    tension = None
    if not isinstance(tension_step, float) or tension_step:
        tension = (tension_step * tension_step) * data.tension
    _link_inertia(model, data, control, velocity_step, IA_links, tension)
    if link_block is not None:
        IA_links += link_block
    # Per-level workspace, sized for the widest level: the products of small matrices write into
    # it (spatial.matmul) instead of allocating, level after level, arrays that the allocator
    # would map and unmap each time.
    widest = max(level.stop - level.start for level in model.level_slices)
    float_type = model.backend.float
    U_level = xp.empty((6, 3, widest), dtype=float_type)
    UDinv_level = xp.empty((6, 3, widest), dtype=float_type)
    StIA_level = xp.empty((3, 6, widest), dtype=float_type)
    D_level = xp.empty((3, 3, widest), dtype=float_type)
    reduced_level = xp.empty((6, 6, widest), dtype=float_type)
    scratch = xp.empty(6 * 6 * 3 * widest, dtype=float_type)
    for depth in range(model.n_levels - 1, -1, -1):
        level = model.level_slices[depth]
        width = level.stop - level.start
        IA, S = IA_links[:, :, level], data.S[:, :, level]
        St = S.transpose(1, 0, 2)
        U = matmul(xp, IA, S, U_level[:, :, :width], scratch)
        StIA = matmul(xp, St, IA, StIA_level[:, :, :width], scratch)
        D = matmul(xp, St, U, D_level[:, :, :width], scratch)
        D += joint_block[:, :, level]
        Dinv = data.Dinv[:, :, level]
        Dinv[...] = inverse3(xp, D)
        UDinv = matmul(xp, U, Dinv, UDinv_level[:, :, :width], scratch)
        if depth:
            reduced = matmul(xp, UDinv, StIA, reduced_level[:, :, :width], scratch)
            xp.subtract(IA, reduced, out=reduced)
            parents = model.level_parent_slice[depth]
            if parents is not None:
                IA_links[:, :, parents] += reduced
            else:
                for children, parents in model.child_rounds[depth]:
                    IA_links[:, :, parents] += reduced[:, :, children]
        # The level's factors go where its articulated inertias were (Data.IA), now read.
        # Dinv Wᵀ = Dinv Sᵀ IA is kept instead of W: the solve's forward sweep then needs one
        # product per level fewer.
        matmul(xp, Dinv, StIA, data.DinvWt[:, :, level], scratch)
        data.UDinv[:, :, level] = UDinv


# The fields of ``Data`` that hold a factorisation (:func:`factorize`).
@dataclass(frozen=True, eq=False)
class TreePart:
    """A model of some trees of a whole one (:func:`.model.select_trees`) with a workspace of
    its own.

    Attributes
    ----------
    model : Model
    links : (n,) int, host
        The whole's level-major links it holds, in its own link order.
    chosen : (n,) int, device
        The same on the model's backend, to gather the whole's per-link arrays with.
    data : Data
    """

    model: Model
    links: np.ndarray
    chosen: Any
    data: Data


def tree_part(model: Model, data: Data, trees: np.ndarray, gathered: tuple = ()) -> TreePart:
    """The model of ``trees`` (host indices, sorted) of ``model``, its workspace holding the
    whole's fields ``gathered`` (names of :class:`Data` fields) at its links. A tree's step
    depends only on the tree, so it steps in a part as it would in the whole."""
    part, links = select_trees(model, trees)
    chosen = model.backend.from_host(links)
    part_data = Data.for_model(part)
    for name in gathered:
        setattr(part_data, name, getattr(data, name)[..., chosen])
    return TreePart(part, links, chosen, part_data)


FACTORS = ("S", "UDinv", "DinvWt", "Dinv")
# A model whose depth levels hold at most this many links is factorised whole even for a few of
# its trees: its passes cost their per-level operations, not their arithmetic, so a model of
# those trees would cost as much to factorise, and building it more (100 strands of 16 links:
# 1.9 ms for the whole against 1.6 ms for one tree and 0.35 ms to select it).
NARROW_LEVEL = 128


def parts_pay(model: Model) -> bool:
    """Whether a pass over a model of a few of ``model``'s trees costs less than one over the
    whole: its depth levels are wider than :data:`NARROW_LEVEL`."""
    return max(stop - start for start, stop in model.level_bounds) > NARROW_LEVEL


def factorize_trees(
    model: Model,
    data: Data,
    trees: Any,
    joint_block: Any,
    link_block: Any = None,
    *,
    velocity_step: float | Any = 0.0,
    control: Control | None = None,
    tension_step: float | Any = 0.0,
) -> None:
    """:func:`factorize` again for some trees only (``trees``, (T,) bool on the device), at the
    last kinematics in ``data``, the other trees' factors left as they are: on a model of just
    those trees (:func:`.model.select_trees`) when they are fewer than half the forest and its
    levels are wider than :data:`NARROW_LEVEL`, on the whole forest with the others' factors
    restored otherwise. A tree's factors depend only on the tree, so both give the same
    factors.

    ``joint_block`` (3, 3, N), ``link_block`` (6, 6, N) or None and a per-link ``velocity_step``
    or ``tension_step`` are the whole model's; the other arguments are :func:`factorize`'s."""
    backend = model.backend
    chosen_trees = np.nonzero(backend.to_host(trees))[0]
    if not len(chosen_trees):
        return
    options = {"velocity_step": velocity_step, "control": control, "tension_step": tension_step}
    if 2 * len(chosen_trees) >= model.n_trees or not parts_pay(model):
        kept = ~trees[model.link_tree]
        saved = {name: getattr(data, name)[..., kept] for name in FACTORS}
        factorize(model, data, joint_block, link_block, **options)
        for name in FACTORS:
            getattr(data, name)[..., kept] = saved[name]
        return
    part = tree_part(model, data, chosen_trees, ("oR", "r", "c", "v", "tension"))
    chosen = part.chosen
    for name in ("velocity_step", "tension_step"):
        if not isinstance(options[name], float):
            options[name] = options[name][chosen]
    if control is not None:
        options["control"] = control.at_links(chosen)
    factorize(
        part.model,
        part.data,
        joint_block[..., chosen],
        None if link_block is None else link_block[..., chosen],
        **options,
    )
    for name in FACTORS:
        getattr(data, name)[..., chosen] = getattr(part.data, name)


# A model of trees of at most this many links is solved densely (:class:`DenseTrees`) when its
# trees' dense blocks hold at most :data:`DENSE_ENTRIES` numbers (:data:`DENSE_ENTRIES_BLOCKED`
# where the solve is :func:`_block_lu`'s): a pass over its levels costs its per-level operations
# whatever the trees' count, while a batched dense solve of a few small trees costs their
# arithmetic. Measured on trees of 25 links (docs/performance.md): LAPACK's solve on one thread
# beats the sweeps up to 20-odd trees, the block factorisation up to 12 or so.
DENSE_LINKS = 48
DENSE_ENTRIES = 200_000
DENSE_ENTRIES_BLOCKED = 60_000


def dense_pays(model: Model) -> bool:
    """Whether :class:`DenseTrees` solves ``model`` for less than :func:`factorize` and
    :func:`solve` would: on the NumPy backend (on a GPU the sweeps stay, not measured there),
    its trees small and few (:data:`DENSE_LINKS`, :data:`DENSE_ENTRIES`, or
    :data:`DENSE_ENTRIES_BLOCKED` where the BLAS is threaded, :func:`single_threaded_blas`)."""
    if model.backend.name != "numpy":
        return False
    largest = int(np.bincount(model.host_link_tree).max())
    entries = model.n_trees * (3 * largest) ** 2
    return largest <= DENSE_LINKS and entries <= (
        DENSE_ENTRIES if single_threaded_blas() else DENSE_ENTRIES_BLOCKED
    )


def single_threaded_blas() -> bool:
    """Whether the process's BLAS was told to run on one thread, as the engine's worker
    processes are (:data:`.workers.ONE_THREAD`). Then :class:`DenseTrees` solves by LAPACK;
    elsewhere by :func:`_block_lu`, as OpenBLAS's LAPACK routines wake its threads, which spin
    where other work holds the cores (a 75 × 75 solve took 27 ms beside a busy process, against
    0.14 ms alone, and a 3 × 3 inverse 8 ms against 8 µs). The engine leaves its host's threads
    as they are."""
    return "1" in (os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"))


@dataclass(frozen=True, eq=False)
class DenseLayout:
    """Where a model's links lie in its trees' dense blocks (:class:`DenseTrees`): each tree's
    links padded to the largest tree's ``size``, link-major.

    Attributes
    ----------
    slot : (N,) int
        Each link's row in the padded layout (trees × size), ``tree · size + k`` with ``k``
        its place in its tree (level-major: a tree's links come root first, each after its
        parent).
    size : int
        The largest tree's link count.
    ancestry : (T, size, size) float
        1 where joint ``j`` moves link ``k`` (``j`` is ``k`` or an ancestor of it).
    above, below : (T, 3 size, 3 size) float
        1 in the blocks ``(i, j)`` of joint velocities where joint ``i`` is ``j`` or an
        ancestor of it (``above``), where ``j`` is a strict ancestor of ``i`` (``below``).
    """

    slot: Any
    size: int
    ancestry: Any
    above: Any
    below: Any

    @classmethod
    def of(cls, model: Model) -> DenseLayout:
        """``model``'s layout."""
        backend = model.backend
        parent, tree = model.host_link_parent, model.host_link_tree
        order = np.argsort(tree, kind="stable")
        place = np.empty(model.n_links, dtype=np.int64)
        place[order] = np.arange(model.n_links) - np.searchsorted(tree[order], tree[order])
        size = int(place.max()) + 1
        ancestry = np.zeros((model.n_trees, size, size))
        joint = np.arange(model.n_links)
        while True:
            reached = joint >= 0
            if not reached.any():
                break
            ancestry[tree[reached], place[reached], place[joint[reached]]] = 1.0
            joint[reached] = parent[joint[reached]]

        def blocks(mask: np.ndarray) -> Any:
            return backend.from_host(np.repeat(np.repeat(mask, 3, axis=1), 3, axis=2))

        strictly = ancestry * (1.0 - np.eye(size))
        return cls(
            backend.from_host(tree * size + place),
            size,
            backend.from_host(ancestry),
            blocks(ancestry.transpose(0, 2, 1)),
            blocks(strictly),
        )

    def padded(self, model: Model, values: Any, fill: Any = None) -> Any:
        """(..., N) per-link values as (T, size, ...): zero at the padding, or ``fill``."""
        xp = model.xp
        shape = values.shape[:-1]
        out = xp.zeros((model.n_trees * self.size, *shape), dtype=values.dtype)
        if fill is not None:
            out[...] = fill
        out[self.slot] = xp.moveaxis(values, -1, 0)
        return out.reshape(model.n_trees, self.size, *shape)

    def per_link(self, values: Any) -> Any:
        """(T, size, C) values in the padded layout as (C, N) per link."""
        return values.reshape(-1, values.shape[-1])[self.slot].T


@dataclass(eq=False)
class DenseTrees:
    """The matrix ``M + A + Σ Jᵀ B J`` of :func:`factorize`, every tree's as one dense block
    over its joint velocities (:class:`DenseLayout`): for a model of a few small trees, whose
    level passes cost their per-level operations rather than their arithmetic
    (:func:`dense_pays`), a batched dense solve (LAPACK's, or :func:`_block_lu`'s where the
    BLAS is threaded) costs less than the articulated-body sweeps. Built at the last
    kinematics; :meth:`set_link_block` replaces the link-local part ``B``.

    A link's spatial velocity is the sum of ``S_j w_j`` over its joint ``j`` and its
    ancestors' (:func:`subspace_velocities` without the base), so with ``K_l`` the link's
    spatial inertia (with whatever :func:`factorize` adds to it) plus ``B_l``, the block of
    joints ``i`` and ``j`` is ``S_iᵀ K_j^c S_j`` where ``i`` is ``j`` or its ancestor,
    ``S_iᵀ K_i^c S_j`` where ``j`` is ``i``'s, and zero between branches; ``K_j^c`` sums ``K``
    over joint ``j``'s subtree (the composite inertia). Every product is of a tree's size or
    smaller, below the size at which a threaded BLAS spreads a product over cores that other
    work needs.

    Attributes
    ----------
    layout : DenseLayout
    subspaces : (T, n, 6, 3)
        Each joint's motion subspace ``S`` (``n`` the layout's ``size``).
    inertia : (T, n, 6, 6)
        Each link's spatial inertia with what :func:`factorize` adds to it.
    joints : (T, n, 3, 3)
        The joint-local blocks ``A`` (identity at the padding).
    matrix : (T, 3n, 3n)
        The matrix, with the link blocks of the last :meth:`set_link_block`.
    lower_upper, pivot_inverses : (T, 3n, 3n), (T, n, 3, 3)
        Its LU factors over 3 × 3 joint blocks (:func:`_block_lu`) and the inverses of the
        upper factor's diagonal blocks, made by the first :meth:`solve` after
        :meth:`set_link_block` (None until then).
    """

    layout: DenseLayout
    subspaces: Any
    inertia: Any
    joints: Any
    matrix: Any = None
    lower_upper: Any = None
    pivot_inverses: Any = None

    @classmethod
    def of(
        cls,
        model: Model,
        data: Data,
        layout: DenseLayout,
        joint_block: Any,
        *,
        velocity_step: float | Any = 0.0,
        control: Control | None = None,
        tension_step: float | Any = 0.0,
    ) -> DenseTrees:
        """The matrix that :func:`factorize` with the same arguments (and no link block)
        factorises, at the kinematics in ``data``; fills ``data.S``."""
        xp, float_type = model.xp, model.backend.float
        motion_subspaces(model, data)
        inertia = xp.empty((6, 6, model.n_links), dtype=float_type)
        tension = None
        if not isinstance(tension_step, float) or tension_step:
            tension = (tension_step * tension_step) * data.tension
        _link_inertia(model, data, control, velocity_step, inertia, tension)
        dense = cls(
            layout,
            layout.padded(model, data.S),
            layout.padded(model, inertia),
            layout.padded(model, joint_block, xp.eye(3, dtype=float_type)),
        )
        dense.set_link_block(model, None)
        return dense

    def set_link_block(self, model: Model, link_block: Any) -> None:
        """The matrix with ``link_block`` ``B`` (6, 6, N) (None: none)."""
        inertia = self.inertia
        if link_block is not None:
            inertia = inertia + self.layout.padded(model, link_block)
        self.matrix = self._assembled(model, inertia)
        self.lower_upper = self.pivot_inverses = None

    def solve(self, model: Model, b: Any) -> Any:
        """``x`` (3, N) with ``matrix x = b`` (3, N), as :func:`solve` gives it: non-finite
        for a tree whose matrix is singular (a step blown up), as the sweeps' division by its
        joint's articulated inertia makes it; the others' as they are."""
        xp = model.xp
        padded = self.layout.padded(model, b).reshape(model.n_trees, -1)
        if single_threaded_blas():
            x = _lapack_solve(xp, self.matrix, padded)
        else:
            if self.lower_upper is None:
                self.lower_upper, self.pivot_inverses = _block_lu(xp, self.matrix)
            x = _block_lu_solve(self.lower_upper, self.pivot_inverses, padded)
        return self.layout.per_link(x.reshape(model.n_trees, self.layout.size, 3))

    def motion(self, model: Model, w: Any) -> Any:
        """The links' spatial velocities (6, N) of joint velocities ``w`` (3, N), the base at
        rest: :func:`subspace_velocities` without the base's."""
        joint_motion = (self.subspaces @ self.layout.padded(model, w)[..., None])[..., 0]
        return self.layout.per_link(self.layout.ancestry @ joint_motion)

    def load(self, model: Model, link_force: Any) -> Any:
        """Joint torques (3, N) of spatial forces (6, N) on the links: :func:`subspace_load`."""
        forces = self.layout.padded(model, link_force)
        subtree = self.layout.ancestry.transpose(0, 2, 1) @ forces
        torques = self.subspaces.transpose(0, 1, 3, 2) @ subtree[..., None]
        return self.layout.per_link(torques[..., 0])

    def _assembled(self, model: Model, link_inertia: Any) -> Any:
        """The matrix of the links' inertias ``link_inertia`` (T, n, 6, 6) and the joints'
        blocks."""
        xp, layout, subspaces = model.xp, self.layout, self.subspaces
        n_trees, size = link_inertia.shape[:2]
        flat = link_inertia.reshape(n_trees, size, 36)
        composite = (layout.ancestry.transpose(0, 2, 1) @ flat).reshape(n_trees, size, 6, 6)
        columns = subspaces.transpose(0, 2, 1, 3).reshape(n_trees, 6, 3 * size)
        pushed = (composite @ subspaces).transpose(0, 2, 1, 3).reshape(n_trees, 6, 3 * size)
        pulled = (subspaces.transpose(0, 1, 3, 2) @ composite).reshape(n_trees, 3 * size, 6)
        matrix = (columns.transpose(0, 2, 1) @ pushed) * layout.above
        matrix += (pulled @ columns) * layout.below
        diagonal = xp.arange(size)
        blocks = matrix.reshape(n_trees, size, 3, size, 3)
        blocks[:, diagonal, :, diagonal, :] += self.joints.transpose(1, 0, 2, 3)
        return matrix


def _lapack_solve(xp: Any, matrix: Any, b: Any) -> Any:
    """``x`` (T, 3n) with ``matrix x = b`` (T, 3n) by LAPACK, a singular tree's non-finite."""
    try:
        return xp.linalg.solve(matrix, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        x = xp.full_like(b, xp.nan)
        for tree in range(len(x)):
            with contextlib.suppress(np.linalg.LinAlgError):
                x[tree] = xp.linalg.solve(matrix[tree], b[tree])
        return x


def _block_lu(xp: Any, matrix: Any) -> tuple[Any, Any]:
    """LU factors of each matrix of ``matrix`` (T, 3n, 3n) over its 3 × 3 blocks, in one array
    (the unit lower factor's blocks below the diagonal), and the inverses (T, n, 3, 3) of the
    upper factor's diagonal blocks. Without pivoting: the matrix is the mass matrix's with
    positive additions and small unsymmetric ones. Only products of small matrices and a
    closed-form 3 × 3 inverse, for a process whose BLAS is threaded (:func:`single_threaded_blas`):
    about 1 ms for two trees of 25 links, where LAPACK on one thread takes 0.1 ms and, threaded
    beside other work, tens. A singular block leaves its tree's factors non-finite."""
    factors = matrix.copy()
    n_trees, rows = matrix.shape[:2]
    inverses = xp.empty((n_trees, rows // 3, 3, 3), dtype=matrix.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(rows // 3):
            pivot, rest = slice(3 * k, 3 * k + 3), slice(3 * k + 3, rows)
            inverses[:, k] = _inverse3(xp, factors[:, pivot, pivot])
            lower = factors[:, rest, pivot] @ inverses[:, k]
            factors[:, rest, pivot] = lower
            factors[:, rest, rest] -= lower @ factors[:, pivot, rest]
    return factors, inverses


def _block_lu_solve(lower_upper: Any, pivot_inverses: Any, b: Any) -> Any:
    """``x`` (T, 3n) with ``matrix x = b`` (T, 3n) from :func:`_block_lu`'s factors."""
    x = b.copy()
    blocks = pivot_inverses.shape[1]
    for k in range(1, blocks):
        row, before = slice(3 * k, 3 * k + 3), slice(0, 3 * k)
        x[:, row] -= (lower_upper[:, row, before] @ x[:, before, None])[..., 0]
    with np.errstate(invalid="ignore"):
        for k in range(blocks - 1, -1, -1):
            row, after = slice(3 * k, 3 * k + 3), slice(3 * k + 3, 3 * blocks)
            remainder = x[:, row] - (lower_upper[:, row, after] @ x[:, after, None])[..., 0]
            x[:, row] = (pivot_inverses[:, k] @ remainder[..., None])[..., 0]
    return x


def _inverse3(xp: Any, a: Any) -> Any:
    """Inverses of (..., 3, 3) matrices through their cofactors; non-finite where singular."""
    cofactors = _cofactors(xp, a)
    determinant = (a[..., 0, :] * cofactors[..., 0, :]).sum(axis=-1)
    return cofactors.swapaxes(-1, -2) / determinant[..., None, None]


def motion_subspaces(model: Model, data: Data) -> None:
    """Each joint's motion subspace ``S`` (6, 3, N) at the last kinematics -> ``data.S``: the
    spatial velocity ``[ω; r × ω]`` that a unit joint velocity about each link-frame axis gives
    its link (and every link below it)."""
    data.S[:3] = data.oR
    data.S[3:] = cross(model.xp, data.r[:, None], data.oR)


def subspace_velocities(model: Model, S: Any, w: Any, control: Control) -> Any:
    """Spatial velocities (6, N) of every link, world-oriented about its tree's reference point,
    from joint velocities ``w`` (3, N) through the motion subspaces ``S`` (6, 3, N) of a fixed
    configuration (:func:`motion_subspaces`) and the control's base velocity: linear in ``w``."""
    xp = model.xp
    v0 = xp.concatenate((control.base_angular_velocity, control.base_linear_velocity))
    velocity = matvec(xp, S, w)
    _accumulate_down(model, velocity, v0, velocity)
    return velocity


def subspace_load(model: Model, S: Any, link_force: Any) -> Any:
    """Joint torques (3, N) of spatial forces (6, N) on links through the motion subspaces ``S``
    of a fixed configuration: the transpose of :func:`subspace_velocities`."""
    subtree_force = link_force.copy()
    _accumulate_up(model, subtree_force)
    return matTvec(model.xp, S, subtree_force)


def solve(model: Model, data: Data, b: Any, answered_depth: int | None = None) -> Any:
    """Solve ``(M + A) x = b`` with the last :func:`factorize`; returns ``data.x`` (3, N).

    The base is prescribed, so its acceleration in the solve is zero; no velocity terms enter.
    Backward sweep: ``u = b - Sᵀ pA`` and the bias force ``pA + UDinv u`` passed to the parent;
    forward sweep: ``x = Dinv u - Dinv Wᵀ a_parent`` and ``a = a_parent + S x``.

    A load near the roots whose answer is wanted near the roots (the constraint operator's test
    solves) needs only those levels of the sweeps: ``b`` (3, n) loads the first ``n`` links, a
    whole number of levels (:func:`joint_load` of forces on them), the deeper ones being
    unloaded; ``x`` and ``data.solve_a`` are computed down to level ``answered_depth`` (default:
    the deepest), their deeper entries left as they were.
    """
    xp = model.xp
    pA, u, x, a = data.pA, data.u, data.x, data.solve_a
    loaded_stop = b.shape[-1]
    loaded = int(model.depth_of(loaded_stop - 1))
    answered = model.n_levels - 1 if answered_depth is None else answered_depth
    pA[:, :loaded_stop] = 0.0
    for depth in range(loaded, -1, -1):
        level = model.level_slices[depth]
        xp.subtract(b[:, level], matTvec(xp, data.S[:, :, level], pA[:, level]), out=u[:, level])
        if not depth:
            break
        carried = matvec(xp, data.UDinv[:, :, level], u[:, level])
        parents = model.level_parent_slice[depth]
        if parents is not None:
            # Contiguous parents have one child each in this level.
            xp.add(carried, pA[:, level], out=pA[:, parents])
            continue
        carried += pA[:, level]
        for children, parents in model.child_rounds[depth]:
            pA[:, parents] += carried[:, children]
    answered_stop = model.level_bounds[answered][1]
    u[:, loaded_stop:answered_stop] = 0.0
    x[:, :answered_stop] = matvec(xp, data.Dinv[..., :answered_stop], u[:, :answered_stop])
    level = model.level_slices[0]
    a[:, level] = matvec(xp, data.S[:, :, level], x[:, level])
    for depth in range(1, answered + 1):
        level = model.level_slices[depth]
        parent_a = _parent_values(model, a, depth)
        x[:, level] -= matvec(xp, data.DinvWt[:, :, level], parent_a)
        xp.add(parent_a, matvec(xp, data.S[:, :, level], x[:, level]), out=a[:, level])
    return x


def link_velocities(model: Model, data: Data, q: Any, w: Any, control: Control) -> None:
    """Link frames (``data.oR``, ``data.r``, ``data.op``), centres of mass (``data.c``) and
    absolute spatial velocities (``data.v``) at ``(q, w)``, the bases at the control's pose and
    velocity."""
    forward_kinematics(model, data, q, control.base_rotation, control.base_position)
    _centres_of_mass(model, data)
    v0 = model.xp.concatenate((control.base_angular_velocity, control.base_linear_velocity))
    _accumulate_down(model, _joint_motion(model, data, w), v0, data.v)


def energy(model: Model, data: Data, q: Any, w: Any, control: Control) -> tuple[Any, Any]:
    """Total kinetic and gravitational potential energy (J) as two 0-d arrays.

    Absolute (world) motion under the control's base velocity; potential relative to the world
    origin. For conservation tests and diagnostics; the step does not use it.
    """
    xp = model.xp
    link_velocities(model, data, q, w, control)
    omega, u = data.v[:3], data.v[3:]
    com_velocity = u + cross(xp, omega, data.c)
    omega_local = matTvec(xp, data.oR, omega)
    kinetic = (
        0.5 * (model.mass * dot(com_velocity, com_velocity)).sum()
        + 0.5 * (model.inertia * omega_local * omega_local).sum()
    )
    com_world = data.c + control.base_position[:, model.link_base]
    potential = -(model.mass * dot(com_world, control.gravity)).sum()
    return kinetic, potential
