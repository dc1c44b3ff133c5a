"""The built-in example: a ponytail colliding with a turning head and a branched tree in wind.

Run with ``make demo`` (or ``python -m oriented_strands.demo --output DIR`` in the Blender venv).
It builds the scene from code (no binary assets), adds strand systems the way an artist does
(select curves, Add Strand System), plays the timeline so the live preview simulates every
frame, bakes both systems to shape keys, bones and hair curves, and writes:

- ``demo.blend``: the scene, with the artist's curves, the simulated preview objects and the
  baked objects (``<name>_shape_keys``, ``<name>_rig``, ``<name>_baked_hair``);
- ``strands_cache/<name>.npy``: the hair-curve caches the baked hair objects play;
- ``hair.abc``, ``shape_keys.abc``: the bakes exported as Alembic, one sample per frame;
- ``strands.npz``: the simulated points of every frame (``<object>``: frames x points x 3);
- ``preview_####.png``: a few frames rendered with Cycles on the CPU.

``--small`` makes a reduced run for the test-suite (fewer frames, strands and samples).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m oriented_strands.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--output", type=Path, default=Path("demo_output"), help="folder for the results"
    )
    parser.add_argument("--small", action="store_true", help="a reduced run (tests)")
    return parser.parse_args(argv)


def _link(bpy, ob):
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _poly_curve(bpy, name: str, splines: list[np.ndarray]):
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    for points in splines:
        spline = curve.splines.new("POLY")
        spline.points.add(len(points) - 1)
        spline.points.foreach_set("co", np.hstack([points, np.ones((len(points), 1))]).ravel())
    return _link(bpy, bpy.data.objects.new(name, curve))


def _head(bpy, frames: int):
    """A head proxy that turns left and right and nods, keyed once per second."""
    mesh = bpy.data.meshes.new("Head")
    import bmesh

    shape = bmesh.new()
    bmesh.ops.create_uvsphere(shape, u_segments=24, v_segments=12, radius=0.1)
    shape.to_mesh(mesh)
    shape.free()
    head = _link(bpy, bpy.data.objects.new("Head", mesh))
    head.location = (0.0, 0.0, 1.6)
    for frame in range(1, frames + 1, 12):
        phase = (frame - 1) / 24.0
        head.rotation_euler = (
            0.15 * math.sin(2 * math.pi * phase),
            0.0,
            0.9 * math.sin(math.pi * phase),
        )
        head.keyframe_insert("rotation_euler", frame=frame)
    return head


def _ponytail(bpy, head, strands: int):
    """Strands from the back of the head, hanging down and back; parented to the head."""
    splines = []
    for k in range(strands):
        angle = math.pi * (0.35 + 0.3 * k / max(strands - 1, 1))
        root = np.array([0.1 * math.cos(angle), -0.1 * math.sin(angle) * 0.2 - 0.09, 0.02])
        direction = np.array([0.2 * math.cos(angle), -0.35, -1.0])
        splines.append(
            root + np.linspace(0.0, 0.35, 8)[:, None] * direction / np.linalg.norm(direction)
        )
    ponytail = _poly_curve(bpy, "Ponytail", splines)
    ponytail.parent = head
    return ponytail


def _tree(bpy):
    """A trunk with two branches and a twig, each branch rooted on its parent's curve."""
    trunk = np.array([[0.8, 0.0, 0.0], [0.8, 0.0, 0.5], [0.82, 0.0, 1.0], [0.83, 0.0, 1.3]])
    left = np.array([trunk[1] + 0.5 * (trunk[2] - trunk[1]), [0.6, 0.05, 0.95], [0.45, 0.1, 1.1]])
    right = np.array([trunk[2], [1.05, -0.05, 1.2], [1.2, -0.1, 1.35]])
    twig = np.array([right[1], [1.1, 0.1, 1.35]])
    return _poly_curve(bpy, "Tree", [trunk, left, right, twig])


def _stage(bpy, output: Path, small: bool) -> None:
    """Camera, light and Cycles settings for a small preview render."""
    scene = bpy.context.scene
    camera = _link(bpy, bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera")))
    camera.location = (0.6, -2.6, 1.3)
    camera.rotation_euler = (math.radians(85), 0.0, math.radians(10))
    scene.camera = camera
    sun = _link(bpy, bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN")))
    sun.rotation_euler = (math.radians(40), 0.0, math.radians(30))
    sun.data.energy = 4.0
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = 4 if small else 16
    scene.render.resolution_x, scene.render.resolution_y = (160, 120) if small else (480, 360)
    scene.render.filepath = str(output / "preview_")


def main(argv: list[str] | None = None) -> int:
    """Build, simulate, save and render the example; print where everything is."""
    arguments = _parse(argv)
    # Blender keeps its configuration where this points; never touch the user's real one.
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="oriented-strands-"))
    import bpy

    import oriented_strands

    output = arguments.output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    frames = 24 if arguments.small else 72
    bpy.ops.wm.read_factory_settings(use_empty=True)
    oriented_strands.register()
    try:
        scene = bpy.context.scene
        scene.render.fps = 24
        scene.frame_start, scene.frame_end = 1, frames
        head = _head(bpy, frames)
        ponytail = _ponytail(bpy, head, 4 if arguments.small else 12)
        tree = _tree(bpy)
        # The hair collides with the head as a ball (read when the systems are added).
        head.oriented_strands_obstacle.use_obstacle = True
        head.oriented_strands_obstacle.shape = "SPHERE"
        head.select_set(False)
        ponytail.select_set(True)
        tree.select_set(True)
        bpy.context.view_layer.objects.active = ponytail
        if bpy.ops.oriented_strands.add_strand_system() != {"FINISHED"}:
            print("demo: Add Strand System failed", file=sys.stderr)
            return 1
        ponytail.oriented_strands.segment_count = 12 if arguments.small else 24
        ponytail.oriented_strands.collision_radius = 0.004
        tree.oriented_strands.segment_count = 6
        tree.oriented_strands.radius = 0.008
        tree.oriented_strands.youngs_modulus = 2.0  # GPa: green wood
        tree.oriented_strands.density = 600.0
        tree.oriented_strands.air_drag = 400.0  # mN·s/m², leaves included
        tree.oriented_strands.wind_velocity = (3.0, 0.5, 0.0)

        simulated = {ob.name: [] for ob in (ponytail, tree)}
        for frame in range(1, frames + 1):
            scene.frame_set(frame)
            for ob in (ponytail, tree):
                preview = ob.oriented_strands.preview_object
                positions = np.empty(len(preview.data.points) * 3, dtype=np.float32)
                preview.data.attributes["position"].data.foreach_get("vector", positions)
                simulated[ob.name].append(positions.reshape(-1, 3))
        np.savez_compressed(
            output / "strands.npz", **{name: np.stack(v) for name, v in simulated.items()}
        )

        blend = output / "demo.blend"
        # Saved first: hair-curve caches are written next to the .blend file.
        bpy.ops.wm.save_as_mainfile(filepath=str(blend))
        systems = [ponytail, tree]
        baked = oriented_strands.scene.bake_systems(
            scene, bpy.context.view_layer, systems, ["SHAPE_KEYS", "BONES", "HAIR"]
        )
        alembic = {target: output / f"{target.lower()}.abc" for target in ("HAIR", "SHAPE_KEYS")}
        for target, path in alembic.items():
            oriented_strands.scene.export_alembic(
                scene, bpy.context.view_layer, systems, target, str(path)
            )
        baked_names = [ob.name for ob in baked]
        _stage(bpy, output, arguments.small)
        bpy.ops.wm.save_mainfile()
        rendered = []
        for frame in (1, frames // 2, frames):
            scene.frame_set(frame)
            scene.render.filepath = str(output / f"preview_{frame:04d}.png")
            bpy.ops.render.render(write_still=True)
            rendered.append(scene.render.filepath)
    finally:
        oriented_strands.unregister()

    moved = {name: float(np.abs(np.stack(v) - v[0]).max()) for name, v in simulated.items()}
    print(f"demo: simulated {frames} frames at 24 fps")
    for name, distance in moved.items():
        print(f"demo:   {name}: points moved up to {distance:.3f} m from frame 1")
    print(f"demo: scene          {blend}")
    print(f"demo: baked objects  {', '.join(baked_names)} (in the scene)")
    print(f"demo: hair caches    {output / 'strands_cache'}")
    for path in alembic.values():
        print(f"demo: alembic        {path}")
    print(f"demo: point caches   {output / 'strands.npz'}")
    for path in rendered:
        print(f"demo: render         {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
