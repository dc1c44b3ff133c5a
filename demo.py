"""The built-in example, a shot: a bust with a head of hair and a ponytail, and a tree in gusts.

Run with ``make demo`` (or ``python -m oriented_strands.demo --output DIR`` in the Blender venv).
It builds the scene from code (no binary assets) and works the way an artist does:

- a bust: a head and shoulders on an armature that turns the head, nods and shrugs (the
  shoulders deform with it and are an obstacle read at every frame, the head a sphere);
- a bob of guide hair grown on the head (Blender's *Empty Hair* on it), simulated with
  collisions and strand interaction, and render hair grown around the guides by Blender's own
  *Interpolate Hair Curves* (*Add Child Hair*), shaded with the Principled Hair BSDF;
- a ponytail tied at the back of the head, its own strand system;
- a branched tree beside the bust, shaken by a gusty wind field, baked to bones that carry its
  leaves;
- three-point lighting, a ground, a camera.

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

from . import staging

HEAD_CENTRE = np.array([0.0, 0.0, 1.62])
HEAD_RADIUS = 0.1
FPS = 24


@dataclass(frozen=True)
class Size:
    """How much the demo makes: frames, hair guides, render hairs per guide, render settings."""

    frames: int
    guides: int
    children_per_guide: float
    ponytail: int
    leaves: int
    samples: int
    still: tuple[int, int]
    video: tuple[int, int]


FULL = Size(72, 1000, 20.0, 40, 200, 24, (1280, 720), (480, 270))
QUICK = Size(12, 60, 4.0, 8, 24, 2, (160, 90), (96, 54))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m oriented_strands.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--output", type=Path, default=Path("demo_output"), help="folder for the results"
    )
    parser.add_argument("--quick", action="store_true", help="a reduced run (tests)")
    return parser.parse_args(argv)


def _rig(bpy, frames: int):
    """An armature: a neck, the head on it, and two shoulders. The head turns left and right
    and nods, the shoulders shrug once, all keyed every half second after a still second."""
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
        shoulder.head, shoulder.tail = (0.03 * x, 0.0, 1.38), (0.2 * x, 0.0, 1.36)
        shoulder.parent = neck
    bpy.ops.object.mode_set(mode="OBJECT")
    pose = rig.pose.bones
    for bone in pose:
        bone.rotation_mode = "XYZ"
    for frame in range(1, frames + 1, 12):
        seconds = (frame - 1) / FPS
        moving = min(1.0, max(0.0, seconds - 0.5))
        pose["head"].rotation_euler = (
            0.18 * moving * math.sin(2.0 * math.pi * seconds),
            0.0,
            0.7 * moving * math.sin(math.pi * seconds),
        )
        pose["head"].keyframe_insert("rotation_euler", frame=frame)
        shrug = 0.22 * math.sin(math.pi * min(1.0, max(0.0, seconds - 1.0)))
        for side, x in (("L", 1.0), ("R", -1.0)):
            pose[f"shoulder.{side}"].rotation_euler = (0.0, x * shrug, 0.0)
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


def _bust(bpy, rig, skin, plinth):
    """The head, parented to the head bone, and the shoulders, deformed by the shoulder bones,
    on a stand; both collide with the hair (the head as a sphere, the shoulders as a deforming
    mesh)."""
    head_mesh = staging.sphere_mesh(bpy, "Head", HEAD_RADIUS)
    head = staging.placed(bpy, head_mesh, HEAD_CENTRE, skin, "SPHERE")
    _on_bone(head, rig, "head")
    neck_mesh = staging.cylinder_mesh(bpy, "Neck", 0.045, 0.22)
    _on_bone(staging.placed(bpy, neck_mesh, (0.0, 0.0, 1.45), skin), rig, "neck")
    body_mesh = staging.sphere_mesh(bpy, "Shoulders", 1.0, (0.24, 0.12, 0.15))
    body = staging.placed(bpy, body_mesh, (0.0, 0.0, 1.26), skin, "MESH")
    body.parent = rig
    coordinates = np.array([v.co for v in body.data.vertices])
    # The shoulders, not the chest below them, go up with a shrug.
    upper = np.clip((coordinates[:, 2] + 0.02) / 0.1, 0.0, 1.0)
    for side, x in (("L", 1.0), ("R", -1.0)):
        group = body.vertex_groups.new(name=f"shoulder.{side}")
        reach = upper * np.clip(x * coordinates[:, 0] / 0.12, 0.0, 1.0)
        for index in np.nonzero(reach)[0]:
            group.add([int(index)], float(reach[index]), "REPLACE")
    neck = body.vertex_groups.new(name="neck")
    share = 1.0 - upper * np.clip(np.abs(coordinates[:, 0]) / 0.12, 0.0, 1.0)
    for index in np.nonzero(share)[0]:
        neck.add([int(index)], float(share[index]), "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = rig
    staging.placed(bpy, staging.cylinder_mesh(bpy, "Stand", 0.07, 1.2), (0.0, 0.0, 0.6), plinth)
    return head, body


def _bob(points: int, polar: np.ndarray, azimuth: np.ndarray) -> list[np.ndarray]:
    """A bob, in the head's space: each guide leaves its root along the scalp down its
    meridian, lifted 6 mm off the head, then falls straight down, 20 cm in all."""
    length, lift = 0.2, 0.006
    guides = []
    for theta0, phi in zip(polar, azimuth, strict=True):
        s = np.linspace(0.0, length, points)
        radius = HEAD_RADIUS + lift * np.minimum(s / 0.02, 1.0)
        theta = np.minimum(theta0 + s / (HEAD_RADIUS + lift), math.radians(100.0))
        over = s - (theta - theta0) * (HEAD_RADIUS + lift)
        guide = np.stack(
            (
                radius * np.sin(theta) * math.cos(phi),
                radius * np.sin(theta) * math.sin(phi),
                radius * np.cos(theta) - over,
            ),
            axis=1,
        )
        guides.append(guide)
    return guides


def _hair(bpy, head, size: Size, material):
    """Guide hair grown on the head the way an artist starts it (Empty Hair on the head)."""
    guides = _bob(9, *staging.scalp_roots(size.guides))
    return staging.empty_hair(bpy, head, "Hair", guides, material)


def _ponytail(bpy, head, strands: int, material):
    """A ponytail tied at the back of the head: strands from a small disc, down its back."""
    rng = np.random.default_rng(5)
    tie = HEAD_CENTRE + np.array([0.0, 0.104, 0.02])
    splines = []
    for _ in range(strands):
        offset = rng.normal(0.0, 0.006, 3) * (1.0, 0.3, 1.0)
        direction = np.array([rng.normal(0.0, 0.08), 0.45, -1.0])
        along = np.linspace(0.0, 0.34, 12)[:, None]
        splines.append(tie + offset + along * direction / np.linalg.norm(direction))
    ponytail = staging.poly_curve(bpy, "Ponytail", splines)
    ponytail.data.materials.append(material)
    ponytail.parent = head
    ponytail.matrix_parent_inverse = head.matrix_world.inverted()
    return ponytail


def _tree(bpy, bark):
    """A trunk with two branches and a twig, each rooted on its parent's curve."""
    trunk = np.array([[0.85, 0.4, 0.0], [0.85, 0.4, 0.6], [0.88, 0.4, 1.2], [0.9, 0.4, 1.6]])
    left = np.array([trunk[1] + 0.6 * (trunk[2] - trunk[1]), [0.65, 0.45, 1.05], [0.5, 0.5, 1.3]])
    right = np.array([trunk[2], [1.1, 0.35, 1.4], [1.25, 0.3, 1.6]])
    twig = np.array([right[1], [1.15, 0.5, 1.62]])
    tree = staging.poly_curve(bpy, "Tree", [trunk, left, right, twig])
    tree.data.materials.append(bark)
    return tree


def _gusts(bpy):
    """A wind field blowing across the tree (and lightly through the hair), with gusts."""
    bpy.ops.object.effector_add(
        type="WIND",
        location=(1.6, -0.4, 1.2),
        rotation=(0.0, math.radians(-80.0), math.radians(-20.0)),
    )
    wind = bpy.context.active_object
    wind.name = "Gusts"
    wind.field.strength = 4.0
    wind.field.noise = 0.6
    # Blender seeds a new field's noise from the clock: fix it, so every run blows alike.
    wind.field.seed = 7
    return wind


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
        materials = {
            "skin": staging.material(bpy, "Skin", (0.8, 0.6, 0.5), 0.45),
            "hair": staging.hair_material(bpy),
            "bark": staging.material(bpy, "Bark", (0.25, 0.17, 0.1), 0.8),
            "leaf": staging.material(bpy, "Leaf", (0.12, 0.32, 0.07), 0.6),
            "ground": staging.material(bpy, "Ground", (0.35, 0.35, 0.33), 0.9),
            "stand": staging.material(bpy, "Stand", (0.08, 0.08, 0.09), 0.4),
        }
        rig = _rig(bpy, size.frames)
        head, _body = _bust(bpy, rig, materials["skin"], materials["stand"])
        scene.frame_set(1)
        hair = _hair(bpy, head, size, materials["hair"])
        ponytail = _ponytail(bpy, head, size.ponytail, materials["hair"])
        tree = _tree(bpy, materials["bark"])
        _gusts(bpy)
        systems = [hair, ponytail, tree]
        for ob in bpy.context.view_layer.objects:
            ob.select_set(ob in systems)
        bpy.context.view_layer.objects.active = hair
        if bpy.ops.oriented_strands.add_strand_system() != {"FINISHED"}:
            print("demo: Add Strand System failed", file=sys.stderr)
            return 1
        with oriented_strands.scene.settings_changed_together(scene, bpy.context.view_layer):
            props = hair.oriented_strands
            props.segment_count = 8
            props.collision_radius = 0.0015
            props.use_interaction = True
            props.field_weight = 0.15
            props = ponytail.oriented_strands
            props.segment_count = 14
            props.collision_radius = 0.004
            props.field_weight = 0.15
            props = tree.oriented_strands
            props.segment_count = 6
            props.radius = 0.012
            props.thickness_tip = 0.5  # branches go on thinning from where they grow
            props.youngs_modulus = 1.5  # GPa: green wood
            props.density = 600.0
            props.air_drag = 600.0  # mN·s/m², leaves included
            props.use_collisions = False
        staging.child_hair(bpy, hair, size.children_per_guide)
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
        tree_rig = bpy.data.objects["Tree_rig"]
        # Along the tree's upper branches.
        upper = [b for b in tree_rig.data.bones if max(b.head_local[2], b.tail_local[2]) > 1.0]
        staging.leaves(bpy, tree_rig, upper, size.leaves, materials["leaf"])
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

        staging.stage(
            bpy,
            camera=(0.48, -2.9, 1.27),
            target=(0.48, 0.0, 1.2194),
            lens=50.0,
            samples=size.samples,
            resolution=size.still,
            ground=materials["ground"],
            lights=[
                ("Key", 220.0, (-1.2, -1.4, 2.5), (50.0, 0.0, -40.0)),
                ("Fill", 60.0, (1.8, -1.6, 1.6), (70.0, 0.0, 50.0)),
                ("Rim", 160.0, (0.3, 1.6, 2.4), (-55.0, 0.0, 10.0)),
            ],
        )
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
