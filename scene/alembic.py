"""Alembic export of baked strands, around the traps of Blender's exporter.

- A Curves object whose positions a frame handler writes exports a single sample unless it has
  a Geometry Nodes modifier (even an empty one): one is added for the export and removed after.
- A legacy Curve animated by shape keys exports the same sample every frame unless curves are
  written as meshes (``curves_as_mesh``), which in turn writes hair Curves as empty meshes. So a
  file holds one bake target: shape keys as meshes (points and edges, which is all a POLY
  strand is), hair as curves, bones as the meshes skinned to the rig.
- Alembic is Y-up: Blender's (x, y, z) is written as (x, z, -y).
- Wire meshes with shape keys (Mesh Shape Keys) export as they are.

The file is written next to its destination and moved over it once complete, so a failed export
never leaves a partial file, and the scene's selection, active object and frame are restored.
"""

from __future__ import annotations

import os

import bpy

from ..strands_io.errors import SceneInputError
from .bake_outputs import (
    BAKE_PROPERTY_GROUP,
    BONES,
    HAIR,
    SHAPE_KEYS,
    baked_objects,
    cache_problem,
)
from .sampling import sampling

EXPORT_MODIFIER = "Oriented Strands Alembic export"


def _skinned_meshes(rig: bpy.types.Object) -> list[bpy.types.Object]:
    return [
        ob
        for ob in bpy.data.objects
        if ob.type == "MESH" and any(m.type == "ARMATURE" and m.object == rig for m in ob.modifiers)
    ]


def exported_objects(sources: list[bpy.types.Object], target: str) -> list[bpy.types.Object]:
    """What an export of ``sources``' bakes to ``target`` writes; raise if there is nothing."""
    objects = []
    for source in sources:
        baked = baked_objects(source, target)
        if not baked:
            kind = target.lower().replace("_", " ")
            raise SceneInputError(f"object {source.name!r} has no {kind} bake to export")
        for ob in baked:
            problem = cache_problem(ob)
            if problem:
                raise SceneInputError(
                    f"{ob.name!r}: its {problem}, so it has no motion to export (a cache that "
                    "moved: put the strands_cache folder back beside the .blend)"
                )
            if target == BONES:
                meshes = _skinned_meshes(ob)
                if not meshes:
                    raise SceneInputError(
                        f"rig {ob.name!r}: Alembic stores no bones; skin a mesh to it (Armature "
                        "modifier) and its deformation is exported"
                    )
                objects.extend(meshes)
            else:
                objects.append(ob)
    return objects


def export_alembic(
    scene: bpy.types.Scene,
    view_layer: bpy.types.ViewLayer,
    sources: list[bpy.types.Object],
    target: str,
    filepath: str,
) -> list[bpy.types.Object]:
    """Write ``sources``' bakes to ``target`` to ``filepath``, one sample per baked frame.

    Returns the objects written. The frame range is the union of the bakes' ranges.
    """
    objects = exported_objects(sources, target)
    if not filepath:
        raise SceneInputError("no Alembic file path given")
    filepath = bpy.path.abspath(filepath)
    folder = os.path.dirname(filepath) or "."
    if not os.path.isdir(folder):
        raise SceneInputError(f"the folder of {filepath!r} does not exist")
    bakes = [
        getattr(baked, BAKE_PROPERTY_GROUP)
        for source in sources
        for baked in baked_objects(source, target)
    ]
    start = min(bake.frame_start for bake in bakes)
    end = max(bake.frame_end for bake in bakes)

    partial = f"{filepath}.partial-{os.getpid()}.abc"
    previous_active = view_layer.objects.active
    selected = [ob for ob in view_layer.objects if ob.select_get()]
    rendered = [(ob, ob.hide_render) for ob in objects]
    modifiers = []
    try:
        for ob in view_layer.objects:
            ob.select_set(ob in objects)
        missing = [ob.name for ob in objects if ob.name not in view_layer.objects]
        if missing:
            raise SceneInputError(
                f"{', '.join(map(repr, missing))} not in the view layer: Alembic exports only "
                "objects in the scene"
            )
        view_layer.objects.active = objects[0]
        if target == HAIR:
            modifiers = [(ob, ob.modifiers.new(EXPORT_MODIFIER, "NODES")) for ob in objects]
        # The exporter evaluates for the render and skips what does not render (guides that
        # child hair grows from, say).
        for ob in objects:
            ob.hide_render = False
        # The live preview stands aside while the exporter steps through frames.
        with sampling():
            result = bpy.ops.wm.alembic_export(
                filepath=partial,
                start=start,
                end=end,
                selected=True,
                curves_as_mesh=target == SHAPE_KEYS,
                export_hair=False,
                export_particles=False,
                as_background_job=False,
            )
        if result != {"FINISHED"} or not os.path.exists(partial):
            raise SceneInputError(f"Blender's Alembic exporter failed to write {filepath!r}")
        os.replace(partial, filepath)
    finally:
        # An export cut short (an error, Ctrl-C, SIGTERM) leaves no partial file behind.
        if os.path.exists(partial):
            os.remove(partial)
        for ob, modifier in modifiers:
            ob.modifiers.remove(modifier)
        for ob, hidden in rendered:
            ob.hide_render = hidden
        for ob in view_layer.objects:
            ob.select_set(ob in selected)
        view_layer.objects.active = previous_active
        if os.path.exists(partial):
            os.remove(partial)
    return objects
