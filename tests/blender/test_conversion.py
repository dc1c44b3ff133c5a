"""Curves become strands: counts, segment lengths, roots and branches, for every curve type."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    bezier_curve,
    hair_curves,
    poly_curve,
    preview,
    preview_strands,
    segment_lengths,
    world,
)

pytestmark = pytest.mark.usefixtures("extension")

# Preview positions are float32: about 1e-7 relative to the scene's size.
POSITION_TOLERANCE = 1e-6


def test_poly_splines_become_equal_segments_rooted_at_their_first_point():
    ob = poly_curve(
        "ponytail",
        [
            # A repeated point must not create a zero-length segment.
            [(0, 0, 0), (0, 0, -0.1), (0, 0, -0.1), (0, 0, -0.3)],
            [(0.1, 0, 0), (0.1, 0, -0.2)],
        ],
    )
    ob.location = (1.0, 2.0, 3.0)
    ob.rotation_euler = (0.0, 0.0, math.pi / 2)

    assert add_strand_system(ob) == {"FINISHED"}

    strands = preview_strands(ob)
    assert [len(s) for s in strands] == [17, 17]  # 16 segments each by default
    np.testing.assert_allclose(segment_lengths(strands[0]), 0.3 / 16, atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(segment_lengths(strands[1]), 0.2 / 16, atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(strands[0][0], world(ob, (0, 0, 0)), atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(strands[1][0], world(ob, (0.1, 0, 0)), atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(strands[1][-1], world(ob, (0.1, 0, -0.2)), atol=POSITION_TOLERANCE)
    # The input stays the artist's: a separate object shows the strands, in world space.
    assert preview(ob) is not ob
    assert preview(ob).name == "ponytail_strands"
    assert preview(ob).parent is None
    assert preview(ob).users_collection[0] == ob.users_collection[0]
    assert len(ob.data.splines[0].points) == 4


def test_segment_length_setting_gives_each_strand_a_whole_number_of_segments():
    ob = poly_curve("grass", [[(0, 0, 0), (0, 0, 0.3)], [(1, 0, 0), (1, 0, 0.52)]])
    ob.oriented_strands.resample_mode = "LENGTH"
    ob.oriented_strands.segment_length = 0.1

    add_strand_system(ob)

    strands = preview_strands(ob)
    assert [len(s) - 1 for s in strands] == [3, 5]
    np.testing.assert_allclose(segment_lengths(strands[1]), 0.52 / 5, atol=POSITION_TOLERANCE)


def test_curved_bezier_spline_is_resampled_along_its_arc_length():
    knots = [(0, 0, 0), (0.1, 0, -0.1), (0.3, 0, -0.15)]
    ob = bezier_curve("ear", [knots], handles="AUTO")
    ob.oriented_strands.segment_count = 20

    add_strand_system(ob)

    (strand,) = preview_strands(ob)
    lengths = segment_lengths(strand)
    assert len(strand) == 21
    # Equal steps along the curve, and together as long as Blender measures the spline.
    np.testing.assert_allclose(lengths, lengths.mean(), rtol=1e-2)
    assert lengths.sum() == pytest.approx(ob.data.splines[0].calc_length(), rel=2e-3)
    np.testing.assert_allclose(strand[0], knots[0], atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(strand[-1], knots[-1], atol=POSITION_TOLERANCE)


def test_nurbs_spline_with_endpoints_starts_at_its_first_control_point():
    controls = [(0, 0, 0), (0, 0.1, -0.1), (0.1, 0.2, -0.2), (0.2, 0.2, -0.35)]
    ob = poly_curve("tail", [controls], kind="NURBS")

    add_strand_system(ob)

    (strand,) = preview_strands(ob)
    lengths = segment_lengths(strand)
    np.testing.assert_allclose(lengths, lengths.mean(), rtol=1e-2)
    assert lengths.sum() == pytest.approx(ob.data.splines[0].calc_length(), rel=5e-3)
    np.testing.assert_allclose(strand[0], controls[0], atol=POSITION_TOLERANCE)
    np.testing.assert_allclose(strand[-1], controls[-1], atol=POSITION_TOLERANCE)


def test_hair_curves_become_one_strand_per_curve():
    curves = [
        [(0, 0, 0), (0, 0, 0.05), (0, 0, 0.1)],
        [(0.02, 0, 0), (0.02, 0.01, 0.05), (0.02, 0.02, 0.1), (0.02, 0.03, 0.15)],
        [(0.04, 0, 0), (0.04, 0, 0.2)],
    ]
    ob = hair_curves("fur", curves)
    ob.location = (0.0, 0.0, 1.0)
    ob.oriented_strands.segment_count = 8

    add_strand_system(ob)

    strands = preview_strands(ob)
    assert [len(s) for s in strands] == [9, 9, 9]
    for strand, points in zip(strands, curves, strict=True):
        np.testing.assert_allclose(strand[0], world(ob, points[0]), atol=POSITION_TOLERANCE)
        expected = np.linalg.norm(np.diff(points, axis=0), axis=1).sum()
        assert segment_lengths(strand).sum() == pytest.approx(expected, rel=1e-5)


def test_shape_keys_of_the_input_count_for_the_rest_shape():
    ob = poly_curve("key", [[(0, 0, 0), (0, 0, -0.2)]])
    ob.shape_key_add(name="Basis")
    lifted = ob.shape_key_add(name="Lifted")
    lifted.data[0].co = (0.0, 0.0, 0.05)
    lifted.value = 1.0

    add_strand_system(ob)

    (strand,) = preview_strands(ob)
    np.testing.assert_allclose(strand[0], (0, 0, 0.05), atol=POSITION_TOLERANCE)
    assert segment_lengths(strand).sum() == pytest.approx(0.25, rel=1e-5)


def test_curves_starting_on_other_curves_become_branches_that_stay_attached():
    trunk = [(0, 0, 0), (0, 0, 0.5), (0, 0, 1)]
    branch = [(0, 0, 0.53), (0.3, 0, 0.83)]  # on the trunk's link 8 (0.5 .. 0.5625)
    twig = [(0.1, 0, 0.63), (0.1, 0.2, 0.9)]  # on the branch, a third of the way along
    tuft = [(0, 0, 0), (-0.2, 0, 0.3)]  # shares the trunk's root: a sibling, not a branch
    ob = poly_curve("tree", [trunk, branch, twig, tuft])

    add_strand_system(ob)

    from oriented_strands import scene

    model = scene.runtime(ob).model
    assert model.strand_parent.tolist() == [-1, 0, 1, -1]
    assert model.strand_parent_link.tolist() == [-1, 8, 5, -1]

    # Under gravity the tree sags; each branch keeps its root on the link it grows from.
    bpy.ops.oriented_strands.apply_material_preset(preset="LEAF_STEM")
    for frame in range(1, 25):
        bpy.context.scene.frame_set(frame)
    assert scene.status(ob)[1] != "ERROR", scene.status(ob)[0]
    trunk_now, branch_now, twig_now, _ = preview_strands(ob)
    assert np.linalg.norm(branch_now[0] - np.array(branch[0])) > 1e-3, "the tree did not move"
    for child, parent, link in ((branch_now, trunk_now, 8), (twig_now, branch_now, 5)):
        a, b = parent[link], parent[link + 1]
        along = np.clip(np.dot(child[0] - a, b - a) / np.dot(b - a, b - a), 0, 1)
        assert np.linalg.norm(child[0] - (a + along * (b - a))) < 1e-4
