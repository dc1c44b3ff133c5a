"""Collision geometry and the batched, swept contact query of strands against obstacles (paper §5).

Obstacles
---------
Each obstacle is a rigid shape given in its own local frame, placed in the world once per substep
by an :class:`ObstacleMotion` (pose, angular velocity and the velocity of its origin), and carries
a :class:`Material`: restitution, static and dynamic friction (paper §6: "defined per obstacle
surface"). Shapes, in local coordinates:

- :class:`Plane` — the half-space ``z <= 0`` (Blender's plane: normal along local +z);
- :class:`Sphere` — centred at the origin;
- :class:`Capsule` — the points within ``radius`` of the segment ``start``–``end`` (from a bone:
  head ``(0, 0, 0)``, tail ``(0, length, 0)``);
- :class:`TriangleMesh` — a closed triangle mesh, stored as a signed-distance grid.

Every shape answers one question, the signed distance ``φ(x)`` of a point to its surface
(negative inside) and the outward unit normal ``∇φ``, in closed form for the first three and by
trilinear interpolation of the grid for meshes.

Why a signed-distance grid for meshes, not closest-point queries: a lookup is eight gathers and a
few multiply-adds per point and obstacle, the same work for every point, so it vectorises over
tens of thousands of strand points on NumPy and CuPy alike, with no tree to traverse; the
interpolated gradient gives normals that vary continuously over edges and corners (closest-point
normals jump there, which makes friction chatter); and ``|∇φ| ≈ 1`` bounds how fast ``φ`` can
change, which is what the swept test below needs. The price is memory (a 64³ grid is 2 MiB) and a
build on the host, once per rigid mesh; deforming meshes would need a rebuild per frame.

The query
---------
:func:`find_contacts` follows the paper's §5: between the configuration at ``t`` and the one
extrapolated to ``t + h``, find every point that would come within its radius of an obstacle.
Each query point moves on the segment ``x(s) = start + s (end − start)``, ``s ∈ [0, 1]``; its
motion *relative to the obstacle* is what matters, so the path is taken in the obstacle's frame:
its start in the frame at ``t``, its end in the frame at ``t + h``, the obstacle turned by ``ω h``
about its origin and moved by ``v h`` (a rigid motion at its velocities of ``t``, exact where
removing the first-order ``h (v + ω × (x − o))`` left hair lying on a turning head sinking into
it by ``r (ω h)² / 2``); between its ends the path is straight in the frame at ``t`` (round a
turning obstacle the chord of a still point's arc, closer to it by up to ``r (ω h)² / 8``).
A contact is reported when the smallest gap ``φ(x(s)) − radius`` along the path is at most
``margin``: exactly for planes (``φ`` is linear), spheres and capsules (closest points between
the path and a point or segment), and by sphere tracing for meshes (advance along the path by the
current distance, which cannot step over a surface, a fixed number of times). So a point that
passes through a thin obstacle within one step is caught although both ends of its path are
outside.

A contact is described at time ``t``, where the strand is: its ``normal`` at the point's position
(so a point about to cross a thin obstacle gets the normal of the side it comes from), its signed
``distance`` (the gap between the point's sphere and the surface: negative is penetration depth,
positive the room left to close within the step) and the obstacle's velocity at the surface point
below it. Several contacts per link come from querying several points per link
(:func:`segment_points`); points and obstacles are tested all against all (a dense broad phase:
the cost is points × obstacles, fine for the few obstacles of a character).

Arrays on the device are component-major as in the rest of the engine: ``(3, P)`` for points,
``(3, 3, K)`` for rotations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import spatial
from .backend import Backend, get_backend
from .base_motion import rigid_parts
from .errors import InvalidInputError
from .triangles import SurfaceGrid, SurfaceHits, query_surface, surface_grid, surface_topology
from .validation import finite_array, is_real, is_whole, positive_number

# Sphere tracing of mesh obstacles: advances along a path, and how close (in grid cells) a traced
# sample must come to count as touching. Perpendicular approaches land on the surface in one
# advance, oblique ones converge on it geometrically. A contact reported a little early is
# harmless: its positive distance lets the strand close the rest of the gap.
_TRACE_STEPS = 12
_TRACE_TOLERANCE_CELLS = 0.1

# Largest signed-distance grid accepted, in nodes (128 MiB of float64).
_MAX_GRID_NODES = 2**24
# Largest cell of a mesh's grid accepted, m (1,000 km: beyond any scene, and far below where the
# squared distances of the grid's construction overflow, about 1e150 m).
_MAX_CELL_SIZE = 1e6

# Squared lengths below this (m²) count as zero: a point that does not move, a capsule of zero
# length, a point exactly on a sphere's centre or a capsule's axis.
_TINY = 1e-24


@dataclass(frozen=True)
class Material:
    """Surface response of an obstacle (paper §5).

    Attributes
    ----------
    restitution : float in [0, 1]
        Normal speed kept by an impact, ``ν``: 0 stops, 1 bounces back at the arrival speed.
    static_friction : float >= 0
        Coulomb ``μ_s``: a resting contact holds while the tangential force stays below
        ``μ_s`` times the normal force.
    dynamic_friction : float >= 0
        Coulomb ``μ_d`` of a sliding contact.
    """

    restitution: float = 0.0
    static_friction: float = 0.5
    dynamic_friction: float = 0.4

    def __post_init__(self) -> None:
        for name in ("restitution", "static_friction", "dynamic_friction"):
            value = getattr(self, name)
            if not (is_real(value) and math.isfinite(value) and value >= 0.0):
                raise InvalidInputError(f"Material.{name} must be a number >= 0, got {value!r}")
        if self.restitution > 1.0:
            raise InvalidInputError(
                f"Material.restitution must be at most 1, got {self.restitution}"
            )


@dataclass(frozen=True)
class Plane:
    """The half-space ``z <= 0`` of the obstacle's frame; its surface normal is local +z."""

    material: Material = field(default_factory=Material)
    name: str = "plane"


@dataclass(frozen=True)
class Sphere:
    """A solid ball of ``radius`` (m) about the obstacle's origin."""

    radius: float
    material: Material = field(default_factory=Material)
    name: str = "sphere"


@dataclass(frozen=True)
class Capsule:
    """The points within ``radius`` (m) of the segment ``start``–``end`` (local, m)."""

    start: Sequence[float]
    end: Sequence[float]
    radius: float
    material: Material = field(default_factory=Material)
    name: str = "capsule"


@dataclass(frozen=True)
class TriangleMesh:
    """A triangle mesh in the obstacle's frame.

    A rigid closed (watertight) mesh is stored as a signed-distance grid of ``cell_size`` (m)
    covering the mesh and ``padding`` (m) around it. ``padding`` must exceed the largest
    collision radius plus contact margin of the strands that meet the mesh (outside the grid
    distances are extrapolated, less accurately); default: three cells.

    A ``deforming`` mesh takes its vertices at every substep from :class:`ObstacleMotion` (in the
    obstacle's frame, with their velocities there), and an open mesh (an edge not shared by two
    triangles: a collar, a brim, a single-sided plane) has no inside: both are queried against
    their triangles directly (:mod:`.triangles`), ``cell_size`` being the spacing of the query's
    broad-phase grid (about the triangles' size). ``thickness`` (m) thickens the surface on
    both sides (on the outside only for a closed mesh); an open mesh needs one.
    """

    vertices: Any
    triangles: Any
    cell_size: float
    padding: float | None = None
    material: Material = field(default_factory=Material)
    name: str = "mesh"
    deforming: bool = False
    thickness: float = 0.0


Shape = Plane | Sphere | Capsule | TriangleMesh
KINDS = (Plane, Sphere, Capsule, TriangleMesh)


@dataclass(frozen=True, eq=False)
class Obstacles:
    """A frozen set of obstacles on one backend. Build with :func:`build_obstacles`.

    Obstacles are numbered ``0 … K-1`` in the order they were given (the order of
    :class:`ObstacleMotion` and of ``Contacts.obstacle``). Internally they are grouped by kind:
    planes, spheres, capsules, rigid closed meshes (signed-distance grids), then surfaces (deforming
    or open meshes, queried against their triangles), each kind a contiguous range
    ``kind_bounds[kind]`` of the *kind order*.

    Attributes
    ----------
    backend : Backend
    n_obstacles : int
    names : tuple of str, given order
    kind_bounds : dict of str -> (int, int)
        Host ``(start, stop)`` of each kind (``"plane"``, ``"sphere"``, ``"capsule"``,
        ``"mesh"``, ``"surface"``) in kind order.
    kind_order : device int (K,)
        Given index of each obstacle in kind order.
    sphere_radius : device float (n_spheres,), m
    capsule_start, capsule_end : device float (3, n_capsules), m, local
    capsule_radius : device float (n_capsules,), m
    grid_values : device float (total nodes,), m
        The signed-distance grids of all meshes, each flattened in C order ``(i, j, k)``.
    grid_offset : device int (n_meshes,)
        Where each mesh's grid starts in ``grid_values``.
    grid_shape : device int (3, n_meshes)
        Nodes along local x, y, z.
    grid_origin : device float (3, n_meshes), m, local
        Position of node ``(0, 0, 0)``.
    grid_cell : device float (n_meshes,), m
    grid_thickness : device float (n_meshes,), m
    surfaces : tuple of :class:`.triangles.SurfaceTopology`, one per surface (kind order)
    surface_obstacle : tuple of int
        Given index of each surface.
    surface_vertices : tuple of device float (3, V), m, local
        Each surface's vertices as given (where a deforming one is when its motion has none).
    surface_deforming : tuple of bool
    surface_cell, surface_thickness : tuple of float, m
    restitution, static_friction, dynamic_friction : device float (K,), kind order
    """

    backend: Backend
    n_obstacles: int
    names: tuple
    kind_bounds: dict
    kind_order: Any
    sphere_radius: Any
    capsule_start: Any
    capsule_end: Any
    capsule_radius: Any
    grid_values: Any
    grid_offset: Any
    grid_shape: Any
    grid_origin: Any
    grid_cell: Any
    grid_thickness: Any
    surfaces: tuple
    surface_obstacle: tuple
    surface_vertices: tuple
    surface_deforming: tuple
    surface_cell: tuple
    surface_thickness: tuple
    restitution: Any
    static_friction: Any
    dynamic_friction: Any


@dataclass(eq=False)
class ObstacleMotion:
    """Pose and velocity of every obstacle at the start of a substep (device, world frame, given
    obstacle order). Build from host data with :meth:`from_host`.

    Attributes
    ----------
    rotation : (3, 3, K) float
        World rotation of each obstacle frame.
    position : (3, K) float, m
        World position of each obstacle's origin.
    angular_velocity : (3, K) float, rad/s, world
    linear_velocity : (3, K) float, m/s, world, of the obstacle's origin
    surface_vertices, surface_velocities : tuple of (3, V) float or None, m and m/s, local
        Per surface of the obstacles (:attr:`Obstacles.surfaces`), the vertices of a deforming
        mesh in its obstacle's frame and their velocities relative to that frame; None: the
        vertices as given to :class:`TriangleMesh`, at rest in the frame.
    """

    rotation: Any
    position: Any
    angular_velocity: Any
    linear_velocity: Any
    surface_vertices: tuple = ()
    surface_velocities: tuple = ()

    @classmethod
    def from_host(
        cls,
        obstacles: Obstacles,
        poses: Any,
        angular_velocity: Any = None,
        linear_velocity: Any = None,
        mesh_vertices: Mapping[int, Any] | None = None,
        mesh_velocities: Mapping[int, Any] | None = None,
    ) -> ObstacleMotion:
        """Copy host poses ``(K, 4, 4)`` (rigid: no scale) and velocities ``(K, 3)`` (default:
        still) to the device, with the vertices ``(V, 3)`` of deforming meshes and their
        velocities ``(V, 3)`` (default: still), both in the obstacle's frame, by the mesh's
        obstacle index.

        Raises
        ------
        InvalidInputError
            Naming the obstacle: vertices for an obstacle that is not a deforming mesh, or a
            vertex count other than the mesh's.
        """
        if not isinstance(obstacles, Obstacles):
            raise InvalidInputError(
                f"obstacles must be an Obstacles (build_obstacles), got {type(obstacles).__name__}"
            )
        n = obstacles.n_obstacles
        poses = finite_array("obstacle poses", poses, (n, 4, 4))
        rotation, position = rigid_parts("obstacle poses", poses)
        still = np.zeros((n, 3))
        omega = still if angular_velocity is None else angular_velocity
        velocity = still if linear_velocity is None else linear_velocity
        omega = finite_array("obstacle angular_velocity", omega, (n, 3))
        velocity = finite_array("obstacle linear_velocity", velocity, (n, 3))
        device = obstacles.backend.from_host
        vertices, velocities = _surface_motion(
            obstacles,
            _by_obstacle("mesh_vertices", mesh_vertices),
            _by_obstacle("mesh_velocities", mesh_velocities),
        )
        return cls(
            rotation=device(rotation.transpose(1, 2, 0)),
            position=device(position.T),
            angular_velocity=device(omega.T),
            linear_velocity=device(velocity.T),
            surface_vertices=vertices,
            surface_velocities=velocities,
        )

    @classmethod
    def from_base_motion(
        cls,
        obstacles: Obstacles,
        motion: Any,
        mesh_vertices: Mapping[int, Any] | None = None,
        mesh_velocities: Mapping[int, Any] | None = None,
    ) -> ObstacleMotion:
        """The poses and velocities of a :class:`.BaseMotion` with one entry per obstacle (e.g. a
        :class:`.BaseTrajectory` of the obstacles' transforms, or of the head they sit on), and
        deforming meshes' vertices as in :meth:`from_host`."""
        poses = np.zeros((motion.rotation.shape[0], 4, 4))
        poses[:, :3, :3] = motion.rotation
        poses[:, :3, 3] = motion.position
        poses[:, 3, 3] = 1.0
        return cls.from_host(
            obstacles,
            poses,
            motion.angular_velocity,
            motion.linear_velocity,
            mesh_vertices,
            mesh_velocities,
        )


@dataclass(frozen=True, eq=False)
class VertexTrajectory:
    """A deforming mesh's vertices sampled at evenly spaced times (e.g. a host application's
    frames), between samples moving in straight lines at constant velocity: what a substep
    takes for :meth:`ObstacleMotion.from_host` (``mesh_vertices``, ``mesh_velocities``).

    Attributes
    ----------
    rate : float, 1/s
        Samples per second; sample ``k`` is at time ``k / rate``.
    vertices : (F, V, 3) float, m
        The vertices at every sample (F >= 1), in the obstacle's frame.
    """

    rate: float
    vertices: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", positive_number("VertexTrajectory.rate", self.rate))
        vertices = finite_array("VertexTrajectory.vertices", self.vertices, (None, None, 3))
        if not len(vertices):
            raise InvalidInputError("VertexTrajectory.vertices must hold at least one sample")
        object.__setattr__(self, "vertices", vertices)

    def __call__(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        """Positions (V, 3) and velocities (V, 3) at ``time`` (s); before the first sample and
        after the last the mesh stands as it is there."""
        if not (is_real(time) and math.isfinite(time)):
            raise InvalidInputError(f"VertexTrajectory time must be a finite number, got {time!r}")
        position = float(time) * self.rate
        last = len(self.vertices) - 1
        if last == 0 or position < 0.0 or position >= last:
            index = 0 if position < 0.0 else last
            return self.vertices[index], np.zeros_like(self.vertices[index])
        index = min(int(math.floor(position)), last - 1)
        share = position - index
        start, end = self.vertices[index], self.vertices[index + 1]
        return start + share * (end - start), (end - start) * self.rate


def _by_obstacle(name: str, given: Any) -> Mapping[int, Any]:
    """``given`` (None: empty) checked to be a mapping keyed by obstacle indices."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidInputError(
            f"{name} must be a mapping from obstacle index to array, got {type(given).__name__}"
        )
    for index in given:
        if not is_whole(index):
            raise InvalidInputError(f"{name} keys must be obstacle indices, got {index!r}")
    return given


def _surface_motion(
    obstacles: Obstacles, vertices: Mapping[int, Any], velocities: Mapping[int, Any]
) -> tuple[tuple, tuple]:
    """Device copies of deforming meshes' vertices and velocities, per surface (None where
    not given)."""
    slot = {index: s for s, index in enumerate(obstacles.surface_obstacle)}
    for index in (*vertices, *velocities):
        if index not in slot or not obstacles.surface_deforming[slot[index]]:
            name = obstacles.names[index] if 0 <= index < obstacles.n_obstacles else None
            raise InvalidInputError(
                f"obstacle {index} ({name!r}) is not a deforming mesh: it takes no vertices"
            )
    device = obstacles.backend.from_host
    per_surface = []
    for given in (vertices, velocities):
        arrays = [None] * len(slot)
        for index, values in given.items():
            count = obstacles.surface_vertices[slot[index]].shape[1]
            label = f"obstacle {index} ({obstacles.names[index]!r})"
            values = finite_array(label, values, (None, 3))
            if len(values) != count:
                raise InvalidInputError(
                    f"{label}: the mesh has {count} vertices, its motion gives an array of "
                    f"shape {values.shape}; a deforming mesh keeps its vertex count"
                )
            arrays[slot[index]] = device(values.T)
        per_surface.append(tuple(arrays))
    return per_surface[0], per_surface[1]


@dataclass(eq=False)
class Contacts:
    """Contacts found by :func:`find_contacts`, sorted by point (device arrays, ``C`` contacts).

    Attributes
    ----------
    point : (C,) int
        Index of the query point.
    obstacle : (C,) int
        Index of the obstacle (given order).
    normal : (3, C) float, world
        Unit normal of the obstacle's surface, pointing away from the obstacle, at the point's
        position at ``t``.
    distance : (C,) float, m
        Signed gap at ``t`` between the point's sphere (its radius) and the surface: negative is
        penetration depth, positive the distance still free.
    obstacle_velocity : (3, C) float, m/s, world
        Velocity of the obstacle's surface point under the query point: ``v + ω × (x − o)``.
    restitution, static_friction, dynamic_friction : (C,) float
        The obstacle's material.
    """

    point: Any
    obstacle: Any
    normal: Any
    distance: Any
    obstacle_velocity: Any
    restitution: Any
    static_friction: Any
    dynamic_friction: Any

    def __len__(self) -> int:
        return len(self.point)


def build_obstacles(
    shapes: Sequence[Shape], backend: str | Backend = "numpy", dtype: str = "float64"
) -> Obstacles:
    """Validate shapes, build the rigid closed meshes' signed-distance grids (host) and freeze
    them on a backend.

    Raises
    ------
    InvalidInputError
        Naming the obstacle (index and name): an unknown shape, a material that is not a
        :class:`Material`, a name that is not a string, a non-positive or non-finite radius or
        cell size, a non-finite capsule end or vertex, a mesh with bad indices, an open mesh
        without a thickness, a grid too large.
    """
    backend = get_backend(backend, dtype)
    if isinstance(shapes, str | bytes | Mapping) or not isinstance(shapes, Sequence):
        raise InvalidInputError(
            f"shapes must be a sequence of obstacle shapes, got {type(shapes).__name__}"
        )
    shapes = list(shapes)
    for index, shape in enumerate(shapes):
        if not isinstance(shape, KINDS):
            raise InvalidInputError(
                f"obstacle {index}: expected Plane, Sphere, Capsule or TriangleMesh, got "
                f"{type(shape).__name__}"
            )
        if not isinstance(shape.name, str):
            raise InvalidInputError(
                f"obstacle {index}: name must be a string, got {type(shape.name).__name__}"
            )
        if not isinstance(shape.material, Material):
            raise InvalidInputError(
                f"obstacle {index} ({shape.name!r}): material must be a Material, got "
                f"{type(shape.material).__name__}"
            )

    def label(index: int) -> str:
        return f"obstacle {index} ({shapes[index].name!r})"

    meshes = {
        i: _mesh_arrays(label(i), shape)
        for i, shape in enumerate(shapes)
        if isinstance(shape, TriangleMesh)
    }
    kinds = {"plane": Plane, "sphere": Sphere, "capsule": Capsule}
    groups = {
        kind: [i for i, s in enumerate(shapes) if type(s) is cls] for kind, cls in kinds.items()
    }
    groups["mesh"] = [i for i, mesh in meshes.items() if not mesh.on_triangles]
    groups["surface"] = [i for i, mesh in meshes.items() if mesh.on_triangles]
    kind_order = [i for members in groups.values() for i in members]
    bounds, start = {}, 0
    for kind, members in groups.items():
        bounds[kind] = (start, start + len(members))
        start += len(members)

    sphere_radius = [
        positive_number(f"{label(i)}: radius", shapes[i].radius) for i in groups["sphere"]
    ]
    capsule_start, capsule_end, capsule_radius = [], [], []
    for i in groups["capsule"]:
        capsule_start.append(finite_array(f"{label(i)}: start", shapes[i].start, (3,)))
        capsule_end.append(finite_array(f"{label(i)}: end", shapes[i].end, (3,)))
        capsule_radius.append(positive_number(f"{label(i)}: radius", shapes[i].radius))
    grids = [_mesh_grid(label(i), shapes[i], meshes[i]) for i in groups["mesh"]]
    device = backend.from_host
    surfaces = [
        surface_topology(backend.xp, label(i), meshes[i].triangles, len(meshes[i].vertices))
        for i in groups["surface"]
    ]

    materials = [shapes[i].material for i in kind_order]
    return Obstacles(
        backend=backend,
        n_obstacles=len(shapes),
        names=tuple(shape.name for shape in shapes),
        kind_bounds=bounds,
        kind_order=device(np.array(kind_order, dtype=np.int64)),
        sphere_radius=device(np.array(sphere_radius, dtype=float)),
        capsule_start=device(np.array(capsule_start, dtype=float).reshape(-1, 3).T),
        capsule_end=device(np.array(capsule_end, dtype=float).reshape(-1, 3).T),
        capsule_radius=device(np.array(capsule_radius, dtype=float)),
        grid_values=device(np.concatenate([g.ravel() for g, _, _ in grids] or [np.zeros(0)])),
        grid_offset=device(np.cumsum([0] + [g.size for g, _, _ in grids])[:-1].astype(np.int64)),
        grid_shape=device(
            np.array([g.shape for g, _, _ in grids], dtype=np.int64).reshape(-1, 3).T
        ),
        grid_origin=device(np.array([o for _, o, _ in grids], dtype=float).reshape(-1, 3).T),
        grid_cell=device(np.array([c for _, _, c in grids], dtype=float)),
        grid_thickness=device(np.array([meshes[i].thickness for i in groups["mesh"]], dtype=float)),
        surfaces=tuple(surfaces),
        surface_obstacle=tuple(groups["surface"]),
        surface_vertices=tuple(device(meshes[i].vertices.T) for i in groups["surface"]),
        surface_deforming=tuple(bool(shapes[i].deforming) for i in groups["surface"]),
        surface_cell=tuple(meshes[i].cell for i in groups["surface"]),
        surface_thickness=tuple(meshes[i].thickness for i in groups["surface"]),
        restitution=device(np.array([m.restitution for m in materials], dtype=float)),
        static_friction=device(np.array([m.static_friction for m in materials], dtype=float)),
        dynamic_friction=device(np.array([m.dynamic_friction for m in materials], dtype=float)),
    )


def segment_points(xp: Any, start: Any, end: Any, fractions: Sequence[float]) -> tuple[Any, Any]:
    """Query points along segments (links): ``start + f (end − start)`` for each fraction ``f``.

    Parameters
    ----------
    start, end : (3, N) float
        Segment ends (a link's joint and tip), world, m.
    fractions : sequence of S floats in [0, 1]
        Where to sample each segment. The tip of a link is the joint of the next, so fractions in
        ``(0, 1]`` (e.g. ``(0.5, 1.0)``) sample every point of a strand once.

    Returns
    -------
    points : (3, S·N) float
        Sample-major: sample ``s`` of segment ``n`` is column ``s·N + n``.
    segment : (S·N,) int
        The segment of each point.
    """
    values = [float(f) for f in fractions]
    if not values or any(not 0.0 <= f <= 1.0 for f in values):
        raise InvalidInputError(f"fractions must be a non-empty sequence in [0, 1], got {values}")
    _check_points("start", start)
    if tuple(end.shape) != tuple(start.shape):
        raise InvalidInputError(
            f"end must have the shape of start {tuple(start.shape)}, got {tuple(end.shape)}"
        )
    n = start.shape[1]
    delta = end - start
    points = xp.concatenate([start + f * delta for f in values], axis=1)
    segment = xp.tile(xp.arange(n), len(values))
    return points, segment


def signed_distances(
    obstacles: Obstacles, motion: ObstacleMotion | Placement, points: Any
) -> tuple[Any, Any]:
    """Signed distance (P, K) of each point (3, P) to each obstacle's surface (m, negative
    inside) and the outward unit normals (3, P, K), world, given obstacle order.

    A mesh queried against its triangles (deforming or open) answers within its broad-phase
    cell of the surface: farther points get ``+inf`` (and the normal +z). ``motion`` may be
    placed already (:func:`place`)."""
    xp = obstacles.backend.xp
    _check_points("points", points)
    placed = place(obstacles, motion)
    local = _to_local(xp, placed, points)
    hits = _surface_hits(obstacles, placed, local, xp.zeros_like(local), None, 0.0)
    distance, normal = _distance_and_normal(obstacles, local, hits)
    inverse = xp.argsort(obstacles.kind_order)
    return distance[:, inverse], _to_world(xp, placed, normal)[:, :, inverse]


def swept_distances(
    obstacles: Obstacles,
    motion: ObstacleMotion | Placement,
    start: Any,
    end: Any,
    reach: Any,
    h: float,
) -> Any:
    """Smallest signed distance (P, K) to each obstacle's surface along the straight path of
    each point from ``start`` (3, P) at ``t`` to ``end`` (3, P) at ``t + h`` relative to the
    obstacle moving over the step as :func:`find_contacts` has it (m, negative inside; a path
    through a surface queried against its triangles counts as reaching its sheet), in given
    obstacle order. Surfaces and grids are searched within ``reach`` (P,) of the paths.
    ``motion`` may be placed already (:func:`place`).

    Meshes collided on their distance grids are measured without the margin that
    :func:`find_contacts` keeps (a tenth of a cell): these distances judge how deep a corrected
    step went (:meth:`.contacts.ObstacleContacts.overshoot`), and a point resting on such a
    mesh would count that much deeper at every step, which no halving of the step reduces (hair
    lying on a 40 cm mesh, cells of 8 mm, had every step halved five times)."""
    xp = obstacles.backend.xp
    _check_points("start", start)
    _check_points("end", end)
    placed = place(obstacles, motion)
    local = _to_local(xp, placed, start)
    displacement = _local_displacement(xp, placed, start, end - start, h)
    hits = _surface_hits(obstacles, placed, local, displacement, reach, h)
    smallest = _swept_distance(obstacles, local, displacement, reach[:, None], hits)
    return smallest[:, xp.argsort(obstacles.kind_order)]


def find_contacts(
    obstacles: Obstacles,
    motion: ObstacleMotion | Placement,
    start: Any,
    end: Any,
    radius: Any,
    h: float,
    margin: float = 0.0,
) -> Contacts:
    """Contacts of points sweeping from ``start`` (at ``t``) to ``end`` (at ``t + h``).

    Parameters
    ----------
    obstacles : Obstacles
    motion : ObstacleMotion or Placement
        Obstacle poses and velocities at ``t`` (or their :class:`Placement`).
    start, end : (3, P) float, world, m
        Query points at ``t`` and extrapolated to ``t + h`` (``x + h v``).
    radius : (P,) float, m
        Collision radius of each point (strand radius times its collision weight), >= 0.
    h : float, s
        Step size, for the obstacles' own motion over the step.
    margin : float, m
        Also report points whose sweep comes within ``margin`` of touching.

    Returns
    -------
    Contacts
        One per (point, obstacle) pair in reach, sorted by point. Reading their count back is
        the query's one device-to-host transfer (the compaction).
    """
    xp = obstacles.backend.xp
    _check_points("start", start)
    _check_points("end", end)
    if tuple(end.shape) != tuple(start.shape) or tuple(radius.shape) != (start.shape[1],):
        raise InvalidInputError(
            f"start and end must both be (3, P) and radius (P,), got {tuple(start.shape)}, "
            f"{tuple(end.shape)} and {tuple(radius.shape)}"
        )
    h = float(h)
    margin = float(margin)
    if not (math.isfinite(h) and h > 0.0):
        raise InvalidInputError(f"step size h must be a positive number, got {h}")
    if not (math.isfinite(margin) and margin >= 0.0):
        raise InvalidInputError(f"margin must be a number >= 0, got {margin}")

    placed = place(obstacles, motion)
    local = _to_local(xp, placed, start)
    local_displacement = _local_displacement(xp, placed, start, end - start, h)

    reach = radius + margin
    hits = _surface_hits(obstacles, placed, local, local_displacement, reach, h)
    swept_gap = (
        _swept_distance(obstacles, local, local_displacement, reach[:, None], hits) - reach[:, None]
    )
    # Sphere tracing converges on a grid's surface without reaching it: a path counts as
    # touching within a tenth of a cell.
    first, last = obstacles.kind_bounds["mesh"]
    swept_gap[:, first:last] -= _TRACE_TOLERANCE_CELLS * obstacles.grid_cell
    point, obstacle = xp.nonzero(swept_gap <= 0.0)
    # The distances and normals at the start of the points in contact only.
    hits = [surface_hits.at(point) for surface_hits in hits]
    distance, normal = _distance_and_normal(obstacles, local[:, point], hits)
    pair = xp.arange(point.shape[0])
    distance, normal = distance[pair, obstacle], normal[:, pair, obstacle]

    world_normal = xp.einsum("ijc,jc->ic", placed.rotation[:, :, obstacle], normal)
    surface_point = start[:, point] - distance * world_normal
    velocity = placed.linear_velocity[:, obstacle] + _cross(
        xp,
        placed.angular_velocity[:, obstacle],
        surface_point - placed.position[:, obstacle],
    )
    # A deforming surface moves in its frame too.
    first = obstacles.kind_bounds["surface"][0]
    for s, surface_hits in enumerate(hits):
        kind_index = first + s
        deformation = placed.rotation[:, :, kind_index] @ surface_hits.velocity
        velocity += xp.where(obstacle == kind_index, deformation, 0.0)
    return Contacts(
        point=point,
        obstacle=obstacles.kind_order[obstacle],
        normal=world_normal,
        distance=distance - radius[point],
        obstacle_velocity=velocity,
        restitution=obstacles.restitution[obstacle],
        static_friction=obstacles.static_friction[obstacle],
        dynamic_friction=obstacles.dynamic_friction[obstacle],
    )


# --- placement -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Placement:
    """The obstacles where an :class:`ObstacleMotion` puts them, in kind order, with the grids
    of their triangle surfaces (:func:`.triangles.surface_grid`): what every query at that
    motion needs of it. Queries given a motion place it themselves; a caller querying one
    motion several times places it once (:func:`place`).

    Attributes
    ----------
    motion : ObstacleMotion
    rotation : (3, 3, K) float
    position, angular_velocity, linear_velocity : (3, K) float
    surfaces : tuple of SurfaceGrid
        One per surface of the obstacles (:attr:`Obstacles.surfaces`).
    """

    motion: ObstacleMotion
    rotation: Any
    position: Any
    angular_velocity: Any
    linear_velocity: Any
    surfaces: tuple[SurfaceGrid, ...]


def place(obstacles: Obstacles, motion: ObstacleMotion | Placement) -> Placement:
    """The :class:`Placement` of ``obstacles`` at ``motion`` (a placement is returned as it
    is).

    Raises
    ------
    InvalidInputError
        The motion is not one of these obstacles'.
    """
    if isinstance(motion, Placement):
        return motion
    n = obstacles.n_obstacles
    if tuple(motion.position.shape) != (3, n):
        raise InvalidInputError(
            f"obstacle motion is for {motion.position.shape[1]} obstacle(s), the set has {n}"
        )
    order = obstacles.kind_order
    vertices = motion.surface_vertices or (None,) * len(obstacles.surfaces)
    velocities = motion.surface_velocities or (None,) * len(obstacles.surfaces)
    for given in (vertices, velocities):
        shapes = [None if array is None else tuple(array.shape) for array in given]
        rest = [tuple(array.shape) for array in obstacles.surface_vertices]
        if len(shapes) != len(rest) or any(
            shape not in (None, own) for shape, own in zip(shapes, rest, strict=True)
        ):
            raise InvalidInputError(
                f"obstacle motion moves surfaces of shapes {shapes}, the set's are {rest}: "
                "build it with ObstacleMotion.from_host from these obstacles"
            )
    backend = obstacles.backend
    surfaces = tuple(
        surface_grid(
            backend.xp,
            backend.to_host,
            topology,
            rest if moved is None else moved,
            backend.xp.zeros_like(rest) if moving is None else moving,
            obstacles.surface_thickness[s],
            obstacles.surface_cell[s],
        )
        for s, (topology, rest, moved, moving) in enumerate(
            zip(obstacles.surfaces, obstacles.surface_vertices, vertices, velocities, strict=True)
        )
    )
    return Placement(
        motion,
        motion.rotation[:, :, order],
        motion.position[:, order],
        motion.angular_velocity[:, order],
        motion.linear_velocity[:, order],
        surfaces,
    )


def _surface_hits(
    obstacles: Obstacles, placed: Placement, local: Any, displacement: Any, reach: Any, h: float
) -> list[SurfaceHits]:
    """The triangle query (:func:`.triangles.query_surface`) of every surface, for local points
    (3, P, K) moving by local ``displacement`` (3, P, K) relative to the obstacle's frame, with
    their ``reach`` (P,) (None: each surface's cell)."""
    backend = obstacles.backend
    first = obstacles.kind_bounds["surface"][0]
    return [
        query_surface(
            backend.xp,
            backend.to_host,
            grid,
            local[:, :, first + s],
            displacement[:, :, first + s],
            backend.xp.full(local.shape[1], grid.cell) if reach is None else reach,
            h,
        )
        for s, grid in enumerate(placed.surfaces)
    ]


def _to_local(xp: Any, placed: Placement, points: Any) -> Any:
    """Points (3, P) in every obstacle's frame: (3, P, K).

    One matrix product per obstacle: the obstacles are few, and a contraction over (3, P, K)
    arrays whose innermost axis is the obstacle runs element by element.
    """
    rotation, position = placed.rotation, placed.position
    local = xp.empty((3, points.shape[1], rotation.shape[2]), dtype=points.dtype)
    for k in range(rotation.shape[2]):
        local[:, :, k] = rotation[:, :, k].T @ (points - position[:, k : k + 1])
    return local


def _local_displacement(
    xp: Any, placed: Placement, points: Any, displacement: Any, h: float
) -> Any:
    """Displacements (3, P, K) of points (3, P) over a step of ``h`` relative to each obstacle's
    body, in the obstacle's frame at the step's start: the body turns by ``ω h`` about its
    origin and moves by ``v h`` (its velocities at the start), and a point's end is taken in the
    body's frame at the end. Exact for a rigid motion at those velocities, where removing the
    surface's displacement ``h (v + ω × (x − o))`` is right only to first order: a point lying
    still on a 10 cm head turning at 7 rad/s seemed 0.27 mm further out at the end of a substep
    of 1/96 s than it was (``r (ω h)² / 2``), and hair sank that much into the head. Between
    its ends the path is straight in the frame at the start: round a turning obstacle a still
    point's path is an arc there, and the chord comes closer, by up to ``r (ω h)² / 8``."""
    rotation, position = placed.rotation, placed.position
    # The end in the end frame less the start in the start frame, written so that it is the
    # plain relative displacement, bit for bit, for an obstacle that does not turn (the matrix
    # of a zero rotation is exactly the identity).
    turned = spatial.quat_to_matrix(xp, spatial.quat_exp(xp, h * placed.angular_velocity))
    identity = xp.eye(3, dtype=points.dtype)
    local = xp.empty((3, points.shape[1], rotation.shape[2]), dtype=points.dtype)
    for k in range(rotation.shape[2]):
        relative = displacement - h * placed.linear_velocity[:, k : k + 1]
        end = points - position[:, k : k + 1] + relative
        local[:, :, k] = rotation[:, :, k].T @ (relative + (turned[:, :, k].T - identity) @ end)
    return local


def _to_world(xp: Any, placed: Placement, local_vectors: Any) -> Any:
    """Vectors (3, P, K) from each obstacle's frame to world axes."""
    return xp.einsum("ijk,jpk->ipk", placed.rotation, local_vectors)


def _check_points(name: str, points: Any) -> None:
    if len(points.shape) != 2 or points.shape[0] != 3:
        raise InvalidInputError(f"{name} must have shape (3, P), got {tuple(points.shape)}")


# --- per-shape distances, normals and swept distances (local frames) -----------------------


def _distance_and_normal(
    obstacles: Obstacles, local: Any, hits: list[SurfaceHits]
) -> tuple[Any, Any]:
    """Signed distance (P, K) and outward unit normal (3, P, K) of local points (3, P, K), the
    surfaces' from their triangle queries ``hits``."""
    xp = obstacles.backend.xp
    distance = xp.empty(local.shape[1:], dtype=local.dtype)
    normal = xp.empty_like(local)
    for kind, (start, stop) in obstacles.kind_bounds.items():
        if start == stop:
            continue
        x = local[:, :, start:stop]
        if kind == "plane":
            distance[:, start:stop] = x[2]
            normal[:, :, start:stop] = 0.0
            normal[2, :, start:stop] = 1.0
        elif kind == "sphere":
            length, direction = _length_and_direction(xp, x, _fallback_axis(xp, x))
            distance[:, start:stop] = length - obstacles.sphere_radius
            normal[:, :, start:stop] = direction
        elif kind == "capsule":
            a, b = obstacles.capsule_start[:, None, :], obstacles.capsule_end[:, None, :]
            axis = b - a
            along = xp.clip(_ratio(xp, _dot(x - a, axis), _dot(axis, axis)), 0.0, 1.0)
            offset = x - (a + along * axis)
            length, direction = _length_and_direction(xp, offset, _perpendicular(xp, axis))
            distance[:, start:stop] = length - obstacles.capsule_radius
            normal[:, :, start:stop] = direction
        elif kind == "mesh":
            distance[:, start:stop], normal[:, :, start:stop] = _grid_lookup(xp, obstacles, x)
            distance[:, start:stop] -= obstacles.grid_thickness
        else:
            for s, surface_hits in enumerate(hits):
                distance[:, start + s] = surface_hits.distance
                normal[:, :, start + s] = surface_hits.normal
    return distance, normal


def _swept_distance(
    obstacles: Obstacles, local: Any, displacement: Any, reach: Any, hits: list[SurfaceHits]
) -> Any:
    """Smallest signed distance (P, K) over each path ``x + s d``, ``s ∈ [0, 1]`` (local), the
    surfaces' from their triangle queries ``hits``."""
    xp = obstacles.backend.xp
    smallest = xp.empty(local.shape[1:], dtype=local.dtype)
    for kind, (start, stop) in obstacles.kind_bounds.items():
        if start == stop:
            continue
        x, d = local[:, :, start:stop], displacement[:, :, start:stop]
        if kind == "plane":
            smallest[:, start:stop] = xp.minimum(x[2], x[2] + d[2])
        elif kind == "sphere":
            along = xp.clip(_ratio(xp, -_dot(x, d), _dot(d, d)), 0.0, 1.0)
            closest = x + along * d
            smallest[:, start:stop] = xp.sqrt(_dot(closest, closest)) - obstacles.sphere_radius
        elif kind == "capsule":
            gap = _segment_segment_distance(
                xp, x, d, obstacles.capsule_start[:, None, :], obstacles.capsule_end[:, None, :]
            )
            smallest[:, start:stop] = gap - obstacles.capsule_radius
        elif kind == "mesh":
            thickness = obstacles.grid_thickness
            smallest[:, start:stop] = (
                _trace_grid(xp, obstacles, x, d, reach + thickness) - thickness
            )
        else:
            for s, surface_hits in enumerate(hits):
                smallest[:, start + s] = surface_hits.smallest
    return smallest


def _segment_segment_distance(xp: Any, p: Any, d: Any, a: Any, b: Any) -> Any:
    """Distance between segments ``p + s d`` and ``a + t (b − a)``, ``s, t ∈ [0, 1]``, by the
    closest points of the two lines clamped to the segments (Ericson, *Real-Time Collision
    Detection*, 5.1.9), with zero-length segments handled as points."""
    e = b - a
    r = p - a
    dd, ee, de = _dot(d, d), _dot(e, e), _dot(d, e)
    dr, er = _dot(d, r), _dot(e, r)
    # Parallel lines (denominator 0): any s is as good, 0 is taken.
    s = xp.clip(_ratio(xp, de * er - dr * ee, dd * ee - de * de), 0.0, 1.0)
    s = xp.where(ee > _TINY, s, xp.clip(_ratio(xp, -dr, dd), 0.0, 1.0))
    t = _ratio(xp, de * s + er, ee)
    # Where the line's closest point falls off the axis segment, clamp it and re-project.
    s = xp.where(t < 0.0, xp.clip(_ratio(xp, -dr, dd), 0.0, 1.0), s)
    s = xp.where(t > 1.0, xp.clip(_ratio(xp, de - dr, dd), 0.0, 1.0), s)
    t = xp.clip(t, 0.0, 1.0)
    gap = (p + s * d) - (a + t * e)
    return xp.sqrt(_dot(gap, gap))


# --- signed-distance grids ------------------------------------------------------------------


def _grid_lookup(xp: Any, obstacles: Obstacles, x: Any) -> tuple[Any, Any]:
    """Trilinear signed distance (P, M) and normalised gradient (3, P, M) of local points.

    Outside the grid the distance grows by the distance to the grid's box (an estimate; the
    padding keeps contacts inside the grid), with the gradient of the nearest grid point. A
    point that is not finite (a diverging step's, found out after the query) gets a NaN
    distance.
    """
    cell = obstacles.grid_cell
    shape = obstacles.grid_shape[:, None, :]
    u = (x - obstacles.grid_origin[:, None, :]) / cell
    finite = xp.all(xp.isfinite(u), axis=0)
    u = xp.where(finite, u, 0.0)
    last = (shape - 1).astype(x.dtype)
    clamped = xp.clip(u, 0.0, last)
    corner = xp.minimum(xp.floor(clamped), last - 1.0).astype(obstacles.grid_offset.dtype)
    f = clamped - corner
    stride_i = shape[1] * shape[2]
    base = obstacles.grid_offset + corner[0] * stride_i + corner[1] * shape[2] + corner[2]
    values = {
        (i, j, k): xp.take(obstacles.grid_values, base + i * stride_i + j * shape[2] + k)
        for i in (0, 1)
        for j in (0, 1)
        for k in (0, 1)
    }
    fx, fy, fz = f[0], f[1], f[2]
    weights = {0: (1.0 - fx, 1.0 - fy, 1.0 - fz), 1: (fx, fy, fz)}
    distance = sum(
        weights[i][0] * weights[j][1] * weights[k][2] * value for (i, j, k), value in values.items()
    )
    gradient = xp.stack(
        (
            sum(
                (values[1, j, k] - values[0, j, k]) * weights[j][1] * weights[k][2]
                for j in (0, 1)
                for k in (0, 1)
            ),
            sum(
                (values[i, 1, k] - values[i, 0, k]) * weights[i][0] * weights[k][2]
                for i in (0, 1)
                for k in (0, 1)
            ),
            sum(
                (values[i, j, 1] - values[i, j, 0]) * weights[i][0] * weights[j][1]
                for i in (0, 1)
                for j in (0, 1)
            ),
        )
    )
    outside = u - clamped
    distance = distance + cell * xp.sqrt(_dot(outside, outside))
    distance = xp.where(finite, distance, xp.nan)
    _, normal = _length_and_direction(xp, gradient, _fallback_axis(xp, x))
    return distance, normal


def _trace_grid(xp: Any, obstacles: Obstacles, x: Any, d: Any, reach: Any) -> Any:
    """Smallest signed distance (P, M) seen by sphere tracing each path ``x + s d``.

    Each advance moves by the current clearance ``φ − reach`` (the distance to the nearest point
    that counts as touching), so it never steps past a surface but converges on it without
    reaching it (:func:`find_contacts` allows for that): the smallest distance seen is returned.
    The end of the path is always sampled.
    """
    path_length = xp.sqrt(_dot(d, d))
    s = xp.zeros(path_length.shape, dtype=x.dtype)
    smallest, _ = _grid_lookup(xp, obstacles, x + d)
    for _ in range(_TRACE_STEPS):
        distance, _ = _grid_lookup(xp, obstacles, x + s * d)
        smallest = xp.minimum(smallest, distance)
        clearance = xp.maximum(distance - reach, 0.0)
        s = xp.minimum(1.0, s + _ratio(xp, clearance, path_length))
    return smallest


@dataclass(frozen=True)
class _MeshArrays:
    """A :class:`TriangleMesh`'s validated host data and how it is collided."""

    vertices: np.ndarray
    triangles: np.ndarray
    cell: float
    thickness: float
    on_triangles: bool


def _mesh_arrays(label: str, mesh: TriangleMesh) -> _MeshArrays:
    """Validate a mesh's vertices, triangles, cell size and thickness. A deforming or open mesh
    is collided against its triangles; an open one needs a thickness."""
    vertices = finite_array(f"{label}: vertices", mesh.vertices, (None, 3))
    triangles = _indices(f"{label}: triangles", mesh.triangles)
    if triangles.ndim != 2 or triangles.shape[1] != 3 or len(triangles) < 1:
        raise InvalidInputError(
            f"{label}: triangles must have shape (F, 3) with F >= 1, got {triangles.shape}"
        )
    if triangles.min() < 0 or triangles.max() >= len(vertices):
        raise InvalidInputError(
            f"{label}: triangle indices must lie in [0, {len(vertices) - 1}], got "
            f"[{triangles.min()}, {triangles.max()}]"
        )
    cell = positive_number(f"{label}: cell_size", mesh.cell_size)
    if cell > _MAX_CELL_SIZE:
        raise InvalidInputError(
            f"{label}: cell_size must be at most {_MAX_CELL_SIZE:g} m, got {cell}"
        )
    thickness = mesh.thickness
    if not (is_real(thickness) and math.isfinite(thickness) and thickness >= 0):
        raise InvalidInputError(
            f"{label}: thickness must be a finite number >= 0, got {thickness!r}"
        )
    if not isinstance(mesh.deforming, bool | np.bool_):
        raise InvalidInputError(f"{label}: deforming must be True or False, got {mesh.deforming!r}")
    open_edges = count_open_edges(triangles)
    if open_edges and thickness == 0.0:
        raise InvalidInputError(
            f"{label}: the mesh must be closed (every edge shared by two triangles) or have a "
            f"thickness; {open_edges} edge(s) are not"
        )
    on_triangles = bool(mesh.deforming) or open_edges > 0
    return _MeshArrays(vertices, triangles, cell, float(thickness), on_triangles)


def _indices(name: str, value: Any) -> np.ndarray:
    """``value`` as int64 indices: integers, or floats that are whole (never rounded)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{name} must be integer indices: {error}") from None
    if array.dtype.kind == "f" and np.isfinite(array).all() and (array == np.round(array)).all():
        if not array.size or np.abs(array).max() < 2**62:
            array = array.astype(np.int64)
    if array.dtype.kind not in "iu" or (array.size and np.abs(array).max() >= 2**62):
        raise InvalidInputError(f"{name} must be integer indices, got {value!r}")
    return array.astype(np.int64)


def _mesh_grid(
    label: str, mesh: TriangleMesh, arrays: _MeshArrays
) -> tuple[np.ndarray, np.ndarray, float]:
    """Signed-distance grid (nx, ny, nz), its origin (3,) and cell size of a closed mesh (host).

    Three passes, after Bridson's ``makelevelset3``: exact distances to the triangles near each
    node (a band of one cell around each triangle's box); sweeps along ±x, ±y, ±z that hand each
    node its neighbour's nearest triangle when that is closer (so every node gets the exact
    distance to a nearby, almost always the nearest, triangle); and the sign from the parity of
    surface crossings on a ray from each node towards −x.
    """
    vertices, triangles, cell = arrays.vertices, arrays.triangles, arrays.cell
    padding = (
        3.0 * cell if mesh.padding is None else positive_number(f"{label}: padding", mesh.padding)
    )
    padding += arrays.thickness
    origin = vertices.min(axis=0) - padding
    with np.errstate(over="ignore", invalid="ignore"):
        nodes = np.ceil((vertices.max(axis=0) + padding - origin) / cell) + 1
        if not (np.isfinite(nodes).all() and np.prod(nodes) <= _MAX_GRID_NODES):
            raise InvalidInputError(
                f"{label}: a grid of {tuple(nodes.tolist())} nodes at cell_size {cell} m is too "
                f"large (at most {_MAX_GRID_NODES}); raise cell_size"
            )
    shape = nodes.astype(np.int64)
    corners = vertices[triangles]  # (F, 3 corners, 3)
    distance, nearest = _band_distances(corners, origin, cell, shape)
    _sweep_nearest(corners, origin, cell, distance, nearest)
    inside = _inside_by_crossings(corners, origin, cell, shape)
    return np.where(inside, -distance, distance), origin, cell


def count_open_edges(triangles: Any) -> int:
    """How many edges of triangles (F, 3) are not shared by exactly two of them (0: the mesh is
    closed)."""
    triangles = np.asarray(triangles, dtype=np.int64)
    edges = np.sort(triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return int((counts != 2).sum())


def _band_distances(
    corners: np.ndarray, origin: np.ndarray, cell: float, shape: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact distance from every node within one cell of a triangle's box to that triangle,
    the smallest per node (inf elsewhere), and the triangle it belongs to (-1 elsewhere)."""
    low = np.clip(np.floor((corners.min(axis=1) - origin) / cell).astype(np.int64) - 1, 0, None)
    high = np.minimum(
        np.ceil((corners.max(axis=1) - origin) / cell).astype(np.int64) + 1, shape - 1
    )
    extent = high - low + 1
    counts = extent.prod(axis=1)
    triangle = np.repeat(np.arange(len(corners)), counts)
    rank = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    ny, nz = extent[triangle, 1], extent[triangle, 2]
    node = low[triangle] + np.stack((rank // (ny * nz), (rank // nz) % ny, rank % nz), axis=1)
    distance = _point_triangle_distance(origin + node * cell, corners[triangle])
    flat = np.ravel_multi_index(node.T, shape)
    order = np.lexsort((distance, flat))
    first = order[np.r_[True, flat[order][1:] != flat[order][:-1]]]
    grid_distance = np.full(np.prod(shape), np.inf)
    grid_nearest = np.full(np.prod(shape), -1, dtype=np.int64)
    grid_distance[flat[first]] = distance[first]
    grid_nearest[flat[first]] = triangle[first]
    return grid_distance.reshape(shape), grid_nearest.reshape(shape)


def _sweep_nearest(
    corners: np.ndarray, origin: np.ndarray, cell: float, distance: np.ndarray, nearest: np.ndarray
) -> None:
    """Propagate nearest triangles through the grid, in place: twice along ±x, ±y, ±z, each node
    measures its distance to its predecessor's nearest triangle and keeps it when closer."""
    axes_nodes = [origin[a] + cell * np.arange(n) for a, n in enumerate(distance.shape)]
    for _ in range(2):
        for axis in range(3):
            moved_distance = np.moveaxis(distance, axis, 0)
            moved_nearest = np.moveaxis(nearest, axis, 0)
            others = [a for a in range(3) if a != axis]
            plane = np.meshgrid(axes_nodes[others[0]], axes_nodes[others[1]], indexing="ij")
            n = moved_distance.shape[0]
            for order in (range(1, n), range(n - 2, -1, -1)):
                step = 1 if order.step == 1 else -1
                for i in order:
                    candidate = moved_nearest[i - step]
                    known = candidate >= 0
                    if not known.any():
                        continue
                    points = np.empty((*candidate.shape, 3))
                    points[..., axis] = axes_nodes[axis][i]
                    points[..., others[0]], points[..., others[1]] = plane
                    trial = np.full(candidate.shape, np.inf)
                    trial[known] = _point_triangle_distance(
                        points[known], corners[candidate[known]]
                    )
                    better = trial < moved_distance[i]
                    moved_distance[i][better] = trial[better]
                    moved_nearest[i][better] = candidate[better]


def _inside_by_crossings(
    corners: np.ndarray, origin: np.ndarray, cell: float, shape: np.ndarray
) -> np.ndarray:
    """Which nodes lie inside the closed mesh: an odd number of surface crossings on the ray from
    the node towards −x. Rays sit a tiny irrational offset off the grid lines, so none passes
    exactly through a vertex or an edge of a mesh aligned with the grid."""
    ray_y = origin[1] + cell * (np.arange(shape[1]) + 1e-6 * math.sqrt(2.0))
    ray_z = origin[2] + cell * (np.arange(shape[2]) + 1e-6 * math.sqrt(3.0))
    low = np.clip(
        np.ceil((corners[:, :, 1:].min(axis=1) - origin[1:]) / cell).astype(int) - 1, 0, None
    )
    high = np.minimum(
        np.floor((corners[:, :, 1:].max(axis=1) - origin[1:]) / cell).astype(int) + 1, shape[1:] - 1
    )
    extent = np.maximum(high - low + 1, 0)
    counts = extent.prod(axis=1)
    triangle = np.repeat(np.arange(len(corners)), counts)
    rank = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    j = low[triangle, 0] + rank // extent[triangle, 1]
    k = low[triangle, 1] + rank % extent[triangle, 1]
    a, b, c = (corners[triangle, v] for v in range(3))
    y, z = ray_y[j], ray_z[k]
    # Barycentric coordinates of the ray in the triangle's projection on the y-z plane.
    wa = (b[:, 1] - y) * (c[:, 2] - z) - (b[:, 2] - z) * (c[:, 1] - y)
    wb = (c[:, 1] - y) * (a[:, 2] - z) - (c[:, 2] - z) * (a[:, 1] - y)
    wc = (a[:, 1] - y) * (b[:, 2] - z) - (a[:, 2] - z) * (b[:, 1] - y)
    total = wa + wb + wc
    hit = ((wa > 0) & (wb > 0) & (wc > 0)) | ((wa < 0) & (wb < 0) & (wc < 0))
    x = (wa * a[:, 0] + wb * b[:, 0] + wc * c[:, 0])[hit] / total[hit]
    # A crossing at x flips the parity of every node beyond it.
    first_node = np.ceil((x - origin[0]) / cell).astype(np.int64)
    keep = first_node < shape[0]
    crossings = np.zeros(shape, dtype=np.int64)
    np.add.at(crossings, (np.maximum(first_node[keep], 0), j[hit][keep], k[hit][keep]), 1)
    return np.cumsum(crossings, axis=0) % 2 == 1


def _point_triangle_distance(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Distance (n,) from points (n, 3) to triangles (n, 3 corners, 3) (host): to the plane when
    the projection falls inside the triangle, else to the nearest of its three edges."""
    a, b, c = triangles[:, 0], triangles[:, 1], triangles[:, 2]
    normal = np.cross(b - a, c - a)
    area2 = np.einsum("ij,ij->i", normal, normal)
    relative = points - a
    with np.errstate(invalid="ignore", divide="ignore"):
        beta = np.einsum("ij,ij->i", np.cross(relative, c - a), normal) / area2
        gamma = np.einsum("ij,ij->i", np.cross(b - a, relative), normal) / area2
        plane = np.abs(np.einsum("ij,ij->i", relative, normal)) / np.sqrt(area2)
    inside = (area2 > 0) & (beta >= 0) & (gamma >= 0) & (beta + gamma <= 1)
    edges = np.minimum(
        np.minimum(_point_segment_distance(points, a, b), _point_segment_distance(points, b, c)),
        _point_segment_distance(points, c, a),
    )
    return np.where(inside, plane, edges)


def _point_segment_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    axis = b - a
    length2 = np.einsum("ij,ij->i", axis, axis)
    along = np.einsum("ij,ij->i", points - a, axis) / np.where(length2 > 0, length2, 1.0)
    closest = a + np.clip(along, 0.0, 1.0)[:, None] * axis
    return np.linalg.norm(points - closest, axis=1)


# --- small helpers --------------------------------------------------------------------------


def _dot(a: Any, b: Any) -> Any:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(xp: Any, a: Any, b: Any) -> Any:
    return xp.stack(
        (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
    )


def _ratio(xp: Any, numerator: Any, denominator: Any) -> Any:
    """``numerator / denominator``, 0 where the denominator is (almost) zero."""
    safe = denominator > _TINY
    return xp.where(safe, numerator / xp.where(safe, denominator, 1.0), 0.0)


def _length_and_direction(xp: Any, vectors: Any, fallback: Any) -> tuple[Any, Any]:
    """Lengths and unit directions of (3, ...) vectors; ``fallback`` where a vector vanishes."""
    length2 = _dot(vectors, vectors)
    safe = length2 > _TINY
    length = xp.sqrt(length2)
    return length, xp.where(safe, vectors / xp.where(safe, length, 1.0), fallback)


def _fallback_axis(xp: Any, like: Any) -> Any:
    """Local +z, shaped like ``like`` (3, ...): the normal chosen at a sphere's centre."""
    axis = xp.zeros_like(like)
    axis[2] = 1.0
    return axis


def _perpendicular(xp: Any, axis: Any) -> Any:
    """A unit vector perpendicular to each (3, ...) axis (any, if the axis vanishes): the
    normal chosen for a point exactly on a capsule's axis."""
    helper = xp.zeros_like(axis)
    use_y = xp.abs(axis[0]) > xp.abs(axis[1])
    helper[0] = xp.where(use_y, 0.0, 1.0)
    helper[1] = xp.where(use_y, 1.0, 0.0)
    _, direction = _length_and_direction(xp, _cross(xp, axis, helper), _fallback_axis(xp, axis))
    return direction
