"""Rotations and spatial algebra against SciPy's rotation code (written independently of ours)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from oriented_strands.core import spatial


@pytest.fixture
def rotations():
    return Rotation.random(50, random_state=1)


def _wxyz(rotation: Rotation) -> np.ndarray:
    return np.roll(rotation.as_quat(), 1, axis=1).T  # SciPy is (x, y, z, w), batch first


def test_quaternion_matrix_round_trip_matches_scipy(backend, rotations):
    xp, device, host = backend.xp, backend.from_host, backend.to_host
    matrices = host(spatial.quat_to_matrix(xp, device(_wxyz(rotations)))).transpose(2, 0, 1)
    np.testing.assert_allclose(matrices, rotations.as_matrix(), atol=1e-14)
    back = host(spatial.matrix_to_quat(xp, device(rotations.as_matrix().transpose(1, 2, 0))))
    expected = _wxyz(rotations) * np.sign(_wxyz(rotations)[0])
    np.testing.assert_allclose(back, expected, atol=1e-14)


def test_multiply_and_exp_match_scipy(backend, rotations):
    xp, device, host = backend.xp, backend.from_host, backend.to_host
    other = Rotation.random(50, random_state=2)
    product = host(spatial.quat_multiply(xp, device(_wxyz(rotations)), device(_wxyz(other))))
    expected = _wxyz(rotations * other)
    np.testing.assert_allclose(
        product * np.sign(product[0]), expected * np.sign(expected[0]), atol=1e-14
    )
    vectors = np.random.default_rng(3).normal(size=(50, 3)) * np.array(
        [[1e-9], [1e-5], [1.0], [3.0], [0.0]]
    ).repeat(10, axis=0)
    exp = host(spatial.quat_exp(xp, device(vectors.T)))
    expected = _wxyz(Rotation.from_rotvec(vectors))
    np.testing.assert_allclose(exp * np.sign(exp[0]), expected * np.sign(expected[0]), atol=1e-14)


def test_twist_swing_recomposes_with_twist_about_y_and_swing_in_xz(backend, rotations):
    xp, device, host = backend.xp, backend.from_host, backend.to_host
    q = device(_wxyz(rotations))
    twist, swing = spatial.twist_swing(xp, q)
    twist, swing, q = host(twist), host(swing), host(q)
    np.testing.assert_allclose(np.abs(twist[[1, 3]]), 0.0, atol=1e-15)
    np.testing.assert_allclose(np.abs(swing[2]), 0.0, atol=1e-14)
    recomposed = spatial.quat_multiply(np, twist, swing)
    np.testing.assert_allclose(recomposed * np.sign(recomposed[0]), q * np.sign(q[0]), atol=1e-14)


def test_minimal_rotation_maps_a_to_b_by_the_angle_between(backend):
    xp, device, host = backend.xp, backend.from_host, backend.to_host
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 20))
    a /= np.linalg.norm(a, axis=0)
    b = rng.normal(size=(3, 20))
    b /= np.linalg.norm(b, axis=0)
    b[:, 0] = -a[:, 0]  # a half turn
    b[:, 1] = a[:, 1]  # no turn
    matrices = host(spatial.minimal_rotation(xp, device(a), device(b))).transpose(2, 0, 1)
    np.testing.assert_allclose(np.einsum("nij,jn->in", matrices, a), b, atol=1e-12)
    angles = Rotation.from_matrix(matrices).magnitude()
    np.testing.assert_allclose(angles, np.arccos(np.clip((a * b).sum(axis=0), -1, 1)), atol=1e-7)


def test_cross_agrees_with_numpy(backend):
    xp, device, host = backend.xp, backend.from_host, backend.to_host
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 3, 10))
    np.testing.assert_allclose(
        host(spatial.cross(xp, device(a), device(b))), np.cross(a.T, b.T).T, atol=1e-15
    )


def test_small_batches_round_exactly_as_wide_ones():
    """A level of a few trees forms its products at once (spatial.small_batch), a wide one row
    by row: an item's result must not depend on the batch around it (a tree steps alone as it
    does among others, bit for bit), so both forms must round alike."""
    from oriented_strands.core.dynamics import inverse3

    rng = np.random.default_rng(3)
    wide = 3 * spatial.SMALL_BATCH
    assert not spatial.small_batch(np, wide)
    assert spatial.small_batch(np, 5)
    for rows, inner, columns in ((6, 6, 3), (3, 6, 6), (3, 6, 3), (6, 3, 6)):
        a = rng.standard_normal((rows, inner, wide))
        b = rng.standard_normal((inner, columns, wide))
        scratch = np.empty(rows * inner * columns * wide)
        together = spatial.matmul(np, a, b, np.empty((rows, columns, wide)), scratch)
        for part in (slice(0, 1), slice(7, 12), slice(100, 100 + spatial.SMALL_BATCH)):
            alone = spatial.matmul(
                np, a[..., part], b[..., part], np.empty_like(together[..., part]), scratch
            )
            np.testing.assert_array_equal(alone, together[..., part])
    q, p = rng.standard_normal((2, 4, wide))
    together = spatial.quat_multiply(np, q, p, out=np.empty((4, wide)))
    matrices = rng.standard_normal((3, 3, wide))
    inverses = inverse3(np, matrices)
    for part in (slice(0, 1), slice(7, 12), slice(100, 100 + spatial.SMALL_BATCH)):
        alone = spatial.quat_multiply(
            np, q[:, part], p[:, part], out=np.empty((4, part.stop - part.start))
        )
        np.testing.assert_array_equal(alone, together[:, part])
        np.testing.assert_array_equal(inverse3(np, matrices[..., part]), inverses[..., part])
