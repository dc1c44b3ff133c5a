"""Scenes built from code for the scene tests, and the checks an artist would make on them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import bpy
import numpy as np
import pytest
from mathutils import Matrix


def link(ob: bpy.types.Object) -> bpy.types.Object:
    bpy.context.scene.collection.objects.link(ob)
    return ob


def select_only(*objects: bpy.types.Object) -> None:
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = objects[0] if objects else None


def poly_curve(name: str, splines: Sequence[Sequence[Sequence[float]]], kind: str = "POLY"):
    """A legacy Curve object with one POLY (or NURBS) spline per point list, object space."""
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    for points in splines:
        spline = curve.splines.new(kind)
        spline.points.add(len(points) - 1)
        spline.points.foreach_set("co", np.hstack([points, np.ones((len(points), 1))]).ravel())
        if kind == "NURBS":
            spline.use_endpoint_u = True
            spline.order_u = min(4, len(points))
    return link(bpy.data.objects.new(name, curve))


def bezier_curve(name: str, splines: Sequence[Sequence[Sequence[float]]], handles: str = "VECTOR"):
    """A legacy Curve object with one Bézier spline per list of knots."""
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    for knots in splines:
        spline = curve.splines.new("BEZIER")
        spline.bezier_points.add(len(knots) - 1)
        for point, co in zip(spline.bezier_points, knots, strict=True):
            point.co = co
            point.handle_left_type = point.handle_right_type = handles
    return link(bpy.data.objects.new(name, curve))


def hair_curves(name: str, curves: Sequence[Sequence[Sequence[float]]]) -> bpy.types.Object:
    """A Curves (hair) object with one curve per point list, object space."""
    data = bpy.data.hair_curves.new(name)
    data.add_curves([len(points) for points in curves])
    data.attributes["position"].data.foreach_set(
        "vector", np.concatenate([np.asarray(p, dtype=np.float32) for p in curves]).ravel()
    )
    return link(bpy.data.objects.new(name, data))


def grid_mesh(name: str, size: float = 1.0, cuts: int = 2) -> bpy.types.Object:
    """A flat square mesh in the xy plane, centred on the origin, ``cuts`` quads a side."""
    step = np.linspace(-size / 2, size / 2, cuts + 1)
    vertices = [(x, y, 0.0) for y in step for x in step]
    faces = [
        (
            j * (cuts + 1) + i,
            j * (cuts + 1) + i + 1,
            (j + 1) * (cuts + 1) + i + 1,
            (j + 1) * (cuts + 1) + i,
        )
        for j in range(cuts)
        for i in range(cuts)
    ]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices, [], faces)
    return link(bpy.data.objects.new(name, mesh))


def add_strand_system(*objects: bpy.types.Object) -> set[str]:
    """Select the objects and press Add Strand System, as an artist would."""
    select_only(*objects)
    return bpy.ops.oriented_strands.add_strand_system()


def system_status(ob: bpy.types.Object) -> tuple[str, str]:
    """The strand system's status line and icon, as its panel shows them."""
    from oriented_strands import scene

    return scene.status(ob)


def play_without_errors(scene: bpy.types.Scene, ob: bpy.types.Object, frames) -> dict:
    """Set each frame as playback does; the preview's points at every frame. The strand
    system's status must show no error afterwards."""
    played = {}
    for frame in frames:
        scene.frame_set(frame)
        played[frame] = preview_points(ob)
    text, icon = system_status(ob)
    assert icon != "ERROR", text
    return played


def preview(ob: bpy.types.Object) -> bpy.types.Object:
    return ob.oriented_strands.preview_object


def preview_strands(ob: bpy.types.Object) -> list[np.ndarray]:
    """Each strand of the preview object as its (points, 3) world positions."""
    curves = preview(ob).data
    positions = np.empty(len(curves.points) * 3, dtype=np.float32)
    curves.attributes["position"].data.foreach_get("vector", positions)
    offsets = np.empty(len(curves.curves) + 1, dtype=np.int64)
    curves.curve_offset_data.foreach_get("value", offsets)
    positions = positions.reshape(-1, 3).astype(np.float64)
    matrix = np.array(preview(ob).matrix_world)
    positions = positions @ matrix[:3, :3].T + matrix[:3, 3]
    return [positions[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def preview_points(ob: bpy.types.Object) -> np.ndarray:
    return np.concatenate(preview_strands(ob))


def segment_lengths(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(points, axis=0), axis=1)


def world(ob: bpy.types.Object, local_point: Sequence[float]) -> np.ndarray:
    """A point given in the object's space, in world space at the current frame."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    matrix = ob.evaluated_get(depsgraph).matrix_world
    return np.array(matrix @ Matrix.Translation(local_point).to_translation())


def scene_snapshot() -> dict:
    """What an artist would see change in the scene: objects, data, transforms, frame,
    strand settings and curve shapes."""
    snapshot = {
        "frame": bpy.context.scene.frame_current,
        "objects": sorted(ob.name for ob in bpy.data.objects),
        "curves": sorted(c.name for c in bpy.data.curves),
        "hair_curves": sorted(c.name for c in bpy.data.hair_curves),
        "meshes": sorted(m.name for m in bpy.data.meshes),
        "collections": {
            c.name: sorted(ob.name for ob in c.objects)
            for c in [bpy.context.scene.collection, *bpy.data.collections]
        },
    }
    for ob in bpy.data.objects:
        snapshot[ob.name] = (
            tuple(map(tuple, ob.matrix_world)),
            ob.oriented_strands.is_system,
            ob.oriented_strands.is_property_set("frame_start"),
            ob.oriented_strands.preview_object,
        )
        if ob.type == "CURVE":
            snapshot[ob.name + ":points"] = [
                tuple(tuple(p.co) for p in spline.points)
                + tuple(tuple(p.co) for p in spline.bezier_points)
                for spline in ob.data.splines
            ]
    return snapshot


def check_deleting_is_refused(
    scene: bpy.types.Scene, ob: bpy.types.Object, target: bpy.types.Object, message: str
) -> None:
    """Play ``ob``'s strand system over four frames, delete ``target`` (an object one of its
    settings points at) as an artist does, and check that the system's status and its
    operators name the problem with ``message`` and that nothing changes: not the scene, not
    the frames already simulated."""
    from oriented_strands import scene as extension_scene

    play_without_errors(scene, ob, range(1, 5))
    cached = dict(extension_scene.runtime(ob).frames)
    select_only(target)
    assert bpy.ops.object.delete() == {"FINISHED"}
    scene.frame_set(5)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert message in text
    before = scene_snapshot()
    select_only(ob)
    for operator in (bpy.ops.oriented_strands.free_cache, bpy.ops.oriented_strands.bake_shape_keys):
        with pytest.raises(RuntimeError, match=message):
            operator()
    assert scene_snapshot() == before
    frames = extension_scene.runtime(ob).frames
    assert sorted(frames) == sorted(cached) == [1, 2, 3, 4]
    for frame, points in cached.items():
        np.testing.assert_array_equal(frames[frame], points)


# A trunk with a branch (its bones parent across strands) and a free strand.
TREE = [
    [(0, 0, 0), (0, 0, 0.2), (0, 0, 0.4)],
    [(0, 0, 0.2), (0.15, 0, 0.3)],
    [(0.3, 0, 0.4), (0.55, 0, 0.4)],
]


def saved_swinging_tree(scene: bpy.types.Scene, folder, frames: int) -> bpy.types.Object:
    """A branched strand system of three segments per strand whose base turns and moves over
    ``frames`` frames, saved as ``folder/tree.blend`` (hair caches go next to it)."""
    scene.frame_start, scene.frame_end = 1, frames
    ob = poly_curve("tree", TREE)
    ob.keyframe_insert("rotation_euler", frame=1)
    ob.keyframe_insert("location", frame=1)
    ob.rotation_euler = (0.0, 0.0, 1.2)
    ob.location = (0.1, 0.0, 0.0)
    ob.keyframe_insert("rotation_euler", frame=frames)
    ob.keyframe_insert("location", frame=frames)
    scene.frame_set(1)
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.segment_count = 3
    props.youngs_modulus = 0.5
    props.radius = 0.004
    bpy.ops.wm.save_as_mainfile(filepath=str(folder / "tree.blend"))
    return bpy.context.scene.objects["tree"]


def _scalp_directions(count: int) -> np.ndarray:
    """Unit vectors on the upper cap of a sphere (a Fibonacci lattice above 20° latitude)."""
    index = np.arange(count) + 0.5
    z = 1.0 - index / count * (1.0 - math.sin(math.radians(20)))
    azimuth = index * math.pi * (3.0 - math.sqrt(5.0))
    ring = np.sqrt(1.0 - z * z)
    return np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)


def saved_groom(
    scene: bpy.types.Scene, folder, frames: int, radius: float, guides: int, points: int
) -> bpy.types.Object:
    """Hair made the way an artist makes it: a UV-sphere head ``radius`` (m) that turns and
    moves over ``frames`` frames, Add > Empty Hair on it (so the hair object is parented to the
    head and bound to its surface and UV map), ``guides`` curves of ``points`` points combed
    out and down from the scalp, a strand system on it; saved as ``folder/groom.blend``."""
    scene.frame_start, scene.frame_end = 1, frames
    bpy.ops.mesh.primitive_uv_sphere_add(
        radius=radius, segments=48, ring_count=24, location=(0.3, -0.2, 1.5)
    )
    head = bpy.context.active_object
    head.name = "head"
    head.keyframe_insert("rotation_euler", frame=1)
    head.keyframe_insert("location", frame=1)
    head.rotation_euler = (0.4, 0.0, 1.2)
    head.location = (0.35, -0.1, 1.5)
    head.keyframe_insert("rotation_euler", frame=frames)
    head.keyframe_insert("location", frame=frames)
    scene.frame_set(1)
    bpy.ops.object.curves_empty_hair_add()
    hair = bpy.context.active_object
    hair.name = "hair"
    assert hair.parent == head
    assert hair.data.surface == head
    # In the hair's space, which is the head's.
    along = np.linspace(0.0, 1.0, points)[:, None]
    curves = [
        radius * d + 0.8 * radius * along * (d + np.array([0.0, 0.0, -0.6]))
        for d in _scalp_directions(guides)
    ]
    hair.data.add_curves([points] * guides)
    hair.data.attributes["position"].data.foreach_set(
        "vector", np.concatenate(curves).astype(np.float32).ravel()
    )
    props = hair.oriented_strands
    props.segment_count = points - 1
    props.youngs_modulus = 0.2
    assert add_strand_system(hair) == {"FINISHED"}
    bpy.ops.wm.save_as_mainfile(filepath=str(folder / "groom.blend"))
    return bpy.context.scene.objects["hair"]
