"""Operators on strand systems: each reads the context, calls ``scene`` (or ``strands_io`` for
the material presets) and reports.

Errors of the engine and the adapter (:class:`StrandError`) become error reports and cancel the
operator; ``scene`` guarantees nothing was changed when they are raised.
"""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty, FloatProperty

from .. import scene
from ..core import StrandError
from ..strands_io.parameters import preset_names, preset_property_values


def report_error(operator: bpy.types.Operator, error: Exception) -> set[str]:
    for line in str(error).splitlines():
        operator.report({"ERROR"}, line)
    return {"CANCELLED"}


def _active_system(context: bpy.types.Context) -> bpy.types.Object | None:
    ob = context.object
    return ob if scene.is_strand_system(ob) else None


class ORIENTED_STRANDS_OT_add_strand_system(bpy.types.Operator):
    """Simulate the selected Curve and Curves (hair) objects as strands"""

    bl_idname = "oriented_strands.add_strand_system"
    bl_label = "Add Strand System"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return any(ob.type in scene.STRAND_OBJECT_TYPES for ob in _candidates(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        candidates = _candidates(context)
        objects = [ob for ob in candidates if ob.type in scene.STRAND_OBJECT_TYPES]
        if not objects:
            self.report({"ERROR"}, "Select Curve or Curves (hair) objects to simulate")
            return {"CANCELLED"}
        try:
            added = scene.add_strand_systems(context.scene, context.view_layer, objects)
        except StrandError as error:
            return report_error(self, error)
        for ob in candidates:
            if ob.type not in scene.STRAND_OBJECT_TYPES:
                self.report({"WARNING"}, f"Skipped {ob.name!r}: a {ob.type.title()} object")
        if not added:
            self.report({"INFO"}, "The selected objects already are strand systems")
            return {"CANCELLED"}
        names = ", ".join(repr(ob.name) for ob in added)
        self.report({"INFO"}, f"Strand system added to {names}")
        return {"FINISHED"}


def _candidates(context: bpy.types.Context) -> list[bpy.types.Object]:
    objects = list(context.selected_objects)
    if context.object is not None and context.object not in objects:
        objects.append(context.object)
    return objects


class ORIENTED_STRANDS_OT_remove_strand_system(bpy.types.Operator):
    """Remove the active object's strand system and its preview object (the curves stay)"""

    bl_idname = "oriented_strands.remove_strand_system"
    bl_label = "Remove Strand System"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _active_system(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        scene.remove_strand_system(context.object)
        return {"FINISHED"}


class ORIENTED_STRANDS_OT_free_cache(bpy.types.Operator):
    """Forget the simulated frames and read the curves and the animation that carries them again"""

    bl_idname = "oriented_strands.free_cache"
    bl_label = "Free Cache"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _active_system(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            scene.free_cache(context.scene, context.view_layer, context.object)
        except StrandError as error:
            return report_error(self, error)
        return {"FINISHED"}


class ORIENTED_STRANDS_OT_reset_to_rest(bpy.types.Operator):
    """Forget the simulated frames and show the strands in their rest shape"""

    bl_idname = "oriented_strands.reset_to_rest"
    bl_label = "Reset to Rest"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _active_system(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            scene.reset_to_rest(context.object)
        except StrandError as error:
            return report_error(self, error)
        return {"FINISHED"}


class ORIENTED_STRANDS_OT_add_child_hair(bpy.types.Operator):
    """Grow render hair from the simulated guides with Blender's Interpolate Hair Curves: a new
    Curves object on the surface, following the hair bake (or the live preview before a bake)"""

    bl_idname = "oriented_strands.add_child_hair"
    bl_label = "Add Child Hair"
    bl_options = {"REGISTER", "UNDO"}

    children_per_guide: FloatProperty(
        name="Children per Guide",
        description="About how many render hairs grow around each simulated guide (the "
        "modifier's Density sets it afterwards)",
        default=10.0,
        min=0.1,
        soft_max=200.0,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        ob = _active_system(context)
        return ob is not None and ob.type == "CURVES"

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            children = scene.add_child_hair(context.scene, context.object, self.children_per_guide)
        except StrandError as error:
            return report_error(self, error)
        self.report({"INFO"}, f"Child hair {children.name!r} added")
        return {"FINISHED"}


def _preset_items(_self: object, _context: object) -> list[tuple[str, str, str]]:
    return _PRESET_ITEMS


# Enum items from a callback must outlive the call (Blender keeps pointers to the strings).
_PRESET_ITEMS: list[tuple[str, str, str]] = []
_PRESET_NAMES: dict[str, str] = {}


class ORIENTED_STRANDS_OT_apply_material_preset(bpy.types.Operator):
    """Set radius, density, moduli, damping and drag from a measured material"""

    bl_idname = "oriented_strands.apply_material_preset"
    bl_label = "Material Preset"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "preset"

    preset: EnumProperty(name="Preset", items=_preset_items)

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _active_system(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            values = preset_property_values(_PRESET_NAMES.get(self.preset, self.preset))
        except StrandError as error:
            return report_error(self, error)
        props = context.object.oriented_strands
        for name, value in values.items():
            setattr(props, name, value)
        self.report({"INFO"}, f"Material preset {_PRESET_NAMES[self.preset]!r} applied")
        return {"FINISHED"}


def register_preset_items() -> None:
    """Fill the preset enum from the engine's presets (called by register())."""
    _PRESET_NAMES.clear()
    _PRESET_NAMES.update({name.upper().replace(" ", "_"): name for name in preset_names()})
    _PRESET_ITEMS[:] = [(key, name.capitalize(), "") for key, name in _PRESET_NAMES.items()]


classes = (
    ORIENTED_STRANDS_OT_add_strand_system,
    ORIENTED_STRANDS_OT_remove_strand_system,
    ORIENTED_STRANDS_OT_free_cache,
    ORIENTED_STRANDS_OT_reset_to_rest,
    ORIENTED_STRANDS_OT_add_child_hair,
    ORIENTED_STRANDS_OT_apply_material_preset,
)
