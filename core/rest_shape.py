"""Zero-gravity rest shape (paper §6.6): the rest shape whose equilibrium under gravity is the
modelled shape.

Artists model strands as they should hang, gravity included. Used as the rest shape, that
shape sags further once gravity acts. :func:`zero_gravity_model` finds, by inverse dynamics,
the rest rotations that make the modelled shape a static equilibrium:

1. Recursive Newton–Euler with zero joint velocity and acceleration
   (:func:`.dynamics.inverse_dynamics`) gives the torque ``τ`` each joint must exert to hold
   the modelled configuration ``q_m`` against gravity (for serial and branched strands alike:
   each joint carries the weight of everything beyond it, branches included).
2. Each joint's spring (the paper's eq. 18, :func:`.dynamics.joint_torques`) must produce
   exactly ``τ`` at ``q_m``. The spring depends on the deviation ``d = q_rest⁻¹ ⊗ q_m``, split
   ``d = twist ⊗ swing``; in the unknowns ``u = tan(θ_b/2) b_x``, ``v = tan(θ_b/2) b_z`` and
   ``s = tan(θ_t/2)`` the torque is

       Q = (−2K_x u − 2K_t s v,  −2K_t s,  −2K_z v + 2K_t s u),

   linear in the bend unknowns (the tan law) and coupled only through the twist torque's
   cross-section part, which the swing brings in. A vectorised Newton iteration over all joints
   (analytic 3x3 Jacobians, started from the uncoupled solution) solves ``Q = τ`` to round-off in
   a few iterations.
3. ``q_rest = q_m ⊗ d⁻¹``.

The result is exact for the engine's spring law, so a simulation started at ``q_m`` with
motionless bases at their rest poses stays there (up to the Newton tolerance of each step).
Gravity is taken relative to the bases' rest poses; a base that turns later turns gravity with
respect to the strand, as it would for a real hairstyle.

How a simulation starts from the modelled shape
-----------------------------------------------
The engine starts a simulation at the model's rest rotations (``State.at_rest``), which are now
the zero-gravity shape. :func:`zero_gravity_model` therefore returns the modelled rotations
alongside the new model; set them as the initial state after creating (or resetting) the
simulation::

    shaped = zero_gravity_model(model, gravity)
    sim = Simulation(shaped.model, gravity=gravity)
    sim.state.q = shaped.modelled_q.copy()
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np

from . import dynamics, spatial
from .dynamics import Data
from .errors import InvalidInputError
from .model import Model
from .simulation import Simulation
from .state import Control

# Newton on the spring law: relative torque tolerance in units of the backend's machine epsilon
# (it converges to round-off), the looser one a converged joint must meet, and the iteration
# cap. Each iteration costs a handful of vectorised operations over all joints and one scalar
# read back.
_TOLERANCE_EPS = 100.0
_ACCEPT_EPS = 1e4
_MAX_ITERATIONS = 50


class ZeroGravityRestShape(NamedTuple):
    """Result of :func:`zero_gravity_model`.

    Attributes
    ----------
    model : Model
        The input model with ``rest_rotation`` replaced by the zero-gravity rest shape and
        ``rest_points`` by its world points (bases at their rest poses).
    modelled_q : device float (4, N)
        The modelled joint rotations (the input model's rest rotations), level-major: the
        state to start simulating from.
    """

    model: Model
    modelled_q: Any


def zero_gravity_model(
    model: Model, gravity: Any = (0.0, 0.0, -9.81), max_angle: float = 0.5 * math.pi
) -> ZeroGravityRestShape:
    """The rest shape that holds ``model``'s modelled shape as its equilibrium under ``gravity``.

    Parameters
    ----------
    model : Model
        Its rest rotations are the modelled shape (as drawn, gravity included); the model's
        default stiffness parameters are the ones that must hold it.
    gravity : (3,) m/s², world
    max_angle : float, rad, in (0, π)
        Largest rotation any joint's rest shape may need away from the modelled shape. Beyond
        90° (the default) the strand is too soft to hold its shape in any useful sense: it
        would have to be modelled curled far the other way.

    Returns
    -------
    ZeroGravityRestShape
        ``(model, modelled_q)``: see the class and the module docstring.

    Raises
    ------
    InvalidInputError
        Naming the strand and link of a joint that cannot hold its load: it has no stiffness
        in a direction in which it is loaded, or its rest shape would have to turn more than
        ``max_angle`` (its stiffness is too low for the modelled shape under this gravity).
    """
    max_angle = float(max_angle)
    if not (0.0 < max_angle < math.pi):
        raise InvalidInputError(f"max_angle must lie in (0, π) radians, got {max_angle}")
    xp, backend = model.xp, model.backend
    control = Control.from_model(model, gravity)
    data = Data.for_model(model)
    modelled_q = model.rest_rotation.copy()
    zero = xp.zeros((3, model.n_links), dtype=backend.float)
    torque = dynamics.inverse_dynamics(model, data, modelled_q, zero, zero, control).copy()
    k_x = control.bend_stiffness[0] / model.joint_length
    k_z = control.bend_stiffness[1] / model.joint_length
    k_t = control.twist_stiffness / model.joint_length
    u, v, s = _solve_spring_law(model, torque, k_x, k_z, k_t)

    bend_tan = xp.sqrt(u * u + v * v)
    worst_bend = _worst(model, 2.0 * xp.arctan(bend_tan))
    worst_twist = _worst(model, 2.0 * xp.arctan(xp.abs(s)))
    for (angle, link), kind in ((worst_bend, "bend"), (worst_twist, "twist")):
        if angle > max_angle:
            raise InvalidInputError(
                f"{_describe_link(model, link)} cannot hold the modelled shape under gravity: "
                f"its rest shape would have to {kind} {math.degrees(angle):.1f}° away from it "
                f"(limit {math.degrees(max_angle):.1f}°); raise its {kind} stiffness or model "
                "it closer to how it hangs"
            )

    swing_w = 1.0 / xp.sqrt(1.0 + bend_tan * bend_tan)
    swing = xp.stack((swing_w, u * swing_w, xp.zeros_like(u), v * swing_w))
    twist_w = 1.0 / xp.sqrt(1.0 + s * s)
    twist = xp.stack((twist_w, xp.zeros_like(s), s * twist_w, xp.zeros_like(s)))
    deviation = spatial.quat_multiply(xp, twist, swing)
    rest = spatial.quat_normalize(
        xp, spatial.quat_multiply(xp, modelled_q, spatial.quat_conjugate(xp, deviation))
    ).astype(backend.float)  # quat_normalize's sign flip is float64 even for float32 input
    shaped = dataclasses.replace(model, rest_rotation=rest)
    # The world points of the new rest shape, so the model stays self-consistent.
    shaped = dataclasses.replace(shaped, rest_points=Simulation(shaped).points())
    return ZeroGravityRestShape(shaped, modelled_q)


def _spring_torque(xp: Any, u, v, s, k_x, k_z, k_t) -> tuple[Any, Any]:
    """Spring torque ``Q`` (3, N) and its Jacobian (3, 3, N) in the unknowns ``(u, v, s)``."""
    c = 2.0 * k_t
    cs = c * s
    torque = xp.stack((-2.0 * k_x * u - cs * v, -cs, -2.0 * k_z * v + cs * u))
    zero = xp.zeros_like(u)
    jacobian = xp.stack(
        (
            xp.stack((-2.0 * k_x, -cs, -c * v)),
            xp.stack((zero, zero, -c)),
            xp.stack((cs, -2.0 * k_z, c * u)),
        )
    )
    return torque, jacobian


def _solve_spring_law(model: Model, torque: Any, k_x: Any, k_z: Any, k_t: Any) -> tuple:
    """Unknowns ``(u, v, s)`` (each (N,)) with spring torque equal to ``torque`` (3, N).

    An unknown whose stiffness is zero has no effect on the torque; it is held at zero and its
    equation left out, so a joint loaded in that direction fails the final residual check.
    """
    xp, to_host = model.xp, model.backend.to_host
    precision = np.finfo(model.backend.dtype)
    stiffness = xp.stack((k_x, k_t, k_z))
    free = stiffness > 0
    safe = xp.where(free, stiffness, 1.0)
    # The uncoupled solution (bend and twist apart): exact for pure bend or pure twist.
    first = xp.where(free, -torque / (2.0 * safe), 0.0)
    u, s, v = first[0], first[1], first[2]
    scale = xp.abs(torque).max(axis=0) + float(precision.tiny)
    eye = xp.eye(3, dtype=model.backend.float)[:, :, None]
    for _ in range(_MAX_ITERATIONS):
        spring, jacobian = _spring_torque(xp, u, v, s, k_x, k_z, k_t)
        # Rows and columns in the unknowns' order (u, s, v) line up with torque (x, y, z).
        jacobian = jacobian[:, [0, 2, 1]]
        residual = xp.where(free, spring - torque, 0.0)
        jacobian = xp.where(free[:, None] & free[None, :], jacobian, eye)
        step = _solve3(xp, jacobian, -residual)
        u, s, v = u + step[0], s + step[1], v + step[2]
        relative = float(to_host(xp.max(xp.abs(residual).max(axis=0) / scale)))
        if relative <= _TOLERANCE_EPS * float(precision.eps):
            break
    spring, _ = _spring_torque(xp, u, v, s, k_x, k_z, k_t)
    error, link = _worst(model, xp.abs(spring - torque).max(axis=0) / scale)
    if not error <= _ACCEPT_EPS * float(precision.eps):
        load = to_host(torque[:, link])
        raise InvalidInputError(
            f"{_describe_link(model, link)} cannot hold the modelled shape under gravity: no "
            f"rest rotation within half a turn gives its joint the torque {load.tolist()} N·m "
            f"(link frame x, y, z) with its stiffness (bend x, twist, bend z) "
            f"{to_host(stiffness[:, link]).tolist()} N·m/rad"
        )
    return u, v, s


def _solve3(xp: Any, matrix: Any, rhs: Any) -> Any:
    """Solutions (3, N) of 3x3 systems ``matrix`` (3, 3, N) by Cramer's rule (any backend)."""
    c0, c1, c2 = matrix[:, 0], matrix[:, 1], matrix[:, 2]
    determinant = (c0 * spatial.cross(xp, c1, c2)).sum(axis=0)
    return (
        xp.stack(
            (
                (rhs * spatial.cross(xp, c1, c2)).sum(axis=0),
                (c0 * spatial.cross(xp, rhs, c2)).sum(axis=0),
                (c0 * spatial.cross(xp, c1, rhs)).sum(axis=0),
            )
        )
        / determinant
    )


def _worst(model: Model, values: Any) -> tuple[float, int]:
    """Largest entry of per-link ``values`` (N,) (NaN counts as largest) and its link."""
    host = model.backend.to_host(values)
    link = int(np.argmax(np.where(np.isnan(host), np.inf, host)))
    return float(host[link]), link


def _describe_link(model: Model, link: int) -> str:
    strand, index = model.link_strand_and_index(link)
    return f"{model.describe_strand(strand)}, link {index}"
