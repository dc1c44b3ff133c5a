"""Recursive multi-body dynamics of strand forests: kinematics, residual, articulated-body solve.

Every pass runs one vectorised operation per depth level over all strands (see :mod:`.model`).
Spatial quantities of a tree are world-oriented and referred to the tree's base origin at the
end of the step (see the glossary in :mod:`.spatial`), so a spatial vector moves from a link to
its parent unchanged: forward passes are prefix sums down the tree and backward passes are sums
up the tree. Arrays are component-major: ``(6, N)``, ``(3, 3, N)``, …

Contracts
---------
- :func:`forward_kinematics` — joint rotations and base poses -> link frames (``oR``, ``op``).
- :func:`inverse_dynamics` — the residual of the paper's Algorithm 1 (recursive Newton–Euler,
  spherical joints, branches): joint torques ``M(q) wdot + c(q, w) - tau_external``.
- :func:`joint_torques` — spring (paper eq. 18) and damping torques at the joints.
- :func:`factorize` / :func:`solve` — articulated-body solution of ``(M(q) + A) x = b`` with
  joint-local 3x3 blocks ``A`` folded into each joint's articulated inertia; linear time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import spatial
from .model import Model
from .spatial import cross, dot, matmul, matTvec, matvec
from .state import Control


@dataclass(eq=False)
class Data:
    """Preallocated workspace of one model; results of every pass land here.

    Attributes (component-major, level-major, ``N = n_links``)
    ----------
    oR : (3, 3, N) world rotation of each link frame
    op : (3, N) world position of each joint, m
    r : (3, N) joint position relative to the tree's reference point, m
    c : (3, N) centre of mass relative to the tree's reference point, m
    v, a, f : (6, N) spatial velocity, acceleration and force ``[angular; linear]``; after
        :func:`inverse_dynamics`, ``f`` is the force each link's subtree receives through its joint
    tau : (3, N) joint torques of inverse dynamics, link frame, N·m
    S : (6, 3, N) joint motion subspaces
    U, W, UDinv : (6, 3, N) ``IA S``, ``IAᵀ S`` and ``IA S Dinv`` (``IA`` need not be symmetric)
    Dinv : (3, 3, N) inverse joint-space articulated inertias
    IA : (6, 6, N) articulated inertias
    pA : (6, N) articulated bias forces of a solve
    u : (3, N) joint-space bias of a solve
    x : (3, N) solution of a solve
    solve_a : (6, N) spatial accelerations of a solve
    """

    oR: Any
    op: Any
    r: Any
    c: Any
    v: Any
    a: Any
    f: Any
    tau: Any
    S: Any
    U: Any
    W: Any
    UDinv: Any
    Dinv: Any
    IA: Any
    pA: Any
    u: Any
    x: Any
    solve_a: Any

    @classmethod
    def for_model(cls, model: Model) -> Data:
        """Allocate the workspace once per model."""
        xp, dtype, n = model.xp, model.backend.float, model.n_links

        def empty(*shape: int) -> Any:
            return xp.zeros((*shape, n), dtype=dtype)

        return cls(
            oR=empty(3, 3), op=empty(3), r=empty(3), c=empty(3),
            v=empty(6), a=empty(6), f=empty(6), tau=empty(3),
            S=empty(6, 3), U=empty(6, 3), W=empty(6, 3), UDinv=empty(6, 3), Dinv=empty(3, 3),
            IA=empty(6, 6),
            pA=empty(6), u=empty(3), x=empty(3), solve_a=empty(6),
        )  # fmt: skip


def forward_kinematics(
    model: Model, data: Data, q: Any, base_rotation: Any, base_position: Any
) -> None:
    """World frames of all links from joint rotations and base poses -> ``data.oR``, ``data.op``.

    Orientations are composed as quaternions level by level (a quarter of the work of 3x3
    products) and turned into matrices once; joint positions are then a prefix sum of each
    parent's rotation applied to the joint offset.
    """
    xp = model.xp
    base_orientation = spatial.matrix_to_quat(xp, base_rotation)
    orientation = xp.empty_like(q)
    for depth, (start, stop) in enumerate(model.level_bounds):
        if depth == 0:
            parent_orientation = base_orientation[:, model.level_base]
        else:
            parent_orientation = orientation[:, model.level_parent[depth]]
        orientation[:, start:stop] = spatial.quat_multiply(xp, parent_orientation, q[:, start:stop])
    data.oR[...] = spatial.quat_to_matrix(xp, orientation)
    frames = xp.concatenate((data.oR, base_rotation), axis=2)
    offsets = matvec(xp, frames[:, :, model.link_parent_frame], model.joint_offset)
    _accumulate_down(model, offsets, base_position, data.op)


def _relative_positions(model: Model, data: Data, reference: Any) -> None:
    """Joint and centre-of-mass positions relative to each tree's reference point."""
    data.r[...] = data.op - reference[:, model.link_base]
    data.c[...] = data.r + data.oR[:, 1] * (0.5 * model.length)


def _accumulate_down(model: Model, increments: Any, root_values: Any, out: Any) -> None:
    """Prefix sum down the forest: ``out[:, i] = out[:, parent(i)] + increments[:, i]``."""
    for depth, (start, stop) in enumerate(model.level_bounds):
        if depth == 0:
            parent_values = root_values[:, model.level_base]
        else:
            parent_values = out[:, model.level_parent[depth]]
        out[:, start:stop] = parent_values + increments[:, start:stop]


def _accumulate_up(model: Model, values: Any) -> None:
    """Sum every link's value into its ancestors', in place (deepest level first)."""
    for depth in range(model.n_levels - 1, 0, -1):
        start = model.level_bounds[depth][0]
        for children, parents in model.child_rounds[depth]:
            values[:, parents] += values[:, start + children]


def _motion_cross(xp: Any, v: Any, m: Any) -> Any:
    """Spatial motion cross product ``v × m`` of (6, ...) vectors."""
    omega, u = v[:3], v[3:]
    return xp.concatenate((cross(xp, omega, m[:3]), cross(xp, omega, m[3:]) + cross(xp, u, m[:3])))


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
    ``M(q) wdot + c(q, w) - tau_gravity - tau_drag - tau_external``.
    """
    xp = model.xp
    forward_kinematics(model, data, q, control.base_rotation, control.base_position)
    _relative_positions(model, data, control.base_position)
    v0, a0 = base_spatial_motion(model, control)

    joint_velocity = _joint_motion(model, data, w)
    _accumulate_down(model, joint_velocity, v0, data.v)
    increments = _joint_motion(model, data, wdot) + _motion_cross(xp, data.v, joint_velocity)
    _accumulate_down(model, increments, a0, data.a)

    omega, u = data.v[:3], data.v[3:]
    alpha, a_linear = data.a[:3], data.a[3:]
    c = data.c
    com_velocity = u + cross(xp, omega, c)
    com_acceleration = a_linear + cross(xp, alpha, c) + cross(xp, omega, com_velocity)
    drag = (control.drag * model.length) * (control.wind_velocity - com_velocity)
    force = model.mass * com_acceleration - drag - control.external_force
    # Moment about the centre of mass, I_c alpha + omega × I_c omega, in the principal frame.
    alpha_local = matTvec(xp, data.oR, alpha)
    omega_local = matTvec(xp, data.oR, omega)
    moment_local = model.inertia * alpha_local + cross(xp, omega_local, model.inertia * omega_local)
    data.f[:3] = matvec(xp, data.oR, moment_local) + cross(xp, c, force)
    data.f[3:] = force

    _accumulate_up(model, data.f)
    # S^T f: the moment about the joint point, in the link frame.
    data.tau[...] = matTvec(xp, data.oR, data.f[:3] - cross(xp, data.r, data.f[3:]))
    return data.tau


def joint_damping(model: Model, control: Control) -> Any:
    """Joint damping coefficients (3, N) about the link-frame axes, N·m·s/rad."""
    bend = control.bend_damping / model.joint_length
    return model.xp.stack((bend, control.twist_damping / model.joint_length, bend))


def joint_torques(model: Model, control: Control, q: Any, w: Any) -> Any:
    """Spring and damping torques (3, N) acting on each link at its joint, link frame, N·m.

    Springs follow the paper's eq. 18 on the deviation from the rest rotation, split as
    ``twist ⊗ swing`` (twist about y, then swing about an axis ``b`` in the cross-section): bend
    ``-2 K_b(b) tan(theta_b/2)``, twist ``-2 K_t tan(theta_t/2)``; the factor 2 makes ``K`` the
    small-angle stiffness, ``K = rigidity / joint_length``.
    """
    xp = model.xp
    deviation = spatial.quat_normalize(
        xp, spatial.quat_multiply(xp, spatial.quat_conjugate(xp, model.rest_rotation), q)
    )
    twist, swing = spatial.twist_swing(xp, deviation)
    # tan(theta/2) = |vector part| / scalar part; the clamp keeps a half-turn finite (the torque
    # is huge there by design: the model resists folding back on itself).
    swing_w = xp.maximum(swing[0], 1e-6)
    twist_w = xp.maximum(twist[0], 1e-6)
    k_bend = control.bend_stiffness / model.joint_length
    k_twist = control.twist_stiffness / model.joint_length
    sw, sx, sz = swing[0], swing[1], swing[3]
    # The twist axis seen from the child frame: R(swing)^T y.
    twist_axis = xp.stack((2 * sw * sz, 1 - 2 * (sx * sx + sz * sz), -2 * sw * sx))
    twist_torque = (-2.0 * k_twist * twist[2] / twist_w) * twist_axis
    bend_torque = xp.stack(
        (-2.0 * k_bend[0] * sx / swing_w, xp.zeros_like(sx), -2.0 * k_bend[1] * sz / swing_w)
    )
    return bend_torque + twist_torque - joint_damping(model, control) * w


def spring_tangent_stiffness(model: Model, control: Control, q: Any, step: float) -> Any:
    """``-dQ_spring/dtheta`` (3, 3, N) for rotations ``q ⊗ exp(theta)``, by local differences.

    Each joint's spring depends on its own rotation only, so three vectorised evaluations give
    the joint-local tangent of any spring model.
    """
    xp = model.xp
    zero_w = xp.zeros((3, model.n_links), dtype=model.backend.float)
    base = joint_torques(model, control, q, zero_w)
    columns = []
    for axis in range(3):
        direction = zero_w.copy()
        direction[axis] = step
        perturbed = spatial.quat_multiply(xp, q, spatial.quat_exp(xp, direction))
        columns.append((base - joint_torques(model, control, perturbed, zero_w)) * (1.0 / step))
    return xp.stack(columns, axis=1)


def _inverse3(xp: Any, m: Any) -> Any:
    """Inverses of (3, 3, ...) matrices by the adjugate (exact, branch-free, any backend)."""
    a, b, c = m[0, 0], m[0, 1], m[0, 2]
    d, e, f = m[1, 0], m[1, 1], m[1, 2]
    g, h, i = m[2, 0], m[2, 1], m[2, 2]
    co00, co01, co02 = e * i - f * h, f * g - d * i, d * h - e * g
    inverse_det = 1.0 / (a * co00 + b * co01 + c * co02)
    adjugate = xp.stack(
        (
            xp.stack((co00, c * h - b * i, b * f - c * e)),
            xp.stack((co01, a * i - c * g, c * d - a * f)),
            xp.stack((co02, b * g - a * h, a * e - b * d)),
        )
    )
    return adjugate * inverse_det


def _spatial_inertia(model: Model, data: Data, out: Any) -> None:
    """World spatial inertia (6, 6, N) of each link about its tree's reference point -> ``out``."""
    xp = model.xp
    mass = model.mass
    inertia_com = xp.einsum("ik...,k...,jk...->ij...", data.oR, model.inertia, data.oR)
    com_cross = spatial.skew(xp, data.c)
    out[:3, :3] = inertia_com - mass * matmul(xp, com_cross, com_cross)
    out[:3, 3:] = mass * com_cross
    out[3:, :3] = -mass * com_cross
    out[3:, 3:] = 0.0
    for axis in range(3, 6):
        out[axis, axis] = mass


def velocity_jacobian(model: Model, data: Data, control: Control) -> Any:
    """Derivative (6, 6, N) of each link's velocity-dependent spatial force with respect to its
    spatial velocity: gyroscopic ``omega × I omega``, centripetal ``m omega × v_c`` and air drag.

    Thin strands have a tiny axial inertia, so the gyroscopic coupling is stiff; adding ``h`` times
    this matrix to each link's inertia in the implicit step's factorisation (it is a link-local
    term, so it enters the articulated-body recursion exactly) keeps Newton converging fast on
    fast-spinning strands. Uses ``data.v``, ``data.c`` and ``data.oR`` of the last
    :func:`inverse_dynamics`.
    """
    xp = model.xp
    skew = spatial.skew
    omega, u, c = data.v[:3], data.v[3:], data.c
    mass = model.mass
    drag = control.drag * model.length
    com_velocity = u + cross(xp, omega, c)
    c_cross, omega_cross = skew(xp, c), skew(xp, omega)
    eye = xp.eye(3, dtype=model.backend.float)[:, :, None]
    force_by_omega = -mass * skew(xp, com_velocity) - matmul(
        xp, mass * omega_cross + drag * eye, c_cross
    )
    force_by_u = mass * omega_cross + drag * eye
    inertia_com = xp.einsum("ik...,k...,jk...->ij...", data.oR, model.inertia, data.oR)
    gyroscopic = matmul(xp, omega_cross, inertia_com) - skew(xp, matvec(xp, inertia_com, omega))
    jacobian = xp.empty((6, 6, model.n_links), dtype=model.backend.float)
    jacobian[:3, :3] = gyroscopic + matmul(xp, c_cross, force_by_omega)
    jacobian[:3, 3:] = matmul(xp, c_cross, force_by_u)
    jacobian[3:, :3] = force_by_omega
    jacobian[3:, 3:] = force_by_u
    return jacobian


def factorize(model: Model, data: Data, joint_block: Any, link_block: Any = None) -> None:
    """Articulated-body factorisation of ``M(q) + A + Σ Jᵀ B J`` at the last kinematics.

    ``joint_block`` (3, 3, N) is the joint-local part ``A`` (``h D + h² K`` in the implicit step,
    zeros for forward dynamics), added to each joint's articulated inertia ``Sᵀ IA S``;
    ``link_block`` (6, 6, N), optional, is a link-local part ``B`` added to each link's spatial
    inertia (``h`` times :func:`velocity_jacobian`). Both enter the articulated-body recursion
    exactly. ``IA`` may then be unsymmetric, so the left and right projections ``W`` and ``U`` are
    kept apart. Fills ``data.S``, ``U``, ``W``, ``UDinv`` and ``Dinv``; ``data.IA`` is consumed.
    """
    xp = model.xp
    data.S[:3] = data.oR
    data.S[3:] = matmul(xp, spatial.skew(xp, data.r), data.oR)
    _spatial_inertia(model, data, data.IA)
    if link_block is not None:
        data.IA += link_block
    for depth in range(model.n_levels - 1, -1, -1):
        start, stop = model.level_bounds[depth]
        S = data.S[:, :, start:stop]
        IA = data.IA[:, :, start:stop]
        U = matmul(xp, IA, S)
        W = xp.einsum("ji...,jk...->ik...", IA, S)
        Dinv = _inverse3(xp, xp.einsum("ki...,kj...->ij...", S, U) + joint_block[:, :, start:stop])
        UDinv = matmul(xp, U, Dinv)
        data.U[:, :, start:stop] = U
        data.W[:, :, start:stop] = W
        data.UDinv[:, :, start:stop] = UDinv
        data.Dinv[:, :, start:stop] = Dinv
        if depth:
            reduced = IA - xp.einsum("ik...,jk...->ij...", UDinv, W)
            for children, parents in model.child_rounds[depth]:
                data.IA[:, :, parents] += reduced[:, :, children]


def solve(model: Model, data: Data, b: Any) -> Any:
    """Solve ``(M + A) x = b`` (3, N) with the last :func:`factorize`; returns ``data.x``.

    The base is prescribed, so its acceleration in the solve is zero; no velocity terms enter.
    """
    xp = model.xp
    data.pA[...] = 0.0
    for depth in range(model.n_levels - 1, -1, -1):
        start, stop = model.level_bounds[depth]
        data.u[:, start:stop] = b[:, start:stop] - matTvec(
            xp, data.S[:, :, start:stop], data.pA[:, start:stop]
        )
        if depth:
            carried = data.pA[:, start:stop] + matvec(
                xp, data.UDinv[:, :, start:stop], data.u[:, start:stop]
            )
            for children, parents in model.child_rounds[depth]:
                data.pA[:, parents] += carried[:, children]
    for depth, (start, stop) in enumerate(model.level_bounds):
        rhs = data.u[:, start:stop]
        if depth:
            parent_a = data.solve_a[:, model.level_parent[depth]]
            rhs = rhs - matTvec(xp, data.W[:, :, start:stop], parent_a)
        x = matvec(xp, data.Dinv[:, :, start:stop], rhs)
        data.x[:, start:stop] = x
        motion = matvec(xp, data.S[:, :, start:stop], x)
        data.solve_a[:, start:stop] = motion if depth == 0 else parent_a + motion
    return data.x


def energy(model: Model, data: Data, q: Any, w: Any, control: Control) -> tuple[Any, Any]:
    """Total kinetic and gravitational potential energy (J) as two 0-d arrays.

    Absolute (world) motion under the control's base velocity; potential relative to the world
    origin. For conservation tests and diagnostics; the step does not use it.
    """
    xp = model.xp
    forward_kinematics(model, data, q, control.base_rotation, control.base_position)
    _relative_positions(model, data, control.base_position)
    v0 = xp.concatenate((control.base_angular_velocity, control.base_linear_velocity))
    _accumulate_down(model, _joint_motion(model, data, w), v0, data.v)
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
