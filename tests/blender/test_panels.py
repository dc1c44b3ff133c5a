"""The Physics-tab panels draw, and every control they show exists.

Background Blender has no window to draw in, so each panel's draw code runs against a recording
layout that checks every property, operator and enum it names.
"""

from types import SimpleNamespace

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    grid_mesh,
    poly_curve,
    saved_swinging_tree,
    select_only,
)

pytestmark = pytest.mark.usefixtures("extension")


class RecordingLayout:
    """Stands in for ``bpy.types.UILayout``; remembers what was drawn."""

    def __init__(self, drawn: list):
        self.drawn = drawn
        self.use_property_split = self.use_property_decorate = False
        self.active = self.enabled = True

    def prop(self, data, name, **_options):
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no {name!r}"
        self.drawn.append(("prop", name))

    def operator(self, idname, **_options):
        category, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, category), name), idname
        self.drawn.append(("operator", idname))

    def operator_menu_enum(self, idname, enum, **_options):
        category, name = idname.split(".")
        operator = getattr(getattr(bpy.ops, category), name)
        assert enum in operator.get_rna_type().properties, (idname, enum)
        self.drawn.append(("menu", idname))

    def prop_search(self, data, name, search_data, search_name, **_options):
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no {name!r}"
        assert search_name in search_data.bl_rna.properties, search_name
        self.drawn.append(("prop", name))

    def label(self, text="", **_options):
        self.drawn.append(("label", text))

    def separator(self, **_options):
        pass

    def column(self, **_options):
        return RecordingLayout(self.drawn)

    row = column


def _draw(panel_class, context):
    """Run a panel's header and body draw code; what they drew."""
    drawn = []
    panel = SimpleNamespace(layout=RecordingLayout(drawn))
    if hasattr(panel_class, "_layout"):  # the sub-panels' shared set-up
        panel._layout = panel_class._layout.__get__(panel)
    if hasattr(panel_class, "draw_header"):
        panel_class.draw_header(panel, context)
    panel_class.draw(panel, context)
    return drawn


def _panels():
    from oriented_strands.panels import physics

    return physics.classes


def test_a_curve_offers_to_add_a_strand_system():
    ob = poly_curve("strand", [[(0, 0, 0), (0, 0, -0.2)]])
    select_only(ob)
    main, *subpanels = [cls for cls in _panels() if "obstacle" not in cls.__name__]
    assert main.poll(bpy.context)
    assert _draw(main, bpy.context) == [("operator", "oriented_strands.add_strand_system")]
    assert not any(cls.poll(bpy.context) for cls in subpanels)


def test_a_strand_system_shows_every_panel_and_its_settings():
    ob = poly_curve("strand", [[(0, 0, 0), (0, 0, -0.2)]])
    add_strand_system(ob)
    drawn = []
    titles = []
    for cls in _panels():
        if cls.poll(bpy.context):
            titles.append(cls.bl_label)
            drawn += _draw(cls, bpy.context)
            assert cls.bl_context == "physics"
    assert titles == [
        "Oriented Strands",
        "Strand",
        "Stiffness",
        "Damping",
        "Forces",
        "Collisions",
        "Interaction",
        "Art Direction",
        "Solver",
        "Cache",
        "Bake",
    ]
    shown = {name for kind, name in drawn if kind == "prop"}
    assert {
        "enabled",
        "segment_count",
        "radius",
        "youngs_modulus",
        "shear_modulus",
        "bend_damping_time",
        "gravity_source",
        "air_drag",
        "wind_velocity",
        "rest_shape",
        "time_scale",
        "local_dynamics",
        "reference_object",
        "pose_object",
        "pin_object",
        "use_collisions",
        "collision_radius",
        "swing_limit",
        "pose_strength",
        "field_collection",
        "solver_method",
        "solver_order",
        "substep_unit",
        "steps_per_second",
        "backend",
        "worker_processes",
        "frame_start",
        "frame_end",
    } <= shown
    labels = [text for kind, text in drawn if kind == "label"]
    assert any("cached" in text for text in labels)
    operators = {name for kind, name in drawn if kind == "operator"}
    assert {
        "oriented_strands.free_cache",
        "oriented_strands.reset_to_rest",
        "oriented_strands.remove_strand_system",
    } <= operators
    for target in ("shape_keys", "bones", "hair"):
        assert {
            f"oriented_strands.bake_{target}",
            f"oriented_strands.free_bake_{target}",
            f"oriented_strands.export_alembic_{target}",
        } <= operators
    assert "Save the file to bake hair curves (cached next to it)" in labels


def test_the_solver_panel_offers_steps_by_error():
    """Steps By Error shows its tolerance instead of a step count, and warns in the panel where
    the Explicit method cannot take it."""
    ob = poly_curve("strand", [[(0, 0, 0), (0, 0, -0.2)]])
    add_strand_system(ob)
    (panel,) = [cls for cls in _panels() if cls.bl_label == "Solver"]
    ob.oriented_strands.substep_unit = "ERROR"
    drawn = _draw(panel, bpy.context)
    shown = {name for kind, name in drawn if kind == "prop"}
    assert "error_tolerance" in shown
    assert not {"substeps", "steps_per_second"} & shown
    assert not any(kind == "label" for kind, _ in drawn)
    ob.oriented_strands.solver_method = "EXPLICIT"
    assert ("label", "By Error needs the Implicit method") in _draw(panel, bpy.context)


def test_the_bake_panel_lists_what_was_baked():
    ob = poly_curve("strand", [[(0, 0, 0), (0, 0, -0.2)]])
    bpy.context.scene.frame_end = 3
    add_strand_system(ob)
    bpy.ops.oriented_strands.bake_shape_keys()
    (panel,) = [cls for cls in _panels() if cls.bl_label == "Bake"]
    assert ("label", "strand_shape_keys: frames 1–3") in _draw(panel, bpy.context)


def test_obstacles_show_their_shape_and_material():
    head = grid_mesh("head")
    select_only(head)
    (panel,) = [cls for cls in _panels() if "obstacle" in cls.__name__]
    assert panel.poll(bpy.context)
    drawn = _draw(panel, bpy.context)
    assert ("prop", "shape") in drawn
    assert {
        ("prop", "restitution"),
        ("prop", "static_friction"),
        ("prop", "dynamic_friction"),
    } <= set(drawn)


def test_the_bake_panel_shows_a_hair_cache_that_went_missing(factory_scene, tmp_path):
    """A hair bake whose cache another bake rewrote, or whose cache file is gone (the .blend
    moved without its strands_cache folder), shows so in the Bake panel, naming the path it
    looks for."""
    from oriented_strands import scene
    from oriented_strands.panels import physics

    tree = saved_swinging_tree(factory_scene, tmp_path, 4)
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    labels = [text for kind, text in _draw(physics.OBJECT_PT_oriented_strands_bake, bpy.context)]
    assert "tree_baked_hair: frames 1–4" in labels
    cache = tmp_path / "strands_cache" / "tree.npy"
    frames = np.load(cache)
    np.save(cache, frames[:1])
    labels = [text for kind, text in _draw(physics.OBJECT_PT_oriented_strands_bake, bpy.context)]
    assert "tree_baked_hair: frames 1–4" not in labels
    assert any(
        text.startswith("tree_baked_hair: cache //strands_cache/tree.npy holds 1 ×")
        for text in labels
    )
    assert scene.status(tree)[0].startswith(
        "Baked, but tree_baked_hair cannot play: its cache //strands_cache/tree.npy holds 1 ×"
    )
    cache.unlink()
    labels = [text for kind, text in _draw(physics.OBJECT_PT_oriented_strands_bake, bpy.context)]
    assert "tree_baked_hair: cache //strands_cache/tree.npy is missing" in labels
