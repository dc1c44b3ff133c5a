"""Bone bakes of several strand systems exported together to FBX come back with their own
animation (Blender's FBX exporter and importer, default settings)."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import addon_utils  # noqa: E402  (Blender's own module, importable once bpy is)

from scene_builders import add_strand_system, poly_curve, select_only  # noqa: E402

pytestmark = pytest.mark.usefixtures("extension")

FRAMES = (3, 7, 12)


def _swinging_pair(scene, name, x, tip):
    """Two strands drawn from roots at ``x`` toward ``tip`` (x, z offsets): they swing down
    under gravity, each pair its own way."""
    ob = poly_curve(
        name,
        [[(x + dx, 0.0, 0.0), (x + dx + tip[0], 0.0, tip[1])] for dx in (0.0, 0.05)],
    )
    assert add_strand_system(ob) == {"FINISHED"}
    ob.oriented_strands.segment_count = 4
    return ob


def _bone_heads(scene, rig, names):
    """World positions of the heads of the bones ``names`` at each of :data:`FRAMES`."""
    heads = []
    for frame in FRAMES:
        scene.frame_set(frame)
        heads.append([list(rig.matrix_world @ rig.pose.bones[name].head) for name in names])
    return np.array(heads)


def test_two_rigs_exported_to_one_fbx_come_back_with_their_own_animation(factory_scene, tmp_path):
    """Each system's bones are named after it, so the exporter's *All Actions* takes match one
    rig each and the importer gives every rig its own (with names shared between rigs the
    second came back moving as the first, 266 mm off)."""
    factory_scene.frame_start, factory_scene.frame_end = 1, 12
    systems = [
        _swinging_pair(factory_scene, "left", -0.3, (0.3, -0.01)),
        _swinging_pair(factory_scene, "right", 0.3, (0.2, -0.2)),
    ]
    select_only(*systems)
    assert bpy.ops.oriented_strands.bake_bones() == {"FINISHED"}
    rigs = [bpy.data.objects[f"{ob.name}_rig"] for ob in systems]
    names = {rig.name: [bone.name for bone in rig.data.bones] for rig in rigs}
    assert names["left_rig"][:2] == ["left.000.000", "left.000.001"]
    assert not set(names["left_rig"]) & set(names["right_rig"])
    baked = {rig.name: _bone_heads(factory_scene, rig, names[rig.name]) for rig in rigs}

    path = tmp_path / "rigs.fbx"
    addon_utils.enable("io_scene_fbx")
    try:
        assert bpy.ops.export_scene.fbx(filepath=str(path)) == {"FINISHED"}
        for ob in list(factory_scene.objects):
            bpy.data.objects.remove(ob)
        for action in list(bpy.data.actions):
            bpy.data.actions.remove(action)
        assert bpy.ops.import_scene.fbx(filepath=str(path)) == {"FINISHED"}
    finally:
        addon_utils.disable("io_scene_fbx")
    for rig_name, heads in baked.items():
        imported = factory_scene.objects[rig_name]
        np.testing.assert_allclose(
            _bone_heads(factory_scene, imported, names[rig_name]), heads, atol=1e-5
        )
