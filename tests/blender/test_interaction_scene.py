"""Strands of one system act on each other through the Interaction panel's grid."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    hair_curves,
    play_without_errors,
    select_only,
)

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 24
HEAD = 0.1  # m, the head's radius


def _combed_out_hair(count=80, length=0.2, points=9):
    """``count`` strands combed straight out of the upper half of a head at the origin."""
    index = np.arange(count) + 0.5
    z = 1.0 - index / count
    ring = np.sqrt(1.0 - z * z)
    azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
    outward = np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)
    along = np.linspace(0.0, length, points)
    return hair_curves("hair", [HEAD * o + along[:, None] * o for o in outward])


def _head():
    bpy.ops.mesh.primitive_uv_sphere_add(radius=HEAD, location=(0.0, 0.0, 0.0))
    head = bpy.context.active_object
    head.oriented_strands_obstacle.use_obstacle = True
    head.oriented_strands_obstacle.shape = "SPHERE"
    return head


def _layer(scene, interaction):
    """The hair's thickness over the upper half of the head at the last frame (90th percentile
    of its points' height over the scalp); no point is ever more than half the collision radius
    inside the head."""
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    scene.frame_end = LAST_FRAME
    _head()
    hair = _combed_out_hair()
    assert add_strand_system(hair) == {"FINISHED"}
    props = hair.oriented_strands
    props.segment_count = 8
    props.youngs_modulus = 0.005
    props.collision_radius = 0.001
    props.collision_tip = 1.0
    props.use_interaction = interaction
    props.interaction_friction = 0.2
    props.interaction_volume = 0.5
    select_only(hair)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    played = play_without_errors(scene, hair, range(1, LAST_FRAME + 1))
    for frame_points in played.values():
        assert (np.linalg.norm(frame_points, axis=1) - HEAD).min() > -0.0005
    points = played[LAST_FRAME]
    height = np.linalg.norm(points, axis=1) - HEAD
    return float(np.percentile(height[points[:, 2] > 0.0], 90))


def test_hair_with_interaction_keeps_a_thicker_layer_on_the_head(factory_scene):
    """80 soft strands combed out of a head fall onto it for a second: with the Interaction panel
    on (friction 0.2, volume 0.5 m/s, as groomed) the hair lies in a layer more than half as
    thick again as without (measured 3.9 cm against 1.7 cm), and nothing sinks in."""
    without = _layer(factory_scene, False)
    with_interaction = _layer(factory_scene, True)
    assert with_interaction > 1.5 * without


def test_keyframed_friction_changes_the_motion_from_its_frame_on(factory_scene):
    """Friction keyframed from 0 to 1 at frame 12: the hair moves as without keyframes before
    that frame, and differently after it."""
    factory_scene.frame_end = LAST_FRAME
    _head()
    hair = _combed_out_hair(count=30)
    assert add_strand_system(hair) == {"FINISHED"}
    props = hair.oriented_strands
    props.segment_count = 6
    props.youngs_modulus = 0.005
    props.use_interaction = True
    props.interaction_friction = 0.0
    select_only(hair)
    plain = play_without_errors(factory_scene, hair, range(1, LAST_FRAME + 1))
    props.interaction_friction = 0.0
    props.keyframe_insert("interaction_friction", frame=11)
    props.interaction_friction = 1.0
    props.keyframe_insert("interaction_friction", frame=12)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    keyed = play_without_errors(factory_scene, hair, range(1, LAST_FRAME + 1))
    assert np.array_equal(plain[11], keyed[11])
    assert np.abs(plain[LAST_FRAME] - keyed[LAST_FRAME]).max() > 1e-3
