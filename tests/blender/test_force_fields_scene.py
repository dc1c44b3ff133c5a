"""The scene's force-field objects blow the strands, as Blender's own physics are blown."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import add_strand_system, poly_curve, preview_points, select_only  # noqa: E402

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 12
HANGING = [[(0.0, 0.0, 0.0), (0.0, 0.0, -0.3)], [(0.1, 0.0, 0.0), (0.1, 0.0, -0.3)]]


def _hanging(scene):
    scene.frame_end = LAST_FRAME
    ob = poly_curve("hair", HANGING)
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = 6
    props.youngs_modulus = 0.5
    props.air_drag = 5.0  # a thick clump: the air moves it visibly within half a second
    return ob


def _field(scene, kind, location=(0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0), strength=1.0):
    bpy.ops.object.effector_add(type=kind, location=location, rotation=rotation)
    ob = bpy.context.object
    ob.name = f"{kind.lower()} field"
    ob.field.strength = strength
    return ob


def _final_points(scene, ob):
    """Re-read the input (fields are sampled with it) and play to the last frame."""
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    for frame in range(1, LAST_FRAME + 1):
        scene.frame_set(frame)
    from oriented_strands import scene as adapter

    text, icon = adapter.status(ob)
    assert icon != "ERROR", text
    return preview_points(ob)


def test_a_wind_field_blows_as_the_same_wind_set_on_the_system(factory_scene):
    ob = _hanging(factory_scene)
    still = _final_points(factory_scene, ob)

    # Local +Z turned onto world +Y: 2 m/s along +Y.
    wind = _field(factory_scene, "WIND", rotation=(-math.pi / 2, 0.0, 0.0), strength=2.0)
    blown = _final_points(factory_scene, ob)
    assert (blown[:, 1] - still[:, 1]).max() > 0.01

    wind.field.strength = 0.0
    ob.oriented_strands.wind_velocity = (0.0, 2.0, 0.0)
    np.testing.assert_allclose(_final_points(factory_scene, ob), blown, atol=1e-6)


def test_field_weight_and_collection_choose_what_acts(factory_scene):
    ob = _hanging(factory_scene)
    still = _final_points(factory_scene, ob)
    _field(factory_scene, "WIND", rotation=(-math.pi / 2, 0.0, 0.0), strength=2.0)
    props = ob.oriented_strands

    props.field_weight = 0.0
    np.testing.assert_array_equal(_final_points(factory_scene, ob), still)

    props.field_weight = 1.0
    props.field_collection = bpy.data.collections.new("no fields")
    np.testing.assert_array_equal(_final_points(factory_scene, ob), still)


def test_a_negative_force_field_attracts(factory_scene):
    ob = _hanging(factory_scene)
    still = _final_points(factory_scene, ob)
    _field(factory_scene, "FORCE", location=(0.5, 0.0, -0.3), strength=-0.05)
    pulled = _final_points(factory_scene, ob)
    assert (pulled[:, 0] - still[:, 0]).max() > 0.005
    assert (pulled[:, 0] >= still[:, 0] - 1e-9).all()


def test_fields_that_act_on_particles_only_are_listed_and_ignored(factory_scene):
    from oriented_strands import scene as adapter

    ob = _hanging(factory_scene)
    still = _final_points(factory_scene, ob)
    _field(factory_scene, "MAGNET", strength=5.0)
    np.testing.assert_array_equal(_final_points(factory_scene, ob), still)
    assert adapter.ignored_fields(ob) == ["magnet field (Magnet field)"]


def test_animated_field_strength_is_followed_and_edits_outdate_the_cache(factory_scene):
    from oriented_strands import scene as adapter

    ob = _hanging(factory_scene)
    wind = _field(factory_scene, "WIND", rotation=(-math.pi / 2, 0.0, 0.0), strength=0.0)
    for frame, strength in ((1, 0.0), (6, 0.0), (7, 3.0)):
        wind.field.strength = strength
        wind.field.keyframe_insert("strength", frame=frame)
    _final_points(factory_scene, ob)
    played = {}
    for frame in range(1, LAST_FRAME + 1):
        factory_scene.frame_set(frame)
        played[frame] = preview_points(ob)
    # The strands hang in the xz plane: any y is the wind's doing, which starts on frame 7.
    assert np.abs(played[6][:, 1]).max() < 1e-9
    assert played[LAST_FRAME][:, 1].max() > 0.01

    wind.animation_data_clear()
    wind.field.strength = 1.0
    factory_scene.frame_set(3)
    text, icon = adapter.status(ob)
    assert icon == "ERROR"
    assert "a force field changed" in text
