"""Strands collide with obstacles as Blender evaluates them at every frame: shape keys and
modifiers that deform a mesh, and open meshes with a thickness."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from mathutils import Vector  # noqa: E402
from mathutils.bvhtree import BVHTree  # noqa: E402

from scene_builders import (  # noqa: E402
    add_strand_system,
    grid_mesh,
    play_without_errors,
    poly_curve,
    select_only,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")

LAST_FRAME = 24
RADIUS = 0.002  # the strands' collision radius
THICKNESS = 0.002  # the sheet's
BUMP = 0.15  # m, the shape key's height


def _sheet_with_a_bump(scene):
    """A 60 cm open sheet of 40 × 40 quads, a Strand Obstacle with a thickness, whose shape key
    raises a 15 cm bump in its middle from frame 1 to 13 (Bézier keys: ease in and out)."""
    sheet = grid_mesh("sheet", size=0.6, cuts=40)
    props = sheet.oriented_strands_obstacle
    props.use_obstacle = True
    props.shape = "MESH"
    props.thickness = THICKNESS
    sheet.shape_key_add(name="Basis")
    bump = sheet.shape_key_add(name="Bump", from_mix=False)
    co = np.empty(len(sheet.data.vertices) * 3)
    sheet.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += BUMP * np.exp(-(co[:, 0] ** 2 + co[:, 1] ** 2) / 0.08**2)
    bump.data.foreach_set("co", co.ravel())
    for frame, value in ((1, 0.0), (13, 1.0)):
        bump.value = value
        bump.keyframe_insert("value", frame=frame)
    scene.frame_end = LAST_FRAME
    return sheet


def _lying_strands(count=10, substeps=4):
    height = THICKNESS + RADIUS
    ob = poly_curve(
        "strands",
        [[(-0.2, y, height), (0.1, y, height)] for y in np.linspace(-0.05, 0.05, count)],
    )
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = 12
    props.youngs_modulus = 0.02
    props.collision_radius = RADIUS
    props.collision_tip = 1.0
    props.substeps = substeps
    return ob


def _reread(ob):
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}


def _clearance(scene, obstacle, points):
    """The smallest distance from the points' centres to the obstacle's evaluated surface as
    Blender's own BVH tree measures it, less the obstacle's thickness."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    tree = BVHTree.FromObject(obstacle, depsgraph)
    inverse = obstacle.matrix_world.inverted()
    distances = [tree.find_nearest(inverse @ Vector(p))[3] for p in points]
    return min(distances) - obstacle.oriented_strands_obstacle.thickness


def test_a_shape_key_bump_rising_under_lying_strands_lifts_them_clear_of_it(factory_scene):
    """Ten strands lie across a sheet whose shape key raises a 15 cm bump under them: the bump
    lifts them, and no point's centre ever comes closer to the deformed surface (its thickness
    included) than half the collision radius, measured with Blender's BVH tree on the evaluated
    mesh at every frame. At 8 substeps per frame: at the default 4 the closest centre came
    0.39 mm from the surface (docs/collisions.md, *Deforming and open meshes*)."""
    sheet = _sheet_with_a_bump(factory_scene)
    ob = _lying_strands(substeps=8)
    _reread(ob)
    played = play_without_errors(factory_scene, ob, range(1, LAST_FRAME + 1))
    closest = np.inf
    for frame, points in played.items():
        factory_scene.frame_set(frame)
        closest = min(closest, _clearance(factory_scene, sheet, points))
    assert max(points[:, 2].max() for points in played.values()) > 0.05
    assert closest > 0.5 * RADIUS


def test_without_following_the_deformation_the_strands_would_sink(factory_scene):
    """The same scene with the bump's key already at full height at the start frame and falling
    back: the sheet deforms over the range and the strands, which start above the bump, follow
    it down and stay on it (a sheet read once at the start frame would leave them hanging in the
    air, 15 cm above the flattened sheet)."""
    sheet = _sheet_with_a_bump(factory_scene)
    bump = sheet.data.shape_keys.key_blocks["Bump"]
    for frame, value in ((1, 1.0), (13, 0.0)):
        bump.value = value
        bump.keyframe_insert("value", frame=frame)
    ob = _lying_strands()
    _reread(ob)
    points = play_without_errors(factory_scene, ob, range(1, LAST_FRAME + 1))[LAST_FRAME]
    factory_scene.frame_set(LAST_FRAME)
    assert points[:, 2].max() < 0.02
    assert _clearance(factory_scene, sheet, points) > 0.5 * RADIUS


def test_an_obstacle_whose_vertex_count_changes_is_refused_by_name(factory_scene):
    """An Array modifier whose count is keyframed from 1 to 2 changes the obstacle's vertex
    count during the range: reading the scene is refused, naming the object, and the scene is
    left at its frame."""
    sheet = _sheet_with_a_bump(factory_scene)
    ob = _lying_strands()
    array = sheet.modifiers.new("Array", "ARRAY")
    for frame, count in ((1, 1), (10, 2)):
        array.count = count
        array.keyframe_insert("count", frame=frame)
    factory_scene.frame_set(3)
    select_only(ob)
    with pytest.raises(RuntimeError, match=r"obstacle 'sheet'.*3362 vertices at frame 6.*1681"):
        bpy.ops.oriented_strands.free_cache()
    assert factory_scene.frame_current == 3
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "'sheet'" in text


def test_an_open_mesh_needs_a_thickness(factory_scene):
    """A single-sided sheet without a thickness is refused, naming it and the setting; with
    one, a strand falls onto it and rests on its thickness."""
    factory_scene.frame_end = LAST_FRAME
    ob = poly_curve("strand", [[(0.0, 0.0, 0.05), (0.3, 0.0, 0.05)]])
    assert add_strand_system(ob) == {"FINISHED"}
    sheet = grid_mesh("sheet", size=1.0, cuts=4)
    props = sheet.oriented_strands_obstacle
    props.use_obstacle = True
    props.shape = "MESH"
    ob.oriented_strands.collision_radius = RADIUS
    ob.oriented_strands.youngs_modulus = 0.02
    select_only(ob)
    with pytest.raises(RuntimeError, match=r"obstacle 'sheet'.*open mesh.*give it a Thickness"):
        bpy.ops.oriented_strands.free_cache()

    props.thickness = THICKNESS
    select_only(ob)
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    played = play_without_errors(factory_scene, ob, range(1, LAST_FRAME + 1))
    lowest = min(points[:, 2].min() for points in played.values())
    assert lowest > THICKNESS + 0.5 * RADIUS
    assert played[LAST_FRAME][-1, 2] < THICKNESS + 3 * RADIUS
