"""Panels in Properties > Physics, laid out like Blender's own physics panels. Draw code only."""

from __future__ import annotations

import bpy

from .. import scene


class _PhysicsPanel:
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"


class _StrandSubPanel(_PhysicsPanel):
    bl_parent_id = "OBJECT_PT_oriented_strands"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return scene.is_strand_system(context.object)

    def _layout(self, context: bpy.types.Context) -> tuple[bpy.types.UILayout, object]:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = True
        props = context.object.oriented_strands
        layout.active = props.enabled
        return layout, props


def _profile(layout: bpy.types.UILayout, props: object, tip: str, shape: str) -> None:
    column = layout.column(align=True)
    column.prop(props, tip)
    column.prop(props, shape, text="Shape")


class OBJECT_PT_oriented_strands(_PhysicsPanel, bpy.types.Panel):
    bl_label = "Oriented Strands"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        ob = context.object
        return ob is not None and ob.type in scene.STRAND_OBJECT_TYPES

    def draw_header(self, context: bpy.types.Context) -> None:
        if scene.is_strand_system(context.object):
            self.layout.prop(context.object.oriented_strands, "enabled", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        ob = context.object
        if not scene.is_strand_system(ob):
            layout.operator("oriented_strands.add_strand_system", icon="ADD")
            return
        props = ob.oriented_strands
        layout.use_property_split = True
        layout.prop(props, "preview_object")
        text, icon = scene.status(ob)
        layout.label(text=text, icon=icon)
        layout.operator("oriented_strands.remove_strand_system", icon="X")


class OBJECT_PT_oriented_strands_strand(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Strand"
    bl_options = set()

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        layout.prop(props, "resample_mode")
        if props.resample_mode == "COUNT":
            layout.prop(props, "segment_count")
        else:
            layout.prop(props, "segment_length")
        layout.prop(props, "branch_tolerance")
        layout.separator()
        layout.operator_menu_enum("oriented_strands.apply_material_preset", "preset")
        layout.prop(props, "radius")
        _profile(layout, props, "thickness_tip", "thickness_shape")
        layout.prop(props, "ellipticity")
        layout.prop(props, "density")
        _profile(layout, props, "mass_tip", "mass_shape")


class OBJECT_PT_oriented_strands_stiffness(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Stiffness"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        column = layout.column(align=True)
        column.prop(props, "youngs_modulus")
        column.prop(props, "shear_modulus")
        _profile(layout, props, "stiffness_tip", "stiffness_shape")


class OBJECT_PT_oriented_strands_damping(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Damping"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        column = layout.column(align=True)
        column.prop(props, "bend_damping_time", text="Bending")
        column.prop(props, "twist_damping_time", text="Twisting")
        _profile(layout, props, "damping_tip", "damping_shape")


class OBJECT_PT_oriented_strands_forces(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Forces"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        layout.prop(props, "gravity_source")
        if props.gravity_source == "CUSTOM":
            layout.prop(props, "custom_gravity")
        elif not context.scene.use_gravity:
            layout.label(text="Scene gravity is disabled", icon="INFO")
        layout.prop(props, "gravity_factor")
        layout.prop(props, "air_drag", text="Air Drag (mN·s/m²)")
        layout.prop(props, "wind_velocity")
        layout.separator()
        layout.prop(props, "field_collection")
        layout.prop(props, "field_weight")
        _profile(layout, props, "field_weight_tip", "field_weight_shape")
        for name in scene.ignored_fields(context.object):
            layout.label(text=f"Not read: {name}", icon="INFO")


class OBJECT_PT_oriented_strands_collisions(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Collisions"

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.object.oriented_strands, "use_collisions", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        column = layout.column()
        column.active = props.use_collisions
        column.prop(props, "obstacle_collection")
        names = scene.obstacle_names(context.object)
        column.label(
            text=f"Colliding with {', '.join(names)}" if names else "No Strand Obstacle objects",
            icon="INFO",
        )
        column.prop(props, "collision_radius")
        _profile(column, props, "collision_tip", "collision_shape")
        column.prop(props, "contact_iterations")
        layout.separator()
        column = layout.column(align=True)
        column.prop(props, "swing_limit")
        column.prop(props, "twist_limit")


class OBJECT_PT_oriented_strands_interaction(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Interaction"

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.object.oriented_strands, "use_interaction", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        column = layout.column()
        column.active = props.use_interaction
        column.prop(props, "interaction_friction")
        column.prop(props, "interaction_volume")
        column.prop(props, "interaction_target")
        row = column.row()
        row.active = props.interaction_target == "VALUE"
        row.prop(props, "interaction_density")
        column.prop(props, "interaction_cell_size")
        _profile(column, props, "interaction_tip", "interaction_shape")


class OBJECT_PT_oriented_strands_art_direction(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Art Direction"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        layout.prop(props, "rest_shape")
        layout.separator()
        layout.prop(props, "time_scale")
        layout.prop(props, "local_dynamics")
        column = layout.column()
        column.prop(props, "reference_object")
        reference = props.reference_object
        if reference is not None and reference.type == "ARMATURE":
            column.prop_search(props, "reference_bone", reference.data, "bones")
        layout.separator()
        layout.prop(props, "pose_object")
        column = layout.column()
        column.active = props.pose_object is not None
        column.prop(props, "pose_strength")
        _profile(column, props, "pose_tip", "pose_shape")
        column.prop(props, "pose_damping_time")
        layout.separator()
        layout.prop(props, "pin_object")


class OBJECT_PT_oriented_strands_solver(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Solver"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        layout.prop(props, "solver_method")
        layout.prop(props, "substep_unit")
        if props.substep_unit == "SECOND":
            layout.prop(props, "steps_per_second")
        elif props.substep_unit == "FRAME":
            layout.prop(props, "substeps")
        else:
            layout.prop(props, "error_tolerance")
            if props.solver_method == "EXPLICIT":
                layout.label(text="By Error needs the Implicit method", icon="ERROR")
        column = layout.column(align=True)
        column.active = props.solver_method == "IMPLICIT"
        column.prop(props, "solver_order")
        column.prop(props, "newton_tolerance")
        column.prop(props, "newton_max_iterations")
        layout.prop(props, "stop_on_failure")
        layout.prop(props, "backend")
        reason = scene.backend_unavailable_reason(props.backend)
        if reason:
            layout.label(text=reason, icon="ERROR")
        layout.prop(props, "precision")
        row = layout.row()
        row.active = props.backend == "numpy"
        row.prop(props, "worker_processes")


class OBJECT_PT_oriented_strands_cache(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Cache"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._layout(context)
        column = layout.column(align=True)
        column.prop(props, "frame_start")
        column.prop(props, "frame_end")
        text, icon = scene.status(context.object)
        layout.label(text=text, icon=icon)
        row = layout.row(align=True)
        row.operator("oriented_strands.free_cache")
        row.operator("oriented_strands.reset_to_rest")


class OBJECT_PT_oriented_strands_bake(_StrandSubPanel, bpy.types.Panel):
    bl_label = "Bake"

    def draw(self, context: bpy.types.Context) -> None:
        layout, _props = self._layout(context)
        layout.use_property_split = False
        for target, label, _description in scene.BAKE_TARGET_ITEMS:
            suffix = target.lower()
            baked = scene.baked_objects(context.object, target)
            column = layout.column(align=True)
            row = column.row(align=True)
            row.operator(f"oriented_strands.bake_{suffix}", text=f"Bake {label}")
            row.operator(f"oriented_strands.free_bake_{suffix}", text="", icon="TRASH")
            row.operator(f"oriented_strands.export_alembic_{suffix}", text="", icon="EXPORT")
            for ob in baked:
                bake = ob.oriented_strands_bake
                problem = scene.cache_problem(ob)
                if problem:
                    column.label(text=f"{ob.name}: {problem}", icon="ERROR")
                    continue
                if target == "HAIR" and not bake.cache_file.startswith("//strands_cache/"):
                    row = column.row()
                    row.label(text=f"{ob.name}: cache {bake.cache_file}", icon="INFO")
                    row.operator("oriented_strands.gather_hair_caches", text="Gather")
                column.label(
                    text=f"{ob.name}: frames {bake.frame_start}–{bake.frame_end}", icon="CHECKMARK"
                )
        if not bpy.data.filepath:
            layout.label(text="Save the file to bake hair curves (cached next to it)", icon="INFO")
        if context.object.type == "CURVES":
            layout.operator("oriented_strands.add_child_hair", icon="CURVES")


class OBJECT_PT_oriented_strands_obstacle(_PhysicsPanel, bpy.types.Panel):
    bl_label = "Strand Obstacle"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        ob = context.object
        return ob is not None and ob.type == "MESH"

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.object.oriented_strands_obstacle, "use_obstacle", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        props = context.object.oriented_strands_obstacle
        column = layout.column()
        column.active = props.use_obstacle
        column.prop(props, "shape")
        if props.shape == "MESH":
            column.prop(props, "cell_size")
            column.prop(props, "thickness")
        column.prop(props, "restitution")
        column.prop(props, "static_friction")
        column.prop(props, "dynamic_friction")


classes = (
    OBJECT_PT_oriented_strands,
    OBJECT_PT_oriented_strands_strand,
    OBJECT_PT_oriented_strands_stiffness,
    OBJECT_PT_oriented_strands_damping,
    OBJECT_PT_oriented_strands_forces,
    OBJECT_PT_oriented_strands_collisions,
    OBJECT_PT_oriented_strands_interaction,
    OBJECT_PT_oriented_strands_art_direction,
    OBJECT_PT_oriented_strands_solver,
    OBJECT_PT_oriented_strands_cache,
    OBJECT_PT_oriented_strands_bake,
    OBJECT_PT_oriented_strands_obstacle,
)
