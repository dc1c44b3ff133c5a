"""Collision workload: hair draped over a head sphere and a neck capsule, against the same strands
with no obstacles, our engine only.

Usage (from the repository root, in ``.venv/blender``)::

    python bench/collisions.py                         # 1,000 strands x 32 links
    python bench/collisions.py --strands 100 --links 16 --warmup-frames 6
    python bench/collisions.py --workers 2               # both cases in two processes
    python bench/collisions.py --strands 300 --links 16 --bend-rigidity 2e-5   # soft hair
    python bench/collisions.py --strands 1000 --links 25 --bend-rigidity 2e-7 \
        --warmup-frames 48 --min-frames 4 --max-frames 4   # dense: ~9 contacts per strand
    python bench/collisions.py --head deforming          # the head a deforming 20,000-triangle mesh
    python bench/collisions.py --order 1                 # both cases in backward Euler
    python bench/collisions.py --backend cupy            # on an NVIDIA GPU

Both cases run in fresh interpreters (``python -m bench.collisions --case ...``) on the same
strands: the bench workload's (:mod:`bench.workload`: 25 cm guide strands on a 10 cm head that
shakes and nods), rooted on the scalp only (above 30° below the equator, so no root sits inside
the neck), combed down over the head, and colliding with a 2 mm radius from their second link
on. The head sphere turns with
the head (its angular velocity enters the contacts), the neck capsule (5 cm radius, from 8 to
25 cm below the head's centre) stands still. Untimed warm-up frames let the hair fall onto the
head, so the timed frames (a fixed number, so that every run times the same contacts) have many
contacts. Both cases step all trees in one process
(``--workers N``: in N worker processes each), so the ratio measures the constraint work alone.
With ``--head deforming`` the head is a
``TriangleMesh`` of 19,740 triangles on the sphere, deforming (its vertices breathe radially by
2 % at 1 Hz in its frame) and so queried against its triangles at every substep. The table goes
to standard output, the figures to
``bench/results/collisions-<host>-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.peer_engine import head_motion
from bench.worker import FramePolicy, emit, time_frames, warm_up
from bench.workload import FRAME_RATE, SUBSTEPS_PER_FRAME, Workload

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
CASES = ("free", "obstacles")
# Roots lie above this elevation on the head (rad): lower ones would sit inside the neck.
LOWEST_ROOT = math.radians(-30.0)
COLLISION_RADIUS = 2e-3  # m
NECK = ((0.0, 0.0, -0.25), (0.0, 0.0, -0.08), 0.05)  # capsule start, end (m), radius (m)
TARGET_RATIO = 3.0
# The deforming head: a UV sphere of this many segments and rings, breathing this much at 1 Hz.
HEAD_SEGMENTS, HEAD_RINGS, BREATH = 141, 71, 0.02


@dataclass(frozen=True)
class ScalpWorkload(Workload):
    """The bench workload's strands combed down over the head: roots on a Fibonacci lattice over
    the part of the head sphere above :data:`LOWEST_ROOT` (``strands`` roots exactly), each
    strand leaving its root down the meridian (straight down below the equator), tilted 0.1 rad
    outward, so that gravity lays it on the head."""

    def rest_points(self) -> np.ndarray:
        outward = self.root_directions()
        horizontal = np.hypot(outward[:, 0], outward[:, 1])
        azimuth = np.arctan2(outward[:, 1], outward[:, 0])
        # Down the meridian on the upper half; below the equator the meridian turns inward,
        # toward the neck, so those strands hang straight down.
        slope = np.maximum(outward[:, 2], 0.0)
        down = np.stack(
            (
                slope * np.cos(azimuth),
                slope * np.sin(azimuth),
                -np.where(slope > 0, horizontal, 1.0),
            ),
            axis=1,
        )
        direction = down + 0.1 * outward
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        along = np.linspace(0.0, self.length, self.links + 1)
        return self.head_radius * outward[:, None, :] + along[None, :, None] * direction[:, None, :]

    def root_directions(self) -> np.ndarray:
        cap = (1.0 - math.sin(LOWEST_ROOT)) / 2.0  # the scalp's share of the sphere's area
        index = np.arange(self.strands) + 0.5
        z = 1.0 - 2.0 * cap * index / self.strands
        ring = np.sqrt(1.0 - z * z)
        azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
        return np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)


def head_mesh(radius: float) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere: vertices (V, 3) on the sphere of ``radius``, triangles (F, 3)."""
    theta = np.pi * np.arange(1, HEAD_RINGS) / HEAD_RINGS
    phi = 2 * np.pi * np.arange(HEAD_SEGMENTS) / HEAD_SEGMENTS
    ring = np.stack(
        (
            np.outer(np.sin(theta), np.cos(phi)).ravel(),
            np.outer(np.sin(theta), np.sin(phi)).ravel(),
            np.repeat(np.cos(theta), HEAD_SEGMENTS),
        ),
        axis=1,
    )
    vertices = radius * np.vstack(([0.0, 0.0, 1.0], ring, [0.0, 0.0, -1.0]))
    n, last = HEAD_SEGMENTS, len(vertices) - 1
    j = np.arange(n)
    triangles = [np.stack((np.zeros(n, int), 1 + j, 1 + (j + 1) % n), axis=1)]
    for i in range(HEAD_RINGS - 2):
        a, b = 1 + i * n + j, 1 + i * n + (j + 1) % n
        triangles += [np.stack((a, a + n, b), axis=1), np.stack((b, a + n, b + n), axis=1)]
    base = 1 + (HEAD_RINGS - 2) * n
    triangles.append(np.stack((base + j, np.full(n, last), base + (j + 1) % n), axis=1))
    return vertices, np.concatenate(triangles)


def build(
    core: Any,
    workload: ScalpWorkload,
    obstacles: bool,
    passes: int | None = None,
    workers: int = 1,
    head: str = "sphere",
    backend: str = "numpy",
    order: int = 2,
) -> tuple[Any, Any]:
    """The simulation, and the obstacles' motion as a function of time (None without them)."""
    weight = np.tile([0.0] + [1.0] * (workload.links - 1), workload.strands)
    parameters = workload.strand_parameters(
        core, collision_radius=COLLISION_RADIUS, collision_weight=weight
    )
    model = core.build_model(
        [core.StrandSpec(p) for p in workload.rest_points()], parameters, backend=backend
    )
    settings = core.SolverSettings(
        method="implicit", substeps=SUBSTEPS_PER_FRAME, workers=workers, order=order
    )
    if not obstacles:
        return core.Simulation(model, settings), None
    skin = core.Material(0.0, 0.4, 0.3)
    if head == "deforming":
        vertices, triangles = head_mesh(workload.head_radius)
        cell = 2 * np.pi * workload.head_radius / HEAD_SEGMENTS
        head_shape = core.TriangleMesh(
            vertices, triangles, cell, material=skin, name="head", deforming=True
        )
    else:
        head_shape = core.Sphere(workload.head_radius, skin, name="head")
    shapes = core.build_obstacles(
        [head_shape, core.Capsule(*NECK, skin, name="neck")], model.backend
    )

    def motion(t: float) -> Any:
        turning = head_motion(core, t)
        poses = np.stack((np.eye(4), np.eye(4)))
        poses[0, :3, :3] = turning.rotation[0]
        spin = np.stack((turning.angular_velocity[0], np.zeros(3)))
        if head == "deforming":
            rate = 2 * np.pi
            scale = 1.0 + BREATH * math.sin(rate * t)
            growth = BREATH * rate * math.cos(rate * t)
            return core.ObstacleMotion.from_host(
                shapes,
                poses,
                spin,
                mesh_vertices={0: scale * vertices},
                mesh_velocities={0: growth * vertices},
            )
        return core.ObstacleMotion.from_host(shapes, poses, spin)

    constraints = core.ConstraintSettings(passes=passes)
    return core.Simulation(
        model, settings, obstacles=shapes, constraint_settings=constraints
    ), motion


def run_case(
    case: str,
    workload: ScalpWorkload,
    policy: FramePolicy,
    passes: int | None,
    workers: int,
    head: str = "sphere",
    backend: str = "numpy",
    order: int = 2,
) -> None:
    """Time one case in this interpreter and print its JSON line."""
    core = importlib.import_module("oriented_strands.core")
    base = functools.partial(head_motion, core)
    start = time.perf_counter()
    simulation, obstacle_motion = build(
        core, workload, case == "obstacles", passes, workers, head, backend, order
    )
    build_seconds = time.perf_counter() - start
    contacts: list[int] = []
    rows: list[int] = []
    # Over the warm-up and the timed frames: the steps redone in halves, the strand-steps held
    # rigid (StepStats.fallbacks).
    subdivisions, fallbacks = [0], [0]

    def advance_frame(_: int) -> None:
        stats = simulation.advance(1.0 / FRAME_RATE, base, obstacle_motion=obstacle_motion)
        subdivisions[0] += stats.subdivisions
        fallbacks[0] += len(stats.fallbacks)
        contacts.append(simulation.constraint_stats.contacts)
        rows.append(simulation.constraint_stats.largest_problem)

    # The deepest any colliding point's centre is inside its collision radius at a frame's end,
    # over every frame, measured between the timed frames.
    deepest = [0.0]

    def measure_depth(_: int) -> None:
        if obstacle_motion is None:
            return
        from oriented_strands.core.obstacles import signed_distances

        points = simulation.points()
        colliding = np.ones(len(points), bool)
        colliding[simulation.model.point_offsets[:-1]] = False
        colliding[simulation.model.point_offsets[:-1] + 1] = False
        model_backend = simulation.model.backend
        distance, _ = signed_distances(
            simulation.constraints.obstacles,
            obstacle_motion(simulation.time),
            model_backend.from_host(points[colliding].T),
        )
        depth = COLLISION_RADIUS - float(model_backend.to_host(distance).min())
        deepest[0] = max(deepest[0], depth)

    def warm_up_frame(frame: int) -> None:
        advance_frame(frame)
        measure_depth(frame)

    first = warm_up(warm_up_frame, policy)
    contacts.clear()
    rows.clear()
    times = time_frames(advance_frame, policy, first, after_frame=measure_depth)
    if not np.isfinite(simulation.points()).all():
        raise SystemExit("the engine produced non-finite strand points")
    emit(
        f"engine-{case}",
        workload,
        times,
        build_seconds=build_seconds,
        contacts_mean=float(np.mean(contacts)),
        contacts_max=int(np.max(contacts)),
        largest_problem_rows=int(np.max(rows)),
        deepest_penetration=deepest[0],
        subdivisions=subdivisions[0],
        fallbacks=fallbacks[0],
        passes=passes,
        head=head,
        backend=backend,
        order=order,
        processes=simulation.processes,
        substeps=SUBSTEPS_PER_FRAME,
        numpy=np.__version__,
        python=sys.version.split()[0],
    )


def soft_workload(strands: int, links: int, bend_rigidity: float | None) -> ScalpWorkload:
    """The workload, with ``bend_rigidity`` (N·m²; None: the workload's) for bending and
    twisting and a hundredth of it for their damping, as the workload's own are: soft hair
    lies on the head with several contacts per strand."""
    if bend_rigidity is None:
        return ScalpWorkload(strands, links)
    return ScalpWorkload(
        strands,
        links,
        bend_rigidity=bend_rigidity,
        twist_rigidity=bend_rigidity,
        bend_damping=bend_rigidity / 100,
        twist_damping=bend_rigidity / 100,
    )


def run_both(
    strands: int,
    links: int,
    policy: FramePolicy,
    passes: int | None,
    workers: int,
    bend_rigidity: float | None,
    head: str,
    backend: str,
    order: int,
) -> list[dict[str, Any]]:
    """Each case in its own interpreter; their JSON results."""
    results = []
    for case in CASES:
        command = [
            sys.executable,
            "-m",
            "bench.collisions",
            f"--case={case}",
            f"--strands={strands}",
            f"--links={links}",
            *([] if passes is None else [f"--passes={passes}"]),
            *([] if bend_rigidity is None else [f"--bend-rigidity={bend_rigidity!r}"]),
            f"--workers={workers}",
            f"--head={head}",
            f"--backend={backend}",
            f"--order={order}",
            *policy.as_arguments(),
        ]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        if finished.returncode:
            raise SystemExit(f"case {case} failed:\n{finished.stderr}")
        results.append(json.loads(finished.stdout.strip().splitlines()[-1]))
    return results


def report(results: Sequence[dict[str, Any]]) -> str:
    """The table: seconds per frame of each case, contacts, and the ratio against the target."""
    free, obstacles = results
    ratio = obstacles["seconds_per_frame"] / free["seconds_per_frame"]
    verdict = "met" if ratio <= TARGET_RATIO else "not met"
    lines = [
        f"{free['strands']} strands x {free['links']} links, {SUBSTEPS_PER_FRAME} substeps/frame, "
        f"bending rigidity {obstacles['workload']['bend_rigidity']:g} N m^2, "
        f"constraint passes: {obstacles['passes'] or 'automatic'}, "
        f"{obstacles['processes']} process(es), backend {obstacles['backend']}, "
        f"order {obstacles['order']}",
        "| case | s/frame (median) | contacts (mean, max) | largest tree problem (rows) |",
        "|---|---|---|---|",
        f"| no obstacles | {free['seconds_per_frame']:.3g} | – | – |",
        f"| head ({obstacles['head']}) + neck | {obstacles['seconds_per_frame']:.3g} | "
        f"{obstacles['contacts_mean']:.0f}, {obstacles['contacts_max']} | "
        f"{obstacles['largest_problem_rows']} |",
        f"contacts per strand {obstacles['contacts_mean'] / obstacles['strands']:.1f} (mean);",
        f"ratio {ratio:.2f} (target <= {TARGET_RATIO:g}: {verdict});"
        f" deepest penetration at a frame's end {1e3 * obstacles['deepest_penetration']:.3f} mm",
        f"over all frames: {obstacles['subdivisions']} halved steps and "
        f"{obstacles['fallbacks']} strand-steps held rigid with obstacles, "
        f"{free['subdivisions']} and {free['fallbacks']} without",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=CASES, help="run one case here (worker mode)")
    parser.add_argument("--strands", type=int, default=1000)
    parser.add_argument("--links", type=int, default=32)
    # A fixed window of timed frames: the hair is still settling, so later frames have more
    # contacts, and a window set by time would give a slower run more of them.
    parser.add_argument("--warmup-frames", type=int, default=12)
    parser.add_argument("--min-frames", type=int, default=8)
    parser.add_argument("--min-seconds", type=float, default=0.0)
    parser.add_argument("--max-frames", type=int, default=8)
    parser.add_argument("--passes", type=int, help="ConstraintSettings.passes (default: automatic)")
    parser.add_argument(
        "--workers", type=int, default=1, help="SolverSettings.workers of both cases"
    )
    parser.add_argument(
        "--bend-rigidity",
        type=float,
        help="bending and twisting rigidity, N m^2 (default: the workload's 2e-4); soft hair "
        "lies on the head with many contacts",
    )
    parser.add_argument(
        "--head",
        choices=("sphere", "deforming"),
        default="sphere",
        help="the head obstacle: a sphere, or a deforming 19,740-triangle mesh",
    )
    parser.add_argument(
        "--backend", choices=("numpy", "cupy"), default="numpy", help="the engine's array backend"
    )
    parser.add_argument(
        "--order",
        type=int,
        choices=(1, 2),
        default=2,
        help="SolverSettings.order of both cases: 2 (BDF2, the default) or 1 (backward Euler)",
    )
    args = parser.parse_args(argv)
    policy = FramePolicy(args.warmup_frames, args.min_frames, args.min_seconds, args.max_frames)
    workload = soft_workload(args.strands, args.links, args.bend_rigidity)
    if args.case:
        run_case(
            args.case,
            workload,
            policy,
            args.passes,
            args.workers,
            args.head,
            args.backend,
            args.order,
        )
        return
    results = run_both(
        args.strands,
        args.links,
        policy,
        args.passes,
        args.workers,
        args.bend_rigidity,
        args.head,
        args.backend,
        args.order,
    )
    print(report(results))
    when = datetime.now(UTC)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"collisions-{socket.gethostname()}-{when:%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps({"when": when.isoformat(), "cases": results}, indent=1))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
