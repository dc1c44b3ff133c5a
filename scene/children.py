"""Child hair: render hair grown from the simulated guides by Blender's own hair nodes.

A child-hair object is a Curves object on the guides' surface (parented to it, in its space)
whose Geometry Nodes modifier runs Blender's *Interpolate Hair Curves* node group (from the
hair node assets Blender ships) on the guides: the system's hair bake where it has one, else its
live preview. The guides are bound to the surface for this (:mod:`.preview`), and no longer
render (the children include them). A hair bake and its Free Bake point the children at the
new guides.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import bpy
import numpy as np

from ..strands_io.errors import SceneInputError
from ..strands_io.geometry import root_spacing

CHILD_HAIR_GROUP = "Oriented Strands Child Hair"
CHILD_HAIR_SUFFIX = "_children"
INTERPOLATE_GROUP = "Interpolate Hair Curves"
HAIR_ASSETS = "procedural_hair_node_assets.blend"
GUIDES_INPUT = "Guides"
# The wrapper's inputs beside the guides, (name, socket type, default): Interpolate Hair
# Curves' own (the last five feed its inputs of the same name) and the children's radius at
# their root and tip (m), linear in between.
SETTINGS = (
    ("Surface", "NodeSocketObject", None),
    ("Surface UV Map", "NodeSocketString", "UVMap"),
    ("Density", "NodeSocketFloat", 10.0),
    ("Distance to Guides", "NodeSocketFloat", 0.0),
    ("Interpolation Guides", "NodeSocketInt", 4),
    ("Viewport Amount", "NodeSocketFloat", 1.0),
    ("Seed", "NodeSocketInt", 0),
    ("Root Radius", "NodeSocketFloat", 4e-5),
    ("Tip Radius", "NodeSocketFloat", 2e-5),
)


def hair_assets_path() -> str:
    """Where this Blender keeps its hair node assets (``datafiles/assets/nodes`` in 5.0,
    ``datafiles/assets/geometry_nodes`` in 4.2)."""
    assets = os.path.join(bpy.utils.system_resource("DATAFILES"), "assets")
    for folder, _, files in os.walk(assets):
        if HAIR_ASSETS in files:
            return os.path.join(folder, HAIR_ASSETS)
    raise SceneInputError(
        f"this Blender has no hair node assets ({HAIR_ASSETS}) to grow child hair"
    )


def _interpolate_group() -> bpy.types.NodeTree:
    """Blender's *Interpolate Hair Curves*, appended from its hair node assets once per file."""
    group = bpy.data.node_groups.get(INTERPOLATE_GROUP)
    if group is not None and group.bl_idname == "GeometryNodeTree":
        return group
    path = hair_assets_path()
    before = set(bpy.data.node_groups)
    with bpy.data.libraries.load(path) as (available, loaded):
        if INTERPOLATE_GROUP not in available.node_groups:
            raise SceneInputError(f"Blender's hair node assets have no {INTERPOLATE_GROUP!r}")
        loaded.node_groups = [INTERPOLATE_GROUP]
    appended = [group for group in bpy.data.node_groups if group not in before]
    return next(group for group in appended if group.name.startswith(INTERPOLATE_GROUP))


def _child_hair_group() -> bpy.types.NodeTree:
    """The wrapper node group: the guides object's curves (Object Info, relative) through
    *Interpolate Hair Curves*, the children's radius set from root to tip, its settings the
    modifier's inputs."""
    group = bpy.data.node_groups.get(CHILD_HAIR_GROUP)
    if group is not None:
        return group
    interpolate = _interpolate_group()
    group = bpy.data.node_groups.new(CHILD_HAIR_GROUP, "GeometryNodeTree")
    interface = group.interface
    interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    interface.new_socket(GUIDES_INPUT, in_out="INPUT", socket_type="NodeSocketObject")
    for name, socket_type, default in SETTINGS:
        socket = interface.new_socket(name, in_out="INPUT", socket_type=socket_type)
        if default is not None:
            socket.default_value = default
    nodes, links = group.nodes, group.links
    inputs = nodes.new("NodeGroupInput")
    output = nodes.new("NodeGroupOutput")
    guides = nodes.new("GeometryNodeObjectInfo")
    guides.transform_space = "RELATIVE"
    child = nodes.new("GeometryNodeGroup")
    child.node_tree = interpolate
    uv = nodes.new("GeometryNodeInputNamedAttribute")
    uv.data_type = "FLOAT_VECTOR"
    links.new(inputs.outputs[GUIDES_INPUT], guides.inputs["Object"])
    links.new(guides.outputs["Geometry"], child.inputs["Geometry"])
    links.new(inputs.outputs["Surface UV Map"], uv.inputs["Name"])
    links.new(uv.outputs["Attribute"], child.inputs["Surface UV Map"])
    surface = next(s for s in child.inputs if s.name == "Surface" and s.type == "OBJECT")
    links.new(inputs.outputs["Surface"], surface)
    for name, _, _ in SETTINGS[2:7]:
        links.new(inputs.outputs[name], child.inputs[name])
    along = nodes.new("GeometryNodeSplineParameter")
    taper = nodes.new("ShaderNodeMapRange")
    links.new(along.outputs["Factor"], taper.inputs["Value"])
    links.new(inputs.outputs["Root Radius"], taper.inputs["To Min"])
    links.new(inputs.outputs["Tip Radius"], taper.inputs["To Max"])
    radius = nodes.new("GeometryNodeSetCurveRadius")
    links.new(child.outputs["Geometry"], radius.inputs["Curve"])
    links.new(taper.outputs["Result"], radius.inputs["Radius"])
    links.new(radius.outputs["Curve"], output.inputs["Geometry"])
    for x, node in enumerate((inputs, guides, uv, child, along, taper, radius, output)):
        node.location = (200.0 * x, 0.0)
    return group


def input_identifiers(group: bpy.types.NodeTree) -> dict[str, str]:
    """The identifier of each input of a node group, by the name its modifier panel shows."""
    return {
        item.name: item.identifier
        for item in group.interface.items_tree
        if item.item_type == "SOCKET" and item.in_out == "INPUT"
    }


def add_child_hair(
    source: bpy.types.Object,
    guides: bpy.types.Object,
    surface: bpy.types.Object,
    uv_map: str,
    roots: np.ndarray,
    radius: tuple[float, float],
    children_per_guide: float,
) -> bpy.types.Object:
    """A child-hair object for ``source``'s ``guides`` on ``surface`` (with ``source``'s
    materials, in its collections): about ``children_per_guide`` children for each guide,
    grown within twice the guides' spacing of a guide (``roots``: the guides' roots, world),
    ``radius`` (m) thick at their root and tip."""
    matrix = np.array(surface.matrix_world, dtype=np.float64)
    local = (roots - matrix[:3, 3]) @ np.linalg.inv(matrix[:3, :3]).T
    if len(roots) < 2:
        raise SceneInputError(f"object {source.name!r}: child hair needs at least two guides")
    spacing = root_spacing(local)
    if not spacing > 0.0:
        raise SceneInputError(f"object {source.name!r}: its guides' roots coincide")
    group = _child_hair_group()
    name = source.name + CHILD_HAIR_SUFFIX
    curves = bpy.data.hair_curves.new(name)
    curves.surface = surface
    curves.surface_uv_map = uv_map
    for material in source.data.materials:
        curves.materials.append(material)
    ob = bpy.data.objects.new(name, curves)
    ob.parent = surface
    ob.matrix_parent_inverse.identity()
    modifier = ob.modifiers.new("Child Hair", "NODES")
    modifier.node_group = group
    identifier = input_identifiers(group)
    values = {
        GUIDES_INPUT: guides,
        "Surface": surface,
        "Surface UV Map": uv_map,
        "Density": children_per_guide / spacing**2,
        "Distance to Guides": 2.0 * spacing,
        "Root Radius": radius[0],
        "Tip Radius": radius[1],
    }
    for key, value in values.items():
        modifier[identifier[key]] = value
    for collection in source.users_collection:
        collection.objects.link(ob)
    # Interpolate Hair Curves keeps the guides among the children: rendered beside them they
    # would show twice.
    guides.hide_render = True
    return ob


def _child_hair_modifiers() -> list[tuple[bpy.types.NodesModifier, str]]:
    """Every child-hair modifier and the identifier of its guides input."""
    group = bpy.data.node_groups.get(CHILD_HAIR_GROUP)
    if group is None:
        return []
    key = input_identifiers(group)[GUIDES_INPUT]
    return [
        (modifier, key)
        for ob in bpy.data.objects
        for modifier in ob.modifiers
        if modifier.type == "NODES" and modifier.node_group == group
    ]


@contextlib.contextmanager
def children_off() -> Iterator[None]:
    """Child hair is not evaluated meanwhile (its modifiers off in the viewport and the render):
    while the scene steps through frames to be read or exported, tens of thousands of children
    would be grown at every frame for nothing."""
    modifiers = [modifier for modifier, _ in _child_hair_modifiers()]
    shown = [(modifier.show_viewport, modifier.show_render) for modifier in modifiers]
    for modifier in modifiers:
        modifier.show_viewport = modifier.show_render = False
    try:
        yield
    finally:
        for modifier, (viewport, render) in zip(modifiers, shown, strict=True):
            modifier.show_viewport, modifier.show_render = viewport, render


def following(guides: list[bpy.types.Object]) -> list[tuple[bpy.types.NodesModifier, str]]:
    """The child-hair modifiers that grow from any of ``guides``."""
    return [(m, key) for m, key in _child_hair_modifiers() if m[key] in guides]


def follow(modifiers: list[tuple[bpy.types.NodesModifier, str]], guides: bpy.types.Object) -> None:
    """Grow ``modifiers``' children (:func:`following`) from ``guides`` instead; the guides then
    do not render (the children include them)."""
    for modifier, key in modifiers:
        modifier[key] = guides
        modifier.id_data.update_tag()
    if modifiers:
        guides.hide_render = True
