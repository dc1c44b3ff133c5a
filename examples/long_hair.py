"""Long hair on a fast-turning head, with collisions and strand interaction (the method
paper's §7 long hair).

Long guide hair grown on a head (Blender's *Empty Hair*) falls over the head, neck and
shoulders. After a still half second the head whips round to one side and back at up to
about 400°/s and nods; the strands feel the head's exact acceleration, collide with the head
(a sphere) and the neck and shoulders (a mesh), and push apart where they crowd
(*Interaction*). Render hair is grown around the guides by Blender's own hair nodes
(*Add Child Hair*).

Run from the repository root in the Blender venv::

    python examples/long_hair.py --output gallery_output

Its figures: the deepest point inside the head and inside the body, as a share of the collision
radius; how far the tips swung in the head's frame.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import bust, staging

HEAD = np.array([0.0, 0.0, 1.55])
HEAD_RADIUS = bust.HEAD_RADIUS
HAIR_LENGTH = 0.42
COLLISION_RADIUS = 0.002
DRAWN_POINTS = 64


def _guides(count: int, points: int) -> list[np.ndarray]:
    """Long hair in the head's space, combed back: each guide leaves its root along the scalp
    down its meridian (over the top to the back for a root on the front of the crown), lifted
    8 mm off the head, to 100° from the top, then falls straight down, outside the neck and
    shoulders."""
    polar, azimuth = staging.scalp_roots(2 * count)
    # No root low on the front third of the head, whose hair would fall over the face.
    from_front = np.abs((azimuth + 0.5 * math.pi + math.pi) % (2.0 * math.pi) - math.pi)
    front = from_front < math.radians(65.0)
    kept = np.nonzero(~front | (polar < math.radians(25.0)))[0]
    chosen = kept[np.linspace(0, len(kept) - 1, count).round().astype(int)]
    lift = 0.008
    guides = []
    for theta0, phi, back in zip(polar[chosen], azimuth[chosen], front[chosen], strict=True):
        # The path's own angle from the top, growing along it; on the front of the crown it
        # starts at -theta0 and crosses the top to the back.
        sign = -1.0 if back else 1.0
        s = np.linspace(0.0, HAIR_LENGTH, points)
        radius = HEAD_RADIUS + lift * np.minimum(s / 0.02, 1.0)
        travelled = np.minimum(sign * theta0 + s / (HEAD_RADIUS + lift), math.radians(100.0))
        over = s - (travelled - sign * theta0) * (HEAD_RADIUS + lift)
        # Below the head the hair falls a little outward, over the shoulders.
        outward = 0.08 * np.maximum(over, 0.0)
        across = sign * (radius * np.sin(travelled) + outward)
        guide = np.stack(
            (across * math.cos(phi), across * math.sin(phi), radius * np.cos(travelled) - over),
            axis=1,
        )
        # Out of the neck and shoulders, 1 cm off them across (on the slope of the shoulders,
        # a few millimetres along their normal).
        guides.append(bust.outside_bust(guide + bust.HEAD_CENTRE, 0.01) - bust.HEAD_CENTRE)
    return guides


def _clearance(bpy, body, points: np.ndarray) -> float:
    """The smallest signed distance (m; negative inside) from ``points`` (..., 3), world, to the
    still ``body``'s surface, as Blender's BVH tree measures it."""
    from mathutils import Vector
    from mathutils.bvhtree import BVHTree

    tree = BVHTree.FromObject(body, bpy.context.evaluated_depsgraph_get())
    inverse = body.matrix_world.inverted()
    closest = np.inf
    for point in points.reshape(-1, 3):
        local = inverse @ Vector(point)
        nearest, normal, _, distance = tree.find_nearest(local)
        closest = min(closest, distance if (local - nearest).dot(normal) >= 0.0 else -distance)
    return float(closest)


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 1.5 if quick else 4.0
    frame = staging.timeline(bpy, seconds)

    guides, points = (40, 9) if quick else (300, 13)
    skin = staging.material(bpy, "Skin", (0.8, 0.6, 0.5), 0.45)
    hair_material = staging.hair_material(bpy, "Hair", melanin=0.55, redness=0.6)
    ground = staging.material(bpy, "Ground", (0.35, 0.35, 0.33), 0.9)

    # The hair grows on, and collides with, the scalp (a ball hidden in renders); the sculpted
    # head turns with it.
    head = staging.placed(bpy, staging.sphere_mesh(bpy, "Scalp", HEAD_RADIUS), HEAD, skin, "SPHERE")
    head.hide_render = True
    face = staging.placed(bpy, bust.head_mesh(bpy), HEAD, skin)
    staging.parent_keeping_place(bpy, face, head)
    # The neck, shoulders and chest are a mesh obstacle, still, its distance grid of 5 mm cells
    # (*Cell Size*; the default, a 48th of its size, 1 cm here, rounds the shoulders' edges
    # into the hair's 2 mm collision radius: a third of it against a sixth, measured).
    body = staging.placed(bpy, bust.torso_mesh(bpy), HEAD - bust.HEAD_CENTRE, skin, "MESH")
    body.oriented_strands_obstacle.cell_size = 0.005

    # Still for half a second, then a whip to the left and back, a nod, still from 2.2 s.
    moves = ((0.5, 0.0, 0.0), (0.8, 0.0, 80.0), (1.1, 0.0, 80.0), (1.45, 0.0, -20.0))
    moves += ((1.8, 18.0, 0.0), (2.2, 0.0, 0.0))
    staging.keyed(head, "rotation_euler", 1, (0.0, 0.0, 0.0))
    for at, nod, turn in moves:
        if at <= seconds:
            pose = (math.radians(nod), 0.0, math.radians(turn))
            staging.keyed(head, "rotation_euler", frame(at / seconds), pose)

    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob is head)
    bpy.context.view_layer.objects.active = head
    scene.frame_set(1)
    bpy.ops.object.curves_empty_hair_add()
    hair = bpy.context.active_object
    hair.name = hair.data.name = "Hair"
    # Drawn finely, so that the strands resampled to their segments start outside the
    # shoulders, not on chords cutting across them.
    drawn = _guides(guides, DRAWN_POINTS)
    hair.data.add_curves([len(g) for g in drawn])
    hair.data.attributes["position"].data.foreach_set(
        "vector", np.concatenate(drawn).astype(np.float32).ravel()
    )
    hair.data.materials.append(hair_material)
    parameters = {
        "segment_count": points - 1,
        "collision_radius": COLLISION_RADIUS,
        "use_interaction": True,
        "youngs_modulus": 0.5,
    }
    staging.add_strand_system(bpy, hair, parameters)
    staging.child_hair(bpy, hair, 2.0 if quick else 50.0)
    parameters["children per guide"] = 2 if quick else 50

    def measure(played: dict, matrices: np.ndarray) -> dict:
        where = played["Hair"]
        local = staging.in_frame(where, matrices)
        rooted = np.ones(where.shape[1], dtype=bool)
        rooted[::points] = False
        rooted[1::points] = False
        inside = HEAD_RADIUS - np.linalg.norm(local[:, rooted], axis=2)
        tips = local[:, points - 1 :: points]
        still = tips[frame(0.5 / seconds) - 1]  # where the tips hang when the head starts
        return {
            "deepest_in_head_share_of_radius": float(
                max(0.0, (inside + COLLISION_RADIUS).max()) / COLLISION_RADIUS
            ),
            "deepest_in_body_share_of_radius": float(
                max(0.0, COLLISION_RADIUS - _clearance(bpy, body, where[:, rooted]))
                / COLLISION_RADIUS
            ),
            "tip_swing_m": float(np.linalg.norm(tips - still, axis=2).max()),
            "finite": float(np.isfinite(where).all()),
        }

    return staging.Example(
        title="Long hair: collisions and strand interaction on a fast-turning head",
        systems=[hair],
        camera=(1.25, -1.35, 1.62),
        target=(0.0, 0.0, 1.38),
        lens=50.0,
        ground=ground,
        stills=tuple(frame(at / seconds) for at in (0.5, 1.0, 1.5)),
        parameters=parameters,
        reference=head,
        measure=measure,
    )


if __name__ == "__main__":
    staging.run_example("long_hair", build, sys.argv[1:])
