"""Art direction from the Physics tab: zero-gravity rest shape, time scale, local dynamics."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    check_deleting_is_refused,
    poly_curve,
    preview_points,
    segment_lengths,
    select_only,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 48
# A 30 cm strand leaving its root sideways and curving down, 12 segments.
ARC = np.linspace(0.0, 1.2, 13)
DRAWN = np.stack((0.25 * np.sin(ARC), 0.0 * ARC, 0.25 * (np.cos(ARC) - 1.0)), axis=1)


def _play(scene, frames):
    positions = {}
    for frame in frames:
        scene.frame_set(frame)
        positions[frame] = preview_points(scene.objects["twig"])
    return positions


def _twig(scene, parent=None, radius=2e-3, youngs_modulus=1.0, shear_modulus=0.4):
    """A drawn twig (by default stiff enough to hold its shape if its rest shape allows it),
    parented to ``parent`` if given."""
    scene.frame_end = LAST_FRAME
    ob = poly_curve("twig", [DRAWN])
    ob.parent = parent
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = 12
    props.radius = radius
    props.youngs_modulus = youngs_modulus
    props.shear_modulus = shear_modulus
    return ob


def _free_cache(ob):
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}


def test_holding_the_drawn_shape_keeps_it_under_gravity_and_drawn_rest_sags(factory_scene):
    ob = _twig(factory_scene)
    length = segment_lengths(DRAWN).sum()

    sagging = _play(factory_scene, range(1, LAST_FRAME + 1))[LAST_FRAME]
    ob.oriented_strands.rest_shape = "HOLD_UNDER_GRAVITY"
    held = _play(factory_scene, range(1, LAST_FRAME + 1))

    np.testing.assert_allclose(held[1], DRAWN, atol=1e-6)
    drift = max(np.abs(points - DRAWN).max() for points in held.values())
    assert drift < 1e-3 * length, system_status(ob)
    assert np.abs(sagging - DRAWN).max() > 0.02 * length


def _carried_twig(scene, use_gravity=False):
    """The twig on an empty that slides 30 cm along x over the first 12 frames, then stops."""
    scene.use_gravity = use_gravity
    carrier = bpy.data.objects.new("carrier", None)
    scene.collection.objects.link(carrier)
    for frame, x in ((1, 0.0), (13, 0.3)):
        carrier.location = (x, 0.0, 0.0)
        carrier.keyframe_insert("location", frame=frame)
    ob = _twig(scene, carrier, radius=1e-3, youngs_modulus=0.05, shear_modulus=0.02)
    return carrier, ob


def _carried_shape_error(scene, carrier, frames):
    """Largest distance of the strand from its drawn shape carried along rigidly."""
    worst = 0.0
    for frame, points in _play(scene, frames).items():
        scene.frame_set(frame)
        shift = np.array(carrier.matrix_world.translation)
        worst = max(worst, np.abs(points - (DRAWN + shift)).max())
    return worst


def test_time_scale_zero_carries_the_strand_rigidly_and_one_lets_it_swing(factory_scene):
    carrier, ob = _carried_twig(factory_scene)
    swinging = _carried_shape_error(factory_scene, carrier, range(1, 25))
    ob.oriented_strands.time_scale = 0.0
    carried = _carried_shape_error(factory_scene, carrier, range(1, 25))
    assert swinging > 0.01
    assert carried < 1e-5, system_status(ob)


def test_local_dynamics_with_the_carrier_as_reference_takes_its_motion_out(factory_scene):
    carrier, ob = _carried_twig(factory_scene)
    props = ob.oriented_strands
    props.local_dynamics = 1.0
    props.reference_object = carrier
    _free_cache(ob)
    assert _carried_shape_error(factory_scene, carrier, range(1, 25)) < 1e-5, system_status(ob)

    props.local_dynamics = 0.5
    half = _carried_shape_error(factory_scene, carrier, range(1, 25))
    assert half > 1e-3


def test_animated_time_scale_switches_the_response_on(factory_scene):
    carrier, ob = _carried_twig(factory_scene)
    props = ob.oriented_strands
    for frame, value in ((1, 0.0), (6, 0.0), (7, 1.0)):
        props.time_scale = value
        props.keyframe_insert("time_scale", frame=frame)
    played = _play(factory_scene, range(1, 13))
    for frame in (1, 4, 6):
        factory_scene.frame_set(frame)
        shift = np.array(carrier.matrix_world.translation)
        np.testing.assert_allclose(played[frame], DRAWN + shift, atol=1e-5)
    factory_scene.frame_set(12)
    shift = np.array(carrier.matrix_world.translation)
    assert np.abs(played[12] - (DRAWN + shift)).max() > 1e-3


def test_local_dynamics_without_a_reference_is_reported(factory_scene):
    _carrier, ob = _carried_twig(factory_scene)
    ob.oriented_strands.local_dynamics = 1.0
    factory_scene.frame_set(2)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "no Reference is set" in text


def test_a_deleted_reference_is_named_and_changes_nothing(factory_scene):
    _carrier, ob = _carried_twig(factory_scene)
    frame = bpy.data.objects.new("frame", None)
    factory_scene.collection.objects.link(frame)
    props = ob.oriented_strands
    props.local_dynamics = 1.0
    props.reference_object = frame
    message = "'twig': its Reference 'frame' is not in the scene"
    check_deleting_is_refused(factory_scene, ob, frame, message)


def test_a_missing_reference_bone_is_reported_by_name(factory_scene):
    _carrier, ob = _carried_twig(factory_scene)
    rig = bpy.data.objects.new("rig", bpy.data.armatures.new("rig"))
    factory_scene.collection.objects.link(rig)
    props = ob.oriented_strands
    props.reference_object = rig
    props.reference_bone = "hip"
    select_only(ob)
    with pytest.raises(RuntimeError, match="armature 'rig' has no bone 'hip'"):
        bpy.ops.oriented_strands.free_cache()
