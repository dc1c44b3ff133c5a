"""The generated objects that show simulated strands: Curves (hair) objects.

Real scene geometry rather than a viewport overlay, so the motion renders (Cycles, EEVEE) and
exports. The artist's input curves are never written: they stay the editable rest shape.

Strands of free-standing curves are shown in world space (identity transform). Hair grown on a
surface (a Curves object with a Surface mesh) is shown the way Blender's hair tools read guide
curves: parented to the input object with an identity transform (so in its space, which
Blender's hair tools make the surface's), with the same surface and UV map, and each curve's
root position on it as ``surface_uv_coordinate``, so that *Interpolate Hair Curves* grows
children around the simulated guides.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

from ..strands_io.errors import SceneInputError
from ..strands_io.records import SurfaceAttachment

PREVIEW_SUFFIX = "_strands"
SURFACE_UV_ATTRIBUTE = "surface_uv_coordinate"


@dataclass(frozen=True)
class SurfaceBinding:
    """What ties generated hair to its system's surface.

    Attributes
    ----------
    source : bpy.types.Object
        The strand system's Curves object: the generated object's parent.
    surface : bpy.types.Object
        Its Surface mesh.
    uv_map : str
        The surface's UV map ("" if it has none).
    uv : (n_curves, 2) float or None
        Each root's coordinate in ``uv_map``.
    """

    source: bpy.types.Object
    surface: bpy.types.Object
    uv_map: str
    uv: np.ndarray | None


def surface_binding(
    source: bpy.types.Object, attachment: SurfaceAttachment | None
) -> SurfaceBinding | None:
    """The binding of ``source``'s generated hair (None for free-standing curves)."""
    if attachment is None:
        return None
    surface = bpy.data.objects.get(attachment.surface_name)
    if surface is None:
        return None
    return SurfaceBinding(source, surface, attachment.uv_map, attachment.uv)


def bind(ob: bpy.types.Object, binding: SurfaceBinding | None) -> None:
    """Parent ``ob`` to the binding's source with an identity transform and give its curves
    the surface, UV map and root coordinates (nothing is set that already holds)."""
    if binding is None:
        return
    if ob.parent != binding.source:
        ob.parent = binding.source
        ob.matrix_parent_inverse.identity()
        ob.matrix_basis.identity()
    curves = ob.data
    if curves.surface != binding.surface:
        curves.surface = binding.surface
    if curves.surface_uv_map != binding.uv_map:
        curves.surface_uv_map = binding.uv_map
    if binding.uv is None or len(binding.uv) != len(curves.curves):
        return
    uv = curves.attributes.get(SURFACE_UV_ATTRIBUTE)
    if uv is None:
        uv = curves.attributes.new(SURFACE_UV_ATTRIBUTE, "FLOAT2", "CURVE")
    uv.data.foreach_set("vector", np.ascontiguousarray(binding.uv, dtype=np.float32).ravel())


def world_matrix(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> np.ndarray:
    """``ob``'s world matrix (4, 4) from its parent's as ``depsgraph`` evaluated it: what
    ``ob.matrix_world`` becomes at its next evaluation, which a frame handler writing before
    that cannot wait for (and an exporter stepping frames in a depsgraph of its own does not
    copy back to the scene's objects)."""
    basis = np.array(ob.matrix_basis, dtype=np.float64)
    if ob.parent is None:
        return basis
    parent = np.array(ob.parent.evaluated_get(depsgraph).matrix_world, dtype=np.float64)
    return parent @ np.array(ob.matrix_parent_inverse, dtype=np.float64) @ basis


def to_local(
    ob: bpy.types.Object, points: np.ndarray, depsgraph: bpy.types.Depsgraph
) -> np.ndarray:
    """World ``points`` (n, 3) in ``ob``'s space."""
    inverse = np.linalg.inv(world_matrix(ob, depsgraph))
    return points @ inverse[:3, :3].T + inverse[:3, 3]


def check_preview_support() -> None:
    """Raise :class:`SceneInputError` if this Blender cannot build preview curves from Python.

    Called before anything is written, so a failure leaves the scene unchanged.
    """
    if bpy.types.Curves.bl_rna.functions.get("add_curves") is None:
        raise SceneInputError(
            f"Blender {bpy.app.version_string} cannot create hair curves from Python "
            "(Curves.add_curves is missing); Oriented Strands needs Blender 4.2 or later"
        )


def _radius_attribute(curves: bpy.types.Curves) -> bpy.types.Attribute:
    radius = curves.attributes.get("radius")
    return radius if radius is not None else curves.attributes.new("radius", "FLOAT", "POINT")


def _new_curves_data(name: str, point_counts: np.ndarray) -> bpy.types.Curves:
    curves = bpy.data.hair_curves.new(name)
    curves.add_curves([int(n) for n in point_counts])
    # Straight segments between points: exactly the simulated rigid links.
    if curves.bl_rna.functions.get("set_types") is not None:
        curves.set_types(type="POLY")
    return curves


def create_preview(
    ob: bpy.types.Object,
    point_counts: np.ndarray,
    radius: np.ndarray,
    points: np.ndarray,
    binding: SurfaceBinding | None,
    depsgraph: bpy.types.Depsgraph,
) -> bpy.types.Object:
    """A new preview object for ``ob``, in the object's collections, showing ``points``."""
    preview = new_curves_object(
        ob.name + PREVIEW_SUFFIX, ob, point_counts, radius, points, binding, depsgraph
    )
    for collection in ob.users_collection:
        collection.objects.link(preview)
    return preview


def new_curves_object(
    name: str,
    ob: bpy.types.Object,
    point_counts: np.ndarray,
    radius: np.ndarray,
    points: np.ndarray,
    binding: SurfaceBinding | None,
    depsgraph: bpy.types.Depsgraph,
) -> bpy.types.Object:
    """A Curves object showing ``points`` with ``ob``'s materials, in no collection yet."""
    curves = _new_curves_data(name, point_counts)
    for material in ob.data.materials:
        curves.materials.append(material)
    result = bpy.data.objects.new(name, curves)
    write_points(result, point_counts, radius, points, binding, depsgraph)
    return result


def write_points(
    preview: bpy.types.Object,
    point_counts: np.ndarray,
    radius: np.ndarray,
    points: np.ndarray,
    binding: SurfaceBinding | None,
    depsgraph: bpy.types.Depsgraph,
) -> None:
    """Show ``points (n_points, 3)`` (world; in the object's space as ``depsgraph`` places it)
    on the preview, rebuilding its curves if the number of strands or points changed (e.g.
    after a new segment count), bound to the surface by ``binding`` (None: as it is)."""
    curves = preview.data
    offsets = np.empty(len(curves.curves) + 1, dtype=np.int64)
    curves.curve_offset_data.foreach_get("value", offsets)
    if len(offsets) - 1 != len(point_counts) or not np.array_equal(np.diff(offsets), point_counts):
        old = curves
        curves = _new_curves_data(old.name, point_counts)
        for material in old.materials:
            curves.materials.append(material)
        preview.data = curves
        if old.users == 0:
            bpy.data.hair_curves.remove(old)
    bind(preview, binding)
    _radius_attribute(curves).data.foreach_set("value", radius.astype(np.float32))
    curves.attributes["position"].data.foreach_set(
        "vector",
        np.ascontiguousarray(to_local(preview, points, depsgraph), dtype=np.float32).ravel(),
    )
    curves.update_tag()


def remove_preview(preview: bpy.types.Object) -> None:
    """Delete the preview object and its curves data."""
    curves = preview.data
    bpy.data.objects.remove(preview)
    if curves is not None and curves.users == 0:
        bpy.data.hair_curves.remove(curves)
