"""Obstacle objects of the scene as the engine's collision shapes (``core.obstacles``).

An obstacle is a Mesh object with *Strand Obstacle* on. Its shape is read from the evaluated mesh
in the object's own axes with the object's scale applied, at the strand system's start frame:

- **Mesh**: the triangle mesh (``TriangleMesh``). A closed mesh that keeps its shape over the
  frame range is a signed-distance grid of the chosen cell size (a 48th of the mesh's largest
  dimension when 0). One whose evaluated shape changes (an armature, shape keys, modifiers,
  Geometry Nodes, a cloth simulation) is *deforming* (``strands_io.cache.with_deformation``
  decides): its vertices are read at every frame and move in straight lines through the
  substeps (``VertexTrajectory``), and it is queried against its triangles with the cell size as
  the query's grid. An open mesh (a collar, a brim, a single-sided plane) needs a *Thickness* and
  is queried against its triangles too. The vertex count must stay the same at every frame;
- **Sphere**: the smallest ball about the object's origin holding every vertex;
- **Capsule**: along the object's local Z, from the lowest to the highest vertex, with the radius
  of the vertex farthest from that axis;
- **Plane**: the object's local XY plane, solid below (local −Z).

The obstacles' world transforms are sampled at every frame with the strands' roots; their
velocities at each substep come from the same C² interpolation as the roots' (a
``BaseTrajectory`` of the obstacle transforms), so an animated obstacle hits with its real speed.
"""

from __future__ import annotations

import hashlib

import bpy
import numpy as np

from ..core.obstacles import Capsule, Material, Plane, Sphere, TriangleMesh, count_open_edges
from ..strands_io.errors import SceneInputError
from ..strands_io.geometry import rigid_part
from ..strands_io.records import ObstacleShapes
from .inputs import mesh_triangles

# A mesh's grid cell when none is set: this fraction of its largest dimension.
DEFAULT_CELLS_ACROSS = 48
OBSTACLE_GROUP = "oriented_strands_obstacle"


def obstacle_objects(
    scene: bpy.types.Scene, collection: bpy.types.Collection | None
) -> list[bpy.types.Object]:
    """Mesh objects with *Strand Obstacle* on, of ``collection`` (the whole scene's when None),
    sorted by name."""
    objects = collection.all_objects if collection is not None else scene.objects
    return sorted(
        (ob for ob in objects if ob.type == "MESH" and getattr(ob, OBSTACLE_GROUP).use_obstacle),
        key=lambda ob: ob.name,
    )


def read_obstacle_shapes(
    objects: list[bpy.types.Object], depsgraph: bpy.types.Depsgraph
) -> ObstacleShapes:
    """Each obstacle object's shape at the depsgraph's frame (raises :class:`SceneInputError`
    naming the object for an empty or unusable mesh)."""
    return ObstacleShapes(
        tuple(_shape(ob, depsgraph) for ob in objects), tuple(ob.name for ob in objects)
    )


def obstacle_vertices(
    objects: list[bpy.types.Object],
    shapes: ObstacleShapes,
    depsgraph: bpy.types.Depsgraph,
    frame: int,
) -> tuple:
    """The evaluated vertices (V, 3) of each Mesh-shaped obstacle at the depsgraph's frame, in
    its axes with its scale applied (None for the other shapes). Raises
    :class:`SceneInputError` naming the object when its vertex count differs from the start
    frame's."""
    vertices = []
    for ob, shape in zip(objects, shapes.shapes, strict=True):
        if not isinstance(shape, TriangleMesh):
            vertices.append(None)
            continue
        co, _ = _scaled_mesh(ob, depsgraph)
        if len(co) != len(shape.vertices):
            raise SceneInputError(
                f"obstacle {ob.name!r} (Strand Obstacle, Shape Mesh) has {len(co)} vertices at "
                f"frame {frame} and {len(shape.vertices)} at the start frame: a deforming "
                "obstacle must keep its vertex count (a modifier that adds or removes geometry "
                "over time, such as Remesh or a changing Decimate, cannot collide)"
            )
        vertices.append(co)
    return tuple(vertices)


def obstacle_matrices(
    objects: list[bpy.types.Object], depsgraph: bpy.types.Depsgraph
) -> np.ndarray:
    """Rigid world transforms (K, 4, 4) of the obstacle objects at the depsgraph's frame."""
    if not objects:
        return np.zeros((0, 4, 4))
    return rigid_part(
        np.stack([np.array(ob.evaluated_get(depsgraph).matrix_world) for ob in objects])
    )


def obstacle_fingerprint(objects: list[bpy.types.Object]) -> str:
    """A digest of the obstacle objects' settings and original mesh data: when it changes, the
    shapes read at the start frame no longer hold."""
    digest = hashlib.blake2b(digest_size=16)
    for ob in objects:
        props = getattr(ob, OBSTACLE_GROUP)
        settings = (ob.name, props.shape, props.cell_size, props.thickness, props.restitution)
        digest.update(repr((*settings, props.static_friction, props.dynamic_friction)).encode())
        co = np.empty(len(ob.data.vertices) * 3)
        ob.data.vertices.foreach_get("co", co)
        digest.update(co.tobytes())
        digest.update(repr([(m.name, m.type, m.show_viewport) for m in ob.modifiers]).encode())
    return digest.hexdigest()


def _shape(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph):
    props = getattr(ob, OBSTACLE_GROUP)
    material = Material(
        restitution=float(props.restitution),
        static_friction=float(props.static_friction),
        dynamic_friction=float(props.dynamic_friction),
    )
    if props.shape == "PLANE":
        return Plane(material=material, name=ob.name)
    vertices, triangles = _scaled_mesh(ob, depsgraph)
    if props.shape == "SPHERE":
        radius = float(np.linalg.norm(vertices, axis=1).max())
        return Sphere(radius, material=material, name=ob.name)
    if props.shape == "CAPSULE":
        radius = float(np.hypot(vertices[:, 0], vertices[:, 1]).max())
        bottom, top = float(vertices[:, 2].min()) + radius, float(vertices[:, 2].max()) - radius
        if bottom > top:  # Shorter than it is wide: a ball.
            bottom = top = 0.5 * (bottom + top)
        return Capsule((0.0, 0.0, bottom), (0.0, 0.0, top), radius, material=material, name=ob.name)
    open_edges = count_open_edges(triangles)
    if open_edges and props.thickness <= 0.0:
        raise SceneInputError(
            f"obstacle {ob.name!r} (Strand Obstacle, Shape Mesh) is an open mesh ({open_edges} "
            "edges do not join two faces): give it a Thickness, or close it"
        )
    cell = float(props.cell_size)
    if cell <= 0:
        cell = float(np.ptp(vertices, axis=0).max()) / DEFAULT_CELLS_ACROSS
    return TriangleMesh(
        vertices,
        triangles,
        cell,
        material=material,
        name=ob.name,
        thickness=float(props.thickness),
    )


def _scaled_mesh(
    ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph
) -> tuple[np.ndarray, np.ndarray]:
    """Evaluated vertices (V, 3) in the object's axes with its scale applied, and triangles."""
    co, triangles, matrix = mesh_triangles(ob, depsgraph)
    if len(triangles) == 0:
        raise SceneInputError(f"obstacle {ob.name!r} has no faces to collide with")
    # matrix = [R S | t] with R the rotation of its rigid part, so S = Rᵀ times the linear part.
    stretch = rigid_part(matrix[None])[0, :3, :3].T @ matrix[:3, :3]
    return co @ stretch.T, triangles
