"""Alembic export of every bake target, read back with an independent reader, sample by sample."""

import warnings

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("alembic3d")

from alembic_samples import read_positions  # noqa: E402
from scene_builders import (  # noqa: E402
    preview_points,
    saved_groom,
    saved_swinging_tree,
    select_only,
)

pytestmark = pytest.mark.usefixtures("extension")

FRAMES = 10


@pytest.fixture
def tree(factory_scene, tmp_path):
    return saved_swinging_tree(factory_scene, tmp_path, FRAMES)


@pytest.fixture
def simulated(factory_scene, tree):
    """The live preview's points at every frame: what every sample must hold."""
    played = []
    for frame in range(1, FRAMES + 1):
        factory_scene.frame_set(frame)
        played.append(preview_points(tree))
    factory_scene.frame_set(1)
    return np.stack(played)


def _check_samples(path, name, simulated, fps=24):
    samples = read_positions(str(path))
    times, positions = samples[name]
    np.testing.assert_allclose(times, np.arange(1, FRAMES + 1) / fps)
    np.testing.assert_allclose(positions, simulated, atol=1e-5)


def test_hair_curves_export_one_sample_per_frame(factory_scene, tree, simulated, tmp_path):
    select_only(tree)
    bpy.ops.oriented_strands.bake_hair()
    path = tmp_path / "hair.abc"
    assert bpy.ops.oriented_strands.export_alembic_hair(filepath=str(path)) == {"FINISHED"}
    _check_samples(path, "tree_baked_hair", simulated)
    # The export's Geometry Nodes modifier is gone again.
    assert not bpy.data.objects["tree_baked_hair"].modifiers


def test_a_path_relative_to_the_blend_exports_beside_it_without_a_warning(
    factory_scene, tree, simulated, tmp_path
):
    """``//hair.abc`` (as the user guide writes it) goes next to the saved .blend, and Blender
    5.0 does not warn that the path property takes no ``//``."""
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    select_only(tree)
    bpy.ops.oriented_strands.bake_hair()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bpy.ops.oriented_strands.export_alembic_hair(filepath="//hair.abc") == {"FINISHED"}
    assert not [str(warning.message) for warning in caught]
    _check_samples(tmp_path / "hair.abc", "tree_baked_hair", simulated)


def test_hair_on_a_surface_exports_where_it_is_under_the_moving_head(factory_scene, tmp_path):
    """The bake of hair bound to a turning head is written under the head's transforms: a
    reader composing them finds the simulated points."""
    hair = saved_groom(factory_scene, tmp_path, FRAMES, 0.1, 12, 5)
    simulated = []
    for frame in range(1, FRAMES + 1):
        factory_scene.frame_set(frame)
        simulated.append(preview_points(hair))
    select_only(hair)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    path = tmp_path / "groom.abc"
    assert bpy.ops.oriented_strands.export_alembic_hair(filepath=str(path)) == {"FINISHED"}
    _check_samples(path, "hair_baked_hair", np.stack(simulated))


@pytest.mark.parametrize(
    ("target", "name"), [("shape_keys", "tree_shape_keys"), ("mesh_shape_keys", "tree_mesh_keys")]
)
def test_shape_keys_export_one_sample_per_frame(
    factory_scene, tree, simulated, tmp_path, target, name
):
    select_only(tree)
    getattr(bpy.ops.oriented_strands, f"bake_{target}")()
    path = tmp_path / "keys.abc"
    factory_scene.frame_set(4)
    export = getattr(bpy.ops.oriented_strands, f"export_alembic_{target}")
    assert export(filepath=str(path)) == {"FINISHED"}
    _check_samples(path, name, simulated)
    assert factory_scene.frame_current == 4
    assert [ob.name for ob in bpy.context.selected_objects] == ["tree"]


def _skin_to_rig(rig, rest, point_counts):
    """A wire mesh through the strands' rest points, each weighted to the bone that carries it:
    a strand's root to its first bone, every other point to the bone whose tail it is."""
    edges, groups, start = [], [], 0
    for strand, count in enumerate(point_counts):
        edges += [(start + k, start + k + 1) for k in range(count - 1)]
        bones = [f"{rig.name.removesuffix('_rig')}.{strand:03d}.{k:03d}" for k in range(count - 1)]
        groups += [bones[0], *bones]
        start += count
    mesh = bpy.data.meshes.new("skin")
    mesh.from_pydata(rest.tolist(), edges, [])
    skin = bpy.data.objects.new("skin", mesh)
    bpy.context.scene.collection.objects.link(skin)
    for index, name in enumerate(groups):
        group = skin.vertex_groups.get(name) or skin.vertex_groups.new(name=name)
        group.add([index], 1.0, "REPLACE")
    skin.modifiers.new("rig", "ARMATURE").object = rig
    return skin


def test_bones_export_the_meshes_skinned_to_the_rig(factory_scene, tree, simulated, tmp_path):
    select_only(tree)
    bpy.ops.oriented_strands.bake_bones()
    rig = bpy.data.objects["tree_rig"]
    path = tmp_path / "bones.abc"
    with pytest.raises(RuntimeError, match="skin a mesh to it"):
        bpy.ops.oriented_strands.export_alembic_bones(filepath=str(path))
    assert not path.exists()
    _skin_to_rig(rig, simulated[0], [4, 4, 4])
    select_only(tree)
    assert bpy.ops.oriented_strands.export_alembic_bones(filepath=str(path)) == {"FINISHED"}
    _check_samples(path, "skin", simulated)


def test_an_export_without_a_bake_is_refused(factory_scene, tree, tmp_path):
    from oriented_strands import scene
    from oriented_strands.strands_io.errors import SceneInputError

    with pytest.raises(SceneInputError, match="no hair bake"):
        scene.export_alembic(
            factory_scene, bpy.context.view_layer, [tree], "HAIR", str(tmp_path / "x.abc")
        )
    assert not list(tmp_path.glob("*.abc*"))
