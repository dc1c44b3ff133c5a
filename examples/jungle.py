"""A small jungle in gusty wind (the method paper's Figure 5, the moving jungle).

A grove of young trees, each a trunk with branches and twigs drawn as curves rooted on their
parents' curves, so that every tree is one branched strand; a wind field blows across them in
gusts (its strength keyed: calm, a gust, a lull, a stronger gust, calm) with turbulence. The
trees hold their drawn shape under gravity (*Rest Shape: Hold Drawn Shape*), bend with the
gusts, their supple twigs more than their stiff trunks, and stand again in the calm. Their
leaves are meshes skinned to the bones of the baked rig.

Run from the repository root in the Blender venv::

    python examples/jungle.py --output gallery_output

Its figures: how far the twigs' tips moved from their drawn places in the gusts and at the end,
how far any branch's root drifted from the parent it is rooted on, and how far the trunks' tops
moved.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from oriented_strands import staging

SEGMENTS = 6


@dataclass(frozen=True)
class Branch:
    """A drawn branch: its points and the index of the branch it is rooted on (-1: a trunk),
    at which of that branch's points."""

    points: np.ndarray
    parent: int
    at: int


def _tree(rng: np.random.Generator, base: np.ndarray, height: float) -> list[Branch]:
    """A trunk leaning a little, three or four branches from its upper two thirds, each with a
    twig or two: a tree of 8 to 12 curves."""
    lean = rng.normal(0.0, 0.05, 2)
    heights = np.linspace(0.0, 1.0, 7)[:, None]
    trunk = base + height * np.hstack((lean * heights**2, heights))
    branches = [Branch(trunk, -1, 0)]
    for k in range(rng.integers(3, 5)):
        at = int(rng.integers(3, 6))
        azimuth = 2.0 * math.pi * (k / 3.7 + rng.uniform(0.0, 0.2))
        out = np.array([math.cos(azimuth), math.sin(azimuth), 0.0])
        length = height * rng.uniform(0.3, 0.45)
        steps = np.linspace(0.0, 1.0, 5)[:, None]
        rise = np.array([0.0, 0.0, 1.0]) * (0.55 * steps - 0.15 * steps**2)
        points = trunk[at] + length * (steps * out + rise)
        parent = len(branches)
        branches.append(Branch(points, 0, at))
        for twig_at in rng.choice([2, 3], size=int(rng.integers(1, 3)), replace=False):
            turn = azimuth + rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.0)
            side = np.array([math.cos(turn), math.sin(turn), 0.6])
            twig = points[twig_at] + 0.4 * length * np.linspace(0.0, 1.0, 3)[:, None] * side
            branches.append(Branch(twig, parent, int(twig_at)))
    return branches


def _grove(count: int) -> list[list[Branch]]:
    """``count`` trees on a jittered grid, 1.2 to 2 m tall."""
    rng = np.random.default_rng(11)
    side = math.ceil(math.sqrt(count))
    trees = []
    for k in range(count):
        row, column = divmod(k, side)
        base = np.array([1.1 * (column - (side - 1) / 2), 1.0 * row, 0.0])
        base[:2] += rng.uniform(-0.25, 0.25, 2)
        trees.append(_tree(rng, base, rng.uniform(1.2, 2.0)))
    return trees


def build(bpy, quick: bool) -> staging.Example:
    seconds = 3.0 if quick else 6.0
    frame = staging.timeline(bpy, seconds)

    bark = staging.material(bpy, "Bark", (0.3, 0.2, 0.12), 0.7)
    leaf = staging.material(bpy, "Leaf", (0.1, 0.3, 0.06), 0.6)
    ground = staging.material(bpy, "Ground", (0.2, 0.24, 0.12), 0.95)
    trees = _grove(4 if quick else 9)
    splines = [branch.points for tree in trees for branch in tree]
    grove = staging.poly_curve(bpy, "Grove", splines)
    grove.data.materials.append(bark)

    bpy.ops.object.effector_add(
        type="WIND", location=(-3.0, 0.5, 1.2), rotation=(0.0, math.radians(80.0), 0.0)
    )
    wind = bpy.context.active_object
    wind.name = "Gusts"
    wind.field.noise = 1.0
    # Blender seeds a new field's noise from the clock: fix it, so every run blows alike.
    wind.field.seed = 7
    for at, strength in ((0.0, 0.0), (0.1, 0.0), (0.2, 5.0), (0.3, 1.5), (0.45, 1.5)):
        wind.field.strength = strength
        wind.field.keyframe_insert("strength", frame=frame(at))
    for at, strength in ((0.55, 7.0), (0.65, 0.0), (1.0, 0.0)):
        wind.field.strength = strength
        wind.field.keyframe_insert("strength", frame=frame(at))
    parameters = {
        "segment_count": SEGMENTS,
        "radius": 0.025,
        "thickness_tip": 0.25,
        "youngs_modulus": 1.5,
        "density": 600.0,
        "rest_shape": "HOLD_UNDER_GRAVITY",
        "air_drag": 1200.0,
        "use_collisions": False,
    }
    staging.add_strand_system(bpy, grove, parameters)
    parameters["wind"] = (
        "a Wind field, strength (air speed, m/s) keyed 0 → 5 → 1.5 → 7 → 0, noise 1"
    )
    first = np.cumsum([0] + [len(tree) for tree in trees])

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = played["Grove"]
        # Every strand has SEGMENTS + 1 points, in the order of the splines.
        strands = points.reshape(len(points), len(splines), SEGMENTS + 1, 3).swapaxes(0, 1)
        away_from_parent = 0.0
        twigs, tops = [], []
        for tree, offset in zip(trees, first[:-1], strict=True):
            tops.append(strands[offset][:, -1])
            for index, branch in enumerate(tree):
                if branch.parent < 0:
                    continue
                # A branch's root rides its parent's link: its distance from the parent's
                # polyline (a few millimetres where resampling cut the drawn curve's corner)
                # stays what it was at the start.
                gap = _segment_distance(
                    strands[offset + index][:, 0], strands[offset + branch.parent]
                )
                away_from_parent = max(away_from_parent, float(np.abs(gap - gap[0]).max()))
                if tree[branch.parent].parent >= 0:
                    twigs.append(strands[offset + index][:, -1])
        twig_tips, top_points = np.stack(twigs, axis=1), np.stack(tops, axis=1)
        moved = np.linalg.norm(twig_tips - twig_tips[0], axis=2).max(axis=1)
        gusts = slice(frame(0.15), frame(0.65))
        return {
            "twig_sway_in_gusts_m": float(moved[gusts].max()),
            "trunk_top_sway_in_gusts_m": float(
                np.linalg.norm(top_points - top_points[0], axis=2).max(axis=1)[gusts].max()
            ),
            "twig_offset_at_end_m": float(moved[-1]),
            "branch_root_drift_m": away_from_parent,
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        rig = bpy.data.objects["Grove_rig"]
        # Along the branches and twigs, and the trunks' upper parts.
        lowest = min(b.head_local[2] for b in rig.data.bones)
        crown = [b for b in rig.data.bones if min(b.head_local[2], b.tail_local[2]) > lowest + 0.6]
        count = (60 if quick else 150) * len(trees)
        staging.leaves(bpy, rig, crown, count, leaf, 0.075, seed=5)

    return staging.Example(
        title="A small jungle: branched trees in gusty wind",
        systems=[grove],
        camera=(4.2, -5.2, 1.9),
        target=(0.0, 1.0, 1.1),
        lens=35.0,
        ground=ground,
        stills=(frame(0.1), frame(0.22), frame(0.58)),
        parameters=parameters,
        reference=grove,
        measure=measure,
        bake=("BONES", "HAIR"),
        dress=dress,
    )


def _segment_distance(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """The distance (frames,) from each frame's point (frames, 3) to that frame's polyline
    (frames, n, 3)."""
    start, end = polyline[:, :-1], polyline[:, 1:]
    along = end - start
    t = np.einsum("fsi,fsi->fs", points[:, None] - start, along)
    t = np.clip(t / np.maximum(np.einsum("fsi,fsi->fs", along, along), 1e-18), 0.0, 1.0)
    nearest = start + t[..., None] * along
    return np.linalg.norm(points[:, None] - nearest, axis=2).min(axis=1)


if __name__ == "__main__":
    staging.run_example("jungle", build, sys.argv[1:])
