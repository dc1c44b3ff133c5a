"""Drawn curves to strands: arc-length resampling and branches, as a forest of ``StrandSpec``.

:func:`convert` resamples each drawn polyline into equal segments, attaches every spline whose
root lies on another spline to the link of that spline it starts on, and returns the
:class:`StrandLayout` the engine's model is built from (``core.build_model``), with what the
root-to-tip profiles, the preview and the bakes need of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import StrandSpec
from .errors import SceneInputError
from .geometry import (
    arc_coordinate,
    branch_cycle,
    find_branch_attachments,
    polyline_length,
    resample_by_arc_length,
    segments_for_length,
)
from .records import DrawnCurves


@dataclass(frozen=True)
class ConversionSettings:
    """How drawn curves become strands."""

    resample_mode: str  # "COUNT" or "LENGTH"
    segment_count: int
    segment_length: float  # m
    branch_tolerance: float  # m


@dataclass(frozen=True)
class StrandLayout:
    """The strands of one object, ready for ``build_model``.

    Attributes
    ----------
    specs : list of StrandSpec
        In the order of the object's splines (strand ``i`` is spline ``i``).
    base_rest_poses : (n_bases, 4, 4) float64
        Rigid world transforms of the bases at the start frame.
    link_coordinate : (n_links,) float64
        Normalised arc length (0 root, 1 tip) of each link's centre along its strand, strand
        order; drives the root-to-tip profiles.
    point_counts : (n_strands,) int
        Points per strand (segments + 1), for writing the preview.
    """

    specs: list[StrandSpec]
    base_rest_poses: np.ndarray
    link_coordinate: np.ndarray
    point_counts: np.ndarray

    @property
    def rest_points(self) -> np.ndarray:
        """(n_points, 3) rest points in strand order, m, world."""
        return np.concatenate([np.asarray(spec.points) for spec in self.specs])

    @property
    def link_parent(self) -> np.ndarray:
        """(n_links,) int64 strand-order parent link of every link (-1 for the first link of a
        root strand): the previous link of its strand, or for a branch's first link the link of
        the parent strand it is attached to."""
        link_counts = np.asarray(self.point_counts) - 1
        offsets = np.concatenate(([0], np.cumsum(link_counts)))
        parents = []
        for strand, spec in enumerate(self.specs):
            first = -1 if spec.parent is None else offsets[spec.parent[0]] + spec.parent[1]
            parents.append(first)
            parents.extend(offsets[strand] + np.arange(link_counts[strand] - 1))
        return np.array(parents, dtype=np.int64)


def convert(
    drawn: DrawnCurves,
    base_of_curve: np.ndarray,
    base_rest_poses: np.ndarray,
    settings: ConversionSettings,
    allow_branches: bool,
) -> StrandLayout:
    """Resample drawn polylines into strands and attach branches to their parents.

    ``base_of_curve`` gives the base that drives each curve if it is a root strand. A branch is
    attached to the link of its parent that holds the nearest point of the parent's drawn curve.
    Raises :class:`SceneInputError` if branches form a cycle.
    """
    lengths = [polyline_length(points) for points in drawn.polylines]
    if settings.resample_mode == "LENGTH":
        counts = [segments_for_length(length, settings.segment_length) for length in lengths]
    else:
        counts = [settings.segment_count] * len(lengths)
    resampled = [
        resample_by_arc_length(points, count)
        for points, count in zip(drawn.polylines, counts, strict=True)
    ]

    attachments = (
        find_branch_attachments(drawn.polylines, settings.branch_tolerance)
        if allow_branches
        else [None] * len(resampled)
    )
    parents = [None if a is None else a.parent for a in attachments]
    cycle = branch_cycle(parents)
    if cycle is not None:
        names = ", ".join(drawn.labels[i] for i in cycle)
        raise SceneInputError(
            f"object {drawn.object_name!r}: {names} start on each other, so none of them can be "
            "the trunk; move one root off the other curve or lower Branch Tolerance"
        )

    specs = []
    for index, points in enumerate(resampled):
        name = f"{drawn.object_name}: {drawn.labels[index]}"
        attachment = attachments[index]
        if attachment is None:
            specs.append(StrandSpec(points, base=int(base_of_curve[index]), name=name))
            continue
        parent = attachment.parent
        fraction = attachment.arc_length / lengths[parent]
        link = min(int(fraction * counts[parent]), counts[parent] - 1)
        specs.append(StrandSpec(points, parent=(parent, link), name=name))
    return StrandLayout(
        specs=specs,
        base_rest_poses=base_rest_poses,
        link_coordinate=np.concatenate([arc_coordinate(points) for points in resampled]),
        point_counts=np.array([len(points) for points in resampled]),
    )
