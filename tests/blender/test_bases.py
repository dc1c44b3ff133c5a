"""Strand roots follow what carries them: an animated object, a bone, a deforming surface."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    grid_mesh,
    hair_curves,
    poly_curve,
    preview_strands,
    select_only,
    world,
)

pytestmark = pytest.mark.usefixtures("extension")

ROOT_TOLERANCE = 1e-5
LAST_FRAME = 20


def _play(frames=range(1, LAST_FRAME + 1)):
    """Yield each frame after setting it, as playback does."""
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        yield frame


def _status_is_fine(ob):
    from oriented_strands import scene

    text, icon = scene.status(ob)
    assert icon != "ERROR", text


def test_roots_follow_a_keyframed_object_and_the_strand_swings_behind(factory_scene):
    factory_scene.frame_end = LAST_FRAME
    ob = poly_curve("tail", [[(0, 0, 0), (0, 0, -0.3)], [(0.05, 0, 0), (0.05, 0, -0.3)]])
    for frame, x, angle in ((1, 0.0, 0.0), (LAST_FRAME, 1.0, math.pi / 2)):
        ob.location = (x, 0.0, 0.0)
        ob.rotation_euler = (0.0, 0.0, angle)
        ob.keyframe_insert("location", frame=frame)
        ob.keyframe_insert("rotation_euler", frame=frame)

    assert add_strand_system(ob) == {"FINISHED"}

    lag = 0.0
    for _ in _play():
        first, second = preview_strands(ob)
        np.testing.assert_allclose(first[0], world(ob, (0, 0, 0)), atol=ROOT_TOLERANCE)
        np.testing.assert_allclose(second[0], world(ob, (0.05, 0, 0)), atol=ROOT_TOLERANCE)
        lag = max(lag, np.linalg.norm(first[-1] - world(ob, (0, 0, -0.3))))
    _status_is_fine(ob)
    # A strand carried rigidly would keep its tip under the root; a simulated one trails.
    assert lag > 0.01


def test_a_cut_carries_the_strands_across_with_their_pose(factory_scene):
    """The object sways, then jumps 100 m between frames 10 and 11 (constant keys): a cut. The
    roots follow it at every frame, and the hair arrives hanging as it hung, not whipped by a
    curve through the jump."""
    factory_scene.frame_end = LAST_FRAME
    ob = poly_curve("tail", [[(0, 0, 0), (0, 0, -0.15), (0, 0, -0.3)]])
    bpy.context.preferences.edit.keyframe_new_interpolation_type = "CONSTANT"
    for frame in range(1, LAST_FRAME + 1):
        ob.location = (0.0 if frame <= 10 else 100.0, 0.0, 0.0)
        ob.rotation_euler = (0.0, 0.0, 0.3 * math.sin(frame / 3.0))
        ob.keyframe_insert("location", frame=frame)
        ob.keyframe_insert("rotation_euler", frame=frame)
    ob.oriented_strands.segment_count = 6
    assert add_strand_system(ob) == {"FINISHED"}

    hanging = {}
    for frame in _play():
        (strand,) = preview_strands(ob)
        np.testing.assert_allclose(strand[0], world(ob, (0, 0, 0)), atol=ROOT_TOLERANCE)
        hanging[frame] = strand - strand[0]
    _status_is_fine(ob)
    assert np.abs(hanging[11] - hanging[10]).max() < 0.02
    assert max(np.abs(hanging[f][-1] - (0.0, 0.0, -0.3)).max() for f in hanging) < 0.1


def test_roots_follow_a_bone_parent(factory_scene):
    factory_scene.frame_end = LAST_FRAME
    armature = bpy.data.armatures.new("rig")
    rig = bpy.data.objects.new("rig", armature)
    factory_scene.collection.objects.link(rig)
    select_only(rig)
    bpy.ops.object.mode_set(mode="EDIT")
    bone = armature.edit_bones.new("head")
    bone.head, bone.tail = (0.0, 0.0, 1.0), (0.0, 0.0, 1.2)
    bpy.ops.object.mode_set(mode="OBJECT")
    pose_bone = rig.pose.bones["head"]
    pose_bone.rotation_mode = "XYZ"
    for frame, angle in ((1, 0.0), (LAST_FRAME, math.radians(60))):
        pose_bone.rotation_euler = (angle, 0.0, 0.0)
        pose_bone.keyframe_insert("rotation_euler", frame=frame)

    ob = poly_curve("braid", [[(0, 0, 0), (0, -0.05, -0.25)]])
    ob.parent = rig
    ob.parent_type = "BONE"
    ob.parent_bone = "head"

    add_strand_system(ob)

    roots = []
    for _ in _play():
        (strand,) = preview_strands(ob)
        np.testing.assert_allclose(strand[0], world(ob, (0, 0, 0)), atol=ROOT_TOLERANCE)
        roots.append(strand[0])
    _status_is_fine(ob)
    assert np.linalg.norm(roots[-1] - roots[0]) > 0.05, "the bone did not carry the root"


def test_hair_roots_follow_a_deforming_surface_and_leave_it_along_its_normal(factory_scene):
    """The surface moves by an affine shape key, (x, y, z) -> (x, y + 0.1, 0.3 x + 0.2) at full
    value, so a point on it moves exactly so whatever the triangulation."""
    factory_scene.frame_end = LAST_FRAME
    surface = grid_mesh("scalp", size=1.0, cuts=2)
    surface.shape_key_add(name="Basis")
    lift = surface.shape_key_add(name="Lift")
    for point in lift.data:
        x, y, _ = point.co
        point.co = (x, y + 0.1, 0.3 * x + 0.2)
    for frame, value in ((1, 0.0), (LAST_FRAME, 1.0)):
        lift.value = value
        lift.keyframe_insert("value", frame=frame)

    roots = np.array([(0.1, 0.2, 0.0), (-0.3, -0.1, 0.0), (0.25, -0.35, 0.0)])
    ob = hair_curves("hair", [[root, root + (0, 0, 0.1), root + (0, 0, 0.2)] for root in roots])
    ob.data.surface = surface
    # Stiff and weightless, so each strand leaves the surface along its normal.
    props = ob.oriented_strands
    props.youngs_modulus, props.gravity_factor, props.segment_count = 10.0, 0.0, 4

    add_strand_system(ob)

    for _ in _play():
        value = lift.value
        expected = roots + value * np.stack(
            [np.zeros(3), np.full(3, 0.1), 0.3 * roots[:, 0] + 0.2], axis=1
        )
        strands = preview_strands(ob)
        np.testing.assert_allclose([s[0] for s in strands], expected, atol=ROOT_TOLERANCE)
    _status_is_fine(ob)
    assert value == pytest.approx(1.0)
    normal = np.array([-0.3, 0.0, 1.0]) / math.hypot(0.3, 1.0)
    for strand in strands:
        direction = (strand[-1] - strand[0]) / np.linalg.norm(strand[-1] - strand[0])
        assert math.degrees(math.acos(min(1.0, direction @ normal))) < 2.0
