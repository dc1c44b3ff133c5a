"""Pure-NumPy geometry for turning drawn curves into strands.

Everything is host float64, world frame, metres. The rules that decide an artist's strands
(which points of Blender's wire mesh form a spline, arc-length resampling, which spline is a
branch of which, how a root sits on a surface triangle) read as plain maths and are checked
without Blender (``tests/strands_io/test_geometry.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Pieces of a drawn polyline shorter than this (m) carry no direction; they are merged away before
# resampling, so repeated control points are harmless.
COINCIDENT_DISTANCE = 1e-9


def edge_chains(vertex_count: int, edges: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` vertex ranges of the wire mesh Blender makes from a legacy curve.

    Blender writes each spline's evaluated points contiguously, joined by edges ``(i, i + 1)``
    (plus a closing edge for cyclic splines); a spline starts wherever that edge is missing.
    ``edges`` is ``(E, 2)`` int, vertex indices.
    """
    linked = np.zeros(max(vertex_count - 1, 0), dtype=bool)
    consecutive = edges[:, 1] - edges[:, 0] == 1
    linked[edges[consecutive, 0]] = True
    backwards = edges[:, 0] - edges[:, 1] == 1
    linked[edges[backwards, 1]] = True
    starts = np.concatenate(([0], np.nonzero(~linked)[0] + 1))
    stops = np.concatenate((starts[1:], [vertex_count]))
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


def polyline_length(points: np.ndarray) -> float:
    """Total length (m) of a polyline ``(P, 3)``."""
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def arc_lengths(points: np.ndarray) -> np.ndarray:
    """Arc length (m) from a polyline's first point to each of its points ``(P, 3)``, ``(P,)``."""
    return np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))))


def points_at_arc_lengths(points: np.ndarray, at: float | np.ndarray) -> np.ndarray:
    """The points of a polyline ``(P, 3)`` at the arc lengths ``at`` (m, a scalar or ``(K,)``)
    from its first point, ``(3,)`` or ``(K, 3)``."""
    arc = arc_lengths(points)
    return np.stack([np.interp(at, arc, points[:, axis]) for axis in range(3)], axis=-1)


def segments_for_length(total_length: float, segment_length: float) -> int:
    """Number of equal segments closest to ``segment_length`` for a strand (at least one)."""
    return max(1, round(total_length / segment_length))


def resample_by_arc_length(points: np.ndarray, segments: int) -> np.ndarray:
    """``segments + 1`` points equally spaced by arc length along a polyline ``(P, 3)``.

    The first and last points are kept exactly (the root stays where the artist put it).
    Consecutive coincident points are dropped first, so they cannot create zero-length pieces.
    """
    points = np.asarray(points, dtype=np.float64)
    steps = np.diff(points, axis=0)
    pieces = np.sqrt(np.einsum("ij,ij->i", steps, steps))
    keep = np.concatenate(([True], pieces > COINCIDENT_DISTANCE))
    points, pieces = points[keep], pieces[keep[1:]]
    arc = np.concatenate(([0.0], np.cumsum(pieces)))
    targets = np.linspace(0.0, arc[-1], segments + 1)
    resampled = np.stack([np.interp(targets, arc, points[:, axis]) for axis in range(3)], axis=1)
    resampled[0], resampled[-1] = points[0], points[-1]
    return resampled


def arc_coordinate(points: np.ndarray) -> np.ndarray:
    """Normalised arc length (0 at the root, 1 at the tip) of each segment's centre, ``(P-1,)``."""
    pieces = np.linalg.norm(np.diff(points, axis=0), axis=1)
    return (np.cumsum(pieces) - 0.5 * pieces) / pieces.sum()


def root_to_tip(s: np.ndarray, tip: float, shape: float) -> np.ndarray:
    """Profile factor along a strand: 1 at the root, ``tip`` at the tip, ``1 + (tip-1) s^shape``."""
    return 1.0 + (tip - 1.0) * np.power(s, shape)


@dataclass(frozen=True)
class BranchAttachment:
    """Where a spline's root lies on another spline.

    Attributes
    ----------
    parent : int
        Index of the spline the root lies on.
    arc_length : float, m
        Arc length along the parent's dense polyline of the point nearest to the root.
    distance : float, m
        Distance from the root to that point.
    """

    parent: int
    arc_length: float
    distance: float


def find_branch_attachments(
    polylines: Sequence[np.ndarray], tolerance: float
) -> list[BranchAttachment | None]:
    """For each polyline, the other polyline its root lies on (within ``tolerance``), or None.

    Two splines that start at the same point are siblings (a tuft), not a branch of each other:
    a root within ``tolerance`` of another spline's root, nearest to its first ``tolerance`` of
    arc length, is not attached. Among several candidates the nearest wins (ties: lower index).

    Candidate segments are found through a uniform grid and tested for all roots at once, so
    thousands of strands cost a few NumPy calls rather than a comparison of every root with
    every segment.
    """
    n = len(polylines)
    if tolerance <= 0 or n < 2:
        return [None] * n
    polylines = [np.asarray(points, dtype=np.float64) for points in polylines]
    a = np.concatenate([points[:-1] for points in polylines])
    ab = np.concatenate([np.diff(points, axis=0) for points in polylines])
    counts = np.array([len(points) - 1 for points in polylines])
    owner = np.repeat(np.arange(n), counts)
    length = np.sqrt(np.einsum("ij,ij->i", ab, ab))
    arc_start = np.cumsum(length) - length
    arc_start -= np.repeat(arc_start[np.cumsum(counts) - counts], counts)
    roots = np.array([points[0] for points in polylines])
    # A segment whose nearest point is within `tolerance` of a root has its midpoint within
    # `cell` of it, so the root's own grid cell and its 26 neighbours hold every candidate.
    grid = _SegmentGrid(a + 0.5 * ab, tolerance + 0.5 * float(length.max()))

    attachments: list[BranchAttachment | None] = [None] * n
    for chunk in range(0, n, _ROOTS_PER_BATCH):
        root_index, segment = grid.pairs_near(roots[chunk : chunk + _ROOTS_PER_BATCH])
        root_index += chunk
        parent = owner[segment]
        keep = parent != root_index
        root_index, segment, parent = root_index[keep], segment[keep], parent[keep]
        offset = roots[root_index] - a[segment]
        lsq = length[segment] ** 2
        t = np.clip(
            np.einsum("ij,ij->i", offset, ab[segment]) / np.where(lsq > 0, lsq, 1.0), 0.0, 1.0
        )
        distance = np.linalg.norm(offset - t[:, None] * ab[segment], axis=1)
        arc = arc_start[segment] + t * length[segment]
        shared_root = np.linalg.norm(roots[parent] - roots[root_index], axis=1) <= tolerance
        usable = (distance <= tolerance) & ~(shared_root & (arc <= tolerance))
        root_index, parent = root_index[usable], parent[usable]
        distance, arc = distance[usable], arc[usable]
        order = np.lexsort((parent, distance, root_index))
        first = order[np.unique(root_index[order], return_index=True)[1]]
        for i in first:
            attachments[int(root_index[i])] = BranchAttachment(
                parent=int(parent[i]), arc_length=float(arc[i]), distance=float(distance[i])
            )
    return attachments


# Roots tested per batch in find_branch_attachments: bounds the candidate pairs held at once.
_ROOTS_PER_BATCH = 4096


def branch_cycle(parents: Sequence[int | None]) -> list[int] | None:
    """The first cycle in a parent list (each spline's parent index or None), or None."""
    state = [0] * len(parents)  # 0: unvisited, 1: on the current path, 2: done
    for start in range(len(parents)):
        path = []
        index: int | None = start
        while index is not None and state[index] == 0:
            state[index] = 1
            path.append(index)
            index = parents[index]
        if index is not None and state[index] == 1:
            return path[path.index(index) :]
        for visited in path:
            state[visited] = 2
    return None


class _SegmentGrid:
    """Segment midpoints hashed into cubic cells, for neighbourhood queries."""

    _OFFSETS = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 3, indexing="ij"), -1).reshape(-1, 3)

    def __init__(self, midpoints: np.ndarray, cell: float) -> None:
        self.cell = cell
        keys = self._hash(np.floor(midpoints / cell).astype(np.int64))
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]

    @staticmethod
    def _hash(cells: np.ndarray) -> np.ndarray:
        # Collisions only add candidates, which the exact distance test then discards.
        return (cells * np.array([73856093, 19349663, 83492791], dtype=np.int64)).sum(axis=-1)

    def pairs_near(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(point index, segment index)`` of every segment whose midpoint lies in a point's
        cell or a neighbouring one."""
        cells = np.floor(points / self.cell).astype(np.int64)
        keys = self._hash(cells[:, None, :] + self._OFFSETS[None])  # (n, 27)
        lo = np.searchsorted(self.sorted_keys, keys, side="left").ravel()
        hi = np.searchsorted(self.sorted_keys, keys, side="right").ravel()
        counts = hi - lo
        total = int(counts.sum())
        starts = np.cumsum(counts) - counts
        # Every index of every [lo, hi) range, laid end to end.
        flat = np.arange(total) - np.repeat(starts - lo, counts)
        point = np.repeat(np.repeat(np.arange(len(points)), len(self._OFFSETS)), counts)
        return point, self.order[flat]


def triangle_frames(corners: np.ndarray, barycentric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rigid frames riding on triangles: ``(matrices (n, 4, 4), areas (n,))``.

    ``corners`` is ``(n, 3, 3)`` (triangle, corner, xyz); the origin is the barycentric point
    ``barycentric (n, 3)``, x runs along the first edge, z along the triangle's normal, y = z × x.
    Areas are returned so callers can reject triangles that collapsed (zero area, no normal).
    """
    v0, v1, v2 = corners[:, 0], corners[:, 1], corners[:, 2]
    e1, e2 = v1 - v0, v2 - v0
    normal = np.cross(e1, e2)
    double_area = np.linalg.norm(normal, axis=1)
    safe = np.where(double_area > 0, double_area, 1.0)
    z = normal / safe[:, None]
    x = e1 / np.maximum(np.linalg.norm(e1, axis=1), 1e-300)[:, None]
    y = np.cross(z, x)
    matrices = np.zeros((len(corners), 4, 4))
    matrices[:, :3, 0], matrices[:, :3, 1], matrices[:, :3, 2] = x, y, z
    matrices[:, :3, 3] = np.einsum("nk,nkj->nj", barycentric, corners)
    matrices[:, 3, 3] = 1.0
    return matrices, 0.5 * double_area


def barycentric_coordinates(corners: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Barycentric coordinates ``(n, 3)`` of ``points (n, 3)`` projected onto triangles."""
    v0 = corners[:, 0]
    e1, e2, d = corners[:, 1] - v0, corners[:, 2] - v0, points - v0
    d11, d12, d22 = (np.einsum("ij,ij->i", u, v) for u, v in ((e1, e1), (e1, e2), (e2, e2)))
    d1, d2 = np.einsum("ij,ij->i", d, e1), np.einsum("ij,ij->i", d, e2)
    denominator = d11 * d22 - d12 * d12
    denominator = np.where(denominator != 0, denominator, 1.0)
    b1 = (d22 * d1 - d12 * d2) / denominator
    b2 = (d11 * d2 - d12 * d1) / denominator
    return np.stack([1.0 - b1 - b2, b1, b2], axis=1)


def rigid_part(matrices: np.ndarray) -> np.ndarray:
    """The rotation-and-translation part of affine world matrices ``(..., 4, 4)``.

    Object matrices may carry scale; the engine's bases are rigid. The rotation is the nearest
    one (polar decomposition by SVD), so non-uniform scale and shear are dropped, not smeared in.
    """
    matrices = np.asarray(matrices, dtype=np.float64)
    shape = matrices.shape
    matrices = matrices.reshape(-1, 4, 4)
    u, _, vt = np.linalg.svd(matrices[:, :3, :3])
    rotation = u @ vt
    flip = np.linalg.det(rotation) < 0
    if flip.any():
        u = u.copy()
        u[flip, :, 2] *= -1.0
        rotation = u @ vt
    rigid = np.zeros_like(matrices)
    rigid[:, :3, :3] = rotation
    rigid[:, :3, 3] = matrices[:, :3, 3]
    rigid[:, 3, 3] = 1.0
    return rigid.reshape(shape)


def quaternions_from_matrices(rotations: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` of rotation matrices ``(..., 3, 3)``.

    Shepperd's method: each quaternion is computed from the largest of its four squared
    components, so no division by a near-zero number loses precision. The sign is ``w >= 0``
    where ``w`` is the largest; use :func:`continuous_quaternions` along time.
    """
    r = np.asarray(rotations, dtype=np.float64)
    trace = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    squares = np.stack(
        [
            1.0 + trace,
            1.0 + 2.0 * r[..., 0, 0] - trace,
            1.0 + 2.0 * r[..., 1, 1] - trace,
            1.0 + 2.0 * r[..., 2, 2] - trace,
        ],
        axis=-1,
    )
    largest = np.argmax(squares, axis=-1)
    pivot = 0.5 * np.sqrt(np.maximum(np.take_along_axis(squares, largest[..., None], -1), 1e-300))
    # Each row: the 4 products 4·q_i·q_largest, from sums and differences of off-diagonals.
    zy, yz = r[..., 2, 1], r[..., 1, 2]
    xz, zx = r[..., 0, 2], r[..., 2, 0]
    yx, xy = r[..., 1, 0], r[..., 0, 1]
    products = np.stack(
        [
            np.stack([squares[..., 0], zy - yz, xz - zx, yx - xy], -1),
            np.stack([zy - yz, squares[..., 1], xy + yx, xz + zx], -1),
            np.stack([xz - zx, xy + yx, squares[..., 2], yz + zy], -1),
            np.stack([yx - xy, xz + zx, yz + zy, squares[..., 3]], -1),
        ],
        axis=-2,
    )
    row = np.take_along_axis(products, largest[..., None, None], -2)[..., 0, :]
    quaternions = row / (4.0 * pivot)
    return quaternions / np.linalg.norm(quaternions, axis=-1, keepdims=True)


def continuous_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """Flip signs along axis 0 (time) so consecutive quaternions ``(F, ..., 4)`` agree.

    ``q`` and ``-q`` are the same rotation, but keyframes interpolate their components: a sign
    jump between two frames would swing a bone the long way round.
    """
    result = np.array(quaternions, dtype=np.float64)
    for frame in range(1, len(result)):
        dot = np.sum(result[frame] * result[frame - 1], axis=-1, keepdims=True)
        result[frame] *= np.where(dot < 0.0, -1.0, 1.0)
    return result


def root_spacing(roots: np.ndarray) -> float:
    """The median distance from each of two or more roots (n, 3) to its nearest neighbour."""
    nearest = np.empty(len(roots))
    for start in range(0, len(roots), 512):
        block = roots[start : start + 512]
        distance = np.linalg.norm(block[:, None] - roots[None], axis=2)
        distance[np.arange(len(block)), start + np.arange(len(block))] = np.inf
        nearest[start : start + len(block)] = distance.min(axis=1)
    return float(np.median(nearest))
