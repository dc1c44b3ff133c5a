"""Posable dynamics from the Physics tab: the strands are pulled towards a posed curve object."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    check_deleting_is_refused,
    play_without_errors,
    poly_curve,
    select_only,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 24
SEGMENTS = 8
LENGTH = 0.24
HANGING = np.stack((np.zeros(SEGMENTS + 1), np.zeros(SEGMENTS + 1), -np.linspace(0, LENGTH, 9)), 1)
# The pose: the same strand bent into a quarter circle towards +x.
ANGLE = np.linspace(0.0, math.pi / 2, SEGMENTS + 1)
RADIUS = LENGTH / (math.pi / 2)
CURLED = np.stack((RADIUS * (1 - np.cos(ANGLE)), 0 * ANGLE, -RADIUS * np.sin(ANGLE)), axis=1)


def _tail(scene):
    scene.frame_end = LAST_FRAME
    ob = poly_curve("tail", [HANGING])
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = SEGMENTS
    props.youngs_modulus = 0.2
    return ob


def _posed(scene, ob, pose):
    props = ob.oriented_strands
    props.pose_object = pose
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    return _play(scene, ob)


def _play(scene, ob):
    return play_without_errors(scene, ob, range(1, LAST_FRAME + 1))


def test_a_strong_pose_bends_the_strand_into_the_pose_object(factory_scene):
    ob = _tail(factory_scene)
    hanging = _play(factory_scene, ob)[LAST_FRAME]
    pose = poly_curve("tail pose", [CURLED])
    ob.oriented_strands.pose_strength = 500.0
    posed = _posed(factory_scene, ob, pose)[LAST_FRAME]
    np.testing.assert_allclose(hanging, HANGING, atol=0.01 * LENGTH)
    # Gravity still sags the pose a little: a rod of 501 times the rigidity.
    assert np.abs(posed - CURLED).max() < 0.02 * LENGTH


def test_zero_pose_strength_changes_nothing(factory_scene):
    ob = _tail(factory_scene)
    free = _play(factory_scene, ob)
    curled = _posed(factory_scene, ob, poly_curve("tail pose", [CURLED]))
    for frame in free:
        np.testing.assert_array_equal(curled[frame], free[frame])


def test_an_animated_pose_is_followed(factory_scene):
    ob = _tail(factory_scene)
    ob.oriented_strands.pose_strength = 500.0
    pose = poly_curve("tail pose", [HANGING])
    # The pose object swings the whole tail 60° about y (its root stays put) over the frames.
    for frame, angle in (
        (1, 0.0),
        (LAST_FRAME - 8, math.radians(60)),
        (LAST_FRAME, math.radians(60)),
    ):
        pose.rotation_euler = (0.0, angle, 0.0)
        pose.keyframe_insert("rotation_euler", frame=frame)
    played = _posed(factory_scene, ob, pose)
    cos, sin = math.cos(math.radians(60)), math.sin(math.radians(60))
    turned = HANGING @ np.array([[cos, 0.0, -sin], [0.0, 1.0, 0.0], [sin, 0.0, cos]])
    assert np.abs(played[4] - HANGING).max() < 0.2 * LENGTH
    assert np.abs(played[LAST_FRAME] - turned).max() < 0.03 * LENGTH


def test_a_pose_object_with_the_wrong_curve_count_is_reported(factory_scene):
    ob = _tail(factory_scene)
    ob.oriented_strands.pose_object = poly_curve("two curves", [CURLED, CURLED + (0.1, 0, 0)])
    select_only(ob)
    with pytest.raises(RuntimeError, match="has 2 curves, one per strand \\(1\\) is needed"):
        bpy.ops.oriented_strands.free_cache()


def test_editing_the_pose_object_outdates_the_cache(factory_scene):
    ob = _tail(factory_scene)
    ob.oriented_strands.pose_strength = 50.0
    pose = poly_curve("tail pose", [CURLED])
    _posed(factory_scene, ob, pose)
    pose.location = (0.0, 0.05, 0.0)
    factory_scene.frame_set(3)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "the pose object or its animation changed" in text


def test_a_deleted_pose_object_is_named_and_changes_nothing(factory_scene):
    ob = _tail(factory_scene)
    pose = poly_curve("tail pose", [CURLED])
    ob.oriented_strands.pose_object = pose
    message = "'tail': its Pose 'tail pose' is not in the scene"
    check_deleting_is_refused(factory_scene, ob, pose, message)
