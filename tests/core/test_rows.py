"""Constraint rows: the joints' swing and twist against rotations built from known angles, the
three rows of a point path, and the padding the LCP pairs rows with."""

import numpy as np

from oriented_strands.core import StrandSpec, build_model, dynamics, spatial
from oriented_strands.core.rows import PathStart, Rows, path_rows, swing_and_twist
from strands import polyline


def test_swing_and_twist_recover_the_angles_a_joint_was_turned_by(backend):
    """A joint turned from rest by a swing of ``θ`` about an axis ``b`` of the cross-section and
    then a twist of ``ψ`` about its own axis (``q = q_rest ⊗ twist ⊗ swing``) has exactly those
    angles and that axis."""
    model = build_model([StrandSpec(polyline(3, 0.3))], backend=backend)
    xp, host = model.xp, backend.to_host
    rng = np.random.default_rng(4)
    n = model.n_links
    swing = rng.uniform(0.1, 2.5, n)
    twist = rng.uniform(-2.5, 2.5, n)
    heading = rng.uniform(0.0, 2 * np.pi, n)
    axis = np.stack((np.cos(heading), np.zeros(n), np.sin(heading)))
    y = np.stack((np.zeros(n), np.ones(n), np.zeros(n)))
    turn = spatial.quat_multiply(
        np, spatial.quat_exp(np, twist * y), spatial.quat_exp(np, swing * axis)
    )
    q = spatial.quat_multiply(xp, model.rest_rotation, backend.from_host(turn))
    angles = swing_and_twist(model, q)
    np.testing.assert_allclose(host(angles.swing), swing, atol=1e-12)
    np.testing.assert_allclose(host(angles.twist), twist, atol=1e-12)
    np.testing.assert_allclose(host(angles.axis), axis, atol=1e-12)


def test_a_points_three_rows_run_along_the_line_from_its_root_and_across_it(backend):
    """A point on a bent strand gets three bilateral rows on orthonormal directions, the first
    along the line from the strand's root joint to the point, each asking for the desired
    velocity's component along it and starting from the held force's."""
    points = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.1, 0.1, 0.0], [0.1, 0.1, -0.1]])
    model = build_model([StrandSpec(points)], backend=backend)
    data = dynamics.Data.for_model(model)
    dynamics.forward_kinematics(
        model, data, model.rest_rotation, *(backend.from_host(a) for a in _still_base())
    )
    link = model.backend.from_host(np.array([model.link_order[2]]))
    desired = np.array([[0.3], [-0.2], [0.5]])
    start = PathStart(link, backend.from_host(np.array([1.0])), backend.from_host(desired))
    held = np.array([[0.02], [0.01], [-0.03]])
    rows = path_rows(model, data, start, backend.from_host(held))
    direction = backend.to_host(rows.direction)
    assert direction.shape == (3, 3)
    np.testing.assert_allclose(direction.T @ direction, np.eye(3), atol=1e-12)
    along = points[3] - points[0]
    np.testing.assert_allclose(direction[:, 0], along / np.linalg.norm(along), atol=1e-12)
    # Components that are zero but for rounding (1e-18) differ by the order of the products.
    np.testing.assert_allclose(
        backend.to_host(rows.target), direction.T @ desired[:, 0], atol=1e-15
    )
    np.testing.assert_allclose(backend.to_host(rows.initial), direction.T @ held[:, 0], atol=1e-15)
    assert np.all(backend.to_host(rows.lower) == -np.inf)
    assert np.all(backend.to_host(rows.upper) == np.inf)


def test_padding_pairs_every_row_with_one_that_holds_no_force(backend):
    xp = backend.xp
    rows = Rows(
        tree=xp.asarray([0, 1]),
        link=xp.asarray([3, 5]),
        fraction=backend.from_host(np.array([0.5, 1.0])),
        direction=backend.from_host(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])),
        joint=xp.asarray([False, True]),
        lower=backend.from_host(np.array([0.0, -np.inf])),
        upper=backend.from_host(np.array([np.inf, np.inf])),
        target=backend.from_host(np.array([0.2, -0.1])),
        initial=backend.from_host(np.array([0.0, 0.3])),
    )
    padded = rows.with_padding(xp)
    host = backend.to_host
    np.testing.assert_array_equal(host(padded.tree), [0, 0, 1, 1])
    np.testing.assert_array_equal(host(padded.link), [3, 3, 5, 5])
    np.testing.assert_array_equal(host(padded.direction)[:, 1::2], 0.0)
    np.testing.assert_array_equal(host(padded.lower)[1::2], 0.0)
    np.testing.assert_array_equal(host(padded.upper)[1::2], 0.0)
    np.testing.assert_array_equal(host(padded.target), [0.2, 0.0, -0.1, 0.0])
    np.testing.assert_array_equal(host(padded.initial), [0.0, 0.0, 0.3, 0.0])


def _still_base() -> tuple[np.ndarray, np.ndarray]:
    """One base at the origin, unrotated: rotation (3, 3, 1) and position (3, 1)."""
    return np.eye(3)[:, :, None], np.zeros((3, 1))
