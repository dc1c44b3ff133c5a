"""Strands collide with the scene's Strand Obstacle objects, and bone-like chains keep limits."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    grid_mesh,
    play_without_errors,
    poly_curve,
    select_only,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 36
RADIUS = 0.002  # the strands' collision radius
# A 30 cm strand lying flat 5 cm above the ground, rooted at its left end.
FLAT = [[(0.0, 0.0, 0.05), (0.3, 0.0, 0.05)]]


def _strand(scene, splines=FLAT, segments=10):
    scene.frame_end = LAST_FRAME
    ob = poly_curve("strand", splines)
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = segments
    props.youngs_modulus = 0.02
    props.collision_radius = RADIUS
    return ob


def _obstacle(ob, shape, restitution=0.0):
    props = ob.oriented_strands_obstacle
    props.use_obstacle = True
    props.shape = shape
    props.restitution = restitution
    return ob


def _reread(ob):
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}


def _play(scene, ob):
    return play_without_errors(scene, ob, range(1, LAST_FRAME + 1))


def test_a_strand_falls_onto_a_ground_plane_and_stays_on_it(factory_scene):
    ground = _obstacle(grid_mesh("ground", size=2.0), "PLANE")
    ob = _strand(factory_scene)
    _reread(ob)
    played = _play(factory_scene, ob)
    lowest = min(points[:, 2].min() for points in played.values())
    assert lowest > 0.9 * RADIUS
    # It did fall: the tip rests on the ground at the end.
    assert played[LAST_FRAME][-1, 2] < 3 * RADIUS

    ground.oriented_strands_obstacle.use_obstacle = False
    _reread(ob)
    assert _play(factory_scene, ob)[LAST_FRAME][:, 2].min() < -0.05


def test_collisions_switched_off_on_the_system_pass_through(factory_scene):
    _obstacle(grid_mesh("ground", size=2.0), "PLANE")
    ob = _strand(factory_scene)
    ob.oriented_strands.use_collisions = False
    _reread(ob)
    assert _play(factory_scene, ob)[LAST_FRAME][:, 2].min() < -0.05


def test_a_strand_drapes_over_a_sphere_without_entering_it(factory_scene):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0.15, 0.0, -0.06))
    head = _obstacle(bpy.context.object, "SPHERE")
    ob = _strand(factory_scene)
    _reread(ob)
    centre = np.array(head.location)
    played = _play(factory_scene, ob)
    closest = min(np.linalg.norm(points - centre, axis=1).min() for points in played.values())
    # The UV sphere's vertices lie on the radius: the bounding ball is the sphere itself.
    assert closest > 0.1 + 0.9 * RADIUS
    # Draped: the far end hangs below the top of the sphere.
    assert played[LAST_FRAME][-1, 2] < 0.0


def test_a_strand_lands_on_a_mesh_box(factory_scene):
    bpy.ops.mesh.primitive_cube_add(size=0.4, location=(0.15, 0.0, -0.2))
    _obstacle(bpy.context.object, "MESH")
    ob = _strand(factory_scene)
    _reread(ob)
    played = _play(factory_scene, ob)
    over_the_box = [points[np.abs(points[:, 0] - 0.15) < 0.19] for points in played.values()]
    # The top face is at z = 0; the signed-distance grid is exact on a flat face to its rounding.
    assert min(points[:, 2].min() for points in over_the_box) > 0.5 * RADIUS
    assert played[LAST_FRAME][-1, 2] < 3 * RADIUS


def test_a_rising_floor_lifts_the_strand(factory_scene):
    floor = _obstacle(grid_mesh("floor", size=2.0), "PLANE")
    for frame, height in ((1, -0.1), (LAST_FRAME, 0.15)):
        floor.location = (0.0, 0.0, height)
        floor.keyframe_insert("location", frame=frame)
    # Slanted, so that the floor bends it up rather than pushing along its length.
    ob = _strand(factory_scene, splines=[[(0.0, 0.0, 0.25), (0.2, 0.0, 0.0)]], segments=8)
    _reread(ob)
    for frame, points in _play(factory_scene, ob).items():
        factory_scene.frame_set(frame)
        assert points[:, 2].min() > floor.matrix_world.translation.z + 0.5 * RADIUS, frame


def test_a_swing_limit_holds_a_soft_chain_out_straight(factory_scene):
    ob = _strand(factory_scene)
    factory_scene.use_gravity = True
    ob.oriented_strands.swing_limit = math.radians(15)
    _reread(ob)
    points = _play(factory_scene, ob)[LAST_FRAME]
    directions = np.diff(points, axis=0)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    # Root joint against the rest direction (+x, the base does not move), then joint to joint.
    bends = np.degrees(
        np.arccos(np.clip(np.sum(directions[1:] * directions[:-1], axis=1), -1.0, 1.0))
    )
    root = np.degrees(np.arccos(np.clip(directions[0, 0], -1.0, 1.0)))
    assert max(root, bends.max()) < 16.0
    # The limit is active: without it the soft chain hangs down far more than 15°.
    assert max(root, bends.max()) > 14.0


def test_editing_an_obstacle_outdates_the_cache(factory_scene):
    ground = _obstacle(grid_mesh("ground", size=2.0), "PLANE")
    ob = _strand(factory_scene)
    _reread(ob)
    _play(factory_scene, ob)
    ground.oriented_strands_obstacle.static_friction = 0.9
    factory_scene.frame_set(2)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "the obstacles changed" in text


def test_a_script_setting_collisions_steps_on_with_the_new_setting(factory_scene):
    """In background mode no timer re-reads a system whose setting changed, so the setting's
    update reads it at once: setting *Collisions* to the value it has (as a script does) leaves
    the cache valid and the strand falls onto the ground as before; switching it off, the next
    frames simulate at once, and the strand falls through the ground."""
    _obstacle(grid_mesh("ground", size=2.0), "PLANE")
    ob = _strand(factory_scene)
    _reread(ob)
    factory_scene.frame_set(1)
    ob.oriented_strands.use_collisions = True
    played = _play(factory_scene, ob)
    assert played[LAST_FRAME][-1, 2] < 3 * RADIUS
    assert min(points[:, 2].min() for points in played.values()) > 0.9 * RADIUS

    ob.oriented_strands.use_collisions = False
    played = _play(factory_scene, ob)
    text, icon = system_status(ob)
    assert icon != "ERROR", text
    assert played[LAST_FRAME][:, 2].min() < -0.05
