"""Rabbit ears with posable dynamics (the method paper's §7 ears).

A rabbit's head hops and turns; its two ears are strands that keep their drawn, upright shape
under gravity (*Rest Shape: Hold Drawn Shape*) and follow an animated pose (*Pose*: a copy of
the ears whose shape key folds them forward and down), swinging with the hops and flopping with
the fold, then standing up again once the head is still.

Run from the repository root in the Blender venv::

    python examples/rabbit_ears.py --output gallery_output

It prints the counts, the seconds per frame and its figures: how far the tips swung from the
pose while the head hopped, how far down the fold took them, and how far from their drawn
place (in the head's frame, where they stood at the first frame) they stand at the end.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import staging

HEAD = np.array([0.0, 0.0, 0.62])
HEAD_RADIUS = 0.1
EAR_POINTS = 10
EAR_LENGTH = 0.22  # m
NOSE = np.array([0.0, -0.134, -0.018])  # from the head's centre, m


def _head_mesh(bpy):
    """A rabbit's head about its centre: a ball drawn forward (-y) into a muzzle, with full
    cheeks low on its sides and a rounder, narrower crown where the ears stand."""
    mesh = staging.sphere_mesh(bpy, "Head", 1.0, rings=64)
    unit = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", unit)
    x, y, z = unit.reshape(-1, 3).T
    front = np.clip(-y, 0.0, 1.0) ** 2
    low = np.clip(-z + 0.2, 0.0, 1.0)
    x = 0.088 * x * (1.0 + 0.18 * low - 0.25 * front)
    z = 0.09 * z * (1.0 - 0.2 * front)
    y = 0.1 * y - 0.035 * front * np.exp(-(((z + 0.02) / 0.05) ** 2))
    mesh.vertices.foreach_set("co", np.stack((x, y, z), axis=1).ravel())
    mesh.update()
    return mesh


def _ears() -> list[np.ndarray]:
    """Two ears from the top of the head, 22 cm, splayed and leaning back a little."""
    ears = []
    for side in (-1.0, 1.0):
        root = HEAD + np.array([0.035 * side, 0.01, 0.093])
        direction = np.array([0.28 * side, 0.18, 1.0])
        direction /= np.linalg.norm(direction)
        along = np.linspace(0.0, EAR_LENGTH, EAR_POINTS)[:, None]
        # A slight forward curve, as ears have.
        bow = np.array([0.0, -1.0, 0.0]) * (0.05 * (along / EAR_LENGTH) ** 2)
        ears.append(root + along * direction + bow)
    return ears


def _folded(ears: list[np.ndarray]) -> list[np.ndarray]:
    """The ears folded forward and down from a third of their length (the pose's shape key)."""
    folded = []
    for ear in ears:
        hinge = ear[3]
        turned = ear.copy()
        angle = math.radians(-110.0)  # about x: the tip goes forward (-y) and down
        rotation = np.array(
            [
                [1.0, 0.0, 0.0],
                [0.0, math.cos(angle), -math.sin(angle)],
                [0.0, math.sin(angle), math.cos(angle)],
            ]
        )
        turned[3:] = (ear[3:] - hinge) @ rotation.T + hinge
        folded.append(turned)
    return folded


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 2.0 if quick else 4.0
    frame = staging.timeline(bpy, seconds)

    fur = staging.material(bpy, "Fur", (0.5, 0.35, 0.22), 0.8)
    inner = staging.material(bpy, "Ear", (0.6, 0.4, 0.38), 0.6)
    ground = staging.material(bpy, "Ground", (0.3, 0.38, 0.24), 0.9)

    head = staging.placed(bpy, _head_mesh(bpy), HEAD, fur)
    body_mesh = staging.sphere_mesh(bpy, "Body", 1.0, (0.16, 0.2, 0.2))
    staging.placed(bpy, body_mesh, (0.0, 0.08, 0.36), fur)
    staging.eyes(bpy, head, (0.066, -0.045, 0.028), 0.015)
    nose = staging.placed(bpy, staging.sphere_mesh(bpy, "Nose", 0.011), HEAD + NOSE, inner)
    staging.parent_keeping_place(bpy, nose, head)
    # Hops while turning, in the first 40 % of the shot; still from then on.
    # A hop every 0.2 to 0.25 s.
    hops = 3 if quick else 7
    for k in range(2 * hops + 1):
        at = 0.4 * k / (2 * hops)
        up = 0.07 if k % 2 else 0.0
        staging.keyed(head, "location", frame(at), tuple(HEAD + np.array([0.0, 0.0, up])))
        turn = math.radians(25.0) * math.sin(math.pi * k / hops) if k < 2 * hops else 0.0
        staging.keyed(head, "rotation_euler", frame(at), (0.0, 0.0, turn))

    ears = staging.poly_curve(bpy, "Ears", _ears())
    ears.data.materials.append(inner)
    pose = staging.poly_curve(bpy, "Ears pose", _ears())
    pose.hide_render = True
    pose.shape_key_add(name="Basis")
    fold = pose.shape_key_add(name="Fold")
    fold.data.foreach_set("co", np.concatenate(_folded(_ears())).ravel())
    # Folded between 45 % and 70 % of the shot, upright again after.
    for at, value in ((0.45, 0.0), (0.52, 1.0), (0.63, 1.0), (0.7, 0.0)):
        fold.value = value
        fold.keyframe_insert("value", frame=frame(at))
    scene.frame_set(1)
    for ob in (ears, pose):
        staging.parent_keeping_place(bpy, ob, head)
    parameters = {
        "segment_count": 9,
        "radius": 0.012,
        "thickness_tip": 0.35,
        "density": 1100.0,
        "youngs_modulus": 0.0005,
        "rest_shape": "HOLD_UNDER_GRAVITY",
        "pose_strength": 3.0,
        "pose_damping_time": 0.02,
        "use_collisions": False,
    }
    staging.add_strand_system(bpy, ears, {**parameters, "pose_object": pose})
    parameters["pose_object"] = "Ears pose (shape key Fold)"

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = played["Ears"]
        tips = points[:, [EAR_POINTS - 1, 2 * EAR_POINTS - 1]]
        # The tips in the head's frame, against where they start.
        local = staging.in_frame(tips, matrices)
        drawn = local[0]
        away = np.linalg.norm(local - drawn, axis=2).max(axis=1)
        hopping = slice(0, frame(0.45) - 1)
        folded = slice(frame(0.55) - 1, frame(0.63) - 1)
        return {
            "tip_swing_while_hopping_m": float(away[hopping].max()),
            "tip_drop_when_folded_m": float((drawn[:, 2] - local[folded, :, 2]).min(axis=1).max()),
            "tip_offset_at_end_m": float(away[-1]),
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        _ear_meshes(bpy, bpy.data.objects["Ears_rig"], inner)

    return staging.Example(
        title="Rabbit ears: posable dynamics on a hopping head",
        systems=[ears],
        camera=(0.7, -1.05, 0.9),
        target=(0.0, 0.0, 0.66),
        lens=40.0,
        ground=ground,
        stills=(frame(0.13), frame(0.55), scene.frame_end),
        parameters=parameters,
        reference=head,
        measure=measure,
        bake=("BONES",),
        dress=dress,
    )


def _ear_meshes(bpy, rig, material) -> None:
    """Flat, cupped ears along the baked bones of each strand, skinned to them: a row of three
    vertices (edge, middle pushed back into a cup, edge) at every joint and at the tip, widest
    a third of the way up."""
    bones = list(rig.data.bones)
    vertices, faces, owners = [], [], []
    for ear in range(2):
        chain = [b for b in bones if b.name.split(".")[-2] == f"{ear:03d}"]
        centres = [np.array(b.head_local) for b in chain] + [np.array(chain[-1].tail_local)]
        for row, centre in enumerate(centres):
            t = row / (len(centres) - 1)
            axis = np.array(chain[min(row, len(chain) - 1)].vector)
            axis /= np.linalg.norm(axis)
            side = np.cross(axis, (0.0, -1.0, 0.0))
            side /= np.linalg.norm(side)
            back = np.cross(side, axis)
            width = 0.005 + 0.04 * math.sin(math.pi * min(1.0, 0.25 + 0.9 * t)) ** 0.8
            first = len(vertices)
            for across, depth in ((-1.0, 0.0), (0.0, 0.35), (1.0, 0.0)):
                vertices.append(centre + width * (across * side - depth * back))
                owners.append(chain[min(row, len(chain) - 1)].name)
            if row:
                previous = first - 3
                faces.append((previous, previous + 1, first + 1, first))
                faces.append((previous + 1, previous + 2, first + 2, first + 1))
    mesh = bpy.data.meshes.new("Ear skin")
    mesh.from_pydata(np.array(vertices).tolist(), [], faces)
    mesh.materials.append(material)
    mesh.shade_smooth()
    skin = staging.skinned(bpy, mesh, [{name: 1.0} for name in owners], rig)
    skin.modifiers.new("Thickness", "SOLIDIFY").thickness = 0.004
    skin.modifiers.new("Smooth", "SUBSURF").levels = 2


if __name__ == "__main__":
    staging.run_example("rabbit_ears", build, sys.argv[1:])
