"""Pinned tips from the Physics tab: every strand's tip follows the Pin Object as if parented."""

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

LAST_FRAME = 25
SEGMENTS = 6
# Three 32 cm strands hanging in a U from their roots at x = 0 to their tips 20 cm away at the
# roots' height, 5 cm apart: slack enough for the tips to go where the pin takes them.
ROWS = (-0.05, 0.0, 0.05)
ARC = np.linspace(0.0, 1.0, 9)
STRANDS = [np.stack((0.2 * ARC, 0 * ARC + y, -0.12 * np.sin(math.pi * ARC)), axis=1) for y in ROWS]
TIPS = np.array([strand[-1] for strand in STRANDS])
TIP_INDICES = (SEGMENTS + 1) * np.arange(1, len(ROWS) + 1) - 1


def _pinned_fringe(scene):
    """The strands, pinned to an empty beside their tips that slides 20 cm along y and turns
    20° about z over the 24 frames of the range."""
    scene.frame_start, scene.frame_end = 1, LAST_FRAME
    pin = bpy.data.objects.new("pin", None)
    scene.collection.objects.link(pin)
    pin.location = (0.2, 0.0, 0.0)
    pin.keyframe_insert("location", frame=1)
    pin.keyframe_insert("rotation_euler", frame=1)
    pin.location = (0.2, 0.2, 0.0)
    pin.rotation_euler = (0.0, 0.0, math.radians(20.0))
    pin.keyframe_insert("location", frame=LAST_FRAME)
    pin.keyframe_insert("rotation_euler", frame=LAST_FRAME)
    scene.frame_set(1)
    ob = poly_curve("fringe", STRANDS)
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = SEGMENTS
    props.pin_object = pin
    return ob, pin


def _targets(scene, pin):
    """Where the tips belong at every frame: the pin's world matrix at that frame times each
    tip's offset from the pin at the start frame."""
    scene.frame_set(1)
    offsets = np.linalg.inv(np.array(pin.matrix_world)) @ np.c_[TIPS, np.ones(len(TIPS))].T
    targets = {}
    for frame in range(1, LAST_FRAME + 1):
        scene.frame_set(frame)
        targets[frame] = (np.array(pin.matrix_world) @ offsets)[:3].T
    return targets


def _baked_tips(scene, ob):
    """Bake the system to hair curves; its tips at every frame, world."""
    select_only(ob)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    hair = bpy.data.objects[f"{ob.name}_baked_hair"]
    tips = {}
    for frame in range(1, LAST_FRAME + 1):
        scene.frame_set(frame)
        positions = np.empty(len(hair.data.points) * 3, dtype=np.float32)
        hair.data.attributes["position"].data.foreach_get("vector", positions)
        matrix = np.array(hair.matrix_world)
        points = positions.reshape(-1, 3)[TIP_INDICES] @ matrix[:3, :3].T + matrix[:3, 3]
        tips[frame] = points
    return tips


def _tip_errors(tips, targets):
    """Each tip's distance from its target at every frame (frames, tips), m."""
    return np.array(
        [np.linalg.norm(tips[f] - targets[f], axis=1) for f in range(1, LAST_FRAME + 1)]
    )


def test_pinned_tips_follow_the_pin_object_after_save_as_and_free_ones_do_not(
    factory_scene, tmp_path
):
    ob, pin = _pinned_fringe(factory_scene)
    targets = _targets(factory_scene, pin)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "fringe.blend"))
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "fringe.blend"))
    scene = bpy.context.scene
    ob = scene.objects["fringe"]
    assert ob.oriented_strands.pin_object == scene.objects["pin"]

    pinned = _tip_errors(_baked_tips(scene, ob), targets)
    ob.oriented_strands.pin_object = None
    free = _tip_errors(_baked_tips(scene, ob), targets)

    assert pinned.max() < 2e-3, pinned.max(axis=0)
    assert (free.max(axis=0) > 0.05).all(), free.max(axis=0)


def test_the_live_preview_pins_the_tips_and_editing_the_pin_outdates_it(factory_scene):
    ob, pin = _pinned_fringe(factory_scene)
    targets = _targets(factory_scene, pin)
    played = play_without_errors(factory_scene, ob, range(1, 9))
    for frame, points in played.items():
        errors = np.linalg.norm(points[TIP_INDICES] - targets[frame], axis=1)
        assert errors.max() < 2e-3, (frame, errors)

    pin.location = (0.2, 0.1, 0.0)
    pin.keyframe_insert("location", frame=LAST_FRAME)
    factory_scene.frame_set(8)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "the pin object or its animation changed" in text


def test_tips_the_pin_leaves_behind_are_reported_in_the_status_and_the_bake(factory_scene, capsys):
    """The pin runs 60 cm away from strands of 32 cm whose roots stay: the tips trail it, and
    the system's status and a bake's warnings say so (as they do for strands held rigid), with
    what to do."""
    ob, pin = _pinned_fringe(factory_scene)
    pin.location = (0.8, 0.0, 0.0)
    pin.keyframe_insert("location", frame=LAST_FRAME)
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    for frame in range(1, LAST_FRAME + 1):
        factory_scene.frame_set(frame)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "mm off their Pin Object" in text
    assert "raise Steps per Second" in text
    assert bpy.ops.oriented_strands.bake_shape_keys() == {"FINISHED"}
    printed = capsys.readouterr().out
    assert "Oriented Strands: warning: object 'fringe': pinned tips up to" in printed


def test_a_deleted_pin_object_is_named_and_changes_nothing(factory_scene):
    ob, pin = _pinned_fringe(factory_scene)
    message = "'fringe': its Pin Object 'pin' is not in the scene"
    check_deleting_is_refused(factory_scene, ob, pin, message)


def test_pinning_a_system_to_itself_is_refused_by_the_panel_label(factory_scene):
    ob, _pin = _pinned_fringe(factory_scene)
    ob.oriented_strands.pin_object = ob
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "'fringe': its Pin Object is the strand system itself" in text
    select_only(ob)
    with pytest.raises(RuntimeError, match="Pin Object is the strand system itself"):
        bpy.ops.oriented_strands.free_cache()
