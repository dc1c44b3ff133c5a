"""Blender application handlers of the live preview, added by register() and removed by
unregister().

They are ``persistent`` so they survive loading another file; the runtime caches they feed are
dropped on every load, as they belong to the objects of the old file.
"""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent

from . import bake_outputs, systems
from .sampling import is_sampling


@persistent
def on_frame_change_post(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph = None) -> None:
    """Play baked hair caches; simulate or replay every strand system up to the new frame."""
    if depsgraph is None:
        depsgraph = bpy.context.evaluated_depsgraph_get()
    # Baked hair plays during sampling too: the Alembic export samples frames that way.
    bake_outputs.apply_hair_caches(scene, depsgraph)
    if is_sampling():
        return
    systems.update_scene(scene, depsgraph)


@persistent
def on_load_post(*_args: object) -> None:
    """Forget the old file's runtimes and read the new file's strand systems.

    In background Blender (render farms, scripts) no timer ever runs, so the systems are read
    here, synchronously; a load handler is not a frame handler, so sampling frames is safe. The
    UI reads them from a timer once the window is ready.
    """
    systems.forget_all()
    bake_outputs.clear_open_caches()
    context = bpy.context
    if context.scene is not None:
        bake_outputs.apply_hair_caches(context.scene, context.evaluated_depsgraph_get())
    if not any(systems.is_strand_system(ob) for ob in bpy.data.objects):
        return
    if bpy.app.background and context.scene is not None and context.view_layer is not None:
        for problem in systems.refresh(context.scene, context.view_layer):
            systems.log.warning("Oriented Strands: %s", problem)
    else:
        systems.request_refresh()


@persistent
def on_save_pre(filepath: str = "", *_args: object) -> None:
    """Keep baked hair playing from the file's new folder (Save As)."""
    if filepath:
        bake_outputs.remap_hair_caches(filepath)


@persistent
def on_save_post(filepath: str = "", *_args: object) -> None:
    """After Save Copy, or a save that failed, the open file stays where it was: so do its
    cache paths."""
    if filepath:
        bake_outputs.restore_after_copy(filepath)


HANDLERS = (
    (bpy.app.handlers.frame_change_post, on_frame_change_post),
    (bpy.app.handlers.load_post, on_load_post),
    (bpy.app.handlers.save_pre, on_save_pre),
    (bpy.app.handlers.save_post, on_save_post),
    (bpy.app.handlers.save_post_fail, on_save_post),
)


def register() -> None:
    for handlers, function in HANDLERS:
        if function not in handlers:
            handlers.append(function)


def unregister() -> None:
    for handlers, function in HANDLERS:
        while function in handlers:
            handlers.remove(function)
    systems.forget_all()
    bake_outputs.clear_open_caches()
