"""Curly bangs: a curly rest shape held under gravity (the method paper's §7 curls).

Eighty curls hang round the face of a head that is still for a second, shakes and nods, and
is still again. The curls are drawn as helices, grown on the head as hair (*Empty Hair*); *Rest
Shape: Hold Drawn Shape* makes the drawn curls the shape they keep under gravity (the
zero-gravity rest shape), so they neither sag straight nor drift while the head is still, and
spring back after it moves. They collide with the head. Each simulated curl renders as a ringlet
of sixty thin hairs (*Add Child Hair*, each child following its nearest curl only, grown within
4 mm of it).

Run from the repository root in the Blender venv::

    python examples/curly_bangs.py --output gallery_output

Its figures: how far any point moved from its place at the first frame (in the head's frame)
while the head was still at the start, as a share of the front curls' mean length (the
shortest); how far the curls swung while the head moved; where they are at the end; the deepest
point inside the head.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import bust, staging

HEAD = np.array([0.0, 0.0, 1.5])
HEAD_RADIUS = bust.HEAD_RADIUS
CURL_POINTS = 33
# m, down the curl's axis, on average: short over the forehead, longest at the sides.
CURL_LENGTH_FRONT, CURL_LENGTH_SIDE = 0.06, 0.14
TURNS = 3.0
CURL_RADIUS = 0.012
RINGLET_RADIUS = 0.004  # m, how far from its curl's root a render hair grows
SPREAD = 100.0  # degrees either side of the front along the hairline
# The curls' axes below their first 2.5 cm: down, and outward from the head by this much.
SPLAY = 0.5


def _roots(count: int) -> np.ndarray:
    """Roots along the hairline: 42° and 52° below the top in two staggered rows, up to
    :data:`SPREAD` either side of the front (-y)."""
    azimuth = np.linspace(-SPREAD, SPREAD, count) - 90.0
    polar = np.where(np.arange(count) % 2, 42.0, 52.0)
    a, p = np.radians(azimuth), np.radians(polar)
    normal = np.stack((np.sin(p) * np.cos(a), np.sin(p) * np.sin(a), np.cos(p)), axis=1)
    return HEAD + HEAD_RADIUS * normal


def _curls(count: int) -> list[np.ndarray]:
    """A helix from each root, its axis leaving the head along the scalp's normal for 2.5 cm
    and then falling down and out from the head, fanning round the hairline as a fringe does,
    short over the forehead and longer toward the sides. Each curl has its own length, width
    and number of turns (within a sixth of the mean), so that the fringe does not read as a row
    of identical springs."""
    curls = []
    rng = np.random.default_rng(7)
    for root in _roots(count):
        normal = (root - HEAD) / HEAD_RADIUS
        outward = np.array([normal[0], normal[1], 0.0]) / math.hypot(normal[0], normal[1])
        fall = np.array([0.0, 0.0, -1.0]) + SPLAY * outward
        fall /= np.linalg.norm(fall)
        # 0 at the front (-y), 1 at SPREAD to either side.
        side = (math.degrees(math.atan2(normal[0], -normal[1])) / SPREAD) ** 2
        mean_length = CURL_LENGTH_FRONT + (CURL_LENGTH_SIDE - CURL_LENGTH_FRONT) * side
        length, width, turns = (
            value * rng.uniform(5.0 / 6.0, 7.0 / 6.0) for value in (mean_length, CURL_RADIUS, TURNS)
        )
        s = np.linspace(0.0, 1.0, CURL_POINTS)
        axis = (
            root[None]
            + 0.025 * np.minimum(s / 0.1, 1.0)[:, None] * normal
            + (length * np.maximum(s - 0.1, 0.0) / 0.9)[:, None] * fall
        )
        phase = rng.uniform(0.0, 2.0 * math.pi)
        angle = 2.0 * math.pi * turns * s + phase
        # The curl widens from the root, round the falling axis.
        radius = width * np.minimum(s / 0.2, 1.0)
        first = np.cross(fall, outward)
        second = np.cross(fall, first)
        across = np.cos(angle)[:, None] * first + np.sin(angle)[:, None] * second
        curls.append(axis + radius[:, None] * across)
    return curls


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 2.0 if quick else 4.0
    frame = staging.timeline(bpy, seconds)

    count = 12 if quick else 80
    skin = staging.material(bpy, "Skin", (0.8, 0.6, 0.5), 0.45)
    hair = staging.hair_material(bpy, "Curls", melanin=0.85, redness=0.45)
    ground = staging.material(bpy, "Ground", (0.35, 0.35, 0.33), 0.9)

    # The curls grow on, and collide with, the scalp (a ball hidden in renders); the sculpted
    # head turns with it, on a still neck and shoulders.
    head = staging.placed(bpy, staging.sphere_mesh(bpy, "Scalp", HEAD_RADIUS), HEAD, skin, "SPHERE")
    head.hide_render = True
    face = staging.placed(bpy, bust.head_mesh(bpy), HEAD, skin)
    staging.parent_keeping_place(bpy, face, head)
    staging.placed(bpy, bust.torso_mesh(bpy), HEAD - bust.HEAD_CENTRE, skin)
    # Still for the first quarter, then a shake and a nod, still again from 70 %.
    moves = ((0.25, 0.0, 0.0), (0.33, 0.0, 35.0), (0.43, 0.0, -35.0), (0.5, 0.0, 0.0))
    moves += ((0.57, 20.0, 0.0), (0.63, -10.0, 0.0), (0.7, 0.0, 0.0))
    staging.keyed(head, "rotation_euler", 1, (0.0, 0.0, 0.0))
    for at, nod, shake in moves:
        turn = (math.radians(nod), 0.0, math.radians(shake))
        staging.keyed(head, "rotation_euler", frame(at), turn)

    scene.frame_set(1)
    curls = staging.empty_hair(bpy, head, "Curls", [c - HEAD for c in _curls(count)], hair)
    parameters = {
        "segment_count": CURL_POINTS - 1,
        "radius": 0.0015,
        "rest_shape": "HOLD_UNDER_GRAVITY",
        "youngs_modulus": 2.0,
        "collision_radius": 0.003,
    }
    staging.add_strand_system(bpy, curls, parameters)

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = played["Curls"]
        local = staging.in_frame(points, matrices)
        # Against the first frame: the curls as resampled from the drawn ones.
        away = np.linalg.norm(local - local[0], axis=2).max(axis=1)
        inside = HEAD_RADIUS - np.linalg.norm(local, axis=2)
        rooted = np.ones(points.shape[1], dtype=bool)
        rooted[::CURL_POINTS] = False
        # The frames before the head first moves, less four: the roots follow a C² spline
        # through the head's frames, which starts to move ahead of a sudden start, a quarter as
        # much at each frame before (core/base_motion.py).
        moved = np.abs(matrices - matrices[0]).max(axis=(1, 2)) > 1e-9
        still = int(np.argmax(moved)) - 4
        return {
            "drift_while_still_share": float(away[:still].max() / CURL_LENGTH_FRONT),
            "swing_while_moving_m": float(away[frame(0.25) : frame(0.7)].max()),
            "offset_at_end_m": float(away[-1]),
            "deepest_inside_head_m": float(max(0.0, inside[:, rooted].max())),
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        # Each curl a ringlet: thin render hairs grown close round every guide, each following
        # its nearest guide only (interpolated between curls of other phases, they would
        # unwind; grown as far out as the guides' spacing, each curl would render as a smear of
        # copies shifted by up to its own width).
        per_curl = 4 if quick else 60
        settings = {
            "Interpolation Guides": 1,
            "Distance to Guides": RINGLET_RADIUS,
            "Density": per_curl / (math.pi * RINGLET_RADIUS**2),
            "Root Radius": 1.2e-4,
            "Tip Radius": 6e-5,
        }
        staging.child_hair(bpy, curls, per_curl, settings)

    return staging.Example(
        title="Curly bangs: the drawn curls kept under gravity",
        systems=[curls],
        camera=(0.55, -1.15, 1.52),
        target=(0.0, -0.05, 1.45),
        lens=55.0,
        ground=ground,
        stills=(frame(0.2), frame(0.45), scene.frame_end),
        parameters=parameters,
        reference=head,
        measure=measure,
        dress=dress,
    )


if __name__ == "__main__":
    staging.run_example("curly_bangs", build, sys.argv[1:])
