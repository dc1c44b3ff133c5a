"""Prescribed motion of the rigid bases that drive strand roots (paper §6.3).

A reduced-coordinate strand feels its base only through the base's velocity and acceleration, so
these must be the exact derivatives of one smooth motion, not finite differences of frames.
:class:`BaseTrajectory` interpolates rigid transforms sampled once per frame with a curve that is
C² across the samples and returns pose, velocity and acceleration at any time as a
:class:`BaseMotion`.

The interpolant
---------------
Rotation, after Park & Kang [PK96] (and Park & Ravani's invariant form): on the interval
``[t_i, t_i+1]`` the rotation is ``R(t) = R_i exp(r_i(s))``, ``s = t - t_i``, with a cubic
``r_i(s) = c_i s + b_i s² + a_i s³`` in so(3) (body axes of ``R_i``) that reaches
``r_i(h_i) = p_i = log(R_iᵀ R_i+1)``. The body angular velocity is ``ω_b = J_r(r) ṙ`` and the
body angular acceleration ``α_b = J_r(r) r̈ + (dJ_r(r)/dt) ṙ``, with ``J_r`` the right Jacobian of
the exponential map, so both are exact derivatives of the interpolated rotation. Continuity of
``ω_b`` and ``α_b`` at every interior sample, written with the unknown knot rates ``c_k``, is a
block-tridiagonal system (3x3 blocks); its only non-linear term, ``(dJ_r/dt) ṙ`` at the end of
each interval, is quadratic in the rates and of relative size ``|p|²``, and Newton's method
(started from the solution without it) resolves it to round-off in two to four iterations. The
curve does not depend on the choice of world or body axes. Each ``p_i`` is the principal
logarithm of the *relative* rotation between successive samples, so a base may turn any number
of times in total; it must turn less than half a turn between two samples (12 turns per second
at 24 fps), beyond which no method can tell the direction of spin from the samples.

Translation: the classical C² cubic spline of the origin's positions, which is the same system with
``J_r = I`` (and no non-linear term).

Why a global spline and not four frames
---------------------------------------
The paper builds its curve "from four successive frames". No cubic scheme that uses only a fixed
window of samples can both interpolate the samples and be C²: Catmull-Rom interpolates but is
only C¹ (its acceleration jumps at every frame, which a stiff strand feels as a kick once per
frame), and the uniform cubic B-spline is C² but does not pass through the animated poses (the
roots would drift off the animated surface). Interpolation and C² together make the knot rates
depend on all samples, so we solve for them once per trajectory. The dependence is nearly local:
a sample's influence decays by a factor of about ``2 - √3 ≈ 0.27`` per frame, so in practice the
curve is shaped by the four or so frames around ``t``, as in the paper.

End conditions: not-a-knot (``F >= 4`` samples), the default of SciPy's and MATLAB's splines,
written invariantly as "the world angular (and linear) accelerations at the first three and at
the last three samples lie on a straight line in time". The spline then reproduces cubic
translations and constant-rate spins about a fixed axis exactly, up to the ends. Fewer samples
give lower order: ``F == 3`` constant world acceleration (a parabola for translation),
``F == 2`` zero acceleration (constant angular and linear velocity: slerp and lerp), ``F == 1``
a motionless base.

Outside ``[times[0], times[-1]]`` the base holds still at its first or last sampled pose with
zero velocity and acceleration (a time within ``1e-9`` of the shortest interval of an end counts
as the end, so substep round-off never switches the motion off early).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from . import spatial
from .errors import InvalidInputError
from .validation import finite_array, is_real

# Largest deviation from orthonormality (max |RᵀR - I|, |det R - 1|) accepted in a rotation;
# Blender's matrices are float32, so their rotations are orthonormal only to about 1e-7.
RIGID_TOLERANCE = 1e-5

# Below this angle (rad) the coefficient functions of exp and its Jacobians use their Taylor
# series (10 terms: truncation < 1e-19); above it the closed forms lose < 1e-14 to cancellation.
_SERIES_ANGLE = 1.0
_SERIES_TERMS = 10

# Newton iteration on the rotation spline's non-linear term: relative step tolerance and cap
# (convergence is quadratic, so the last step leaves the rates at round-off).
_RATE_TOLERANCE = 1e-12
_MAX_ITERATIONS = 30

# Times this close to an end (relative to the shortest interval) still lie on the curve.
_TIME_SLACK = 1e-9
# Velocity changes faster than these between sample intervals, on both sides of one, make it a
# cut (BaseTrajectory): 1,000 m/s² is 42 m/s within a frame at 24 fps, far beyond what a
# swinging arm or a braking car does, far below a teleport of a metre.
CUT_ACCELERATION = 1000.0
CUT_ANGULAR_ACCELERATION = 1000.0
# ... and that many times faster than the velocity changes around it (_cut_intervals).
CUT_CONTRAST = 8.0


@dataclass(frozen=True)
class BaseMotion:
    """Pose, velocity and acceleration of every base at one instant (host, world frame).

    Attributes
    ----------
    rotation : (n_bases, 3, 3) float64
        World rotation of each base frame (orthonormal, det +1).
    position : (n_bases, 3) float64, m
        World position of each base frame's origin.
    angular_velocity : (n_bases, 3) float64, rad/s, world axes
    linear_velocity : (n_bases, 3) float64, m/s, world axes
        Velocity of the base frame's origin.
    angular_acceleration : (n_bases, 3) float64, rad/s², world axes
    linear_acceleration : (n_bases, 3) float64, m/s², world axes
        Classical acceleration (second time derivative of ``position``) of the origin.

    The arrays are read-only float64 copies of what was passed in.
    """

    rotation: np.ndarray
    position: np.ndarray
    angular_velocity: np.ndarray
    linear_velocity: np.ndarray
    angular_acceleration: np.ndarray
    linear_acceleration: np.ndarray

    def __post_init__(self) -> None:
        rotation = finite_array("BaseMotion.rotation", self.rotation, (None, 3, 3))
        n_bases = rotation.shape[0]
        _check_orthonormal("BaseMotion.rotation", rotation)
        for item in fields(self):
            if item.name == "rotation":
                value = rotation
            else:
                value = finite_array(
                    f"BaseMotion.{item.name}", getattr(self, item.name), (n_bases, 3)
                )
            value.setflags(write=False)
            object.__setattr__(self, item.name, value)

    @property
    def n_bases(self) -> int:
        """Number of bases."""
        return self.rotation.shape[0]

    @classmethod
    def still(cls, matrices: np.ndarray) -> BaseMotion:
        """Motionless bases at the rigid world transforms ``matrices`` (n_bases, 4, 4).

        Rotations within :data:`RIGID_TOLERANCE` of orthonormal are re-orthonormalised.
        """
        matrices = finite_array("BaseMotion.still matrices", matrices, (None, 4, 4))
        rotation, position = rigid_parts("BaseMotion.still matrices", matrices)
        zeros = np.zeros_like(position)
        return cls(rotation, position, zeros, zeros, zeros, zeros)


class BaseTrajectory:
    """C² rigid motion of every base through transforms sampled at increasing times.

    Parameters
    ----------
    times : array_like, shape (F,), s
        Strictly increasing sample times, ``F >= 1``.
    matrices : array_like, shape (F, n_bases, 4, 4)
        World transforms of the bases at each sample: rotation and translation only (no scale or
        shear; rotations within :data:`RIGID_TOLERANCE` of orthonormal are re-orthonormalised).

    cut_acceleration : float, m/s²
        A base whose velocity between two samples differs from the velocity between the samples
        before and after it (both, where there are) by more than this over a sample interval is
        *cut* there: an animation cut, an object snapped across the set (see below).
    cut_angular_acceleration : float, rad/s²
        The same for its angular velocity.

    Calling the trajectory (or :meth:`sample`) at a time ``t`` returns a :class:`BaseMotion`;
    see the module docstring for the curve, its end conditions and the behaviour outside the
    sampled range.

    **Cuts.** A jump in the samples (a base teleported 100 m within a frame) is no motion a
    curve through them should follow: a C² spline turns it into accelerations of thousands of
    g over the frames around it, which the strands would feel as inertial forces. So the
    trajectory is split at every interval a base jumps in (any base: the split applies to all)
    and each piece is its own curve, with its own end conditions; within a cut interval the
    bases hold the pose of the sample after it, still (the strands are carried across with
    their pose relative to their bases, as they are by any base motion, and feel nothing of the
    jump). ``times`` of the pieces' first samples after a cut are :attr:`cuts`. ``inf`` for both
    thresholds never cuts.
    """

    def __init__(
        self,
        times: np.ndarray,
        matrices: np.ndarray,
        cut_acceleration: float = CUT_ACCELERATION,
        cut_angular_acceleration: float = CUT_ANGULAR_ACCELERATION,
    ) -> None:
        times = finite_array("BaseTrajectory times", times, (None,))
        if times.shape[0] < 1:
            raise InvalidInputError("BaseTrajectory times must hold at least one sample time")
        matrices = finite_array("BaseTrajectory matrices", matrices, (times.shape[0], None, 4, 4))
        steps = np.diff(times)
        if (steps <= 0).any():
            i = int(np.argmax(steps <= 0))
            raise InvalidInputError(
                f"BaseTrajectory times must be strictly increasing, got times[{i}] = {times[i]} "
                f"and times[{i + 1}] = {times[i + 1]}"
            )
        limits = (cut_acceleration, cut_angular_acceleration)
        for name, limit in zip(
            ("cut_acceleration", "cut_angular_acceleration"), limits, strict=True
        ):
            if not (is_real(limit) and limit > 0.0):
                raise InvalidInputError(
                    f"BaseTrajectory {name} must be > 0 (inf: no cuts), got {limit!r}"
                )
        rotation, position = rigid_parts("BaseTrajectory matrices", matrices)
        times.setflags(write=False)
        self.times = times
        """(F,) float64, s: the sample times (read-only)."""
        self._rotation = rotation
        self._position = position
        self._slack = _TIME_SLACK * float(steps.min()) if steps.size else 0.0
        starts = _cut_intervals(times, rotation, position, *limits) + 1
        self.cuts = times[starts]
        """(C,) float64, s: the first sample time of each piece after a cut (read-only)."""
        self._pieces = (
            [
                BaseTrajectory(times[a:b], matrices[a:b], math.inf, math.inf)
                for a, b in zip(
                    np.concatenate(([0], starts)),
                    np.concatenate((starts, [len(times)])),
                    strict=True,
                )
            ]
            if len(starts)
            else []
        )
        if self._pieces or steps.size == 0:
            return
        h = steps
        rotation_jump = _log(np.einsum("kbji,kbjl->kbil", rotation[:-1], rotation[1:]))
        jac = _right_jacobian(rotation_jump, _coefficients(rotation_jump))
        jac_inv = np.linalg.inv(jac)
        rates = _knot_rates(h, rotation_jump, jac, jac_inv, rotation, rotational=True)
        self._spin = _cubic_coefficients(h, rotation_jump, rates, jac_inv)
        identity = np.broadcast_to(np.eye(3), jac.shape)
        translation = np.diff(position, axis=0)
        velocities = _knot_rates(h, translation, identity, identity, None, rotational=False)
        self._shift = _cubic_coefficients(h, translation, velocities, identity)

    @property
    def n_bases(self) -> int:
        """Number of bases."""
        return self._rotation.shape[1]

    def __call__(self, t: float) -> BaseMotion:
        """The bases' motion at time ``t`` (s); see :meth:`sample`."""
        return self.sample(t)

    def sample(self, t: float) -> BaseMotion:
        """The bases' motion at time ``t`` (s): pose, velocity and acceleration, world frame."""
        real = isinstance(t, int | float | np.integer | np.floating)
        if not real or isinstance(t, bool | np.bool_) or not math.isfinite(t):
            raise InvalidInputError(f"BaseTrajectory sample time must be finite, got {t!r}")
        t = float(t)
        if self._pieces:
            # A cut interval belongs to the piece after it, which holds its first pose there.
            ends = [piece.times[-1] + piece._slack for piece in self._pieces[:-1]]
            return self._pieces[int(np.searchsorted(ends, t, side="left"))].sample(t)
        first, last = self.times[0], self.times[-1]
        if self.times.shape[0] == 1 or t < first - self._slack or t > last + self._slack:
            end = 0 if t <= first else -1
            zeros = np.zeros_like(self._position[end])
            return BaseMotion(self._rotation[end], self._position[end], zeros, zeros, zeros, zeros)
        t = min(max(t, first), last)
        i = min(int(np.searchsorted(self.times, t, side="right")) - 1, self.times.shape[0] - 2)
        s = t - self.times[i]
        r, r_dot, r_ddot = _cubic_at(self._spin, i, s)
        x, x_dot, x_ddot = _cubic_at(self._shift, i, s)
        coefficients = _coefficients(r)
        rotation = self._rotation[i] @ _exp(r, coefficients)
        jac = _right_jacobian(r, coefficients)
        omega_body = np.einsum("bij,bj->bi", jac, r_dot)
        alpha_body = np.einsum("bij,bj->bi", jac, r_ddot) + _curvature_term(r, r_dot, coefficients)
        # World and body angular acceleration differ by ω × ω = 0, so one rotation maps both.
        return BaseMotion(
            rotation=rotation,
            position=self._position[i] + x,
            angular_velocity=np.einsum("bij,bj->bi", rotation, omega_body),
            linear_velocity=x_dot,
            angular_acceleration=np.einsum("bij,bj->bi", rotation, alpha_body),
            linear_acceleration=x_ddot,
        )


def _cut_intervals(
    times: np.ndarray,
    rotation: np.ndarray,
    position: np.ndarray,
    linear_limit: float,
    angular_limit: float,
) -> np.ndarray:
    """Indices ``i`` of the sample intervals ``[times[i], times[i + 1]]`` in which some base
    jumps (:class:`BaseTrajectory`, *Cuts*): its mean velocity there differs from the mean
    velocity of each neighbouring interval faster than the limit, and :data:`CUT_CONTRAST`
    times faster than it changes between the intervals beyond those (so a motion that is fast
    throughout, a base whirled round an origin far away, is not cut everywhere)."""
    if len(times) < 3 or (math.isinf(linear_limit) and math.isinf(angular_limit)):
        return np.zeros(0, dtype=np.int64)
    h = np.diff(times)
    linear = np.diff(position, axis=0) / h[:, None, None]
    turn = _log(np.einsum("kbji,kbjl->kbil", rotation[:-1], rotation[1:]))
    angular = np.einsum("kbij,kbj->kbi", rotation[:-1], turn) / h[:, None, None]
    spacing = 0.5 * (h[:-1] + h[1:])
    jumping = np.zeros(len(h), dtype=bool)
    for velocity, limit in ((linear, linear_limit), (angular, angular_limit)):
        # (F - 2, B): how fast each base's velocity changes from one interval to the next,
        # padded so that interval i sees the changes on its sides at [i] and [i + 1] and the
        # changes beyond them at [i - 1] and [i + 2].
        change = np.linalg.norm(np.diff(velocity, axis=0), axis=-1) / spacing[:, None]
        pad = np.zeros((2, change.shape[1]))
        sides = np.concatenate((pad + np.inf, change, pad + np.inf))[1:-1]
        beyond = np.concatenate((pad - 1.0, change, pad - 1.0))
        jump = np.minimum(sides[:-1], sides[1:])
        # -1 where there is nothing beyond: with no motion around to compare with, no cut.
        background = np.maximum(beyond[:-3], beyond[3:])
        cut = (jump > limit) & (background >= 0.0) & (jump > CUT_CONTRAST * background)
        jumping |= cut.any(axis=1)
    return np.nonzero(jumping)[0]


# --- validation ------------------------------------------------------------------------------


def _check_orthonormal(name: str, rotation: np.ndarray) -> None:
    """Raise unless every ``(..., 3, 3)`` matrix is a rotation within RIGID_TOLERANCE."""
    gram_error = np.abs(np.swapaxes(rotation, -1, -2) @ rotation - np.eye(3)).max(axis=(-2, -1))
    error = np.maximum(gram_error, np.abs(np.linalg.det(rotation) - 1.0))
    if (error > RIGID_TOLERANCE).any():
        index = tuple(int(i) for i in np.argwhere(error > RIGID_TOLERANCE)[0])
        raise InvalidInputError(
            f"{name}[{', '.join(map(str, index))}] is not a rotation (orthonormal, det +1; scale, "
            f"shear and mirroring are not rigid): deviation {error[index]:.3g} > {RIGID_TOLERANCE}"
        )


def rigid_parts(name: str, matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotations (re-orthonormalised) and translations of rigid ``(..., 4, 4)`` transforms."""
    bottom_error = np.abs(matrices[..., 3, :] - (0.0, 0.0, 0.0, 1.0)).max(axis=-1)
    if (bottom_error > RIGID_TOLERANCE).any():
        index = tuple(int(i) for i in np.argwhere(bottom_error > RIGID_TOLERANCE)[0])
        raise InvalidInputError(
            f"{name}[{', '.join(map(str, index))}] is not a rigid transform: its last row must be "
            f"(0, 0, 0, 1), got {matrices[index][3]}"
        )
    rotation = matrices[..., :3, :3]
    _check_orthonormal(name, rotation)
    # Nearest rotation (polar factor), so the spline works on exact rotations.
    u, _, vt = np.linalg.svd(rotation)
    return u @ vt, matrices[..., :3, 3].copy()


# --- so(3): exponential map, logarithm, right Jacobian ---------------------------------------


def _series_table() -> np.ndarray:
    """Taylor coefficients in θ² (5, terms) of ``φ_1, φ_2, φ_3, φ_2'/θ, φ_3'/θ``, where
    ``φ_m = Σ_k (-1)^k θ^2k / (2k+m)!``: ``φ_1 = sin θ/θ``, ``φ_2 = (1 - cos θ)/θ²``,
    ``φ_3 = (θ - sin θ)/θ³``."""
    k = np.arange(_SERIES_TERMS)
    value = [(-1.0) ** k / [float(math.factorial(2 * j + m)) for j in k] for m in (1, 2, 3)]
    # φ_m'/θ = Σ_k≥1 (-1)^k 2k θ^(2k-2) / (2k+m)!, re-indexed to start at θ⁰.
    slope = [
        (-1.0) ** (k + 1) * (2 * k + 2) / [float(math.factorial(2 * j + 2 + m)) for j in k]
        for m in (2, 3)
    ]
    return np.array(value + slope)


_SERIES = _series_table()


def _coefficients(r: np.ndarray) -> np.ndarray:
    """``φ_1, φ_2, φ_3, φ_2'/θ, φ_3'/θ`` (5, ...) of ``θ = |r|`` for rotation vectors (..., 3)."""
    theta2 = np.einsum("...i,...i->...", r, r)
    theta = np.sqrt(theta2)
    small = theta < _SERIES_ANGLE
    t = np.where(small, 1.0, theta)  # keeps the unused closed-form branch finite
    sin, one_minus_cos = np.sin(t), 2.0 * np.sin(0.5 * t) ** 2
    closed = np.stack(
        (
            sin / t,
            one_minus_cos / t**2,
            (t - sin) / t**3,
            (t * sin - 2.0 * one_minus_cos) / t**4,
            (t * one_minus_cos - 3.0 * (t - sin)) / t**5,
        )
    )
    series = np.zeros_like(closed)
    for column in reversed(_SERIES.T):
        series = series * theta2 + column.reshape((5,) + (1,) * theta2.ndim)
    return np.where(small, series, closed)


def _skew(r: np.ndarray) -> np.ndarray:
    """Cross-product matrices ``[r]x`` (..., 3, 3) of vectors (..., 3)."""
    zero = np.zeros_like(r[..., 0])
    x, y, z = r[..., 0], r[..., 1], r[..., 2]
    return np.stack(
        (np.stack((zero, -z, y), -1), np.stack((z, zero, -x), -1), np.stack((-y, x, zero), -1)),
        -2,
    )


def _exp(r: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """Rotation matrices ``exp([r]x)`` (..., 3, 3) of rotation vectors (..., 3).

    ``coefficients`` is ``_coefficients(r)``, shared by the functions below.
    """
    f1, f2 = coefficients[0, ..., None, None], coefficients[1, ..., None, None]
    k = _skew(r)
    return np.eye(3) + f1 * k + f2 * (k @ k)


def _log(rotation: np.ndarray) -> np.ndarray:
    """Principal rotation vectors (..., 3), angle in [0, π], of rotation matrices (..., 3, 3)."""
    q = spatial.matrix_to_quat(np, np.moveaxis(rotation, (-2, -1), (0, 1)))  # w >= 0
    vector = np.moveaxis(q[1:], 0, -1)
    sin_half = np.linalg.norm(vector, axis=-1)
    tiny = sin_half < 1e-8
    # angle / sin(angle/2) -> 2 / cos(angle/2) as the angle vanishes (error ~ sin_half² < 1e-16).
    ratio = 2.0 * np.arctan2(sin_half, q[0]) / np.where(tiny, 1.0, sin_half)
    return np.where(tiny, 2.0 / q[0], ratio)[..., None] * vector


def _right_jacobian(r: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """Right Jacobians ``J_r(r)`` (..., 3, 3) of exp: ``exp(r)ᵀ d exp(r)/dt = [J_r(r) ṙ]x``."""
    f2, f3 = coefficients[1, ..., None, None], coefficients[2, ..., None, None]
    k = _skew(r)
    return np.eye(3) - f2 * k + f3 * (k @ k)


def _curvature_term(r: np.ndarray, r_dot: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``(dJ_r(r)/dt) ṙ`` (..., 3): the part of the body angular acceleration not in ``J_r r̈``.

    From ``J_r(r) u = u - φ_2 r×u + φ_3 r×(r×u)`` differentiated along ``ṙ`` (with
    ``dφ/dt = (φ'/θ)(r·ṙ)``) and applied to ``u = ṙ``. It is quadratic in ``ṙ`` and vanishes
    when ``ṙ`` is parallel to ``r`` (a spin about a fixed axis).
    """
    _, _, f3, g2, g3 = (c[..., None] for c in coefficients)
    rxv = np.cross(r, r_dot)
    rv = np.einsum("...i,...i->...", r, r_dot)[..., None]
    return rv * (g3 * np.cross(r, rxv) - g2 * rxv) + f3 * np.cross(r_dot, rxv)


# --- the spline ----------------------------------------------------------------------------------


def _knot_rates(h, jump, jac, jac_inv, frames, rotational):
    """Knot rates ``c_k`` (F, n, 3) of the C² cubic spline through the samples.

    Parameters
    ----------
    h : (F-1,) interval lengths, s.
    jump : (F-1, n, 3) ``p_i``: what ``r_i`` must reach at the interval's end.
    jac, jac_inv : (F-1, n, 3, 3) ``J_r(p_i)`` and its inverse (identity for translation).
    frames : (F, n, 3, 3) or None
        World rotation of each knot's axes, to state the end conditions in world axes
        (None: all knots share world axes, as positions do).
    rotational : bool
        Whether the accelerations carry the curvature term of the rotation spline.

    Every row of the system is a condition on knot accelerations, each written as a *form*
    ``(cols, const, quad)`` meaning ``Σ_j cols[j] c_(row+j) + const + Σ_i quad[i] Q_(row+i)``,
    where ``Q_i = _curvature_term(p_i, J_r(p_i)⁻¹ c_i+1)`` is the acceleration's non-linear
    part at the end of interval ``i``. Forms take an index array ``k`` to state all interior rows
    at once. The rates solve ``A c = rhs + Σ N Q(c)``, by Newton's method when ``Q`` is present.
    """
    n_knots, n = jump.shape[0] + 1, jump.shape[1]
    eye = np.broadcast_to(np.eye(3), (n, 3, 3))
    h3, h4 = h[:, None, None], h[:, None, None, None]

    def right(k):  # body acceleration at knot k, from interval k
        return {0: -4.0 / h4[k] * eye, 1: -2.0 / h4[k] * jac_inv[k]}, 6.0 * jump[k] / h3[k] ** 2, {}

    def left(k):  # body acceleration at knot k, from interval k - 1 (ends in knot k's axes)
        cols = {-1: 2.0 / h4[k - 1] * jac[k - 1], 0: 4.0 / h4[k - 1] * eye}
        return cols, -6.0 * jump[k - 1] / h3[k - 1] ** 2, {-1: eye}

    def rel(a, b):  # maps vectors in knot a's axes into knot b's
        return eye if frames is None else np.swapaxes(frames[b], -1, -2) @ frames[a]

    def combine(*terms):  # Σ weight · form, each form shifted to its knot's offset from the row
        cols, const, quad = {}, 0.0, {}
        for weight, shift, (form_cols, form_const, form_quad) in terms:
            for target, source in ((cols, form_cols), (quad, form_quad)):
                for j, block in source.items():
                    target[j + shift] = target.get(j + shift, 0.0) + weight @ block
            const = const + (weight @ form_const[..., None])[..., 0]
        return cols, const, quad

    last = n_knots - 1
    interior = np.arange(1, last)
    rows = [(interior, combine((eye, 0, right(interior)), (-eye, 0, left(interior))))]
    if n_knots == 2:  # zero acceleration at both ends
        rows += [(0, right(0)), (1, left(1))]
    elif n_knots == 3:  # equal world accelerations at all three knots
        rows += [
            (0, combine((rel(0, 1), 0, right(0)), (-eye, 1, right(1)))),
            (2, combine((rel(2, 1), 0, left(2)), (-eye, -1, left(1)))),
        ]
    else:  # not-a-knot: world accelerations of the end triples collinear in time
        m = last - 1
        first_row = combine(
            ((h[0] + h[1]) * eye, 1, right(1)),
            (-h[1] * rel(0, 1), 0, right(0)),
            (-h[0] * rel(2, 1), 2, left(2)),
        )
        last_row = combine(
            ((h[m - 1] + h[m]) * eye, -1, left(m)),
            (-h[m] * rel(m - 1, m), -2, right(m - 1)),
            (-h[m - 1] * rel(m + 1, m), 0, left(m + 1)),
        )
        rows += [(0, first_row), (last, last_row)]

    # Block band: offsets -2..2 around the diagonal (±2 only in the two end rows).
    band = np.zeros((5, n_knots, n, 3, 3))
    rhs = np.zeros((n_knots, n, 3))
    quad_rows, quad_intervals, quad_blocks = [], [], []
    for k, (cols, const, quad) in rows:
        for j, block in cols.items():
            band[j + 2, k] = block
        rhs[k] = -const
        for i, block in quad.items():
            k_array = np.atleast_1d(k)
            quad_rows.append(k_array)
            quad_intervals.append(k_array + i)
            quad_blocks.append(-np.broadcast_to(block, (k_array.size, n, 3, 3)))
    rates = _BandSolver(band)(rhs)
    if not rotational:
        return rates
    quad_rows, quad_intervals = np.concatenate(quad_rows), np.concatenate(quad_intervals)
    quad_blocks = np.concatenate(quad_blocks)
    # Q_i depends on c_(i+1) only: its column in row k sits at offset i + 1 - k.
    quad_offsets = quad_intervals + 1 - quad_rows + 2
    coefficients = _coefficients(jump)
    scale = np.abs(jump).max(initial=0.0) / h.min() + np.finfo(float).tiny
    for _ in range(_MAX_ITERATIONS):
        end_rate = np.einsum("kbij,kbj->kbi", jac_inv, rates[1:])
        quad_terms = _curvature_term(jump, end_rate, coefficients)
        # Q is quadratic in the end rate v, so dQ/dv e_j = Q(v + e_j) - Q(v) - Q(e_j) exactly.
        unit = np.eye(3)[:, None, None, :]
        slope = (
            _curvature_term(jump, end_rate + unit, coefficients)
            - quad_terms
            - _curvature_term(jump, np.broadcast_to(unit, (3, *end_rate.shape)), coefficients)
        )
        slope = np.moveaxis(slope, 0, -1) @ jac_inv  # dQ_i / dc_(i+1)
        # Newton: (A - N dQ/dc) c_new = rhs + N (Q - dQ/dc c).
        newton_band = band.copy()
        np.add.at(newton_band, (quad_offsets, quad_rows), -quad_blocks @ slope[quad_intervals])
        linear_part = quad_terms - np.einsum("kbij,kbj->kbi", slope, rates[1:])
        forced = rhs.copy()
        np.add.at(forced, quad_rows, (quad_blocks @ linear_part[quad_intervals][..., None])[..., 0])
        rates, previous = _BandSolver(newton_band)(forced), rates
        if np.abs(rates - previous).max(initial=0.0) <= _RATE_TOLERANCE * scale:
            return rates
    step = np.abs(rates - previous).max(axis=-1)
    worst = np.argmax(np.where(np.isfinite(step), step, np.inf))
    knot, base = np.unravel_index(worst, step.shape)
    raise InvalidInputError(
        f"BaseTrajectory: the rotation spline of base {base} did not converge near sample {knot}; "
        "the base turns too fast between samples (it must turn well under half a turn per sample)"
    )


class _BandSolver:
    """Block LU of a block-banded matrix whose only entries at offset ±2 are in the first row
    (column 2) and the last row (column F-3): the not-a-knot end conditions.

    Those two entries are first eliminated with the neighbouring row, which leaves a block
    tridiagonal matrix, factorised by the block Thomas algorithm (no pivoting: the interior rows
    are block diagonally dominant, ``|J_r| <= 1``, ``|J_r⁻¹| <= π/2`` for angles up to π).
    """

    def __init__(self, band: np.ndarray) -> None:
        lower, diag, upper = band[1].copy(), band[2].copy(), band[3].copy()
        n_knots = diag.shape[0]
        self.first = self.last = None
        if n_knots >= 3:
            # Row 0 -= X row 1 and row F-1 -= Y row F-2 cancel the offset ±2 blocks.
            self.first = band[4, 0] @ np.linalg.inv(upper[1])
            diag[0] -= self.first @ lower[1]
            upper[0] -= self.first @ diag[1]
            self.last = band[0, -1] @ np.linalg.inv(lower[-2])
            lower[-1] -= self.last @ diag[-2]
            diag[-1] -= self.last @ upper[-2]
        self.upper = upper
        self.pivot_inv = np.empty_like(diag)
        self.multiplier = np.empty_like(lower)
        self.pivot_inv[0] = np.linalg.inv(diag[0])
        for k in range(1, n_knots):
            self.multiplier[k] = lower[k] @ self.pivot_inv[k - 1]
            self.pivot_inv[k] = np.linalg.inv(diag[k] - self.multiplier[k] @ upper[k - 1])

    def __call__(self, rhs: np.ndarray) -> np.ndarray:
        """Solution (F, n, 3) for the right-hand side ``rhs`` (F, n, 3)."""
        y = rhs.copy()
        if self.first is not None:
            y[0] -= np.einsum("bij,bj->bi", self.first, y[1])
            y[-1] -= np.einsum("bij,bj->bi", self.last, y[-2])
        for k in range(1, y.shape[0]):
            y[k] -= np.einsum("bij,bj->bi", self.multiplier[k], y[k - 1])
        x = np.empty_like(y)
        x[-1] = np.einsum("bij,bj->bi", self.pivot_inv[-1], y[-1])
        for k in reversed(range(y.shape[0] - 1)):
            residual = y[k] - np.einsum("bij,bj->bi", self.upper[k], x[k + 1])
            x[k] = np.einsum("bij,bj->bi", self.pivot_inv[k], residual)
        return x


def _cubic_coefficients(h, jump, rates, jac_inv) -> np.ndarray:
    """Coefficients ``(c_i, b_i, a_i)`` (3, F-1, n, 3) of ``r_i(s) = c s + b s² + a s³``."""
    end_rate = np.einsum("kbij,kbj->kbi", jac_inv, rates[1:])  # ṙ_i(h_i)
    h = h[:, None, None]
    c = rates[:-1]
    b = (3.0 * jump / h - 2.0 * c - end_rate) / h
    a = (c + end_rate - 2.0 * jump / h) / h**2
    return np.stack((c, b, a))


def _cubic_at(coefficients: np.ndarray, i: int, s: float) -> tuple[np.ndarray, ...]:
    """Value, first and second derivative (each (n, 3)) of cubic ``i`` at ``s``."""
    c, b, a = coefficients[:, i]
    return ((a * s + b) * s + c) * s, (3.0 * a * s + 2.0 * b) * s + c, 6.0 * a * s + 2.0 * b
