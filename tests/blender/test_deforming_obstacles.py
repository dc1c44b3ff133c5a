"""Strands collide with obstacles as Blender evaluates them at every frame: shape keys and
modifiers that deform a mesh, and open meshes with a thickness."""

import math

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
    preview_points,
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
    props.substep_unit = "FRAME"
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
    mesh at every frame, at the default 4 substeps per frame (the closest centre came 0.39 mm
    from the surface before steps that take a point deeper than half its radius were halved)."""
    sheet = _sheet_with_a_bump(factory_scene)
    ob = _lying_strands()
    _reread(ob)
    played = play_without_errors(factory_scene, ob, range(1, LAST_FRAME + 1))
    closest = np.inf
    for frame, points in played.items():
        factory_scene.frame_set(frame)
        closest = min(closest, _clearance(factory_scene, sheet, points))
    assert max(points[:, 2].max() for points in played.values()) > 0.05
    assert closest > 0.5 * RADIUS


def _armature_arm(scene):
    """A closed 60 cm arm (a 5 cm tube of 25 rings × 24 segments, capped) skinned to an upper
    arm and a forearm bone, 20 cm below the strands' roots: from frame 1 to 7 the upper arm
    swings 90° about z (its tip at 0.6 m: about 3.8 m/s) and the forearm bends 45°."""
    rings, segments, length, radius = 25, 24, 0.6, 0.05
    xs = np.linspace(0.0, length, rings)
    angles = 2 * np.pi * np.arange(segments) / segments
    vertices = [(x, radius * math.cos(a), radius * math.sin(a)) for x in xs for a in angles]
    vertices += [(0.0, 0.0, 0.0), (length, 0.0, 0.0)]
    faces = []
    last = (rings - 1) * segments
    for i in range(rings - 1):
        for j in range(segments):
            a, b = i * segments + j, i * segments + (j + 1) % segments
            faces.append((a, b, b + segments, a + segments))
    for j in range(segments):
        faces.append((rings * segments, (j + 1) % segments, j))
        faces.append((rings * segments + 1, last + j, last + (j + 1) % segments))
    mesh = bpy.data.meshes.new("arm")
    mesh.from_pydata(vertices, [], faces)
    mesh.validate()
    arm = bpy.data.objects.new("arm", mesh)
    scene.collection.objects.link(arm)
    armature = bpy.data.armatures.new("rig")
    rig = bpy.data.objects.new("rig", armature)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    upper = armature.edit_bones.new("upper")
    upper.head, upper.tail = (0, 0, 0), (0.3, 0, 0)
    fore = armature.edit_bones.new("fore")
    fore.head, fore.tail = (0.3, 0, 0), (0.6, 0, 0)
    fore.parent, fore.use_connect = upper, True
    bpy.ops.object.mode_set(mode="OBJECT")
    to_fore = np.clip((np.array(vertices)[:, 0] - 0.25) / 0.1, 0.0, 1.0)
    groups = {name: arm.vertex_groups.new(name=name) for name in ("upper", "fore")}
    for index, weight in enumerate(to_fore):
        if weight < 1.0:
            groups["upper"].add([index], 1.0 - float(weight), "REPLACE")
        if weight > 0.0:
            groups["fore"].add([index], float(weight), "REPLACE")
    arm.modifiers.new("Armature", "ARMATURE").object = rig
    arm.parent = rig
    rig.location = (0.0, 0.0, -0.2)
    for bone in rig.pose.bones:
        bone.rotation_mode = "XYZ"
    for frame, swing, bend in ((1, 0.0, 0.0), (7, 90.0, 45.0)):
        rig.pose.bones["upper"].rotation_euler = (0.0, 0.0, math.radians(swing))
        rig.pose.bones["fore"].rotation_euler = (0.0, 0.0, math.radians(bend))
        for bone in rig.pose.bones:
            bone.keyframe_insert("rotation_euler", frame=frame)
    props = arm.oriented_strands_obstacle
    props.use_obstacle = True
    props.shape = "MESH"
    return arm


def _inside(tree, point) -> bool:
    """Whether a point (the mesh's local frame) is inside the closed mesh: the parity of the
    surface crossings on a ray towards +z, by Blender's BVH tree."""
    origin, crossings, up = Vector(point), 0, Vector((0.0, 0.0, 1.0))
    while (hit := tree.ray_cast(origin, up)[0]) is not None:
        crossings += 1
        origin = hit + up * 1e-6
    return crossings % 2 == 1


def test_an_armature_arm_swept_through_hanging_strands_leaves_none_inside(factory_scene):
    """An armature-deformed arm swings through ten hanging 40 cm strands at about 3.8 m/s at
    its tip, at the default 4 substeps per frame: every frame is simulated, no strand point is
    ever inside the evaluated arm (Blender's BVH tree) and the strands are pushed aside. Before
    steps whose correction swung a point through the obstacle were halved, and strands whipping
    round it that no halving could step fell back (the status counts them), the same swing
    stopped the bake."""
    arm = _armature_arm(factory_scene)
    factory_scene.frame_end = 12
    roots = [(0.45 * math.cos(a), 0.45 * math.sin(a)) for a in np.radians(np.linspace(25, 65, 10))]
    strands = poly_curve("strands", [[(x, y, 0.0), (x, y, -0.4)] for x, y in roots])
    assert add_strand_system(strands) == {"FINISHED"}
    props = strands.oriented_strands
    props.segment_count = 16
    props.youngs_modulus = 0.02
    props.collision_radius = RADIUS
    props.collision_tip = 1.0
    _reread(strands)
    played = {}
    for frame in range(1, 13):
        factory_scene.frame_set(frame)
        played[frame] = preview_points(strands)
    assert system_status(strands)[0].startswith("12 frames cached")
    for frame, points in played.items():
        factory_scene.frame_set(frame)
        tree = BVHTree.FromObject(arm, bpy.context.evaluated_depsgraph_get())
        inverse = arm.matrix_world.inverted()
        assert not any(_inside(tree, inverse @ Vector(p)) for p in points), frame
    moved = np.linalg.norm(played[12] - played[1], axis=1)
    assert moved.max() > 0.1


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
