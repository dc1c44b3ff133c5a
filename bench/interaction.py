"""Strand interaction workload: the bench head's strands with and without strand–strand
interaction, our engine only, and the volume the interaction keeps on hair falling onto a head.

Usage (from the repository root, in ``.venv/blender``)::

    python bench/interaction.py                          # 1,000 strands x 25 links
    python bench/interaction.py --strands 300 --links 16 --drape-strands 150
    python bench/interaction.py --workers 2              # both cases in two processes each

Speed: both cases step the bench workload's strands (:mod:`bench.workload`: 25 cm guide strands
on a shaking, nodding head, no obstacles) in fresh interpreters (``python -m bench.interaction
--case ...``), both in one process, or both in ``--workers`` processes (with interaction their
groups meet on one grid at every substep), so that the ratio measures the interaction's work
alone. Volume: ``--drape-strands`` strands of 20 cm, 16 links,
combed straight out of the upper half of a 10 cm head, fall onto it for ``--drape-seconds``
with and without the interaction (``--drape-friction``, ``--drape-volume``: by default the
engine's defaults; ``--drape-target``: each link's rest density, the default, or ``scalp``, the
groom's density next to the scalp for every link); reported are the hair layer's thickness over
the upper half (90th percentile of the points' height over the scalp) and the links'
95th-percentile density (as the interaction's grid measures it) over the target density. The
table goes to standard output, the figures to
``bench/results/interaction-<host>-<UTC time>.json``.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.peer_engine import head_motion, peak_resident_bytes, workers_peak_resident_bytes
from bench.worker import FramePolicy, emit, time_frames, warm_up
from bench.workload import FRAME_RATE, SUBSTEPS_PER_FRAME, Workload

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
CASES = ("without", "with")
TARGET_RATIO = 1.5
HEAD_RADIUS = 0.1  # m


def run_case(
    case: str, workload: Workload, policy: FramePolicy, backend: str = "numpy", workers: int = 1
) -> None:
    """Time one case in this interpreter and print its JSON line."""
    core = importlib.import_module("oriented_strands.core")
    base = functools.partial(head_motion, core)
    start = time.perf_counter()
    model = core.build_model(
        [core.StrandSpec(points) for points in workload.rest_points()],
        workload.strand_parameters(core),
        backend=backend,
    )
    interaction = core.StrandInteraction() if case == "with" else None
    simulation = core.Simulation(
        model,
        core.SolverSettings(substeps=SUBSTEPS_PER_FRAME, workers=workers),
        interaction=interaction,
    )
    build_seconds = time.perf_counter() - start

    def advance_frame(_: int) -> None:
        simulation.advance(1.0 / FRAME_RATE, base)

    first = warm_up(advance_frame, policy)
    times = time_frames(advance_frame, policy, first)
    if not np.isfinite(simulation.points()).all():
        raise SystemExit("the engine produced non-finite strand points")
    processes = simulation.processes
    # Read before the workers end: their peaks go with them.
    workers_bytes = workers_peak_resident_bytes()
    simulation.close()
    emit(
        f"engine-{case}-interaction",
        workload,
        times,
        build_seconds=build_seconds,
        peak_density_ratio=simulation.interaction_stats.peak_density_ratio,
        processes=processes,
        peak_resident_bytes=peak_resident_bytes(),
        workers_peak_resident_bytes=workers_bytes,
        substeps=SUBSTEPS_PER_FRAME,
        backend=backend,
        numpy=np.__version__,
        python=sys.version.split()[0],
    )


def run_both(
    strands: int, links: int, policy: FramePolicy, backend: str = "numpy", workers: int = 1
) -> list[dict[str, Any]]:
    """Each case in its own interpreter; their JSON results."""
    results = []
    for case in CASES:
        command = [
            sys.executable,
            "-m",
            "bench.interaction",
            f"--case={case}",
            f"--strands={strands}",
            f"--links={links}",
            f"--backend={backend}",
            f"--workers={workers}",
            *policy.as_arguments(),
        ]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        if finished.returncode:
            raise SystemExit(f"case {case} failed:\n{finished.stderr}")
        results.append(json.loads(finished.stdout.strip().splitlines()[-1]))
    return results


def drape(
    strands: int, seconds: float, friction: float, volume: float, target: str
) -> list[dict[str, Any]]:
    """Hair combed out of a head falling onto it, with and without interaction (``friction``,
    ``volume``, ``target``: "rest" or "scalp"): layer thickness and density over the target
    density (module docstring)."""
    core = importlib.import_module("oriented_strands.core")
    interaction_module = importlib.import_module("oriented_strands.core.interaction")
    links = 16
    index = np.arange(strands) + 0.5
    z = 1.0 - index / strands
    ring = np.sqrt(1.0 - z * z)
    azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
    outward = np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)
    along = np.linspace(0.0, 0.2, links + 1)
    weight = np.tile([0.0] + [1.0] * (links - 1), strands)
    model = core.build_model(
        [core.StrandSpec(HEAD_RADIUS * o + along[:, None] * o) for o in outward],
        core.StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=2e-5,
            twist_stiffness=2e-5,
            bend_damping=2e-7,
            twist_damping=2e-7,
            drag=1e-3,
            collision_radius=1e-3,
            collision_weight=weight,
        ),
    )
    head = core.build_obstacles([core.Sphere(HEAD_RADIUS, core.Material(0.0, 0.4, 0.3))])
    still = core.BaseMotion.still(model.base_rest_poses)
    # Each link's rest density as the interaction's grid measures it; "scalp": the groom's
    # density next to the scalp (the strands' second links), for every link.
    reference = interaction_module.Interaction.for_model(model, core.StrandInteraction())
    rest = reference.target
    target_density = None
    if target == "scalp":
        second_links = model.to_strand_order(rest).reshape(strands, links)[:, 1]
        target_density = float(np.median(second_links))
    settings = core.StrandInteraction(
        friction=friction, volume=volume, target_density=target_density
    )
    targets = rest if target_density is None else np.full(model.n_links, target_density)
    rows = []
    for interaction in (None, settings):
        simulation = core.Simulation(
            model, core.SolverSettings(workers=1), obstacles=head, interaction=interaction
        )
        start = time.perf_counter()
        for _ in range(int(round(FRAME_RATE * seconds))):
            simulation.advance(1.0 / FRAME_RATE, still)
        elapsed = time.perf_counter() - start
        points = simulation.points()
        height = np.linalg.norm(points, axis=1) - HEAD_RADIUS
        positions, _ = interaction_module.centres(model, simulation.data, simulation.state, None)
        density = interaction_module.density_at_points(
            model.backend, positions, model.mass, reference.cell
        )
        rows.append(
            {
                "interaction": interaction is not None,
                "friction": friction,
                "volume": volume,
                "target": target,
                "target_density": target_density,
                "strands": strands,
                "links": links,
                "seconds": seconds,
                "seconds_per_frame": elapsed / (FRAME_RATE * seconds),
                "layer_thickness": float(np.percentile(height[points[:, 2] > 0.0], 90)),
                "density_ratio_p95": float(np.percentile(density / targets, 95)),
                "deepest": float(max(0.0, -height.min())),
            }
        )
    return rows


def report(results: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> str:
    """The tables: seconds per frame of each case with the ratio, and the drape's volume."""
    without, with_ = results
    ratio = with_["seconds_per_frame"] / without["seconds_per_frame"]
    verdict = "met" if ratio <= TARGET_RATIO else "not met"
    lines = [
        f"{without['strands']} strands x {without['links']} links, {SUBSTEPS_PER_FRAME} "
        f"substeps/frame, {without['processes']} and {with_['processes']} processes",
        "| case | s/frame (median) |",
        "|---|---|",
        f"| without interaction | {without['seconds_per_frame']:.3g} |",
        f"| with interaction (defaults) | {with_['seconds_per_frame']:.3g} |",
        f"ratio {ratio:.2f} (target <= {TARGET_RATIO:g}: {verdict})",
        "",
        f"{rows[0]['strands']} strands x {rows[0]['links']} links combed out of a head, falling "
        f"onto it for {rows[0]['seconds']:g} s (interaction: friction {rows[1]['friction']:g}, "
        f"volume {rows[1]['volume']:g} m/s, target: {rows[1]['target']})",
        "| interaction | layer thickness (mm) | 95th-percentile density / target | s/frame |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {'on' if row['interaction'] else 'off'} | {1e3 * row['layer_thickness']:.1f} | "
            f"{row['density_ratio_p95']:.2f} | {row['seconds_per_frame']:.3g} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=CASES, help="run one case here (worker mode)")
    parser.add_argument("--strands", type=int, default=1000)
    parser.add_argument("--links", type=int, default=25)
    parser.add_argument("--warmup-frames", type=int, default=3)
    parser.add_argument("--min-frames", type=int, default=8)
    parser.add_argument("--min-seconds", type=float, default=0.0)
    parser.add_argument("--max-frames", type=int, default=8)
    parser.add_argument(
        "--backend",
        choices=("numpy", "cupy"),
        default="numpy",
        help="the engine's array backend for the speed cases (the drape runs on NumPy)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes stepping each speed case (the drape runs in one)",
    )
    parser.add_argument("--drape-strands", type=int, default=600)
    parser.add_argument("--drape-seconds", type=float, default=1.0)
    parser.add_argument("--drape-friction", type=float, default=0.2)
    parser.add_argument("--drape-volume", type=float, default=0.5)
    parser.add_argument(
        "--drape-target",
        choices=("rest", "scalp"),
        default="rest",
        help="target density: each link's rest density (the default), or the groom's density "
        "next to the scalp for every link",
    )
    args = parser.parse_args(argv)
    policy = FramePolicy(args.warmup_frames, args.min_frames, args.min_seconds, args.max_frames)
    workload = Workload(args.strands, args.links)
    if args.case:
        run_case(args.case, workload, policy, args.backend, args.workers)
        return
    results = run_both(args.strands, args.links, policy, args.backend, args.workers)
    rows = drape(
        args.drape_strands,
        args.drape_seconds,
        args.drape_friction,
        args.drape_volume,
        args.drape_target,
    )
    print(report(results, rows))
    when = datetime.now(UTC)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"interaction-{socket.gethostname()}-{when:%Y%m%dT%H%M%SZ}.json"
    path.write_text(
        json.dumps({"when": when.isoformat(), "cases": results, "drape": rows}, indent=1)
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
