"""Render hair follows the simulated guides through Blender's own hair nodes.

The guides are hair made the way an artist makes it (Add > Empty Hair on a head, so the hair
object is parented to the head and bound to its surface and UV map), the head turning and
moving. Blender's own *Attach Hair Curves to Surface* gives the root coordinates the generated
guides must carry, and Blender's *Interpolate Hair Curves* grows the children.
"""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import preview, preview_strands, saved_groom, select_only  # noqa: E402

pytestmark = pytest.mark.usefixtures("extension")

FRAMES = 10
RADIUS = 0.1
GUIDES = 30
POINTS = 6
# A child rooted this close to a guide's root (m), but not on it (the guides are among the
# children), keeps within SAME_SHAPE (m) of that guide's shape.
BESIDE, SAME_SHAPE = 5e-3, 3e-3


@pytest.fixture
def groom(factory_scene, tmp_path):
    return saved_groom(factory_scene, tmp_path, FRAMES, RADIUS, GUIDES, POINTS)


def _blender_root_uvs(hair):
    """``surface_uv_coordinate`` as Blender's own Attach Hair Curves to Surface sets it, on a
    copy of the hair."""
    from oriented_strands.scene.children import hair_assets_path

    with bpy.data.libraries.load(hair_assets_path()) as (_, loaded):
        loaded.node_groups = ["Attach Hair Curves to Surface"]
    group = next(g for g in bpy.data.node_groups if g.name.startswith("Attach Hair Curves"))
    copy = hair.copy()
    copy.data = hair.data.copy()
    bpy.context.scene.collection.objects.link(copy)
    modifier = copy.modifiers.new("attach", "NODES")
    modifier.node_group = group
    for item in group.interface.items_tree:
        if item.item_type == "SOCKET" and item.in_out == "INPUT" and item.name == "Surface":
            if item.socket_type == "NodeSocketObject":
                modifier[item.identifier] = hair.data.surface
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = copy.evaluated_get(depsgraph).data
    uv = np.empty(len(evaluated.curves) * 2)
    evaluated.attributes["surface_uv_coordinate"].data.foreach_get("vector", uv)
    bpy.data.objects.remove(copy)
    return uv.reshape(-1, 2)


def _curves_world(ob):
    """Each curve of ``ob``'s evaluated geometry as its (points, 3) world positions."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = ob.evaluated_get(depsgraph)
    data = evaluated.data
    positions = np.empty(len(data.points) * 3, dtype=np.float32)
    data.attributes["position"].data.foreach_get("vector", positions)
    offsets = np.empty(len(data.curves) + 1, dtype=np.int64)
    data.curve_offset_data.foreach_get("value", offsets)
    matrix = np.array(evaluated.matrix_world)
    positions = positions.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
    return [positions[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def _point_attribute(ob, name):
    """A float point attribute of ``ob``'s evaluated curves."""
    data = ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    values = np.empty(len(data.points), dtype=np.float32)
    data.attributes[name].data.foreach_get("value", values)
    return values


def _head_centre():
    return np.array(bpy.context.scene.objects["head"].matrix_world.translation)


def _children_follow(children, guides):
    """The children lie on the head and grow near the guides; those rooted beside a guide
    keep its shape. Returns how many children there are."""
    grown = _curves_world(children)
    followed = _curves_world(guides)
    guide_roots = np.array([g[0] for g in followed])
    child_roots = np.array([c[0] for c in grown])
    centre = _head_centre()
    # On the (faceted) sphere where the head is now, not around some other origin.
    np.testing.assert_allclose(np.linalg.norm(child_roots - centre, axis=1), RADIUS, atol=1.5e-3)
    distance = np.linalg.norm(child_roots[:, None] - guide_roots[None], axis=2)
    nearest = distance.argmin(axis=1)
    closest = distance.min(axis=1)
    beside = np.nonzero((closest > 1e-6) & (closest < BESIDE))[0]
    assert len(beside) >= 5
    for child in beside:
        guide = followed[nearest[child]]
        offset = (grown[child] - grown[child][0]) - (guide - guide[0])
        assert np.linalg.norm(offset, axis=1).max() < SAME_SHAPE
    return len(grown)


def test_the_simulated_guides_are_hair_on_the_surface(factory_scene, groom):
    guides = preview(groom)
    assert guides.parent == groom
    assert guides.data.surface == bpy.data.objects["head"]
    assert guides.data.surface_uv_map == groom.data.surface_uv_map == "UVMap"
    uv = np.empty(GUIDES * 2, dtype=np.float32)
    guides.data.attributes["surface_uv_coordinate"].data.foreach_get("vector", uv)
    np.testing.assert_allclose(uv.reshape(-1, 2), _blender_root_uvs(groom), atol=1e-5)
    for frame in range(1, FRAMES + 1):
        factory_scene.frame_set(frame)
        roots = np.array([strand[0] for strand in preview_strands(groom)])
        np.testing.assert_allclose(
            np.linalg.norm(roots - _head_centre(), axis=1), RADIUS, atol=1e-3
        )


def test_child_hair_follows_the_preview_then_the_bake_then_the_preview(
    factory_scene, groom, tmp_path
):
    select_only(groom)
    assert bpy.ops.oriented_strands.add_child_hair(children_per_guide=20.0) == {"FINISHED"}
    children = bpy.data.objects["hair_children"]
    assert children.parent == bpy.data.objects["head"]
    modifier = children.modifiers["Child Hair"]
    guides_input = next(
        item.identifier
        for item in modifier.node_group.interface.items_tree
        if item.item_type == "SOCKET" and item.name == "Guides"
    )
    assert modifier[guides_input] == preview(groom)
    assert preview(groom).hide_render
    played = {}
    for frame in (1, FRAMES // 2, FRAMES):
        factory_scene.frame_set(frame)
        assert _children_follow(children, preview(groom)) > 5 * GUIDES
        played[frame] = np.concatenate(preview_strands(groom))
    # As thick as the guides, from root to tip.
    guide_radius = _point_attribute(preview(groom), "radius")[:POINTS]
    child_radius = _point_attribute(children, "radius")[:POINTS]
    np.testing.assert_allclose(child_radius[[0, -1]], guide_radius[[0, -1]], rtol=1e-5)

    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    baked = bpy.data.objects["hair_baked_hair"]
    assert modifier[guides_input] == baked
    assert baked.hide_render
    assert baked.parent == groom
    assert baked.data.surface == bpy.data.objects["head"]
    for frame in (FRAMES // 2, FRAMES):
        factory_scene.frame_set(frame)
        np.testing.assert_allclose(np.concatenate(_curves_world(baked)), played[frame], atol=1e-6)
        _children_follow(children, baked)

    # The guides the children grow from do not render, and still export.
    pytest.importorskip("alembic3d")
    from alembic_samples import read_positions

    path = tmp_path / "guides.abc"
    assert bpy.ops.oriented_strands.export_alembic_hair(filepath=str(path)) == {"FINISHED"}
    times, positions = read_positions(str(path))["hair_baked_hair"]
    assert len(times) == FRAMES
    np.testing.assert_allclose(positions[FRAMES - 1], played[FRAMES], atol=1e-5)
    assert baked.hide_render
    assert modifier.show_viewport
    assert modifier.show_render

    assert bpy.ops.oriented_strands.free_bake_hair() == {"FINISHED"}
    assert modifier[guides_input] == preview(groom)


def test_child_hair_needs_hair_on_a_surface(factory_scene, groom):
    from oriented_strands import scene
    from oriented_strands.strands_io.errors import SceneInputError

    groom.data.surface = None
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    with pytest.raises(SceneInputError, match="'hair': child hair grows on a surface"):
        scene.add_child_hair(factory_scene, groom, 10.0)
    assert "hair_children" not in bpy.data.objects
