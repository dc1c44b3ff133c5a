"""The geometry rules behind conversion, checked against brute force on random curves and
against SciPy's rotations."""

import numpy as np
import pytest

from oriented_strands.strands_io.geometry import (
    arc_lengths,
    branch_cycle,
    continuous_quaternions,
    edge_chains,
    find_branch_attachments,
    points_at_arc_lengths,
    quaternions_from_matrices,
    resample_by_arc_length,
    root_spacing,
)


def _brute_force(polylines, tolerance):
    """Nearest point of every other polyline to each root, by testing every segment."""
    found = []
    for i, points in enumerate(polylines):
        root, best = points[0], None
        for j, other in enumerate(polylines):
            if j == i:
                continue
            arc = 0.0
            for a, b in zip(other[:-1], other[1:], strict=True):
                t = np.clip(np.dot(root - a, b - a) / np.dot(b - a, b - a), 0, 1)
                distance = np.linalg.norm(root - (a + t * (b - a)))
                along = arc + t * np.linalg.norm(b - a)
                arc += np.linalg.norm(b - a)
                sibling = np.linalg.norm(other[0] - root) <= tolerance and along <= tolerance
                if distance <= tolerance and not sibling and (best is None or distance < best[1]):
                    best = (j, distance, along)
        found.append(best)
    return found


def test_the_wire_mesh_of_a_curve_splits_where_consecutive_vertices_are_not_joined():
    """Blender's wire mesh of four splines: an open one (vertices 0-3), a cyclic one (4-7, with
    its closing edge), one whose edge runs backwards (8-9) and a single point (10)."""
    edges = np.array([(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (7, 4), (9, 8)])

    assert edge_chains(11, edges) == [(0, 4), (4, 8), (8, 10), (10, 11)]
    assert edge_chains(1, np.zeros((0, 2), dtype=np.int64)) == [(0, 1)]


def test_branch_attachments_match_brute_force():
    rng = np.random.default_rng(7)
    polylines = [np.cumsum(rng.normal(0, 0.05, (rng.integers(2, 9), 3)), axis=0) for _ in range(60)]
    # Start some curves on others, some exactly at others' roots.
    for k in range(0, 60, 3):
        host = polylines[(k + 1) % 60]
        polylines[k] = polylines[k] - polylines[k][0] + host[len(host) // 2]
    polylines[5] = polylines[5] - polylines[5][0] + polylines[6][0]

    found = find_branch_attachments(polylines, tolerance=0.01)
    expected = _brute_force(polylines, tolerance=0.01)
    assert sum(e is not None for e in expected) >= 20
    for got, want in zip(found, expected, strict=True):
        if want is None:
            assert got is None
        else:
            assert (got.parent, got.distance, got.arc_length) == pytest.approx(want, abs=1e-12)


def test_branch_cycles_are_found():
    assert branch_cycle([None, 0, 1]) is None
    assert sorted(branch_cycle([None, 2, 3, 1])) == [1, 2, 3]


def test_points_at_arc_lengths_walk_round_a_corner():
    """An L of a 1 m leg along x and a 2 m leg along y: arc lengths 0, 1, 3 at its corners, and
    the point 2 m along it is 1 m up the second leg."""
    corner = np.array([(0, 0, 0), (1, 0, 0), (1, 2, 0)], dtype=float)
    np.testing.assert_allclose(arc_lengths(corner), [0.0, 1.0, 3.0])
    np.testing.assert_allclose(points_at_arc_lengths(corner, 2.0), [1.0, 1.0, 0.0])
    np.testing.assert_allclose(
        points_at_arc_lengths(corner, np.array([0.0, 0.5, 3.0])),
        [[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [1.0, 2.0, 0.0]],
    )


def test_resampling_keeps_root_and_tip_and_skips_repeated_points():
    points = np.array([(0, 0, 0), (1, 0, 0), (1, 0, 0), (1, 2, 0)], dtype=float)
    resampled = resample_by_arc_length(points, 6)
    np.testing.assert_array_equal(resampled[[0, -1]], points[[0, -1]])
    np.testing.assert_allclose(np.linalg.norm(np.diff(resampled, axis=0), axis=1), 0.5)


def test_quaternions_match_scipy_including_half_turns():
    from scipy.spatial.transform import Rotation

    rotations = Rotation.concatenate(
        [Rotation.random(500, random_state=3), Rotation.from_rotvec(np.pi * np.eye(3))]
    )
    ours = quaternions_from_matrices(rotations.as_matrix())
    theirs = rotations.as_quat()[:, [3, 0, 1, 2]]  # scipy is (x, y, z, w)
    np.testing.assert_allclose(np.abs(np.sum(ours * theirs, axis=1)), 1.0, atol=1e-12)


def test_continuous_quaternions_never_jump_sign_between_frames():
    from scipy.spatial.transform import Rotation

    angles = np.linspace(0.0, 4.0 * np.pi, 60)  # two full turns about z
    matrices = Rotation.from_rotvec(angles[:, None] * [0.0, 0.0, 1.0]).as_matrix()
    smooth = continuous_quaternions(quaternions_from_matrices(matrices)[:, None])[:, 0]
    assert (np.sum(smooth[1:] * smooth[:-1], axis=1) > 0.9).all()


def test_root_spacing_is_the_median_nearest_neighbour_distance_of_a_lattice():
    # A 30 x 30 grid 2 mm apart, jittered by 0.1 mm: every root's nearest neighbour is 2 mm away
    # within the jitter, whatever the blocks the distances are taken in.
    rng = np.random.default_rng(1)
    grid = np.stack(np.meshgrid(np.arange(30), np.arange(30), [0.0]), axis=-1).reshape(-1, 3)
    roots = 2e-3 * grid + rng.uniform(-5e-5, 5e-5, grid.shape)
    assert root_spacing(roots) == pytest.approx(2e-3, abs=2e-4)
    assert root_spacing(roots[:2]) == pytest.approx(np.linalg.norm(roots[1] - roots[0]))
