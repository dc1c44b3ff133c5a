"""Reading what the artist drew: curves as world-space polylines, and the bases that carry them.

Everything here reads the *evaluated* scene (modifiers, shape keys, parents, constraints) at the
depsgraph's current frame and returns host NumPy arrays and the records of
``strands_io.records``; nothing is written. Which wire-mesh vertices form a spline, and the
geometry of roots on surface triangles, are ``strands_io.geometry``'s.
"""

from __future__ import annotations

import hashlib

import bpy
import numpy as np
from mathutils.bvhtree import BVHTree

from ..strands_io.errors import SceneInputError
from ..strands_io.geometry import (
    COINCIDENT_DISTANCE,
    barycentric_coordinates,
    edge_chains,
    polyline_length,
    rigid_part,
    triangle_frames,
)
from ..strands_io.records import DrawnCurves, SurfaceAttachment

STRAND_OBJECT_TYPES = ("CURVE", "CURVES")


def _world(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def _legacy_polylines(ob: bpy.types.Object, evaluated: bpy.types.Object) -> list[np.ndarray]:
    splines = ob.data.splines
    mesh = evaluated.to_mesh()
    try:
        if len(mesh.polygons):
            raise SceneInputError(
                f"object {ob.name!r}: its curves have Bevel or Extrude geometry, so Blender "
                "evaluates them as a surface, not a centre line; set Geometry > Bevel Depth and "
                "Extrude to 0 (the strands' preview object shows their thickness)"
            )
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
        edges = np.empty(len(mesh.edges) * 2, dtype=np.int64)
        mesh.edges.foreach_get("vertices", edges)
    finally:
        evaluated.to_mesh_clear()
    co, edges = co.reshape(-1, 3), edges.reshape(-1, 2)
    chains = edge_chains(len(co), edges)
    if len(chains) != len(splines):
        raise SceneInputError(
            f"object {ob.name!r}: its modifiers turn {len(splines)} spline(s) into "
            f"{len(chains)} pieces; strands need one piece per spline (remove modifiers that add "
            "or split curves)"
        )
    return [co[start:stop] for start, stop in chains]


def _hair_polylines(evaluated: bpy.types.Object) -> list[np.ndarray]:
    curves = evaluated.data
    co = np.empty(len(curves.points) * 3)
    curves.attributes["position"].data.foreach_get("vector", co)
    offsets = np.empty(len(curves.curves) + 1, dtype=np.int64)
    curves.curve_offset_data.foreach_get("value", offsets)
    co = co.reshape(-1, 3)
    return [co[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def _cyclic_indices(ob: bpy.types.Object) -> list[int]:
    if ob.type == "CURVE":
        return [i for i, spline in enumerate(ob.data.splines) if spline.use_cyclic_u]
    cyclic = ob.data.attributes.get("cyclic")
    if cyclic is None or cyclic.domain != "CURVE":
        return []
    flags = np.zeros(len(ob.data.curves), dtype=bool)
    cyclic.data.foreach_get("value", flags)
    return np.nonzero(flags)[0].tolist()


def read_drawn_curves(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> DrawnCurves:
    """The object's splines as world-space polylines at the depsgraph's frame.

    Raises :class:`SceneInputError` naming the object and every spline that cannot be a strand:
    a point that is not a number (a script can set one), a single point, zero length (all
    points coincide), or a closed (cyclic) spline.
    """
    if ob.type not in STRAND_OBJECT_TYPES:
        raise SceneInputError(
            f"object {ob.name!r} is a {ob.type.title()} object; strands are made from Curve and "
            "Curves (hair) objects"
        )
    evaluated = ob.evaluated_get(depsgraph)
    if ob.type == "CURVE":
        local, kind = _legacy_polylines(ob, evaluated), "spline"
    else:
        local, kind = _hair_polylines(evaluated), "curve"
    if not local:
        raise SceneInputError(f"object {ob.name!r} has no {kind}s")
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    polylines = [_world(points, matrix) for points in local]

    problems = [f"{kind} {i} is closed (cyclic); strands are open" for i in _cyclic_indices(ob)]
    for i, points in enumerate(polylines):
        if not np.isfinite(points).all():
            problems.append(f"{kind} {i} has a point whose position is not a number")
        elif len(points) < 2:
            problems.append(f"{kind} {i} has a single point")
        elif polyline_length(points) <= COINCIDENT_DISTANCE:
            problems.append(f"{kind} {i} has zero length (all its points coincide)")
    if problems:
        raise SceneInputError(f"object {ob.name!r}: " + "; ".join(sorted(set(problems))))
    return DrawnCurves(ob.name, polylines, [f"{kind} {i}" for i in range(len(polylines))])


def object_base_matrix(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> np.ndarray:
    """Rigid world transform (1, 4, 4) of the object as evaluated (parents, bones, constraints)."""
    matrix = np.array(ob.evaluated_get(depsgraph).matrix_world, dtype=np.float64)
    return rigid_part(matrix[None])


def require_in_scene(
    ob: bpy.types.Object, target: bpy.types.Object, label: str, depsgraph: bpy.types.Depsgraph
) -> None:
    """Raise :class:`SceneInputError` naming ``ob``, the panel's ``label`` and ``target`` when
    ``target`` (an object a strand system's setting points at) is not in the depsgraph's view
    layer: deleted from the scene (which the pointer alone keeps alive) or in an excluded
    collection, where Blender would give its last transform and shape, unanimated."""
    if depsgraph.view_layer.objects.get(target.name) != target:
        raise SceneInputError(
            f"object {ob.name!r}: its {label} {target.name!r} is not in the scene (deleted, or "
            f"in a collection excluded from the view layer); put it back or clear {label}"
        )


def reference_matrix(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> np.ndarray | None:
    """Rigid world transform (1, 4, 4) of the strand system's local-dynamics reference, as
    evaluated: its Reference object, or the named bone of that armature; None if it has none.

    Raises :class:`SceneInputError` naming both objects when the Reference is not in the scene
    (:func:`require_in_scene`) or has no such bone."""
    props = ob.oriented_strands
    reference = props.reference_object
    if reference is None:
        return None
    require_in_scene(ob, reference, "Reference", depsgraph)
    evaluated = reference.evaluated_get(depsgraph)
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    if props.reference_bone:
        if reference.type != "ARMATURE":
            raise SceneInputError(
                f"object {ob.name!r}: its local-dynamics Reference {reference.name!r} is a "
                f"{reference.type.title()} object, so it has no bone {props.reference_bone!r}"
            )
        bone = evaluated.pose.bones.get(props.reference_bone)
        if bone is None:
            raise SceneInputError(
                f"object {ob.name!r}: armature {reference.name!r} has no bone "
                f"{props.reference_bone!r} to use as local-dynamics Reference"
            )
        matrix = matrix @ np.array(bone.matrix, dtype=np.float64)
    return rigid_part(matrix[None])


def pin_matrix(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> np.ndarray | None:
    """Rigid world transform (1, 4, 4) of the strand system's Pin Object as evaluated (its
    animation, parents, constraints); None if it has none.

    Raises :class:`SceneInputError` naming both objects when the Pin Object is the strand system
    itself or is not in the scene (:func:`require_in_scene`).
    """
    pin = ob.oriented_strands.pin_object
    if pin is None:
        return None
    if pin == ob:
        raise SceneInputError(
            f"object {ob.name!r}: its Pin Object is the strand system itself; pick another "
            "object for the tips to follow, or clear Pin Object"
        )
    require_in_scene(ob, pin, "Pin Object", depsgraph)
    return object_base_matrix(pin, depsgraph)


def hair_surface(ob: bpy.types.Object) -> bpy.types.Object | None:
    """The mesh a Curves object's hair grows on, or None for free-standing curves."""
    if ob.type != "CURVES" or ob.data.surface is None:
        return None
    surface = ob.data.surface
    if surface.type != "MESH":
        raise SceneInputError(
            f"object {ob.name!r}: its surface {surface.name!r} is a {surface.type.title()} "
            "object; hair roots can follow a Mesh surface only"
        )
    return surface


def mesh_triangles(
    ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The evaluated mesh of ``ob``: vertex positions (V, 3) in object space, triangle corner
    indices (T, 3) and the object's world matrix (4, 4)."""
    evaluated = ob.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        mesh.calc_loop_triangles()
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
        triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int64)
        mesh.loop_triangles.foreach_get("vertices", triangles)
    finally:
        evaluated.to_mesh_clear()
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    return co.reshape(-1, 3), triangles.reshape(-1, 3), matrix


def _surface_triangles(
    surface: bpy.types.Object, depsgraph: bpy.types.Depsgraph
) -> tuple[np.ndarray, np.ndarray]:
    """World vertex positions (V, 3) and triangle corner indices (T, 3) of the evaluated mesh."""
    co, triangles, matrix = mesh_triangles(surface, depsgraph)
    return _world(co, matrix), triangles


def attach_to_surface(
    ob: bpy.types.Object,
    surface: bpy.types.Object,
    roots: np.ndarray,
    depsgraph: bpy.types.Depsgraph,
) -> SurfaceAttachment:
    """Attach each root ``(n, 3)`` (world) to its closest triangle of the evaluated surface."""
    co, triangles = _surface_triangles(surface, depsgraph)
    if len(triangles) == 0:
        raise SceneInputError(
            f"object {ob.name!r}: its surface {surface.name!r} has no faces to attach roots to"
        )
    tree = BVHTree.FromPolygons(co.tolist(), triangles.tolist(), all_triangles=True)
    nearest = np.empty(len(roots), dtype=np.int64)
    for i, root in enumerate(roots):
        location, _normal, index, _distance = tree.find_nearest(root.tolist())
        if location is None:
            raise SceneInputError(f"object {ob.name!r}: curve {i} found no surface triangle")
        nearest[i] = index
    barycentric = barycentric_coordinates(co[triangles[nearest]], roots)
    _, areas = triangle_frames(co[triangles[nearest]], barycentric)
    collapsed = np.nonzero(areas <= 0)[0]
    if collapsed.size:
        raise SceneInputError(
            f"object {ob.name!r}: curve {int(collapsed[0])} roots on a zero-area face of "
            f"{surface.name!r}"
        )
    uv_map, corner_uvs = _triangle_uvs(ob, surface, depsgraph)
    uv = None
    if corner_uvs is not None:
        uv = np.einsum("nk,nkj->nj", barycentric, corner_uvs[nearest])
    return SurfaceAttachment(surface.name, nearest, barycentric, len(triangles), uv_map, uv)


def _triangle_uvs(
    ob: bpy.types.Object, surface: bpy.types.Object, depsgraph: bpy.types.Depsgraph
) -> tuple[str, np.ndarray | None]:
    """The UV map the hair ``ob`` names on its evaluated ``surface`` (its ``surface_uv_map``, or
    the mesh's active render UV map when it names none) and the map's coordinates at the
    corners of each loop triangle (T, 3, 2); ``("", None)`` if the mesh has no such map."""
    evaluated = surface.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        name = ob.data.surface_uv_map
        if not name:
            active = next((layer for layer in mesh.uv_layers if layer.active_render), None)
            name = active.name if active is not None else ""
        layer = mesh.uv_layers.get(name) if name else None
        if layer is None:
            return "", None
        mesh.calc_loop_triangles()
        loops = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int64)
        mesh.loop_triangles.foreach_get("loops", loops)
        uv = np.empty(len(mesh.loops) * 2)
        layer.data.foreach_get("uv", uv)
    finally:
        evaluated.to_mesh_clear()
    return name, uv.reshape(-1, 2)[loops].reshape(-1, 3, 2)


def surface_base_matrices(
    ob: bpy.types.Object, attachment: SurfaceAttachment, depsgraph: bpy.types.Depsgraph
) -> np.ndarray:
    """Rigid world frame (n, 4, 4) of each attached root on the evaluated, deformed surface."""
    surface = bpy.data.objects.get(attachment.surface_name)
    if surface is None:
        raise SceneInputError(
            f"object {ob.name!r}: its surface object {attachment.surface_name!r} is gone"
        )
    co, triangles = _surface_triangles(surface, depsgraph)
    if len(triangles) != attachment.triangle_count:
        raise SceneInputError(
            f"object {ob.name!r}: the surface {surface.name!r} changed from "
            f"{attachment.triangle_count} to {len(triangles)} triangles; hair roots can follow "
            "a surface that deforms, not one whose topology changes"
        )
    matrices, areas = triangle_frames(co[triangles[attachment.triangle]], attachment.barycentric)
    collapsed = np.nonzero(areas <= 0)[0]
    if collapsed.size:
        raise SceneInputError(
            f"object {ob.name!r}: the surface face under curve {int(collapsed[0])} collapsed "
            "to zero area"
        )
    return matrices


def input_fingerprint(ob: bpy.types.Object) -> str:
    """A digest of the object's original (unevaluated) curve data and modifier stack.

    Cheap enough to take on every frame change; it notices edits of the drawn curves at any
    frame. Evaluated-only changes (a modifier's settings) are picked up by Free Cache.
    """
    digest = hashlib.blake2b(digest_size=16)
    data = ob.data
    if ob.type == "CURVE":
        for spline in data.splines:
            digest.update(
                repr(
                    (
                        spline.type,
                        spline.use_cyclic_u,
                        spline.order_u,
                        spline.resolution_u,
                        spline.use_endpoint_u,
                        spline.use_bezier_u,
                    )
                ).encode()
            )
            if spline.type == "BEZIER":
                for attribute in ("co", "handle_left", "handle_right"):
                    values = np.empty(len(spline.bezier_points) * 3)
                    spline.bezier_points.foreach_get(attribute, values)
                    digest.update(values.tobytes())
            else:
                values = np.empty(len(spline.points) * 4)
                spline.points.foreach_get("co", values)
                digest.update(values.tobytes())
        digest.update(repr((data.resolution_u, data.bevel_depth, data.extrude)).encode())
    else:
        values = np.empty(len(data.points) * 3)
        data.attributes["position"].data.foreach_get("vector", values)
        offsets = np.empty(len(data.curves) + 1, dtype=np.int64)
        data.curve_offset_data.foreach_get("value", offsets)
        digest.update(values.tobytes())
        digest.update(offsets.tobytes())
        digest.update(repr(data.surface.name if data.surface else None).encode())
    modifiers = [(m.name, m.type, m.show_viewport) for m in ob.modifiers]
    digest.update(repr(modifiers).encode())
    return digest.hexdigest()
