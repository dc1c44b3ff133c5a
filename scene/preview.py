"""The generated object that shows simulated strands: a Curves (hair) object in world space.

Real scene geometry rather than a viewport overlay, so the motion renders (Cycles, EEVEE) and
exports. The artist's input curves are never written: they stay the editable rest shape.
"""

from __future__ import annotations

import bpy
import numpy as np

from .errors import SceneInputError

PREVIEW_SUFFIX = "_strands"


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
    ob: bpy.types.Object, point_counts: np.ndarray, radius: np.ndarray, points: np.ndarray
) -> bpy.types.Object:
    """A new preview object for ``ob``, in the object's collections, showing ``points``."""
    preview = new_curves_object(ob.name + PREVIEW_SUFFIX, ob, point_counts, radius, points)
    for collection in ob.users_collection:
        collection.objects.link(preview)
    return preview


def new_curves_object(
    name: str,
    ob: bpy.types.Object,
    point_counts: np.ndarray,
    radius: np.ndarray,
    points: np.ndarray,
) -> bpy.types.Object:
    """A Curves object showing ``points`` with ``ob``'s materials, in no collection yet."""
    curves = _new_curves_data(name, point_counts)
    for material in ob.data.materials:
        curves.materials.append(material)
    result = bpy.data.objects.new(name, curves)
    write_points(result, point_counts, radius, points)
    return result


def write_points(
    preview: bpy.types.Object, point_counts: np.ndarray, radius: np.ndarray, points: np.ndarray
) -> None:
    """Show ``points (n_points, 3)`` (world) on the preview, rebuilding its curves if the
    number of strands or points changed (e.g. after a new segment count)."""
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
    _radius_attribute(curves).data.foreach_set("value", radius.astype(np.float32))
    curves.attributes["position"].data.foreach_set(
        "vector", np.ascontiguousarray(points, dtype=np.float32).ravel()
    )
    curves.update_tag()


def remove_preview(preview: bpy.types.Object) -> None:
    """Delete the preview object and its curves data."""
    curves = preview.data
    bpy.data.objects.remove(preview)
    if curves is not None and curves.users == 0:
        bpy.data.hair_curves.remove(curves)
