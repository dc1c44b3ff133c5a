"""Spatial algebra and rotations, batched over trailing axes.

Glossary (fixed across the engine)
----------------------------------
- **Component-major layout.** Engine arrays put their components first and the batch (links,
  bases) last: a vector field over ``N`` links is ``(3, N)``, a rotation field ``(3, 3, N)``, a
  quaternion field ``(4, N)``. Each component is then a contiguous row, which makes NumPy's and
  CuPy's elementwise kernels run at full speed (several times faster than ``(N, 3)`` rows of three).
  Public results handed to users (``Simulation.points()`` …) are batch-first host arrays.
- Spatial vectors are 6-vectors ``[angular; linear]`` (Featherstone's order). All spatial
  quantities of a tree are expressed in world-oriented axes about that tree's *reference point*
  ``o`` (its base origin at the end of the step), so moving a spatial vector from a link to its
  parent needs no transform at all.
- Motion vector ``v = [omega; u]``: ``omega`` is the angular velocity, ``u`` the velocity of the
  body-fixed point that coincides with ``o``. Force vector ``f = [n; F]``: ``n`` is the moment
  about ``o``, ``F`` the force. Power is ``omega·n + u·F``.
- Quaternions are ``(w, x, y, z)``, scalar first (Blender's order), unit length, acting on column
  vectors: ``R(q) x``. ``q_a ⊗ q_b`` applies ``q_b`` first, in the frame of ``q_a``.
- A link frame has its origin at the link's joint (the segment's first point) and its local ``y``
  axis along the segment (Blender's bone convention); ``x`` and ``z`` are the cross-section
  (material) axes.
- Names: ``oR`` world rotation of a link frame, ``op`` world joint position, ``r`` joint position
  relative to the tree's reference point, ``c`` centre of mass relative to it, ``S`` joint motion
  subspace (6x3), ``v``/``a``/``f`` spatial velocity/acceleration/force, ``IA`` articulated
  inertia, ``U = IA S``, ``Dinv`` inverse of the joint-space articulated inertia.

Every function that creates arrays takes the array namespace ``xp`` first, so one code path
serves NumPy and CuPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any

# Below this angle (rad) sin(x)/x and friends use their Taylor series; the cutoff keeps the
# truncation error below float64 round-off.
_SMALL_ANGLE = 1e-4


# (i, j, k) for the three components of a cross product: c_i = a_j b_k - a_k b_j.
_CYCLIC = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def cross(xp: Any, a: Array, b: Array, out: Array = None) -> Array:
    """Cross product of 3-vectors along the first axis (broadcasting over the others).

    With ``out`` (which must not overlap ``a`` or ``b``) the result is written there, which saves
    the stacking copy.
    """
    if out is None:
        return xp.stack(
            (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
        )
    for i, j, k in _CYCLIC:
        xp.multiply(a[j], b[k], out=out[i])
        out[i] -= a[k] * b[j]
    return out


def add_cross(xp: Any, out: Array, a: Array, b: Array) -> Array:
    """``out += a × b`` in place, along the first axis (``out`` must not overlap ``a`` or ``b``)."""
    for i, j, k in _CYCLIC:
        out[i] += a[j] * b[k]
        out[i] -= a[k] * b[j]
    return out


def dot(a: Array, b: Array) -> Array:
    """Dot product of 3-vectors along the first axis."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def matvec(xp: Any, m: Array, v: Array) -> Array:
    """``m @ v`` for fields of matrices ``(i, j, ...)`` and vectors ``(j, ...)``."""
    return xp.einsum("ij...,j...->i...", m, v)


def matTvec(xp: Any, m: Array, v: Array) -> Array:
    """``m.T @ v`` for fields of matrices ``(j, i, ...)`` and vectors ``(j, ...)``."""
    return xp.einsum("ji...,j...->i...", m, v)


def matmul(xp: Any, a: Array, b: Array, out: Array, scratch: Array) -> Array:
    """``a @ b`` for fields of matrices ``(i, k, n)`` and ``(k, j, n)`` into ``out`` (i, j, n).

    Summed over ``k`` as whole ``(i, j, n)`` products of rows: on a thousand 6x6 matrices that
    takes about half the time of a batched matrix product, which multiplies matrix by matrix.
    Up to :data:`SMALL_BATCH` matrices on NumPy every product is formed at once and summed over
    ``k`` (:func:`small_batch`), with the same rounding. ``scratch`` is a flat array of at least
    ``i k j n`` elements; ``out`` must not overlap ``a`` or ``b``.
    """
    i, k, n = a.shape
    if small_batch(xp, n):
        terms = scratch.reshape(-1)[: i * k * out.shape[1] * n].reshape(i, k, out.shape[1], n)
        xp.multiply(a[:, :, None], b[None], out=terms)
        return xp.add.reduce(terms, axis=1, out=out)
    term = scratch.reshape(-1)[: out.size].reshape(out.shape)
    xp.multiply(a[:, 0, None], b[None, 0], out=out)
    for column in range(1, k):
        xp.multiply(a[:, column, None], b[None, column], out=term)
        out += term
    return out


# Up to this many items, NumPy forms all the products of a small matrix product (or quaternion
# product, or 3x3 inverse) in one broadcast operation and sums them over the summed axis: a pass
# over a level of a few trees then costs a few operations instead of one per term (a 6x6 by 6x3
# product of 16 items: 7 us against 12). NumPy sums over an axis other than the last in order,
# term by term, so the result rounds exactly as the row-by-row form, which stays the faster one
# for wide batches (1,000 items: 71 us against 83 for that product, 26 against 19 for a
# quaternion product) and on CuPy.
SMALL_BATCH = 128


def small_batch(xp: Any, items: int) -> bool:
    """Whether the products of ``items`` small matrices are formed at once (:data:`SMALL_BATCH`)."""
    return items <= SMALL_BATCH and getattr(xp, "__name__", "") == "numpy"


def quat_multiply(xp: Any, a: Array, b: Array, out: Array = None) -> Array:
    """Hamilton product ``a ⊗ b`` of quaternions ``(4, ...)``, into ``out`` if given (which must
    not overlap ``a`` or ``b``)."""
    if out is not None and a.ndim == 2 and small_batch(xp, out.shape[1]):
        items = out.shape[1]
        products = (a[:, None] * b[None]).reshape(16, items)[_QUATERNION_TERMS]
        products *= _QUATERNION_SIGNS
        return xp.add.reduce(products.reshape(4, 4, items), axis=1, out=out)
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    if out is not None:
        # The same terms in the same order as below, so both forms round alike.
        for row, terms in enumerate(
            (
                ((aw, bw, 1), (ax, bx, -1), (ay, by, -1), (az, bz, -1)),
                ((aw, bx, 1), (ax, bw, 1), (ay, bz, 1), (az, by, -1)),
                ((aw, by, 1), (ax, bz, -1), (ay, bw, 1), (az, bx, 1)),
                ((aw, bz, 1), (ax, by, 1), (ay, bx, -1), (az, bw, 1)),
            )
        ):
            target = out[row]
            xp.multiply(terms[0][0], terms[0][1], out=target)
            for left, right, sign in terms[1:]:
                if sign > 0:
                    target += left * right
                else:
                    target -= left * right
        return out
    return xp.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        )
    )


# The terms of quat_multiply, row by row in its order, as indices 4 i + j into the products
# a_i b_j, and their signs.
_QUATERNION_TERMS = np.array([0, 5, 10, 15, 1, 4, 11, 14, 2, 7, 8, 13, 3, 6, 9, 12])
_QUATERNION_SIGNS = np.array(
    [1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0, -1.0, 1.0]
)[:, None]


def quat_conjugate(xp: Any, q: Array) -> Array:
    """Conjugate (the inverse of a unit quaternion)."""
    return xp.stack((q[0], -q[1], -q[2], -q[3]))


def quat_normalize(xp: Any, q: Array) -> Array:
    """Unit quaternions with a non-negative scalar part (``q`` and ``-q`` are one rotation)."""
    norm = xp.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    # Signed norm: a where() between Python floats would make a float64 array and upcast float32.
    return q / xp.where(q[0] < 0, -norm, norm)


def quat_exp(xp: Any, rotation_vector: Array) -> Array:
    """Unit quaternion of the rotation by ``|rotation_vector|`` radians about its direction."""
    angle = xp.sqrt(dot(rotation_vector, rotation_vector))
    small = angle < _SMALL_ANGLE
    safe = xp.where(small, 1.0, angle)
    # sin(angle/2)/angle, with its series near zero.
    half_sinc = xp.where(small, 0.5 - angle * angle / 48.0, xp.sin(0.5 * safe) / safe)
    return xp.concatenate((xp.cos(0.5 * angle)[None], half_sinc * rotation_vector))


def quat_log(xp: Any, q: Array) -> Array:
    """Rotation vectors (3, ...) of unit quaternions (4, ...), the shorter way round (the inverse
    of :func:`quat_exp`)."""
    # Signed, as in quat_normalize: a where() between Python floats would upcast float32.
    q = q * xp.sign(q[0] + (q[0] == 0))
    sine = xp.sqrt(dot(q[1:], q[1:]))
    angle = 2.0 * xp.arctan2(sine, q[0])
    small = sine < 1e-12
    return q[1:] * xp.where(small, 2.0, angle / xp.where(small, 1.0, sine))


def quat_to_matrix(xp: Any, q: Array, out: Array = None) -> Array:
    """Rotation matrices ``(3, 3, ...)`` of unit quaternions ``(4, ...)``, into ``out`` if given."""
    if out is None:
        out = xp.empty((3, 3, *q.shape[1:]), dtype=q.dtype)
    w, x, y, z = q[0], q[1], q[2], q[3]
    # Doubling is exact, so x * (2 y) rounds exactly as 2 (x y).
    x2, y2, z2 = 2 * x, 2 * y, 2 * z
    xx, yy, zz = x * x2, y * y2, z * z2
    xy, xz, yz = x * y2, x * z2, y * z2
    wx, wy, wz = w * x2, w * y2, w * z2
    xp.subtract(1.0, yy + zz, out=out[0, 0])
    xp.subtract(xy, wz, out=out[0, 1])
    xp.add(xz, wy, out=out[0, 2])
    xp.add(xy, wz, out=out[1, 0])
    xp.subtract(1.0, xx + zz, out=out[1, 1])
    xp.subtract(yz, wx, out=out[1, 2])
    xp.subtract(xz, wy, out=out[2, 0])
    xp.add(yz, wx, out=out[2, 1])
    xp.subtract(1.0, xx + yy, out=out[2, 2])
    return out


def matrix_to_quat(xp: Any, m: Array) -> Array:
    """Unit quaternions ``(4, ...)`` (w >= 0) of rotation matrices ``(3, 3, ...)``, any angle."""
    m00, m11, m22 = m[0, 0], m[1, 1], m[2, 2]
    # Shepperd's method: build from the largest of the four squared components.
    candidates = xp.stack(
        (1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22)
    )
    choice = xp.argmax(candidates, axis=0)
    s2 = xp.maximum(xp.max(candidates, axis=0), 1e-300)
    d21, d02, d10 = m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]
    s21, s02, s10 = m[2, 1] + m[1, 2], m[0, 2] + m[2, 0], m[1, 0] + m[0, 1]
    options = (
        xp.stack((s2, d21, d02, d10)),
        xp.stack((d21, s2, s10, s02)),
        xp.stack((d02, s10, s2, s21)),
        xp.stack((d10, s02, s21, s2)),
    )
    q = options[3]
    for index in (2, 1, 0):
        q = xp.where(choice == index, options[index], q)
    return quat_normalize(xp, q)


def twist_swing(xp: Any, q: Array) -> tuple[Array, Array]:
    """Split unit quaternions ``q = twist ⊗ swing``: twist about local y, swing about an xz axis.

    The swing is applied last, so its axis is expressed in the child's own cross-section axes
    (where bend anisotropy lives). Returns ``(twist, swing)``, each ``(4, ...)``.
    """
    norm = xp.sqrt(q[0] * q[0] + q[2] * q[2])
    degenerate = norm < 1e-12
    # A swing of exactly pi leaves the twist undefined; any twist is then as good as another.
    safe = xp.where(degenerate, 1.0, norm)
    tw = xp.where(degenerate, 1.0, q[0] / safe)
    ty = xp.where(degenerate, 0.0, q[2] / safe)
    zero = xp.zeros_like(tw)
    twist = xp.stack((tw, zero, ty, zero))
    swing = quat_multiply(xp, quat_conjugate(xp, twist), q)
    return twist, swing


def minimal_rotation(xp: Any, a: Array, b: Array) -> Array:
    """Rotation matrices ``(3, 3, ...)`` taking unit vectors ``a`` to ``b`` about ``a × b``.

    This is parallel transport of a frame along a polyline. When ``b`` is opposite to ``a`` the
    axis is a vector perpendicular to ``a``.
    """
    axis = cross(xp, a, b)
    cos = dot(a, b)
    sin = xp.sqrt(dot(axis, axis))
    opposite = (sin < 1e-9) & (cos < 0)
    use_x = xp.abs(a[0]) < 0.9
    helper = xp.stack((xp.where(use_x, 1.0, 0.0), xp.where(use_x, 0.0, 1.0), xp.zeros_like(a[0])))
    perpendicular = cross(xp, a, helper)
    perpendicular = perpendicular / xp.sqrt(dot(perpendicular, perpendicular))
    unit_axis = xp.where(opposite, perpendicular, axis / xp.where(sin < 1e-300, 1.0, sin))
    return quat_to_matrix(xp, quat_exp(xp, unit_axis * xp.arctan2(sin, cos)))
