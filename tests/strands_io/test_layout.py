"""Drawn curves become strands: segment counts, equal segments, roots, bases and branches."""

import numpy as np
import pytest

from oriented_strands.strands_io.errors import SceneInputError
from oriented_strands.strands_io.layout import convert
from strand_systems import conversion, drawn

IDENTITY = np.eye(4)[None]


def _segment_lengths(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(points, axis=0), axis=1)


def test_each_curve_becomes_equal_segments_from_its_root_to_its_tip():
    curves = drawn(
        [
            [(0, 0, 0), (0, 0, -0.1), (0, 0, -0.1), (0, 0, -0.3)],  # a repeated point
            [(0.1, 0, 0), (0.1, 0, -0.2)],
        ],
        name="ponytail",
    )
    layout = convert(curves, np.zeros(2, int), IDENTITY, conversion(), allow_branches=True)

    assert layout.point_counts.tolist() == [17, 17]
    first, second = (np.asarray(spec.points) for spec in layout.specs)
    np.testing.assert_allclose(_segment_lengths(first), 0.3 / 16)
    np.testing.assert_allclose(_segment_lengths(second), 0.2 / 16)
    np.testing.assert_array_equal(first[[0, -1]], [(0, 0, 0), (0, 0, -0.3)])
    np.testing.assert_array_equal(layout.rest_points, np.concatenate([first, second]))
    assert [spec.name for spec in layout.specs] == ["ponytail: spline 0", "ponytail: spline 1"]
    # Link centres at (k + 1/2) / 16 of each strand's length.
    np.testing.assert_allclose(layout.link_coordinate, np.tile((np.arange(16) + 0.5) / 16, 2))


def test_segment_length_gives_each_strand_the_nearest_whole_number_of_segments():
    curves = drawn([[(0, 0, 0), (0, 0, 0.3)], [(1, 0, 0), (1, 0, 0.52)], [(2, 0, 0), (2, 0, 0.04)]])
    settings = conversion(resample_mode="LENGTH", segment_length=0.1)

    layout = convert(curves, np.zeros(3, int), IDENTITY, settings, allow_branches=True)

    # 0.3 / 0.1 = 3, 0.52 / 0.1 = 5.2 -> 5, and a strand shorter than half a segment keeps one.
    assert (layout.point_counts - 1).tolist() == [3, 5, 1]
    np.testing.assert_allclose(_segment_lengths(np.asarray(layout.specs[1].points)), 0.52 / 5)


def test_hair_on_a_surface_gives_each_curve_its_own_base():
    curves = drawn([[(0, 0, 0), (0, 0, 0.1)], [(0.02, 0, 0), (0.02, 0, 0.1)]])
    bases = np.stack([np.eye(4), np.eye(4)])

    layout = convert(curves, np.arange(2), bases, conversion(), allow_branches=False)

    assert [spec.base for spec in layout.specs] == [0, 1]
    assert layout.base_rest_poses is bases


TREE = [
    [(0, 0, 0), (0, 0, 0.5), (0, 0, 1)],  # trunk, 1 m
    [(0, 0, 0.53), (0.3, 0, 0.83)],  # on the trunk at 0.53 m: link 8 of 16 (0.5 .. 0.5625)
    [(0.1, 0, 0.63), (0.1, 0.2, 0.9)],  # on the branch a third of the way: link 5 (5.33 / 16)
    [(0, 0, 0), (-0.2, 0, 0.3)],  # shares the trunk's root: a sibling, not a branch
]


def test_curves_starting_on_other_curves_become_branches_of_the_link_they_start_on():
    layout = convert(drawn(TREE), np.zeros(4, int), IDENTITY, conversion(), allow_branches=True)

    assert [spec.parent for spec in layout.specs] == [None, (0, 8), (1, 5), None]
    assert [spec.base for spec in layout.specs[::3]] == [0, 0]


def test_branches_are_not_looked_for_where_they_are_not_allowed():
    layout = convert(drawn(TREE), np.zeros(4, int), IDENTITY, conversion(), allow_branches=False)

    assert [spec.parent for spec in layout.specs] == [None] * 4


def test_link_parents_run_down_each_strand_and_into_the_link_a_branch_starts_on():
    trunk, branch = [(0, 0, 0), (0, 0, 1)], [(0, 0, 0.6), (0.5, 0, 1)]  # 0.6 m: link 2 of 4
    free = [(1, 0, 0), (1, 0, 1)]
    curves = drawn([trunk, branch, free])

    layout = convert(
        curves, np.zeros(3, int), IDENTITY, conversion(segment_count=4), allow_branches=True
    )

    assert layout.link_parent.tolist() == [-1, 0, 1, 2, 2, 4, 5, 6, -1, 8, 9, 10]


def test_curves_that_start_on_each_other_are_refused_naming_them():
    first = [(0, 0, 0), (1, 0, 0)]
    second = [(0.5, 0, 0), (0.5, 1, 0), (0, 0, 0)]  # starts on the first and ends at its root
    curves = drawn([first, second], name="knot")

    with pytest.raises(SceneInputError, match=r"'knot': spline 0, spline 1 start on each other"):
        convert(curves, np.zeros(2, int), IDENTITY, conversion(), allow_branches=True)
