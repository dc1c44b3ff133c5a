"""Fast obstacles: a 10 cm ball swept through a curtain of hanging strands at mid-height.

Usage (from the repository root, in ``.venv/engine`` or ``.venv/blender``)::

    python bench/fast_obstacles.py                      # 100 strands, 5, 10 and 20 m/s
    python bench/fast_obstacles.py --speeds 10 --substeps 8

The curtain: 100 strands of 40 cm and 16 links (10 g/m, radius 1 mm, bending and twisting
rigidity 2·10⁻⁵ N·m², collision radius 2 mm) hanging in rows of 20 across 50 cm, the rows spread
over 4 cm in depth; the ball (radius 5 cm, friction 0.3/0.2, no bounce) starts 30 cm in front,
crosses 20 cm below the roots at a constant speed, and the run ends 6 frames after it has
travelled 60 cm. Every substep is checked against the ball's
exact distance: points inside it at the substep's end, and points whose straight path relative
to the ball over the substep passes within half its radius of its centre (through it). Reports
those counts, the fallbacks (strand-steps held rigid, :class:`Fallback`), the halvings and the
seconds, one line per speed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oriented_strands.core import (
    BaseMotion,
    Material,
    ObstacleMotion,
    Simulation,
    SolverSettings,
    Sphere,
    StrandParameters,
    StrandSpec,
    build_model,
    build_obstacles,
)

FRAME_RATE = 24.0
RADIUS = 0.05  # m, the ball's
LINKS, LENGTH = 16, 0.4
START = np.array([0.0, -0.3, -0.2])  # the ball's centre at t = 0, m
TRAVEL = 0.6  # m


def curtain(strands: int):
    """Rows of 20 strands across 50 cm, rows spread over 4 cm in depth."""
    rows = max(1, strands // 20)
    specs = []
    for k in range(strands):
        x = -0.25 + 0.5 * (k % 20) / 19
        y = -0.02 + 0.04 * (k // 20) / max(rows - 1, 1)
        points = np.linspace(0.0, LENGTH, LINKS + 1)[:, None] * np.array([0.0, 0.0, -1.0])
        specs.append(StrandSpec(points + np.array([x, y, 0.0])))
    parameters = StrandParameters(
        mass_per_length=0.01,
        radius=1e-3,
        bend_stiffness=2e-5,
        twist_stiffness=2e-5,
        bend_damping=2e-7,
        twist_damping=2e-7,
        collision_radius=2e-3,
    )
    return build_model(specs, parameters)


def sweep(strands: int, speed: float, substeps: int) -> dict:
    model = curtain(strands)
    obstacles = build_obstacles([Sphere(RADIUS, Material(0.0, 0.3, 0.2), name="ball")])
    sim = Simulation(model, SolverSettings(substeps=1), obstacles=obstacles)
    still = BaseMotion.still(np.eye(4)[None])
    velocity = np.array([0.0, speed, 0.0])

    def centre(t: float) -> np.ndarray:
        return START + velocity * t

    def ball(t: float) -> ObstacleMotion:
        pose = np.eye(4)
        pose[:3, 3] = centre(t)
        return ObstacleMotion.from_host(obstacles, pose[None], None, velocity[None])

    h = 1.0 / FRAME_RATE / substeps
    steps = int(np.ceil(TRAVEL / speed / h)) + 6 * substeps
    inside = through = subdivisions = 0
    fallbacks = []
    before = sim.points() - centre(0.0)
    started = time.perf_counter()
    for _ in range(steps):
        stats = sim.advance(h, still, obstacle_motion=ball)
        fallbacks += stats.fallbacks
        subdivisions += stats.subdivisions
        after = sim.points() - centre(sim.time)
        path = after - before
        along = np.clip(
            -np.sum(before * path, axis=1) / np.maximum(np.sum(path * path, axis=1), 1e-30), 0, 1
        )
        closest = np.linalg.norm(before + along[:, None] * path, axis=1)
        through += int((closest < 0.5 * RADIUS).sum())
        inside = max(inside, int((np.linalg.norm(after, axis=1) < RADIUS).sum()))
        before = after
    return {
        "speed": speed,
        "seconds": time.perf_counter() - started,
        "frames": steps / substeps,
        "inside": inside,
        "through": through,
        "fallbacks": len(fallbacks),
        "fallback_strands": len({fallback.strand for fallback in fallbacks}),
        "subdivisions": subdivisions,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strands", type=int, default=100)
    parser.add_argument("--speeds", type=float, nargs="+", default=[5.0, 10.0, 20.0])
    parser.add_argument("--substeps", type=int, default=4)
    args = parser.parse_args(argv)
    print(
        f"{args.strands} strands x {LINKS} links, ball radius {RADIUS} m, "
        f"{args.substeps} substeps per frame at {FRAME_RATE:g} fps"
    )
    for speed in args.speeds:
        r = sweep(args.strands, speed, args.substeps)
        print(
            f"{r['speed']:5.1f} m/s: {r['frames']:.0f} frames in {r['seconds']:.1f} s; most points "
            f"inside {r['inside']}, paths through {r['through']}; fallbacks {r['fallbacks']} "
            f"(on {r['fallback_strands']} strands), halvings {r['subdivisions']}"
        )


if __name__ == "__main__":
    main()
