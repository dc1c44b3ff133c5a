"""Time scale β and local dynamics γ (paper §6.4, eq. 19): how much of the base's motion a strand
feels, without changing where its root is.

A reduced-coordinate strand feels its base only through the base's velocity and acceleration;
its root is placed by the base's pose. Eq. 19 edits the former and keeps the latter:

    â₀ ← β (â₀ − γ â_ref),    v̂₀ ← β (v̂₀ − γ v̂_ref)

- **time scale β** scales the motion the strand feels: 0 makes a strand on a moving base
  behave as on a still one (it is carried along rigidly), 1 is the plain simulation, above 1
  exaggerates;
- **local dynamics γ** subtracts the motion of a reference frame (e.g. a character's hip) so
  that the strand responds only to the base's motion *relative to* it: a braid on a running
  character with γ = 1 and the hip as reference swings with the head's motion on the body but
  not with the run itself.

Derivation
----------
The hats are spatial vectors (Featherstone), so both motions must be written about one point
before they are combined: the base's origin ``p₀``, the point the engine refers the base's
motion to. The reference frame is a rigid body with origin ``p_r``, angular velocity ``ω_r``,
origin velocity ``v_r``, angular acceleration ``α_r`` and origin acceleration ``a_r``; with
``r = p₀ − p_r``:

- its velocity field at ``p₀``: ``v_r + ω_r × r``, so ``v̂_ref = [ω_r; v_r + ω_r × r]``;
- the classical acceleration of its body point at ``p₀``:
  ``a_r + α_r × r + ω_r × (ω_r × r)``; the spatial acceleration is the rate of change of the
  velocity field at the fixed point ``p₀``, i.e. that minus ``ω_r × (v_r + ω_r × r)``:
  ``â_ref = [α_r; a_r + α_r × r − ω_r × v_r]``;
- the base's own spatial acceleration about its origin is ``â₀ = [α₀; a₀ − ω₀ × v₀]``.

Eq. 19 then gives ``ω, v, α`` and the spatial ``â``; the classical acceleration of the base
origin handed to the engine is ``a = â_linear + ω × v``. Scaling the *spatial* acceleration
(rather than the classical one) keeps steady motions steady: a base on a carousel spinning at
``Ω`` becomes, with β = 1/2, exactly a base on a carousel spinning at ``Ω/2`` (centripetal
acceleration ``Ω²R/4``), so the centrifugal field the strand feels is that of a real motion.
With γ = 1 and a reference rigidly attached to the base (any ``r``), the base feels no motion
at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .base_motion import BaseMotion
from .errors import InvalidInputError

MotionSource = BaseMotion | Callable[[float], BaseMotion]
Animatable = float | np.ndarray | Callable[[float], Any]


def art_directed_motion(
    motion: BaseMotion,
    time_scale: Any = 1.0,
    local_dynamics: Any = 0.0,
    reference: BaseMotion | None = None,
) -> BaseMotion:
    """The base motion a strand should feel under time scale β and local dynamics γ (eq. 19).

    Parameters
    ----------
    motion : BaseMotion
        The bases' actual motion (world frame). Its pose is returned unchanged.
    time_scale : float >= 0 or (n_bases,) array
        β: scales the velocity and acceleration felt (0: as if still, 1: unchanged).
    local_dynamics : float >= 0 or (n_bases,) array
        γ: how much of the reference frame's motion to remove (typically 0 to 1).
    reference : BaseMotion, optional
        The reference frame's motion, world frame: one frame for all bases or one per base.
        Required when ``local_dynamics`` is not zero.

    Returns
    -------
    BaseMotion
        Same rotation and position; velocities and accelerations as derived in the module
        docstring.
    """
    n_bases = motion.n_bases
    beta = _factor("time_scale (β)", time_scale, n_bases)
    gamma = _factor("local_dynamics (γ)", local_dynamics, n_bases)
    omega, velocity = motion.angular_velocity, motion.linear_velocity
    alpha, acceleration = motion.angular_acceleration, motion.linear_acceleration
    spatial_acceleration = acceleration - np.cross(omega, velocity)
    if reference is None:
        if (gamma != 0).any():
            raise InvalidInputError(
                "local_dynamics (γ) needs a reference frame: pass reference=... (e.g. the hip)"
            )
        ref_omega = ref_velocity = ref_alpha = ref_spatial_acceleration = np.zeros((n_bases, 3))
    else:
        if reference.n_bases not in (1, n_bases):
            raise InvalidInputError(
                f"reference must have 1 frame or one per base ({n_bases}), got {reference.n_bases}"
            )
        offset = motion.position - reference.position  # r = p₀ − p_r, broadcast over bases
        ref_omega = np.broadcast_to(reference.angular_velocity, (n_bases, 3))
        ref_alpha = np.broadcast_to(reference.angular_acceleration, (n_bases, 3))
        ref_velocity = reference.linear_velocity + np.cross(ref_omega, offset)
        ref_spatial_acceleration = (
            reference.linear_acceleration
            + np.cross(ref_alpha, offset)
            - np.cross(ref_omega, reference.linear_velocity)
        )
    beta, gamma = beta[:, None], gamma[:, None]
    new_omega = beta * (omega - gamma * ref_omega)
    new_velocity = beta * (velocity - gamma * ref_velocity)
    new_spatial_acceleration = beta * (spatial_acceleration - gamma * ref_spatial_acceleration)
    return BaseMotion(
        rotation=motion.rotation,
        position=motion.position,
        angular_velocity=new_omega,
        linear_velocity=new_velocity,
        angular_acceleration=beta * (alpha - gamma * ref_alpha),
        linear_acceleration=new_spatial_acceleration + np.cross(new_omega, new_velocity),
    )


class ArtDirectedBase:
    """A base source (``t -> BaseMotion``) with animatable time scale and local dynamics.

    Usable wherever the engine takes a base, e.g. ``Simulation.advance(dt, base)``.

    Parameters
    ----------
    base : BaseMotion or callable ``t -> BaseMotion``
        The bases' actual motion, e.g. a :class:`~.base_motion.BaseTrajectory`.
    time_scale, local_dynamics : float, (n_bases,) array, or callable ``t -> float or array``
        β and γ of :func:`art_directed_motion`, constant or animated.
    reference : BaseMotion or callable ``t -> BaseMotion``, optional
        The local-dynamics reference frame's motion (e.g. the hip's ``BaseTrajectory``).
    """

    def __init__(
        self,
        base: MotionSource,
        time_scale: Animatable = 1.0,
        local_dynamics: Animatable = 0.0,
        reference: MotionSource | None = None,
    ) -> None:
        self.base = base
        self.time_scale = time_scale
        self.local_dynamics = local_dynamics
        self.reference = reference

    def __call__(self, t: float) -> BaseMotion:
        """The motion the strands should feel at time ``t`` (s)."""
        return art_directed_motion(
            _at(self.base, t),
            _at(self.time_scale, t),
            _at(self.local_dynamics, t),
            None if self.reference is None else _at(self.reference, t),
        )


def _at(source: Any, t: float) -> Any:
    return source(t) if callable(source) else source


def _factor(name: str, value: Any, n_bases: int) -> np.ndarray:
    """A non-negative, finite factor per base (n_bases,) from a scalar or per-base values."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number or one per base, got {value!r}") from None
    if array.shape not in ((), (n_bases,)):
        raise InvalidInputError(
            f"{name} must be a scalar or have shape ({n_bases},), got shape {array.shape}"
        )
    if not np.isfinite(array).all() or (array < 0).any():
        raise InvalidInputError(f"{name} must be finite and non-negative, got {value!r}")
    return np.broadcast_to(array, (n_bases,))
