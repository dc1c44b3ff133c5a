"""Bake, Free Bake and Alembic export operators: one of each per bake target.

In the UI a bake runs from a timer, a frame or more per tick, with a progress bar, and Esc
cancels it; in background Blender (no timers; ``INVOKE_DEFAULT`` runs ``execute``) and from
scripts it runs synchronously. Either way ``scene.BakeJob`` changes nothing until the last frame
is simulated, and then writes everything or nothing. File errors (a full disk, a read-only
folder) are reported like the engine's errors.
"""

from __future__ import annotations

import time

import bpy
from bpy.props import StringProperty
from bpy_extras.io_utils import ExportHelper

from .. import scene
from ..core import StrandError
from .strand_system import report_error

# A timer tick simulates one frame, then more for up to this long (s), before the UI gets
# control back.
TICK_SECONDS = 0.1


def _selected_systems(context: bpy.types.Context) -> list[bpy.types.Object]:
    objects = [ob for ob in context.selected_objects if scene.is_strand_system(ob)]
    if scene.is_strand_system(context.object) and context.object not in objects:
        objects.append(context.object)
    return objects


def _has_ui(context: bpy.types.Context) -> bool:
    # Background Blender runs no timers, so a modal bake would never advance.
    return not bpy.app.background and context.window is not None


def _target_label(target: str) -> str:
    return next(label for key, label, _ in scene.BAKE_TARGET_ITEMS if key == target)


class _Bake:
    """Bake the selected strand systems to one target."""

    bl_options = {"REGISTER", "UNDO"}
    target = ""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return bool(_selected_systems(context))

    def _start(self, context: bpy.types.Context) -> scene.BakeJob:
        return scene.BakeJob(
            context.scene, context.view_layer, _selected_systems(context), [self.target]
        )

    def _finished(self, job: scene.BakeJob) -> set[str]:
        objects = job.finish()
        names = ", ".join(repr(ob.name) for ob in objects)
        self.report({"INFO"}, f"Baked {job.frame_count} frames to {names}")
        for warning in job.warnings():
            self.report({"WARNING"}, warning)
        return {"FINISHED"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        window_manager = context.window_manager
        try:
            job = self._start(context)
            window_manager.progress_begin(0.0, 1.0)
            try:
                while not job.done:
                    job.step()
                    window_manager.progress_update(job.fraction)
            finally:
                window_manager.progress_end()
            return self._finished(job)
        except (StrandError, OSError) as error:
            return report_error(self, error)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if not _has_ui(context):
            return self.execute(context)
        try:
            self._job = self._start(context)
        except (StrandError, OSError) as error:
            return report_error(self, error)
        window_manager = context.window_manager
        window_manager.progress_begin(0.0, 1.0)
        self._timer = window_manager.event_timer_add(0.01, window=context.window)
        window_manager.modal_handler_add(self)
        context.workspace.status_text_set(
            f"Baking {_target_label(self.target).lower()}: Esc to cancel"
        )
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if event.type == "ESC":
            self._stop(context)
            self.report({"WARNING"}, "Bake cancelled: nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            # Edits during the bake would change what is being baked: the UI waits.
            return {"RUNNING_MODAL"}
        job = self._job
        try:
            deadline = time.perf_counter() + TICK_SECONDS
            job.step()
            while not job.done and time.perf_counter() < deadline:
                job.step()
            context.window_manager.progress_update(job.fraction)
            if not job.done:
                return {"RUNNING_MODAL"}
            self._stop(context)
            return self._finished(job)
        except (StrandError, OSError) as error:
            self._stop(context)
            return report_error(self, error)

    def cancel(self, context: bpy.types.Context) -> None:
        self._stop(context)

    def _stop(self, context: bpy.types.Context) -> None:
        window_manager = context.window_manager
        window_manager.event_timer_remove(self._timer)
        window_manager.progress_end()
        context.workspace.status_text_set(None)


class _FreeBake:
    """Delete the selected strand systems' bake to one target"""

    bl_options = {"REGISTER", "UNDO"}
    target = ""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return any(scene.baked_objects(ob, cls.target) for ob in _selected_systems(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        removed = sum(scene.free_bake(ob, self.target) for ob in _selected_systems(context))
        self.report({"INFO"}, f"Removed {removed} baked object(s)")
        return {"FINISHED"}


# The export resolves ``//`` against the .blend's folder itself; Blender 5.0 warns about a ``//``
# path given to a file path property unless the property says so (4.2 has no such option).
_BLEND_RELATIVE = (
    {"PATH_SUPPORTS_BLEND_RELATIVE"}
    if "is_path_supports_blend_relative" in bpy.types.Property.bl_rna.properties
    else set()
)


class _ExportAlembic(ExportHelper):
    """Write the selected strand systems' bake to one target as Alembic, a sample per frame"""

    bl_options = {"REGISTER"}
    filename_ext = ".abc"
    filter_glob: StringProperty(default="*.abc", options={"HIDDEN"})
    filepath: StringProperty(
        name="File Path",
        description="The Alembic file to write (// is the .blend file's folder)",
        maxlen=1024,
        subtype="FILE_PATH",
        options=_BLEND_RELATIVE,
    )
    target = ""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return any(scene.baked_objects(ob, cls.target) for ob in _selected_systems(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            objects = scene.export_alembic(
                context.scene,
                context.view_layer,
                _selected_systems(context),
                self.target,
                self.filepath,
            )
        except (StrandError, OSError) as error:
            return report_error(self, error)
        self.report({"INFO"}, f"Wrote {len(objects)} object(s) to {self.filepath}")
        return {"FINISHED"}


class ORIENTED_STRANDS_OT_gather_hair_caches(bpy.types.Operator):
    """Copy every hair bake's cache that lies elsewhere into this .blend file's strands_cache
    folder and play it from there (for a render farm, or before freeing a bake another file
    shares)"""

    bl_idname = "oriented_strands.gather_hair_caches"
    bl_label = "Gather Hair Caches"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            copied = scene.gather_hair_caches()
        except (StrandError, OSError) as error:
            return report_error(self, error)
        if copied:
            self.report({"INFO"}, f"Copied {len(copied)} hair cache(s): {', '.join(copied)}")
        else:
            self.report({"INFO"}, "Every hair cache already is beside this file")
        return {"FINISHED"}


def _operator(base: type, verb: str, target: str, doc: str) -> type:
    suffix = target.lower()
    label = _target_label(target)
    return type(
        f"ORIENTED_STRANDS_OT_{verb}_{suffix}",
        (base, bpy.types.Operator),
        {
            "bl_idname": f"oriented_strands.{verb}_{suffix}",
            "bl_label": f"{verb.replace('_', ' ').title()} {label}",
            "bl_description": doc.format(label=label.lower()),
            "target": target,
        },
    )


classes = (
    *(
        _operator(base, verb, target, doc)
        for target, _label, _description in scene.BAKE_TARGET_ITEMS
        for base, verb, doc in (
            (_Bake, "bake", "Bake the selected strand systems to {label}"),
            (_FreeBake, "free_bake", "Delete the selected strand systems' bake to {label}"),
            (_ExportAlembic, "export_alembic", "Write the bake to {label} as Alembic"),
        )
    ),
    ORIENTED_STRANDS_OT_gather_hair_caches,
)
