"""Closest points on triangle meshes whose vertices move: the query behind deforming and open
mesh obstacles (:mod:`.obstacles`).

A rigid closed mesh is collided through a signed-distance grid built once. A deforming mesh
would need that grid rebuilt at every substep, which costs seconds on the host for a body of
20,000 triangles (``docs/collisions.md``, *Deforming and open meshes*), and an open mesh (a
collar, a hat's brim, a single-sided plane) has no inside for a grid to store. Both are queried
here against their triangles directly, batched over points on NumPy and CuPy alike:

1. **Broad phase**, a uniform grid of ``cell`` over the mesh's box, built once for the mesh
   where it stands (:func:`surface_grid`, a sort of the triangles' cells; the queries of a
   step share it): each triangle is listed in the cells its box covers, each point looks in
   the cells that the box of its path (from ``x`` to ``x + d``, grown by its reach and by how
   far the surface can move within the step) covers. Every (point, triangle) pair so found is
   a candidate. A summed-area table of the cells holding triangles passes over the points
   whose box holds none at the cost of eight lookups: hair hanging clear of a body takes no
   cells at all.
2. **Narrow phase** per candidate: the closest point on the triangle at the step's start (its
   Voronoi region and barycentric weights, after Ericson, *Real-Time Collision Detection*,
   5.1.5), the closest point at the path's end, and whether the path crosses the triangle
   (Möller–Trumbore). The path is the point's motion relative to the triangle, ``d − h u``
   (``u`` the mean velocity of the triangle's vertices), so a surface that sweeps through a
   point catches it as a point that sweeps through a surface does.
3. **Per point**, the nearest candidate at the start gives the distance, normal and surface
   velocity (the vertices' velocities at the closest point's barycentric weights); the smallest
   distance over all candidates' paths (zero where one crosses) gives the swept distance.

The sign of a closed mesh's distance is that of ``(x − closest)`` against the angle-weighted
pseudonormal of the closest feature (face, edge or vertex; Bærentzen & Aanæs 2005), which is
exact for closed meshes. Open meshes give unsigned distances: they are a sheet of
``thickness`` on either side, and a point is kept on the side it comes from by the swept test.
Points with no candidate get ``+inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInputError
from .spatial import cross, dot

# Voronoi regions of a triangle's closest point: the face, a vertex, an edge (ab, bc, ca).
FACE, VERTEX_A, VERTEX_B, VERTEX_C, EDGE_AB, EDGE_BC, EDGE_CA = range(7)

# Squared lengths below this (m²) count as zero (a point on the surface, a degenerate triangle).
_TINY = 1e-24
# The most cells the summed-area table of a grid's occupied cells holds: a finer grid's cells are
# counted in blocks of several along each axis.
OCCUPANCY_CELLS = 1 << 20


@dataclass(frozen=True, eq=False)
class SurfaceTopology:
    """What stays fixed of a mesh whose vertices move (device arrays).

    Attributes
    ----------
    triangles : (3, F) int
        Vertex indices of each triangle's corners a, b, c.
    edges : (3, F) int
        Index of each triangle's edges ab, bc, ca among the mesh's edges.
    n_edges, n_vertices : int
    closed : bool
        Every edge is shared by exactly two triangles: distances are signed.
    """

    triangles: Any
    edges: Any
    n_edges: int
    n_vertices: int
    closed: bool


@dataclass(eq=False)
class SurfaceHits:
    """The query's answer per point (device arrays, ``P`` points, local frame of the mesh).

    Attributes
    ----------
    distance : (P,) float, m
        Distance at the step's start to the surface (its sheet's side, ``thickness`` off the
        triangles), signed for closed meshes (negative inside); ``+inf`` without candidates.
    normal : (3, P) float
        Unit direction from the closest point to the point (outward for closed meshes).
    smallest : (P,) float, m
        Smallest distance along the point's path relative to the surface (0 less the thickness
        where the path crosses a triangle); the signed distance for a point already inside.
    velocity : (3, P) float, m/s
        The surface's velocity at the closest point (its vertices' velocities interpolated).
    """

    distance: Any
    normal: Any
    smallest: Any
    velocity: Any

    def at(self, points: Any) -> SurfaceHits:
        """The answers for the points ``points`` (indices) only."""
        return SurfaceHits(
            self.distance[points],
            self.normal[:, points],
            self.smallest[points],
            self.velocity[:, points],
        )


def surface_topology(
    xp: Any, label: str, triangles: np.ndarray, n_vertices: int
) -> SurfaceTopology:
    """The topology of a mesh's triangles (F, 3) (host), on the device of ``xp``."""
    corners = triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 3, 2)
    repeated = corners[:, :, 0] == corners[:, :, 1]
    if repeated.any():
        raise InvalidInputError(
            f"{label}: triangle {int(np.nonzero(repeated.any(axis=1))[0][0])} repeats a vertex"
        )
    pairs = np.sort(corners.reshape(-1, 2), axis=1)
    unique, index, counts = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    return SurfaceTopology(
        triangles=xp.asarray(np.ascontiguousarray(triangles.T)),
        edges=xp.asarray(np.ascontiguousarray(index.reshape(-1, 3).T)),
        n_edges=len(unique),
        n_vertices=int(n_vertices),
        closed=bool((counts == 2).all()),
    )


@dataclass(frozen=True, eq=False)
class SurfaceGrid:
    """What a triangle query needs of a surface where it stands: its triangles' corners, boxes,
    velocities and normals, and the broad phase's grid of them (device arrays, ``F``
    triangles, the mesh's frame). It depends on the surface alone, so one serves every query
    of a step (:func:`surface_grid`).

    Attributes
    ----------
    topology : SurfaceTopology
    vertices, velocity : (3, V) float, m and m/s
    thickness, cell : float, m
    corners : (3, 3, F) float
        Each triangle's corners a, b, c.
    low, high : (3, F) float
        The triangles' boxes.
    triangle_velocity : (3, F) float
        The mean velocity of each triangle's corners.
    surface_speed : float, m/s
        The fastest vertex's speed (host).
    origin, top : (3,) float, host
        The mesh's box.
    shape : (3,) int, host
        The grid's cells along each axis.
    first_cell : (3, F) int
        The first cell of each triangle's box.
    sorted_keys, sorted_triangles : (E,) int
        Every (cell, triangle) entry of the grid, by cell.
    coarsening : int
        How many of the grid's cells along each axis one cell of ``occupied`` spans.
    occupied : (X + 1, Y + 1, Z + 1) int
        The summed-area table of the coarse cells that hold a triangle: how many do in the
        block from the first coarse cell to each one, inclusive (after a layer of zeros along
        each axis).
    face_normal : (3, F) float
    pseudonormals : dict or None
        A closed mesh's angle-weighted pseudonormals (:func:`_pseudonormals`).
    """

    topology: SurfaceTopology
    vertices: Any
    velocity: Any
    thickness: float
    cell: float
    corners: Any
    low: Any
    high: Any
    triangle_velocity: Any
    surface_speed: float
    origin: np.ndarray
    top: np.ndarray
    shape: np.ndarray
    first_cell: Any
    sorted_keys: Any
    sorted_triangles: Any
    coarsening: int
    occupied: Any
    face_normal: Any
    pseudonormals: dict | None


def surface_grid(
    xp: Any,
    to_host: Any,
    topology: SurfaceTopology,
    vertices: Any,
    velocity: Any,
    thickness: float,
    cell: float,
) -> SurfaceGrid:
    """The :class:`SurfaceGrid` of the mesh at ``vertices`` (3, V) moving at ``velocity``
    (3, V) (its frame), its broad phase's cells of size ``cell``. Two device-to-host
    transfers: the surface's largest speed with the mesh's box, and the number of the
    triangles' cell entries."""
    tri = topology.triangles
    a, b, c = vertices[:, tri[0]], vertices[:, tri[1]], vertices[:, tri[2]]
    triangle_velocity = (velocity[:, tri[0]] + velocity[:, tri[1]] + velocity[:, tri[2]]) / 3.0
    low = xp.minimum(xp.minimum(a, b), c)
    high = xp.maximum(xp.maximum(a, b), c)
    speed = xp.sqrt(xp.max(dot(velocity, velocity))) if velocity.shape[1] else xp.zeros(())
    summary = to_host(xp.concatenate((xp.min(low, axis=1), xp.max(high, axis=1), speed[None])))
    origin, top = summary[:3], summary[3:6]
    shape = np.floor((top - origin) / cell).astype(np.int64) + 1
    origin_d, shape_d = xp.asarray(origin)[:, None], xp.asarray(shape)[:, None]
    first_cell = _cell(xp, low, origin_d, cell, shape_d)
    last_cell = _cell(xp, high, origin_d, cell, shape_d)
    keys, owner = _cell_entries(xp, to_host, first_cell, last_cell, shape)
    order = xp.argsort(keys)
    coarsening = max(1, math.ceil((float(np.prod(shape)) / OCCUPANCY_CELLS) ** (1.0 / 3.0)))
    coarse = -(-shape // coarsening)
    along = (
        keys // int(shape[1] * shape[2]),
        (keys // int(shape[2])) % int(shape[1]),
        keys % int(shape[2]),
    )
    occupied = xp.zeros(tuple(int(n) + 1 for n in coarse), dtype=xp.int64)
    occupied[tuple(1 + index // coarsening for index in along)] = 1
    for axis in range(3):
        occupied = xp.cumsum(occupied, axis=axis)
    face_normal = _face_normals(xp, a, b, c)
    pseudonormals = None
    if topology.closed:
        pseudonormals = _pseudonormals(xp, topology, vertices, face_normal, a, b, c)
    return SurfaceGrid(
        topology=topology,
        vertices=vertices,
        velocity=velocity,
        thickness=float(thickness),
        cell=float(cell),
        corners=xp.stack((a, b, c)),
        low=low,
        high=high,
        triangle_velocity=triangle_velocity,
        surface_speed=float(summary[6]),
        origin=origin,
        top=top,
        shape=shape,
        first_cell=first_cell,
        sorted_keys=keys[order],
        sorted_triangles=owner[order],
        coarsening=coarsening,
        occupied=occupied,
        face_normal=face_normal,
        pseudonormals=pseudonormals,
    )


def query_surface(
    xp: Any,
    to_host: Any,
    grid: SurfaceGrid,
    x: Any,
    displacement: Any,
    reach: Any,
    h: float,
) -> SurfaceHits:
    """Distances, normals, swept distances and surface velocities of points ``x`` (3, P) moving
    by ``displacement`` (3, P) over a step of ``h`` against the mesh of ``grid``, moving as it
    says (all in the mesh's frame). Candidates are the triangles within ``reach`` (P,) (plus
    the thickness) of each point's path.

    Three device-to-host transfers: the numbers of the points' cell entries, of candidate
    pairs, and of pairs kept.
    """
    n_points = x.shape[1]
    tri = grid.topology.triangles
    a, b, c = grid.corners[0], grid.corners[1], grid.corners[2]
    shape, cell, thickness = grid.shape, grid.cell, grid.thickness
    pad = reach + (thickness + h * grid.surface_speed)
    end = x + displacement
    low_p = xp.minimum(x, end) - pad
    high_p = xp.maximum(x, end) + pad
    origin_d, shape_d = xp.asarray(grid.origin)[:, None], xp.asarray(shape)[:, None]
    first_p = _cell(xp, low_p, origin_d, cell, shape_d)
    last_p = _cell(xp, high_p, origin_d, cell, shape_d)
    # Points whose path box misses the mesh's box, or whose cells hold no triangle, take none.
    outside = xp.any((high_p < origin_d) | (low_p > xp.asarray(grid.top)[:, None]), axis=0)
    outside |= _occupied_cells(grid, first_p, last_p) == 0
    last_p = xp.where(outside[None], first_p - 1, last_p)

    sorted_keys, sorted_tri = grid.sorted_keys, grid.sorted_triangles
    point_keys, point_owner = _cell_entries(xp, to_host, first_p, last_p, shape)
    begin = xp.searchsorted(sorted_keys, point_keys, side="left")
    count = xp.searchsorted(sorted_keys, point_keys, side="right") - begin
    entry, rank = _expand(xp, to_host, count)
    point = point_owner[entry]
    triangle = sorted_tri[begin[entry] + rank]
    # Keep each pair once, in the first cell both boxes share, and only where the boxes meet.
    shared = xp.maximum(first_p[:, point], grid.first_cell[:, triangle])
    kept = (
        ((shared[0] * int(shape[1]) + shared[1]) * int(shape[2]) + shared[2] == point_keys[entry])
        & xp.all(low_p[:, point] <= grid.high[:, triangle], axis=0)
        & xp.all(grid.low[:, triangle] <= high_p[:, point], axis=0)
    )
    kept = xp.nonzero(kept)[0]
    point, triangle = point[kept], triangle[kept]

    p = x[:, point]
    ta, tb, tc = a[:, triangle], b[:, triangle], c[:, triangle]
    closest, weights, region = _closest_on_triangle(xp, p, ta, tb, tc)
    offset = p - closest
    start_distance = xp.sqrt(dot(offset, offset))
    relative_end = end[:, point] - h * grid.triangle_velocity[:, triangle]
    end_closest, _, _ = _closest_on_triangle(xp, relative_end, ta, tb, tc)
    end_offset = relative_end - end_closest
    swept = xp.minimum(start_distance, xp.sqrt(dot(end_offset, end_offset)))
    swept = xp.where(_crosses(xp, p, relative_end - p, ta, tb, tc), 0.0, swept)

    distance = xp.full(n_points, xp.inf, dtype=x.dtype)
    smallest = xp.full(n_points, xp.inf, dtype=x.dtype)
    normal = xp.zeros_like(x)
    normal[2] = 1.0
    surface_velocity = xp.zeros_like(x)
    if not len(point):
        return SurfaceHits(distance - thickness, normal, smallest - thickness, surface_velocity)

    least = _first_per_group(xp, point, swept)
    smallest[point[least]] = swept[least]
    nearest = _first_per_group(xp, point, start_distance)
    near_point, near_triangle = point[nearest], triangle[nearest]
    near_offset, near_distance = offset[:, nearest], start_distance[nearest]
    # Every triangle within ``pad`` of a point is among its candidates; a farther nearest
    # candidate need not be the nearest triangle, but it is the one to answer for a path
    # that comes within ``pad`` of the surface.
    answered = (near_distance <= pad[near_point]) | (smallest[near_point] <= pad[near_point])
    near_distance = xp.where(answered, near_distance, xp.inf)
    if grid.pseudonormals is not None:
        feature_normal = _feature_normal(
            xp, grid.topology, grid.pseudonormals, near_triangle, region[nearest]
        )
        sign = xp.where(dot(near_offset, feature_normal) < 0.0, -1.0, 1.0)
    else:
        feature_normal = grid.face_normal[:, near_triangle]
        sign = xp.ones_like(near_distance)
    safe = (near_distance * near_distance > _TINY) & xp.isfinite(near_distance)
    unit = near_offset / xp.where(safe, near_distance, 1.0)
    normal[:, near_point] = xp.where(safe, sign * unit, feature_normal)
    distance[near_point] = xp.where(answered, sign * near_distance, xp.inf)
    corners = tri[:, near_triangle]
    w = weights[:, nearest]
    velocity = grid.velocity
    surface_velocity[:, near_point] = (
        w[0] * velocity[:, corners[0]]
        + w[1] * velocity[:, corners[1]]
        + w[2] * velocity[:, corners[2]]
    )
    # A point that starts inside a closed mesh is as deep as it is, whatever its path.
    smallest = xp.where(distance < 0.0, distance, smallest)
    return SurfaceHits(distance - thickness, normal, smallest - thickness, surface_velocity)


def _occupied_cells(grid: SurfaceGrid, first: Any, last: Any) -> Any:
    """How many coarse cells holding a triangle meet each box of cells ``first``–``last``
    (3, n) (inclusive), from the grid's summed-area table."""
    low = first // grid.coarsening
    high = last // grid.coarsening + 1
    total = 0
    # Inclusion–exclusion over the box's corners: each low side taken flips the sign.
    for corner in range(8):
        i, j, k = ((high if corner >> axis & 1 else low)[axis] for axis in range(3))
        lows = 3 - bin(corner).count("1")
        total = total + (-1) ** lows * grid.occupied[i, j, k]
    return total


def _cell(xp: Any, positions: Any, origin: Any, cell: float, shape: Any) -> Any:
    """Grid cell (3, n) of positions (3, n), clamped to the grid; the first cell for a
    position that is not finite (a diverging step's, whose distances come out NaN)."""
    offset = positions - origin
    offset = xp.where(xp.isfinite(offset), offset, 0.0)
    index = xp.floor(offset / cell).astype(shape.dtype)
    return xp.clip(index, 0, shape - 1)


def _cell_entries(
    xp: Any, to_host: Any, first: Any, last: Any, shape: np.ndarray
) -> tuple[Any, Any]:
    """Every cell of each box ``first``–``last`` (3, n) (inclusive; none where ``last <
    first``): the cells' keys and the box each belongs to."""
    extent = xp.maximum(last - first + 1, 0)
    owner, rank = _expand(xp, to_host, extent[0] * extent[1] * extent[2])
    ny, nz = extent[1, owner], extent[2, owner]
    i = first[0, owner] + rank // (ny * nz)
    j = first[1, owner] + (rank // nz) % ny
    k = first[2, owner] + rank % nz
    return (i * int(shape[1]) + j) * int(shape[2]) + k, owner


def _expand(xp: Any, to_host: Any, counts: Any) -> tuple[Any, Any]:
    """For counts (n,), the owner and the rank within it of each of their ``sum`` entries: a
    ``repeat`` whose counts stay on the device (one transfer, the total)."""
    ends = xp.cumsum(counts)
    total = int(to_host(ends[-1])) if counts.shape[0] else 0
    starts = ends - counts
    # Each entry's owner is the last whose run starts at or before it (owners with no entries
    # start where the next one does, and are counted before it).
    owner = xp.cumsum(xp.bincount(starts, minlength=total + 1)[:total]) - 1
    return owner, xp.arange(total) - starts[owner]


def _first_per_group(xp: Any, group: Any, value: Any) -> Any:
    """Index of the smallest ``value`` within each ``group`` (one per distinct group)."""
    order = xp.lexsort(xp.stack((value, group)))
    sorted_group = group[order]
    first = xp.concatenate((xp.ones(1, dtype=bool), sorted_group[1:] != sorted_group[:-1]))
    return order[first]


def _closest_on_triangle(xp: Any, p: Any, a: Any, b: Any, c: Any) -> tuple[Any, Any, Any]:
    """Closest points (3, n) on triangles ``abc`` to points ``p`` (all (3, n)), their barycentric
    weights (3, n) and Voronoi regions (n,) (Ericson, 5.1.5, branch for branch)."""
    ab, ac = b - a, c - a
    ap, bp, cp = p - a, p - b, p - c
    d1, d2 = dot(ab, ap), dot(ac, ap)
    d3, d4 = dot(ab, bp), dot(ac, bp)
    d5, d6 = dot(ab, cp), dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    denominator = va + vb + vc
    safe = xp.where(xp.abs(denominator) > 0.0, denominator, 1.0)
    # The face, then each region whose test Ericson runs earlier overrides it.
    wb, wc = vb / safe, vc / safe
    region = xp.full(p.shape[1], FACE)
    on_bc = (va <= 0.0) & (d4 - d3 >= 0.0) & (d5 - d6 >= 0.0)
    t_bc = _fraction(xp, d4 - d3, (d4 - d3) + (d5 - d6))
    wb, wc = xp.where(on_bc, 1.0 - t_bc, wb), xp.where(on_bc, t_bc, wc)
    region = xp.where(on_bc, EDGE_BC, region)
    on_ca = (vb <= 0.0) & (d2 >= 0.0) & (d6 <= 0.0)
    t_ca = _fraction(xp, d2, d2 - d6)
    wb, wc = xp.where(on_ca, 0.0, wb), xp.where(on_ca, t_ca, wc)
    region = xp.where(on_ca, EDGE_CA, region)
    at_c = (d6 >= 0.0) & (d5 <= d6)
    wb, wc = xp.where(at_c, 0.0, wb), xp.where(at_c, 1.0, wc)
    region = xp.where(at_c, VERTEX_C, region)
    on_ab = (vc <= 0.0) & (d1 >= 0.0) & (d3 <= 0.0)
    t_ab = _fraction(xp, d1, d1 - d3)
    wb, wc = xp.where(on_ab, t_ab, wb), xp.where(on_ab, 0.0, wc)
    region = xp.where(on_ab, EDGE_AB, region)
    at_b = (d3 >= 0.0) & (d4 <= d3)
    wb, wc = xp.where(at_b, 1.0, wb), xp.where(at_b, 0.0, wc)
    region = xp.where(at_b, VERTEX_B, region)
    at_a = (d1 <= 0.0) & (d2 <= 0.0)
    wb, wc = xp.where(at_a, 0.0, wb), xp.where(at_a, 0.0, wc)
    region = xp.where(at_a, VERTEX_A, region)
    weights = xp.stack((1.0 - wb - wc, wb, wc))
    return a + wb * ab + wc * ac, weights, region


def _crosses(xp: Any, p: Any, direction: Any, a: Any, b: Any, c: Any) -> Any:
    """Whether each segment ``p + s direction``, ``s ∈ [0, 1]``, crosses triangle ``abc``
    (Möller–Trumbore; a segment in the triangle's plane does not count)."""
    e1, e2 = b - a, c - a
    pvec = cross(xp, direction, e2)
    det = dot(e1, pvec)
    usable = xp.abs(det) > _TINY
    inverse = 1.0 / xp.where(usable, det, 1.0)
    tvec = p - a
    u = dot(tvec, pvec) * inverse
    qvec = cross(xp, tvec, e1)
    v = dot(direction, qvec) * inverse
    s = dot(e2, qvec) * inverse
    return usable & (u >= 0.0) & (v >= 0.0) & (u + v <= 1.0) & (s >= 0.0) & (s <= 1.0)


def _face_normals(xp: Any, a: Any, b: Any, c: Any) -> Any:
    """Unit normals (3, F) of triangles, by the right-hand rule (outward for a mesh wound
    counter-clockwise seen from outside, as Blender's are)."""
    normal = cross(xp, b - a, c - a)
    length = xp.sqrt(dot(normal, normal))
    return normal / xp.where(length > 0.0, length, 1.0)


def _pseudonormals(
    xp: Any, topology: SurfaceTopology, vertices: Any, face_normal: Any, a: Any, b: Any, c: Any
) -> dict:
    """Angle-weighted pseudonormals of a closed mesh's vertices (3, V) and edges (3, E)."""
    tri, edges = topology.triangles, topology.edges
    vertex = xp.zeros_like(vertices)
    edge = xp.zeros((3, topology.n_edges), dtype=vertices.dtype)
    angles = (_angle(xp, b - a, c - a), _angle(xp, c - b, a - b), _angle(xp, a - c, b - c))
    for axis in range(3):
        for corner in range(3):
            vertex[axis] += xp.bincount(
                tri[corner], weights=angles[corner] * face_normal[axis], minlength=vertices.shape[1]
            )
            edge[axis] += xp.bincount(
                edges[corner], weights=face_normal[axis], minlength=topology.n_edges
            )
    return {"vertex": vertex, "edge": edge, "face": face_normal}


def _feature_normal(
    xp: Any, topology: SurfaceTopology, pseudo: dict, triangle: Any, region: Any
) -> Any:
    """The pseudonormal (3, n) of the feature ``region`` of each ``triangle`` holds the closest
    point on."""
    tri, edges = topology.triangles[:, triangle], topology.edges[:, triangle]
    normal = pseudo["face"][:, triangle]
    for code, vertex in ((VERTEX_A, tri[0]), (VERTEX_B, tri[1]), (VERTEX_C, tri[2])):
        normal = xp.where(region == code, pseudo["vertex"][:, vertex], normal)
    for code, edge in ((EDGE_AB, edges[0]), (EDGE_BC, edges[1]), (EDGE_CA, edges[2])):
        normal = xp.where(region == code, pseudo["edge"][:, edge], normal)
    return normal


def _angle(xp: Any, u: Any, v: Any) -> Any:
    """Angles (n,) between vectors (3, n)."""
    return xp.arctan2(xp.sqrt(dot(cross(xp, u, v), cross(xp, u, v))), dot(u, v))


def _fraction(xp: Any, numerator: Any, denominator: Any) -> Any:
    safe = xp.abs(denominator) > 0.0
    return xp.clip(numerator / xp.where(safe, denominator, 1.0), 0.0, 1.0)
