"""Building and rendering shots from code: the demo's and the gallery's (``examples/``) set.

Objects, materials, a three-point stage and Cycles renders (stills and clips), made with
``bpy`` the way an artist would set them up; nothing here knows of strands. Every function takes
the ``bpy`` module, imported by the caller after it has chosen Blender's user folder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


def link(bpy: Any, ob: Any) -> Any:
    """``ob`` linked into the scene's collection."""
    bpy.context.scene.collection.objects.link(ob)
    return ob


def placed(bpy: Any, mesh: Any, location, material: Any, obstacle: str | None = None) -> Any:
    """An object of ``mesh`` (named after it) at ``location`` with ``material``, linked; with
    ``obstacle`` (a *Strand Obstacle* shape: ``"SPHERE"``, ``"CAPSULE"``, ``"MESH"``) strands
    collide with it."""
    ob = link(bpy, bpy.data.objects.new(mesh.name, mesh))
    ob.location = tuple(location)
    ob.data.materials.append(material)
    if obstacle is not None:
        ob.oriented_strands_obstacle.use_obstacle = True
        ob.oriented_strands_obstacle.shape = obstacle
    return ob


def eyes(bpy: Any, head: Any, offset, radius: float) -> None:
    """Two dark eyes on ``head``, at its location plus ``offset`` and mirrored across x,
    parented to it."""
    dark = material(bpy, "Eye", (0.02, 0.02, 0.02), 0.15)
    for name, side in (("Eye.L", 1.0), ("Eye.R", -1.0)):
        at = np.array(head.location) + np.array(offset) * (side, 1.0, 1.0)
        parent_keeping_place(bpy, placed(bpy, sphere_mesh(bpy, name, radius), at, dark), head)


def with_nodes(datablock: Any) -> Any:
    """``datablock`` (a material or world) with its node tree: Blender 5 makes one with it,
    4.2 when asked (the switch is deprecated in 5)."""
    if datablock.node_tree is None:
        datablock.use_nodes = True
    return datablock


def material(bpy: Any, name: str, color: tuple[float, float, float], roughness: float = 0.5):
    """A Principled BSDF material of one colour."""
    made = with_nodes(bpy.data.materials.new(name))
    shader = made.node_tree.nodes["Principled BSDF"]
    shader.inputs["Base Color"].default_value = (*color, 1.0)
    shader.inputs["Roughness"].default_value = roughness
    made.diffuse_color = (*color, 1.0)
    return made


def hair_material(bpy: Any, name: str = "Hair", melanin: float = 0.65, redness: float = 0.55):
    """Hair shaded by the Principled Hair BSDF by melanin (0.65, 0.55: brown)."""
    made = with_nodes(bpy.data.materials.new(name))
    nodes, links = made.node_tree.nodes, made.node_tree.links
    nodes.remove(nodes["Principled BSDF"])
    hair = nodes.new("ShaderNodeBsdfHairPrincipled")
    hair.parametrization = "MELANIN"
    hair.inputs["Melanin"].default_value = melanin
    hair.inputs["Melanin Redness"].default_value = redness
    hair.inputs["Roughness"].default_value = 0.3
    hair.inputs["Random Roughness"].default_value = 0.2
    links.new(hair.outputs[0], nodes["Material Output"].inputs["Surface"])
    made.diffuse_color = (0.22, 0.12, 0.06, 1.0)
    return made


def stone_material(
    bpy: Any,
    name: str,
    color: tuple[float, float, float],
    clouds: tuple[float, float, float],
    roughness: float = 0.35,
):
    """Polished stone for a sculpture: ``color`` clouded with ``clouds`` by a noise in the
    object's space (so the clouds move with it), and light scattered a few millimetres under the
    surface, as marble does."""
    made = material(bpy, name, color, roughness)
    nodes, links = made.node_tree.nodes, made.node_tree.links
    shader = nodes["Principled BSDF"]
    shader.inputs["Subsurface Weight"].default_value = 0.25
    shader.inputs["Subsurface Scale"].default_value = 0.004
    links.new(_noise_ramp(nodes, links, 7.0, color, clouds), shader.inputs["Base Color"])
    return made


def leaf_material(
    bpy: Any, name: str, colors: tuple[tuple[float, float, float], tuple[float, float, float]]
):
    """Leaves between two greens (``colors``), in patches across the tree (a noise over the
    leaves' rest places, so a leaf keeps its colour as it sways), that let some light through:
    a light behind them shines in them."""
    made = material(bpy, name, colors[0], 0.55)
    nodes, links = made.node_tree.nodes, made.node_tree.links
    shader = nodes["Principled BSDF"]
    tint = _noise_ramp(nodes, links, 6.0, *colors, space="Generated")
    links.new(tint, shader.inputs["Base Color"])
    through = nodes.new("ShaderNodeBsdfTranslucent")
    links.new(tint, through.inputs["Color"])
    mix = nodes.new("ShaderNodeMixShader")
    mix.inputs[0].default_value = 0.3
    links.new(shader.outputs[0], mix.inputs[1])
    links.new(through.outputs[0], mix.inputs[2])
    links.new(mix.outputs[0], nodes["Material Output"].inputs["Surface"])
    return made


def _noise_ramp(nodes, links, scale: float, low, high, space: str = "Object"):
    """The colour output of a ramp from ``low`` to ``high`` driven by a noise texture of
    ``scale`` in the texture space ``space``."""
    coordinates = nodes.new("ShaderNodeTexCoord")
    noise = nodes.new("ShaderNodeTexNoise")
    noise.inputs["Scale"].default_value = scale
    noise.inputs["Detail"].default_value = 6.0
    links.new(coordinates.outputs[space], noise.inputs["Vector"])
    ramp = nodes.new("ShaderNodeValToRGB")
    for element, position, color in zip(
        ramp.color_ramp.elements, (0.35, 0.65), (low, high), strict=True
    ):
        element.position = position
        element.color = (*color, 1.0)
    # The factor sockets are "Fac" before Blender 5 and "Factor" from it: the first either way.
    links.new(noise.outputs[0], ramp.inputs[0])
    return ramp.outputs["Color"]


def poly_curve(bpy: Any, name: str, splines: list[np.ndarray]) -> Any:
    """A Curve object of poly splines through ``splines`` ((n, 3) points each), linked."""
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    for points in splines:
        spline = curve.splines.new("POLY")
        spline.points.add(len(points) - 1)
        spline.points.foreach_set("co", np.hstack([points, np.ones((len(points), 1))]).ravel())
    return link(bpy, bpy.data.objects.new(name, curve))


def sphere_mesh(bpy: Any, name: str, radius: float, scale=(1.0, 1.0, 1.0), rings: int = 24):
    """A smooth UV sphere mesh (with UVs), scaled by ``scale``."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    shape = bmesh.new()
    shape.loops.layers.uv.new("UVMap")
    bmesh.ops.create_uvsphere(
        shape, u_segments=2 * rings, v_segments=rings, radius=radius, calc_uvs=True
    )
    bmesh.ops.scale(shape, vec=scale, verts=shape.verts)
    shape.to_mesh(mesh)
    shape.free()
    mesh.shade_smooth()
    return mesh


def cylinder_mesh(bpy: Any, name: str, radius: float, depth: float, top: float | None = None):
    """A smooth closed cylinder mesh along z, centred (a cone where ``top`` differs)."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    shape = bmesh.new()
    bmesh.ops.create_cone(
        shape,
        cap_ends=True,
        segments=32,
        radius1=radius,
        radius2=radius if top is None else top,
        depth=depth,
    )
    shape.to_mesh(mesh)
    shape.free()
    mesh.shade_smooth()
    return mesh


def box_mesh(bpy: Any, name: str, size: tuple[float, float, float]):
    """A box mesh of ``size`` (m along x, y, z), centred."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    shape = bmesh.new()
    bmesh.ops.create_cube(shape, size=1.0)
    bmesh.ops.scale(shape, vec=size, verts=shape.verts)
    shape.to_mesh(mesh)
    shape.free()
    return mesh


def has_agx(scene: Any) -> bool:
    items = scene.view_settings.bl_rna.properties["view_transform"].enum_items
    return "AgX" in {item.identifier for item in items}


def three_point_lights(
    target: tuple[float, float, float], distance: float
) -> list[tuple[str, float, tuple, tuple]]:
    """Key (front left, high), fill (front right, low) and rim (behind) area lights
    ``distance`` from ``target``, aimed at it: ``(name, watts, location, rotation)``."""
    from mathutils import Vector

    aim, lights = Vector(target), []
    for name, energy, azimuth, elevation in (
        ("Key", 90.0, -130.0, 45.0),
        ("Fill", 25.0, -45.0, 20.0),
        ("Rim", 70.0, 80.0, 40.0),
    ):
        a, e = math.radians(azimuth), math.radians(elevation)
        offset = Vector((math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)))
        rotation = (-offset).to_track_quat("-Z", "Y").to_euler()
        lights.append(
            (
                name,
                energy * (distance / 2.5) ** 2,
                tuple(aim + distance * offset),
                tuple(math.degrees(angle) for angle in rotation),
            )
        )
    return lights


def stage(
    bpy: Any,
    *,
    camera: tuple[float, float, float],
    target: tuple[float, float, float],
    lens: float,
    samples: int,
    resolution: tuple[int, int],
    ground: Any,
    lights: list[tuple[str, float, tuple, tuple]],
    sky: tuple[float, float, float] = (0.5, 0.55, 0.62),
    horizon: tuple[float, float, float] | None = None,
    backdrop: float | None = None,
) -> None:
    """A ground, area ``lights`` (``(name, watts, location, rotation in degrees)``, e.g.
    :func:`three_point_lights`), a camera at ``camera`` looking at ``target``, a sky of ``sky``
    (fading to it from ``horizon`` up when given), Cycles on the CPU with ``samples`` and
    denoising, AgX (Filmic before 4.0). With ``backdrop`` (m) the ground curves up into a wall
    that far behind ``target``, as a studio's cyclorama: a background without a horizon."""
    import bmesh
    from mathutils import Vector

    scene = bpy.context.scene
    if backdrop is None:
        mesh = bpy.data.meshes.new("Ground")
        shape = bmesh.new()
        bmesh.ops.create_grid(shape, x_segments=1, y_segments=1, size=40.0)
        shape.to_mesh(mesh)
        shape.free()
    else:
        mesh = cyclorama_mesh(bpy, "Ground", target[1] + backdrop)
    floor = link(bpy, bpy.data.objects.new("Ground", mesh))
    floor.data.materials.append(ground)

    aim = Vector(target)
    view = link(bpy, bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera")))
    view.location = camera
    view.rotation_euler = (aim - view.location).to_track_quat("-Z", "Y").to_euler()
    view.data.lens = lens
    scene.camera = view
    for name, energy, location, rotation in lights:
        light = link(bpy, bpy.data.objects.new(name, bpy.data.lights.new(name, "AREA")))
        light.data.energy = energy
        light.data.size = 1.2
        light.location = location
        light.rotation_euler = tuple(math.radians(angle) for angle in rotation)
    world = with_nodes(bpy.data.worlds.new("Sky"))
    background = world.node_tree.nodes["Background"]
    background.inputs["Color"].default_value = (*sky, 1.0)
    background.inputs["Strength"].default_value = 0.4
    if horizon is not None:
        _sky_gradient(world, horizon, sky)
    world.color = sky
    scene.world = world

    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = True
    scene.render.resolution_x, scene.render.resolution_y = resolution
    scene.render.resolution_percentage = 100
    scene.view_settings.view_transform = "AgX" if has_agx(scene) else "Filmic"


def cyclorama_mesh(bpy: Any, name: str, wall: float, width: float = 24.0, bend: float = 2.0):
    """A studio backdrop: a floor (z = 0) up to ``bend`` (m) before y = ``wall``, a quarter
    circle of radius ``bend`` up into a wall at y = ``wall``, 8 m high, ``width`` across x."""
    profile = [(-12.0, 0.0)] + [
        (wall - bend + bend * math.sin(angle), bend - bend * math.cos(angle))
        for angle in np.linspace(0.0, 0.5 * math.pi, 17)
    ]
    profile.append((wall, 8.0))
    vertices = [(x, y, z) for x in (-0.5 * width, 0.5 * width) for y, z in profile]
    rows = len(profile)
    faces = [(k, k + 1, rows + k + 1, rows + k) for k in range(rows - 1)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices, [], faces)
    mesh.shade_smooth()
    return mesh


def _sky_gradient(world: Any, horizon: tuple, zenith: tuple) -> None:
    """The world's colour by the height of the view direction: ``horizon`` at and below it,
    ``zenith`` straight up."""
    nodes, links = world.node_tree.nodes, world.node_tree.links
    direction = nodes.new("ShaderNodeTexCoord")
    height = nodes.new("ShaderNodeSeparateXYZ")
    links.new(direction.outputs["Generated"], height.inputs[0])
    ramp = nodes.new("ShaderNodeValToRGB")
    # A world's generated coordinates are the view direction: its z is 0 at the horizon.
    for element, position, color in zip(
        ramp.color_ramp.elements, (0.0, 1.0), (horizon, zenith), strict=True
    ):
        element.position = position
        element.color = (*color, 1.0)
    links.new(height.outputs["Z"], ramp.inputs[0])
    links.new(ramp.outputs["Color"], nodes["Background"].inputs["Color"])


def render_still(bpy: Any, path: Path, frame: int) -> Path:
    """Render ``frame`` to ``path`` (its extension picks PNG or JPEG)."""
    scene = bpy.context.scene
    settings = scene.render.image_settings
    kept = settings.file_format
    settings.file_format = "JPEG" if path.suffix.lower() in (".jpg", ".jpeg") else "PNG"
    if settings.file_format == "JPEG":
        settings.quality = 88
    scene.frame_set(frame)
    scene.render.filepath = str(path)
    try:
        bpy.ops.render.render(write_still=True)
    finally:
        settings.file_format = kept
    return path


def render_clip(
    bpy: Any, path: Path, resolution: tuple[int, int], samples: int, frame_step: int = 2
) -> Path:
    """The scene's frame range, every ``frame_step``-th frame played at the matching lower
    rate (so it plays in real time), small and with ``samples``, into an MP4 (Blender's
    FFmpeg, H.264) at ``path``; the render settings are put back after."""
    scene = bpy.context.scene
    settings, render = scene.render.image_settings, scene.render
    kept = (render.resolution_x, render.resolution_y, scene.cycles.samples, render.fps)
    render.resolution_x, render.resolution_y = resolution
    scene.cycles.samples = samples
    scene.frame_step, render.fps = frame_step, max(1, round(render.fps / frame_step))
    if "media_type" in settings.bl_rna.properties:
        settings.media_type = "VIDEO"
    settings.file_format = "FFMPEG"
    render.ffmpeg.format = "MPEG4"
    render.ffmpeg.codec = "H264"
    render.ffmpeg.constant_rate_factor = "MEDIUM"
    render.filepath = str(path)
    try:
        bpy.ops.render.render(animation=True)
    finally:
        if "media_type" in settings.bl_rna.properties:
            settings.media_type = "IMAGE"
        settings.file_format = "PNG"
        render.resolution_x, render.resolution_y, scene.cycles.samples, render.fps = kept
        scene.frame_step = 1
    return path


@dataclass(frozen=True)
class Example:
    """A gallery scene as its builder made it: what :func:`run_example` simulates, renders and
    measures.

    Attributes
    ----------
    title : str
        What it shows, for the summary.
    systems : list
        The strand-system objects (made with *Add Strand System*).
    camera, target : (3,) floats, m
        Where the camera stands and what it looks at.
    lens : float, mm
    ground : material
    stills : tuple of int
        The frames rendered as stills.
    parameters : dict
        The settings that matter, for the summary.
    reference : object
        An object whose world matrix is recorded at every frame (the head the strands ride).
    bake : tuple of str
        What the systems are baked to for the render (``"HAIR"``: round, tapered hair curves;
        ``"BONES"``: a rig, for meshes that ``dress`` skins to it).
    dress : callable or None
        ``dress(bpy)`` after the bake: what the render needs besides (meshes on the bones).
    measure : callable
        ``measure(played, matrices)`` from the points every system's preview held at every
        frame (``{object name: (frames, points, 3)}``, world, m) and the reference's world
        matrices ((frames, 4, 4)) to the example's figures (``{name: float}``), which its test
        checks.
    """

    title: str
    systems: list
    camera: tuple[float, float, float]
    target: tuple[float, float, float]
    lens: float
    ground: Any
    stills: tuple[int, ...]
    parameters: dict
    reference: Any
    measure: Callable[[dict[str, np.ndarray], np.ndarray], dict[str, float]]
    bake: tuple[str, ...] = ("HAIR",)
    dress: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class Quality:
    """How much a run renders: still and clip pixels and Cycles samples."""

    still: tuple[int, int]
    still_samples: int
    clip: tuple[int, int]
    clip_samples: int


GALLERY = Quality((960, 540), 32, (480, 270), 6)
QUICK = Quality((96, 54), 1, (48, 28), 1)


def run_example(name: str, build: Callable[[Any, bool], Example], argv: list[str] | None) -> dict:
    """Build an example (``build(bpy, quick)``) in a new scene, play it as an artist does (the
    live preview simulates every frame), bake it to hair curves, render its stills (JPEG) and a
    clip (MP4) into ``--output`` and return (and write, ``<name>.json``) its summary: the
    counts, the seconds per simulated frame, the parameters and the example's figures.
    ``--quick`` makes a reduced run for the test-suite."""
    import argparse
    import json
    import os
    import tempfile
    import time

    parser = argparse.ArgumentParser(prog=f"examples/{name}.py")
    parser.add_argument("--output", type=Path, default=Path("gallery_output"))
    parser.add_argument("--quick", action="store_true", help="a reduced run (tests)")
    arguments = parser.parse_args(argv)
    quality = QUICK if arguments.quick else GALLERY
    # Blender keeps its configuration where this points; never touch the user's real one.
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="oriented-strands-"))
    import bpy

    from . import register, scene, unregister

    output = arguments.output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    register()
    try:
        example = build(bpy, arguments.quick)
        world = bpy.context.scene
        played: dict[str, list[np.ndarray]] = {ob.name: [] for ob in example.systems}
        matrices = []
        start = time.perf_counter()
        for frame in range(world.frame_start, world.frame_end + 1):
            world.frame_set(frame)
            for ob in example.systems:
                played[ob.name].append(_preview_points(ob))
            matrices.append(np.array(example.reference.matrix_world))
        simulated = time.perf_counter() - start
        points = {key: np.stack(value) for key, value in played.items()}
        figures = example.measure(points, np.stack(matrices))
        strands = sum(len(ob.oriented_strands.preview_object.data.curves) for ob in example.systems)
        bpy.ops.wm.save_as_mainfile(filepath=str(output / f"{name}.blend"))
        scene.bake_systems(world, bpy.context.view_layer, example.systems, list(example.bake))
        for ob in example.systems:
            ob.oriented_strands.preview_object.hide_render = True
        if example.dress is not None:
            example.dress(bpy)
        stage(
            bpy,
            camera=example.camera,
            target=example.target,
            lens=example.lens,
            samples=quality.still_samples,
            resolution=quality.still,
            ground=example.ground,
            lights=three_point_lights(example.target, 2.5),
        )
        bpy.ops.wm.save_mainfile()
        stills = [
            render_still(bpy, output / f"{name}_{frame:03d}.jpg", frame) for frame in example.stills
        ]
        clip = render_clip(bpy, output / f"{name}.mp4", quality.clip, quality.clip_samples)
    finally:
        unregister()
    frames = world.frame_end - world.frame_start + 1
    summary = {
        "name": name,
        "title": example.title,
        # The example's docstring says what the scene is: its second paragraph.
        "description": " ".join(build.__globals__["__doc__"].split("\n\n")[1].split()),
        "strands": strands,
        "segments": sum(value.shape[1] for value in points.values()) - strands,
        "frames": frames,
        "seconds_per_frame": simulated / frames,
        "parameters": example.parameters,
        "figures": figures,
        "stills": [path.name for path in stills],
        "clip": clip.name,
    }
    (output / f"{name}.json").write_text(json.dumps(summary, indent=1))
    print(f"{name}: {summary['strands']} strands, {summary['segments']} segments, {frames} frames")
    print(f"{name}: {summary['seconds_per_frame']:.3f} s per simulated frame (live preview)")
    for key, value in figures.items():
        print(f"{name}: {key} = {value:.4g}")
    for path in (*stills, clip):
        print(f"{name}: wrote {path}")
    return summary


def _preview_points(ob: Any) -> np.ndarray:
    """The points (n, 3), world, m, that a strand system's preview shows at this frame."""
    preview = ob.oriented_strands.preview_object
    positions = np.empty(len(preview.data.points) * 3, dtype=np.float32)
    preview.data.attributes["position"].data.foreach_get("vector", positions)
    matrix = np.array(preview.matrix_world)
    return positions.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]


def add_strand_system(bpy: Any, ob: Any, parameters: dict) -> None:
    """Select ``ob`` alone, press *Add Strand System*, and set the system's ``parameters``
    (property name to value) together."""
    from . import scene

    for other in bpy.context.view_layer.objects:
        other.select_set(other is ob)
    bpy.context.view_layer.objects.active = ob
    if bpy.ops.oriented_strands.add_strand_system() != {"FINISHED"}:
        raise RuntimeError(f"Add Strand System failed on {ob.name!r}")
    with scene.settings_changed_together(bpy.context.scene, bpy.context.view_layer):
        for name, value in parameters.items():
            setattr(ob.oriented_strands, name, value)


def skinned(bpy: Any, mesh: Any, weights: list[dict[str, float]], rig: Any) -> Any:
    """An object of ``mesh`` (named after it), linked, deformed by the bones of ``rig`` (a
    *Bones* bake): vertex ``i`` follows the bones ``weights[i]`` names, by their weights. The
    mesh is made in the rig's rest pose, in its space."""
    ob = link(bpy, bpy.data.objects.new(mesh.name, mesh))
    members: dict[tuple[str, float], list[int]] = {}
    for index, owners in enumerate(weights):
        for name, weight in owners.items():
            members.setdefault((name, weight), []).append(index)
    for (name, weight), indices in members.items():
        group = ob.vertex_groups.get(name) or ob.vertex_groups.new(name=name)
        group.add(indices, weight, "REPLACE")
    ob.modifiers.new("Armature", "ARMATURE").object = rig
    return ob


def leaves(
    bpy: Any,
    rig: Any,
    bones: list[Any],
    count: int,
    material: Any,
    size: float = 0.045,
    seed: int = 3,
) -> Any:
    """``count`` leaves of ``size`` (m, half their length) turned at random along the ``bones``
    (of ``rig``, a *Bones* bake), each skinned to the bone it grows from. A leaf is ovate and
    pointed, a little wider below its middle, folded along its midrib and curled down towards
    its tip, held a little off the twig as by a stalk; sizes vary by a quarter."""
    rng = np.random.default_rng(seed)
    along = np.linspace(0.0, 1.0, 6)
    # Half-width along the blade (of its half-length): round at the stalk, widest at 40 %,
    # drawn to a point.
    half_width = 0.55 * np.sin(np.pi * along**0.8)
    vertices, faces, weights = [], [], []
    for k in range(count):
        bone = bones[k % len(bones)]
        start, end = np.array(bone.head_local), np.array(bone.tail_local)
        stalk = start + rng.uniform(0.2, 1.0) * (end - start) + rng.normal(0.0, 0.012, 3)
        # Leaves point away from their twig, mostly sideways and up, some drooping.
        out = rng.normal(0.0, 1.0, 3) + (0.0, 0.0, 0.6)
        twig = (end - start) / max(np.linalg.norm(end - start), 1e-9)
        out -= 0.6 * np.dot(out, twig) * twig
        out /= np.linalg.norm(out)
        side = np.cross(out, rng.normal(0.0, 1.0, 3))
        side /= max(np.linalg.norm(side), 1e-9)
        up = np.cross(side, out)
        length = 2.0 * size * rng.uniform(0.75, 1.25)
        base = stalk + 0.12 * length * out
        fold, curl = rng.uniform(0.1, 0.25), rng.uniform(0.05, 0.25)
        first = len(vertices)
        for t, w in zip(along, half_width, strict=True):
            midrib = base + t * length * out - curl * length * t**2 * up
            for across in (-w, 0.0, w):
                vertices.append(midrib + across * length * (side + fold * np.sign(across) * up))
        for row in range(len(along) - 1):
            a = first + 3 * row
            faces += [(a, a + 3, a + 4, a + 1), (a + 1, a + 4, a + 5, a + 2)]
        weights += [{bone.name: 1.0}] * (3 * len(along))
    mesh = bpy.data.meshes.new("Leaves")
    mesh.from_pydata(np.array(vertices).tolist(), [], faces)
    mesh.materials.append(material)
    mesh.shade_smooth()
    return skinned(bpy, mesh, weights, rig)


def timeline(bpy: Any, seconds: float, fps: int = 24) -> Callable[[float], int]:
    """Set the scene to ``fps`` frames per second from frame 1 over ``seconds``; the frame at
    a share (0 to 1) of the shot."""
    scene = bpy.context.scene
    scene.render.fps = fps
    scene.frame_start, scene.frame_end = 1, 1 + round(seconds * fps)

    def frame(share: float) -> int:
        return 1 + round(share * seconds * fps)

    return frame


def keyed(ob: Any, path: str, frame: int, value: Any) -> None:
    """Set ``ob.<path>`` to ``value`` and key it at ``frame``."""
    setattr(ob, path, value)
    ob.keyframe_insert(path, frame=frame)


def empty_hair(bpy: Any, surface: Any, name: str, curves: list[np.ndarray], material: Any) -> Any:
    """Hair grown the way an artist starts it: *Empty Hair* on ``surface`` (a mesh object with a
    UV map), holding ``curves`` (each (n, 3), in the surface's local space)."""
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    surface.select_set(True)
    bpy.context.view_layer.objects.active = surface
    bpy.ops.object.curves_empty_hair_add()
    hair = bpy.context.active_object
    hair.name = hair.data.name = name
    hair.data.add_curves([len(curve) for curve in curves])
    hair.data.attributes["position"].data.foreach_set(
        "vector", np.concatenate(curves).astype(np.float32).ravel()
    )
    hair.data.materials.append(material)
    return hair


def child_hair(bpy: Any, system: Any, per_guide: float, inputs: dict | None = None) -> Any:
    """*Add Child Hair* on a strand system of hair on a surface, as the artist clicks it; then
    the child-hair modifier's ``inputs`` by the names its panel shows (``{"Root Radius": 1e-4,
    "Interpolation Guides": 1}``). Returns the child-hair object."""
    from .scene import children

    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    system.select_set(True)
    bpy.context.view_layer.objects.active = system
    bpy.ops.oriented_strands.add_child_hair(children_per_guide=per_guide)
    grown = bpy.data.objects[system.name + children.CHILD_HAIR_SUFFIX]
    modifier = next(m for m in grown.modifiers if m.type == "NODES")
    identifiers = children.input_identifiers(modifier.node_group)
    for name, value in (inputs or {}).items():
        modifier[identifiers[name]] = value
    grown.update_tag()
    return grown


def parent_keeping_place(bpy: Any, child: Any, parent: Any) -> None:
    """Parent ``child`` to ``parent`` where both stand now (at the scene's current frame)."""
    bpy.context.view_layer.update()
    child.parent = parent
    child.matrix_parent_inverse = parent.matrix_world.inverted()


def in_frame(points: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """World points (frames, n, 3) in the frames of a moving object whose world matrices are
    ``matrices`` (frames, 4, 4)."""
    inverse = np.linalg.inv(matrices)
    return np.einsum("fij,fpj->fpi", inverse[:, :3, :3], points) + inverse[:, None, :3, 3]


def scalp_roots(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Polar angle and azimuth of ``count`` roots on the scalp: a Fibonacci lattice above the
    ears, less the face (front, -y, below the hairline)."""
    candidates = 3 * count
    index = np.arange(candidates) + 0.5
    z = 1.0 - index / candidates * (1.0 - math.sin(math.radians(-5.0)))
    polar = np.arccos(z)
    azimuth = (index * math.pi * (3.0 - math.sqrt(5.0))) % (2.0 * math.pi)
    from_front = np.abs(((azimuth + 0.5 * math.pi) + math.pi) % (2.0 * math.pi) - math.pi)
    keep = (polar < math.radians(50.0)) | (from_front > math.radians(55.0))
    keep &= ~((polar > math.radians(70.0)) & (from_front > math.radians(120.0)))
    chosen = np.nonzero(keep)[0]
    chosen = chosen[np.linspace(0, len(chosen) - 1, count).round().astype(int)]
    return polar[chosen], azimuth[chosen]
