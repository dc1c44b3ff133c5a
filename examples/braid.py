"""A bun and a long braid on a running head (the method paper's §7 braid).

A head bobs and turns sharply from side to side, as a runner's does, and then stops. The bun
and the braid below it are one strand, as in the paper: thick and very stiff for its first
tenth (the bun, which only bounces and twists a little), thin and supple after (the braid,
which swings out and wraps against the back). *Local Dynamics* 0.6 with the body as its
reference (the paper's hip) lets the braid feel only 60 % of the body's bobbing, so that it
swings without flying away. The braid is rendered as three interlaced tresses and the bun as
a knot, meshes skinned to the strand's baked rig; it collides with the head and the back.

Run from the repository root in the Blender venv::

    python examples/braid.py --output gallery_output

Its figures: how far the braid's tip and the bun's end moved from their places in the head's
frame while the head ran, the deepest point inside the head or the back, and whether the strand
kept its length.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import staging

HEAD = np.array([0.0, 0.0, 1.6])
HEAD_RADIUS = 0.1
# The back: a capsule round this centre, its axis vertical, this half-length and radius (m).
BACK_CENTRE, BACK_HALF, BACK_RADIUS = np.array([0.0, 0.03, 1.22]), 0.12, 0.12
ROOT = HEAD + np.array([0.0, 0.098, -0.02])  # the back of the head
LENGTH = 0.6
SEGMENTS = 30
BUN_SHARE = 0.1  # of the strand's length
TRESS_RADIUS = 0.012
COLLISION_RADIUS = 0.018


def _strand() -> np.ndarray:
    """The drawn strand: out of the back of the head and then down its back, clear of it."""
    s = np.linspace(0.0, 1.0, SEGMENTS + 1)[:, None]
    out = np.array([0.0, 1.0, 0.0])
    down = np.array([0.0, 0.35, -1.0]) / math.hypot(0.35, 1.0)
    bend = np.minimum(s / BUN_SHARE, 1.0)
    direction = (1.0 - bend) * out + bend * down
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    steps = LENGTH / SEGMENTS * direction[:-1]
    return ROOT + np.vstack(([0.0, 0.0, 0.0], np.cumsum(steps, axis=0)))


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 3.0 if quick else 6.0
    frame = staging.timeline(bpy, seconds)

    skin = staging.material(bpy, "Skin", (0.75, 0.55, 0.45), 0.45)
    cloth = staging.material(bpy, "Shirt", (0.2, 0.3, 0.45), 0.8)
    hair = staging.material(bpy, "Braid", (0.42, 0.22, 0.09), 0.4)
    ground = staging.material(bpy, "Ground", (0.4, 0.38, 0.34), 0.9)

    head = staging.placed(bpy, staging.sphere_mesh(bpy, "Head", HEAD_RADIUS), HEAD, skin, "SPHERE")
    staging.eyes(bpy, head, (0.04, -0.085, 0.02), 0.012)
    back = staging.placed(bpy, _capsule_mesh(bpy, "Back"), BACK_CENTRE, cloth, "CAPSULE")
    neck_mesh = staging.cylinder_mesh(bpy, "Neck", 0.045, 0.14)
    neck = staging.placed(bpy, neck_mesh, (0.0, 0.01, HEAD[2] - 0.1), skin)
    staging.parent_keeping_place(bpy, neck, back)
    # A runner: the body bobs at each stride and the head turns sharply from side to side and
    # nods, for 60 % of the shot; then both are still.
    strides = 5 if quick else 10
    for k in range(2 * strides + 1):
        at = 0.6 * k / (2 * strides)
        still = k == 2 * strides
        bob = np.array([0.0, 0.0, 0.0 if still else 0.04 * (k % 2)])
        turn = 0.0 if still else math.radians(25.0) * math.sin(math.pi * k / 2.5)
        nod = 0.0 if still else math.radians(8.0) * (k % 2)
        staging.keyed(back, "location", frame(at), tuple(BACK_CENTRE + bob))
        staging.keyed(head, "location", frame(at), tuple(HEAD + bob))
        staging.keyed(head, "rotation_euler", frame(at), (nod, 0.0, turn))
    braid = staging.poly_curve(bpy, "Braid", [_strand()])
    braid.data.materials.append(hair)
    scene.frame_set(1)
    staging.parent_keeping_place(bpy, braid, head)
    parameters = {
        "segment_count": SEGMENTS,
        "radius": 0.02,
        "thickness_tip": 0.45,
        "thickness_shape": 0.15,
        "density": 400.0,
        "youngs_modulus": 0.004,
        "shear_modulus": 0.002,
        "stiffness_tip": 0.03,
        "stiffness_shape": 0.3,
        "bend_damping_time": 0.02,
        "local_dynamics": 0.6,
        "air_drag": 20.0,
        "collision_radius": COLLISION_RADIUS,
    }
    # The body is the local dynamics' reference, as the paper's character's hip.
    staging.add_strand_system(bpy, braid, {**parameters, "reference_object": back})
    parameters["reference_object"] = "Back"
    bun_end = round(BUN_SHARE * SEGMENTS)

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = played["Braid"]
        local = staging.in_frame(points, matrices)
        away = np.linalg.norm(local - local[0], axis=2)
        running = slice(0, frame(0.6))
        inside_head = HEAD_RADIUS - np.linalg.norm(local, axis=2)
        # The body bobs with the head.
        centre = matrices[:, None, :3, 3] + (BACK_CENTRE - HEAD)
        nearest = centre + np.zeros_like(points)
        nearest[..., 2] += np.clip(points[..., 2] - centre[..., 2], -BACK_HALF, BACK_HALF)
        inside_back = BACK_RADIUS - np.linalg.norm(points - nearest, axis=2)
        lengths = np.linalg.norm(np.diff(points, axis=1), axis=2).sum(axis=1)
        return {
            "tip_swing_while_running_m": float(away[running, -1].max()),
            "bun_end_swing_while_running_m": float(away[running, bun_end].max()),
            "deepest_inside_head_or_back_m": float(
                max(0.0, inside_head[:, 1:].max(), inside_back[:, 1:].max())
            ),
            "length_change_share": float(np.abs(lengths / lengths[0] - 1.0).max()),
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        _tresses(bpy, bpy.data.objects["Braid_rig"], hair)

    return staging.Example(
        title="A bun and a braid: one strand, stiff then supple, on a running head",
        systems=[braid],
        camera=(1.5, 1.3, 1.45),
        target=(0.0, 0.1, 1.35),
        lens=50.0,
        ground=ground,
        stills=(frame(0.25), frame(0.45), scene.frame_end),
        parameters=parameters,
        reference=head,
        measure=measure,
        bake=("BONES",),
        dress=dress,
    )


def _capsule_mesh(bpy, name: str):
    """A capsule mesh along z: a sphere of :data:`BACK_RADIUS` whose halves are moved apart by
    twice :data:`BACK_HALF` (the *Capsule* obstacle fitted to it is the same capsule)."""
    mesh = staging.sphere_mesh(bpy, name, BACK_RADIUS)
    positions = np.empty(3 * len(mesh.vertices))
    mesh.vertices.foreach_get("co", positions)
    positions = positions.reshape(-1, 3)
    positions[:, 2] += np.sign(positions[:, 2]) * BACK_HALF
    mesh.vertices.foreach_set("co", positions.ravel())
    return mesh


def _tresses(bpy, rig, material) -> None:
    """The bun, a knot of hair round the strand's first tenth, and three tresses interlaced
    along the rest, round tubes skinned to the strand's bones (each ring to the bone it lies
    on, blended with the next across the joint)."""
    bones = [b for b in rig.data.bones]
    heads = np.array([b.head_local for b in bones])
    tails = np.array([b.tail_local for b in bones])
    pieces = np.linalg.norm(tails - heads, axis=1)
    arc = np.concatenate(([0.0], np.cumsum(pieces)))
    total = arc[-1]
    bun = BUN_SHARE * total

    def frame_at(distance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """The point on the rest strand at ``distance`` along it, its direction, a side
        vector, and the bones (name, weight) it belongs to."""
        index = int(np.clip(np.searchsorted(arc, distance, side="right") - 1, 0, len(bones) - 1))
        t = (distance - arc[index]) / pieces[index]
        tangent = (tails[index] - heads[index]) / pieces[index]
        side = np.cross(tangent, (1.0, 0.0, 0.0))
        side /= np.linalg.norm(side)
        centre = heads[index] + t * (tails[index] - heads[index])
        owners = [(bones[index].name, 1.0 - 0.5 * max(0.0, t - 0.5))]
        if t > 0.5 and index + 1 < len(bones):
            owners.append((bones[index + 1].name, 0.5 * (t - 0.5)))
        return centre, tangent, side, owners

    vertices, faces, weights = [], [], []

    def tube(path: list[tuple[np.ndarray, np.ndarray, list]], radius: np.ndarray) -> None:
        ring = 10
        for row, ((centre, normal, owners), r) in enumerate(zip(path, radius, strict=True)):
            first = len(vertices)
            helper = np.cross(normal, (0.0, 0.0, 1.0))
            if np.linalg.norm(helper) < 1e-6:
                helper = np.cross(normal, (1.0, 0.0, 0.0))
            helper /= np.linalg.norm(helper)
            other = np.cross(normal, helper)
            for k in range(ring):
                angle = 2.0 * math.pi * k / ring
                vertices.append(centre + r * (math.cos(angle) * helper + math.sin(angle) * other))
                weights.append(owners)
            if row:
                for k in range(ring):
                    a, b = first - ring + k, first - ring + (k + 1) % ring
                    faces.append((a, b, first + (k + 1) % ring, first + k))

    # Three tresses: each winds left and right across the braid's axis and in and out of it.
    rows = 12 * SEGMENTS
    distances = np.linspace(bun * 0.6, total, rows)
    pitch = 0.11  # m of braid per crossing cycle
    for tress in range(3):
        phase = 2.0 * math.pi * tress / 3.0
        path = []
        for distance in distances:
            centre, tangent, side, owners = frame_at(distance)
            depth = np.cross(tangent, side)
            angle = 2.0 * math.pi * distance / pitch + phase
            # Wider than deep, as a braid lies: each tress crosses over the middle in turn.
            across = 1.3 * math.sin(angle) * side + 0.45 * math.sin(2 * angle) * depth
            offset = TRESS_RADIUS * across
            path.append((centre + offset, tangent, owners))
        taper = TRESS_RADIUS * (1.0 - 0.45 * (distances - distances[0]) / (total - distances[0]))
        tube(path, taper)
    # The bun: a thick, short knot round the first tenth.
    knot = np.linspace(0.0, bun * 1.1, 16)
    path = [(c, n, o) for c, n, _, o in (frame_at(d) for d in knot)]
    tube(path, 0.02 + 0.035 * np.sin(np.pi * np.clip(knot / (bun * 1.1), 0.05, 0.95)))
    mesh = bpy.data.meshes.new("Tresses")
    mesh.from_pydata(np.array(vertices).tolist(), [], faces)
    mesh.materials.append(material)
    mesh.shade_smooth()
    tresses = staging.skinned(bpy, mesh, [dict(owners) for owners in weights], rig)
    tresses.modifiers.new("Smooth", "SUBSURF").levels = 1


if __name__ == "__main__":
    staging.run_example("braid", build, sys.argv[1:])
