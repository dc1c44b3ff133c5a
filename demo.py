"""The built-in example, a shot: a marble bust with flowing hair, and a young tree in gusts.

Run with ``make demo`` (or ``python -m oriented_strands.demo --output DIR`` in the Blender venv).
It builds the scene from code (no binary assets) and works the way an artist does:

- a bust on a plinth: a sculpted head (nose, eyes, brows, lips, chin carved into a ball) on a
  neck and shoulders lofted through cross-sections, on an armature that turns the head, nods and
  shrugs. The shoulders deform with it and are a mesh obstacle read at every frame; the hair
  grows on, and collides with, a ball just outside the head (the scalp);
- shoulder-length guide hair grown on the scalp (Blender's *Empty Hair* on it), swept back
  from the forehead, over the crown and down the sides and back, lying on the neck and
  shoulders as drawn (the drawn curves are its shape at rest); simulated with collisions and
  strand interaction. Render hair is grown around the guides by Blender's own *Interpolate Hair
  Curves* (*Add Child Hair*), shaded with the Principled Hair BSDF;
- a ponytail tied high at the back of the head, its own strand system;
- a young tree beside the bust, four levels of trunk, boughs, branches and twigs each rooted on
  its parent's curve (one branched strand), shaken by a gusty wind field and baked to bones that
  carry its leaves;
- three-point lighting, a studio backdrop (a floor curving up into a wall), a sky, a camera.

It plays the timeline so the live preview simulates every frame, bakes the hair and ponytail
to hair curves (from the played frames) and shape keys, the tree to bones, and writes:

- ``demo.blend``: the scene, with the artist's curves, the simulated and baked objects;
- ``strands_cache/<name>.npy``: the hair-curve caches the baked hair objects play;
- ``hair.abc``, ``shape_keys.abc``: the bakes exported as Alembic, one sample per frame;
- ``strands.npz``: the simulated points of every frame (``<object>``: frames x points x 3);
- ``shot_####.png``: stills rendered with Cycles on the CPU, and ``shot.mp4``, the whole shot
  (small, 12 frames a second).

``--quick`` makes a reduced run for the test-suite (fewer frames, strands, samples and pixels).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import bust, staging
from .bust import HEAD_CENTRE, HEAD_RADIUS
from .strands_io.geometry import points_at_arc_lengths, polyline_length

FPS = 24
# Where the hair is swept from: just in front of the hairline, a little to the bust's left.
SWEPT_FROM = np.array([0.015, -0.097, 0.02])
HAIR_LENGTH = 0.32
TREE_ROOT = np.array([1.35, 1.65, 0.0])


@dataclass(frozen=True)
class Size:
    """How much the demo makes: frames, hair guides and their points, render hairs per guide,
    ponytail strands, leaves, render settings."""

    frames: int
    guides: int
    guide_points: int
    children_per_guide: float
    ponytail: int
    leaves: int
    samples: int
    still: tuple[int, int]
    video: tuple[int, int]


FULL = Size(72, 1000, 11, 12.0, 160, 1200, 16, (1280, 720), (480, 270))
QUICK = Size(24, 60, 11, 4.0, 8, 60, 2, (160, 90), (96, 54))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m oriented_strands.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--output", type=Path, default=Path("demo_output"), help="folder for the results"
    )
    parser.add_argument("--quick", action="store_true", help="a reduced run (tests)")
    return parser.parse_args(argv)


def _hair_material(bpy):
    """Brown hair whose white reflection off the cuticle is dimmed (the Principled Hair BSDF's
    Huang model, Reflection 0.4): the rim light behind the head glances off the hair rising over
    the crown towards the camera, a sheen there rather than a white patch that reads as the
    stone showing through."""
    made = staging.hair_material(bpy, melanin=0.42, redness=0.6)
    shader = next(n for n in made.node_tree.nodes if n.type == "BSDF_HAIR_PRINCIPLED")
    shader.model = "HUANG"
    shader.inputs["Reflection"].default_value = 0.4
    return made


def _rig(bpy, frames: int):
    """An armature: a neck, the head on it, and two shoulders. The head turns towards the tree
    (+x) and back past the front, and nods, the shoulders shrug once, all keyed every quarter
    second after a still half second."""
    armature = bpy.data.armatures.new("Rig")
    rig = staging.link(bpy, bpy.data.objects.new("Rig", armature))
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    neck = armature.edit_bones.new("neck")
    neck.head, neck.tail = (0.0, 0.0, 1.36), (0.0, 0.0, 1.52)
    head = armature.edit_bones.new("head")
    head.head, head.tail, head.parent = (0.0, 0.0, 1.52), (0.0, 0.0, 1.72), neck
    for side, x in (("L", 1.0), ("R", -1.0)):
        shoulder = armature.edit_bones.new(f"shoulder.{side}")
        shoulder.head, shoulder.tail = (0.03 * x, 0.0, 1.4), (0.2 * x, 0.0, 1.38)
        shoulder.parent = neck
    bpy.ops.object.mode_set(mode="OBJECT")
    pose = rig.pose.bones
    for bone in pose:
        bone.rotation_mode = "XYZ"
    for frame in range(1, frames + 1, FPS // 4):
        seconds = (frame - 1) / FPS
        moving = min(1.0, max(0.0, seconds - 0.5))
        # The head bone points up: its x turns it forward (a nod), its y about the neck (a
        # negative y turns the face towards +x, and the ponytail out to -x, into the camera's
        # view).
        pose["head"].rotation_euler = (
            0.18 * moving * math.sin(2.0 * math.pi * seconds),
            -0.6 * moving * math.sin(math.pi * seconds),
            0.0,
        )
        pose["head"].keyframe_insert("rotation_euler", frame=frame)
        # The shoulder bones point out: their x lifts their tips.
        shrug = 0.2 * math.sin(math.pi * min(1.0, max(0.0, seconds - 1.0)))
        for side in ("L", "R"):
            pose[f"shoulder.{side}"].rotation_euler = (shrug, 0.0, 0.0)
            pose[f"shoulder.{side}"].keyframe_insert("rotation_euler", frame=frame)
    return rig


def _on_bone(ob, rig, bone: str) -> None:
    """Parent ``ob`` to a bone of ``rig``, keeping where it is in the rest pose (a bone child
    hangs from the bone's tail)."""
    from mathutils import Matrix

    rest = rig.data.bones[bone]
    tail = rig.matrix_world @ rest.matrix_local @ Matrix.Translation((0.0, rest.length, 0.0))
    ob.parent, ob.parent_type, ob.parent_bone = rig, "BONE", bone
    ob.matrix_parent_inverse = tail.inverted()


def _bust(bpy, rig, stone, plinth):
    """The bust on a plinth: the scalp (a ball the hair grows on and collides with, hidden in
    renders) and the sculpted head on the head bone; the chest, shoulders and neck skinned to
    the neck, shoulder and head bones, a deforming mesh the hair collides with."""
    scalp = staging.placed(bpy, staging.sphere_mesh(bpy, "Scalp", HEAD_RADIUS), HEAD_CENTRE, stone)
    scalp.oriented_strands_obstacle.use_obstacle = True
    scalp.oriented_strands_obstacle.shape = "SPHERE"
    scalp.hide_render = True
    _on_bone(scalp, rig, "head")
    _on_bone(staging.placed(bpy, bust.head_mesh(bpy), HEAD_CENTRE, stone), rig, "head")
    body = staging.placed(bpy, bust.torso_mesh(bpy), (0.0, 0.0, 0.0), stone, "MESH")
    body.parent = rig
    x, _, z = np.array([v.co for v in body.data.vertices]).T
    # A shrug lifts the shoulders, not the chest below them nor the neck between them; the top
    # of the neck turns with the head.
    shoulder = bust.smoothstep(1.22, 1.36, z) * bust.smoothstep(0.05, 0.16, np.abs(x))
    weights = {
        "shoulder.L": np.where(x > 0.0, shoulder, 0.0),
        "shoulder.R": np.where(x < 0.0, shoulder, 0.0),
        "head": bust.smoothstep(1.47, 1.55, z),
    }
    weights["neck"] = np.clip(1.0 - sum(weights.values()), 0.0, 1.0)
    for name, weight in weights.items():
        group = body.vertex_groups.new(name=name)
        for index in np.nonzero(weight > 1e-3)[0]:
            group.add([int(index)], float(weight[index]), "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = rig
    # The bust's cut stands on a round socle on a square pedestal.
    bottom = bust.BUST_SECTIONS[0, 0]
    socle = staging.cylinder_mesh(bpy, "Socle", 0.13, 0.06, 0.11)
    staging.placed(bpy, socle, (0.0, 0.0, bottom - 0.03), plinth)
    pedestal = staging.box_mesh(bpy, "Plinth", (0.42, 0.42, bottom - 0.06))
    staging.placed(bpy, pedestal, (0.0, 0.0, 0.5 * (bottom - 0.06)), plinth)
    return scalp, body


def _swept_hair(polar: np.ndarray, azimuth: np.ndarray, points: int, seed: int = 2):
    """Shoulder-length hair swept back, in the head's space. Each guide follows the scalp from
    its root, lifted 6 mm off it, away from a point at the front of the hairline and, the lower
    it gets, more and more down: back over the crown, down the sides behind the face and down
    the back. Where the head starts to curve in it leaves it and falls, flaring a little, over
    the neck, shoulders and back, kept 4 mm off the bust. Lengths vary from 9 cm
    shorter than ``HAIR_LENGTH`` to 5 cm longer, so the ends are layered, not cut straight."""
    rng = np.random.default_rng(seed)
    roots = np.stack(
        (np.sin(polar) * np.cos(azimuth), np.sin(polar) * np.sin(azimuth), np.cos(polar)), axis=1
    )
    lengths = HAIR_LENGTH + rng.uniform(-0.09, 0.05, len(roots))
    flare = rng.uniform(0.02, 0.08, len(roots))
    step, lift = 0.002, 0.006
    unit, travelled = roots.copy(), np.zeros(len(roots))
    falling = unit[:, 2] <= 0.0
    where = (HEAD_RADIUS * unit).copy()
    path = [where.copy()]
    while (travelled < lengths).any():
        radius = HEAD_RADIUS + lift * np.minimum(travelled / 0.02, 1.0)
        away = HEAD_RADIUS * unit - SWEPT_FROM
        away /= np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-9)
        # Nothing falls over the face: hair at the front goes sideways and back, behind the
        # ears.
        away[:, 1] = np.maximum(away[:, 1], 0.0) + 0.6 * np.maximum(-unit[:, 1], 0.0)
        down = 0.3 + 2.0 * np.maximum(0.0, 0.7 - unit[:, 2])
        flow = away + down[:, None] * np.array([0.0, 0.0, -1.0])
        flow -= np.einsum("ij,ij->i", flow, unit)[:, None] * unit
        flow /= np.linalg.norm(flow, axis=1, keepdims=True)
        on_head = unit + flow * step / radius[:, None]
        on_head /= np.linalg.norm(on_head, axis=1, keepdims=True)
        unit = np.where(falling[:, None], unit, on_head)
        head_point = radius[:, None] * unit
        # Falling: straight down, out from the head's axis by the flare, and out of the bust.
        across = where[:, :2] / np.maximum(
            np.linalg.norm(where[:, :2], axis=1, keepdims=True), 1e-9
        )
        dropped = where + np.column_stack(
            (flare[:, None] * step * across, np.full(len(where), -step))
        )
        dropped = bust.outside_bust(dropped + HEAD_CENTRE, 0.004) - HEAD_CENTRE
        moved = np.where(falling[:, None], dropped, head_point)
        travelled += np.linalg.norm(moved - where, axis=1)
        where = moved
        falling |= unit[:, 2] <= 0.0
        path.append(where.copy())
    path = np.stack(path, axis=1)
    return [
        points_at_arc_lengths(guide, np.linspace(0.0, length, points))
        for guide, length in zip(path, lengths, strict=True)
    ]


def _hair(bpy, scalp, size: Size, material):
    """Guide hair grown on the scalp the way an artist starts it (Empty Hair on it)."""
    guides = _swept_hair(*staging.scalp_roots(size.guides), size.guide_points)
    return staging.empty_hair(bpy, scalp, "Hair", guides, material)


def _ponytail(bpy, scalp, strands: int, material):
    """A ponytail tied high at the back of the head, on the hair: strands from a small disc
    that leave it a little upwards, arc out backwards clear of the hair and fall, 34 cm long,
    fanning out a little towards their tips."""
    rng = np.random.default_rng(5)
    # The tie, 40° up the back of the head, just outside the hair lying on the scalp.
    tie = HEAD_CENTRE + 0.108 * np.array([0.0, math.cos(0.7), math.sin(0.7)])
    across = np.array([[1.0, 0.0, 0.0], [0.0, -0.26, 0.97]])
    s = np.linspace(0.0, 0.34, 12)
    # The strands' slope: 15° up at the tie, bending down to 80° below level within 18 cm.
    slope = np.radians(15.0) - np.radians(95.0) * bust.smoothstep(0.0, 0.18, s)
    step = np.diff(s, prepend=0.0)
    arc = np.stack(
        (np.zeros_like(s), np.cumsum(step * np.cos(slope)), np.cumsum(step * np.sin(slope))),
        axis=1,
    )
    splines = []
    for _ in range(strands):
        offset = rng.normal(0.0, 0.005, 2) @ across
        fan = np.array([rng.normal(0.0, 0.03), 0.0, 0.0]) * s[:, None]
        splines.append(tie + offset + arc + fan)
    ponytail = staging.poly_curve(bpy, "Ponytail", splines)
    ponytail.data.materials.append(material)
    ponytail.parent = scalp
    ponytail.matrix_parent_inverse = scalp.matrix_world.inverted()
    return ponytail


def _point_along(polyline: np.ndarray, share: float) -> np.ndarray:
    """The point ``share`` (0 to 1) of the way along ``polyline`` (n, 3), on it."""
    return points_at_arc_lengths(polyline, share * polyline_length(polyline))


def _limb(rng, root: np.ndarray, heading: np.ndarray, length: float, points: int) -> np.ndarray:
    """A branch from ``root`` along ``heading``, ``length`` long, curving up towards the light
    and wandering a little."""
    heading = heading / np.linalg.norm(heading)
    t = np.linspace(0.0, 1.0, points)[:, None]
    bend = np.array([0.0, 0.0, 0.25]) * t**2
    wander = np.cumsum(rng.normal(0.0, 0.04, (points, 3)), axis=0) * t
    return root + length * (t * heading + bend + wander)


def _tree_curves(seed: int = 4) -> list[np.ndarray]:
    """A young tree 2.1 m tall, four levels: a leaning trunk, eight boughs spiralling up it,
    three branches on each and two twigs on every branch, each rooted on its parent's curve."""
    rng = np.random.default_rng(seed)
    heights = np.linspace(0.0, 1.0, 9)[:, None]
    lean = np.array([0.12, 0.05, 0.0]) * heights**2 + np.array([0.03, -0.02, 0.0]) * np.sin(
        math.pi * heights
    )
    trunk = TREE_ROOT + lean + np.array([0.0, 0.0, 2.1]) * heights
    curves = [trunk]
    golden = math.pi * (3.0 - math.sqrt(5.0))
    for k, share in enumerate(np.linspace(0.38, 0.92, 8)):
        azimuth = 1.0 + k * golden
        rise = rng.uniform(0.5, 0.9)
        heading = np.array([math.cos(azimuth), math.sin(azimuth), rise])
        bough = _limb(rng, _point_along(trunk, share), heading, 0.95 * (1.1 - share), 6)
        curves.append(bough)
        for j, along in enumerate((0.35, 0.6, 0.82)):
            turn = azimuth + (1.0 if j % 2 else -1.0) * rng.uniform(0.5, 0.9)
            heading = np.array([math.cos(turn), math.sin(turn), rng.uniform(0.3, 0.8)])
            length = 0.45 * np.linalg.norm(bough[-1] - bough[0]) * (1.1 - 0.4 * along)
            branch = _limb(rng, _point_along(bough, along), heading, length, 5)
            curves.append(branch)
            for i, at in enumerate((0.5, 0.85)):
                twist = turn + (1.0 if i else -1.0) * rng.uniform(0.4, 0.8)
                heading = np.array([math.cos(twist), math.sin(twist), rng.uniform(0.2, 0.7)])
                curves.append(_limb(rng, _point_along(branch, at), heading, 0.5 * length, 4))
    return curves


def _tree(bpy, bark):
    """The tree: one curve per trunk, bough, branch and twig, every one but the trunk starting
    on its parent's curve (a branched strand)."""
    tree = staging.poly_curve(bpy, "Tree", _tree_curves())
    tree.data.materials.append(bark)
    return tree


def _gusts(bpy, frames: int):
    """A wind field blowing across the tree (and lightly through the hair): a breeze with
    turbulence, two gusts a second apart."""
    bpy.ops.object.effector_add(
        type="WIND",
        location=(1.6, -0.4, 1.2),
        rotation=(0.0, math.radians(-80.0), math.radians(-20.0)),
    )
    wind = bpy.context.active_object
    wind.name = "Gusts"
    wind.field.noise = 0.6
    # Blender seeds a new field's noise from the clock: fix it, so every run blows alike.
    wind.field.seed = 7
    for seconds, strength in ((0.0, 4.0), (0.9, 7.0), (1.5, 2.5), (2.2, 8.0), (2.8, 3.0)):
        frame = 1 + round(seconds * FPS)
        if frame <= frames:
            wind.field.strength = strength
            wind.field.keyframe_insert("strength", frame=frame)
    return wind


def _build(bpy, size: Size):
    """The bust on its rig, its hair and ponytail, the tree and the wind, as strand systems
    (``None`` where *Add Strand System* fails), with the render hair grown; and the
    materials."""
    scene = bpy.context.scene
    scene.render.fps = FPS
    scene.frame_start, scene.frame_end = 1, size.frames
    materials = {
        "stone": staging.stone_material(bpy, "Marble", (0.86, 0.83, 0.78), (0.7, 0.67, 0.63)),
        "hair": _hair_material(bpy),
        "bark": staging.material(bpy, "Bark", (0.2, 0.14, 0.09), 0.85),
        "leaf": staging.leaf_material(bpy, "Leaf", ((0.07, 0.2, 0.03), (0.2, 0.36, 0.06))),
        "ground": staging.material(bpy, "Ground", (0.45, 0.46, 0.48), 0.9),
        "plinth": staging.material(bpy, "Plinth", (0.09, 0.09, 0.1), 0.45),
    }
    rig = _rig(bpy, size.frames)
    scalp, _body = _bust(bpy, rig, materials["stone"], materials["plinth"])
    scene.frame_set(1)
    hair = _hair(bpy, scalp, size, materials["hair"])
    ponytail = _ponytail(bpy, scalp, size.ponytail, materials["hair"])
    tree = _tree(bpy, materials["bark"])
    _gusts(bpy, size.frames)
    systems = [hair, ponytail, tree]
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob in systems)
    bpy.context.view_layer.objects.active = hair
    if bpy.ops.oriented_strands.add_strand_system() != {"FINISHED"}:
        return None, materials
    from .scene import settings_changed_together

    with settings_changed_together(scene, bpy.context.view_layer):
        props = hair.oriented_strands
        props.segment_count = size.guide_points - 1
        props.collision_radius = 0.0015
        props.use_interaction = True
        # Hair drawn lying on the head keeps its drawn curvature (the head carries it: a rest
        # shape that held it up under gravity would lift it off and throw it over the face),
        # and resists twisting and sliding past its neighbours, so the strands drawn over the
        # crown stay there rather than rolling off it sideways.
        props.rest_shape = "DRAWN"
        props.youngs_modulus = 0.3
        props.shear_modulus = 0.3
        props.interaction_friction = 0.6
        props.field_weight = 0.15
        props = ponytail.oriented_strands
        props.segment_count = 14
        props.collision_radius = 0.004
        props.field_weight = 0.15
        # Locks thick enough to read as a ponytail from the camera, tapering to their tips; the
        # stiffness falls with the thicker section's weight, so they swing as thin strands do.
        props.radius = 0.0018
        props.thickness_tip = 0.3
        props.youngs_modulus = 0.015
        # The tie holds it out from the head: the drawn arc is its shape under gravity.
        props.rest_shape = "HOLD_UNDER_GRAVITY"
        props = tree.oriented_strands
        props.segment_count = 6
        props.radius = 0.03
        props.thickness_tip = 0.3  # branches go on thinning from where they grow
        props.youngs_modulus = 1.5  # GPa: green wood
        props.density = 600.0
        props.air_drag = 900.0  # mN·s/m², leaves included
        props.rest_shape = "HOLD_UNDER_GRAVITY"
        props.use_collisions = False
    # Render hairs thin to a fine point, so their ends read as tips, not cut.
    staging.child_hair(bpy, hair, size.children_per_guide, {"Tip Radius": 5e-6})
    return systems, materials


def _leaves(bpy, count: int, material) -> None:
    """Leaves on the tree's bake: on its boughs away from the trunk, its branches and twigs."""
    rig = bpy.data.objects["Tree_rig"]
    axis = TREE_ROOT[:2]
    crown = [
        bone
        for bone in rig.data.bones
        if np.linalg.norm(np.array(bone.tail_local)[:2] - axis) > 0.25 or bone.tail_local[2] > 2.0
    ]
    staging.leaves(bpy, rig, crown, count, material, 0.035)


def _stage(bpy, size: Size, ground) -> None:
    """Camera, three-point lights, a studio backdrop and a sky for the shot."""
    staging.stage(
        bpy,
        camera=(-0.3, -2.0, 1.55),
        target=(0.35, 0.3, 1.47),
        lens=40.0,
        samples=size.samples,
        resolution=size.still,
        ground=ground,
        lights=staging.three_point_lights(tuple(HEAD_CENTRE), 2.4),
        sky=(0.55, 0.65, 0.8),
        horizon=(0.85, 0.82, 0.76),
        backdrop=3.5,
    )
    # A warm key and a cool rim model the white stone and light the hair's edge.
    bpy.data.lights["Key"].color = (1.0, 0.9, 0.78)
    bpy.data.lights["Rim"].color = (0.8, 0.88, 1.0)


def main(argv: list[str] | None = None) -> int:
    """Build, simulate, bake, save and render the shot; print what it did and where it is."""
    arguments = _parse(argv)
    size = QUICK if arguments.quick else FULL
    # Blender keeps its configuration where this points; never touch the user's real one.
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="oriented-strands-"))
    import bpy

    import oriented_strands

    output = arguments.output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        stages[name] = now - clock
        clock = now

    bpy.ops.wm.read_factory_settings(use_empty=True)
    oriented_strands.register()
    try:
        scene = bpy.context.scene
        scene.render.fps = FPS
        scene.frame_start, scene.frame_end = 1, size.frames
        systems, materials = _build(bpy, size)
        if systems is None:
            print("demo: Add Strand System failed", file=sys.stderr)
            return 1
        hair, ponytail, tree = systems
        lap("scene built")

        simulated = {ob.name: [] for ob in systems}
        for frame in range(1, size.frames + 1):
            scene.frame_set(frame)
            for ob in systems:
                preview = ob.oriented_strands.preview_object
                positions = np.empty(len(preview.data.points) * 3, dtype=np.float32)
                preview.data.attributes["position"].data.foreach_get("vector", positions)
                local = positions.reshape(-1, 3).astype(np.float64)
                matrix = np.array(preview.matrix_world)
                simulated[ob.name].append(local @ matrix[:3, :3].T + matrix[:3, 3])
        np.savez_compressed(
            output / "strands.npz",
            **{name: np.stack(v).astype(np.float32) for name, v in simulated.items()},
        )
        lap("simulated (live playback)")

        blend = output / "demo.blend"
        # Saved first: hair-curve caches are written next to the .blend file.
        bpy.ops.wm.save_as_mainfile(filepath=str(blend))
        baked = oriented_strands.scene.bake_systems(
            scene, bpy.context.view_layer, [hair, ponytail], ["SHAPE_KEYS", "HAIR"]
        )
        # The tree renders as its hair bake (round, tapered); its bones carry the leaves.
        baked += oriented_strands.scene.bake_systems(
            scene, bpy.context.view_layer, [tree], ["BONES", "HAIR"]
        )
        _leaves(bpy, size.leaves, materials["leaf"])
        alembic = {target: output / f"{target.lower()}.abc" for target in ("HAIR", "SHAPE_KEYS")}
        for target, path in alembic.items():
            oriented_strands.scene.export_alembic(
                scene, bpy.context.view_layer, [hair, ponytail], target, str(path)
            )
        # The baked shape keys stand beside the hair bakes for export; they do not render.
        for ob in baked:
            if ob.name.endswith("_shape_keys"):
                ob.hide_render = True
                ob.hide_set(True)
        lap("baked and exported")

        _stage(bpy, size, materials["ground"])
        bpy.ops.wm.save_mainfile()
        rendered = []
        for frame in (1, size.frames // 2, size.frames):
            scene.frame_set(frame)
            scene.render.filepath = str(output / f"shot_{frame:04d}.png")
            bpy.ops.render.render(write_still=True)
            rendered.append(scene.render.filepath)
        lap("stills rendered (Cycles)")
        # Cycles: Workbench draws tens of thousands of hairs in software here, three times
        # slower.
        video = staging.render_clip(bpy, output / "shot.mp4", size.video, max(1, size.samples // 6))
        lap("video rendered (Cycles)")
        children = bpy.data.objects["Hair_children"]
        grown = len(children.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.curves)
    finally:
        oriented_strands.unregister()

    moved = {name: float(np.abs(np.stack(v) - v[0]).max()) for name, v in simulated.items()}
    counts = {ob: len(simulated[ob][0]) for ob in simulated}
    print(f"demo: simulated {size.frames} frames at {FPS} fps")
    for name, distance in moved.items():
        print(f"demo:   {name}: {counts[name]} points, moved up to {distance:.3f} m from frame 1")
    print(f"demo:   Hair: {size.guides} guides, {grown} render hairs grown around them")
    for name, seconds in stages.items():
        print(f"demo: {name:<27} {seconds:6.1f} s")
    print(f"demo: scene          {blend}")
    print(f"demo: baked objects  {', '.join(ob.name for ob in baked)} (in the scene)")
    print(f"demo: hair caches    {output / 'strands_cache'}")
    for path in alembic.values():
        print(f"demo: alembic        {path}")
    print(f"demo: point caches   {output / 'strands.npz'}")
    for path in rendered:
        print(f"demo: render         {path}")
    print(f"demo: video          {video}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
