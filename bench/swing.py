"""Strands swung near resonance: accuracy against cost, the engine and MuJoCo.

Run as ``python -m bench.swing`` from the repository root (in ``.venv/engine`` or
``.venv/blender``: both have MuJoCo).

**The strand.** 0.5 m of the benchmark's hair (``bench/workload.py``: 0.01 kg/m, radius 1 mm,
bending and twisting rigidity 2·10⁻⁴ N·m², damping a hundredth of it) in 25 links, hanging
straight down from a base that moves ±10 cm sideways at 1 Hz, near the strand's first mode, for
2 s from rest. The engine's base motion carries its exact velocity and acceleration. MuJoCo's
chain hangs from a still body and is stepped in the base's frame: the base only translates, so
its acceleration enters as a uniform inertial force, set into MuJoCo's gravity at each step's
start (a mocap body moved instead carries its chains along without their feeling its
acceleration, ``bench/peer_mujoco.py``). Tips are compared relative to their roots.

**Accuracy.** The tip's largest distance from a converged run over the 2 s, sampled at every
frame (24 fps), at 2, 4, 8, 16 and 32 substeps per frame. Each simulator is compared with itself
at 512 substeps (MuJoCo's capsules and linear joint springs are not the engine's rod inertia and
``2K tan(θ/2)`` springs, so their converged motions differ; the distance between the two is
reported too).

**Error control.** The engine with ``SolverSettings(tolerance=…)`` at each of ``TOLERANCES``:
the same tip error, and the mean steps per frame its estimates chose.

**Cost.** 1,000 such strands side by side (the same motion each), at each substep count and
tolerance: the mean seconds per frame over the whole 2 s (the steps error control chooses follow
the swing's phase, so a few frames would not represent them; the same measure for every case),
the engine in one process (``workers=1``) and, with BDF2 at fixed steps, in as many as it picks
by itself (one per core here; ``--no-processes`` leaves that out), MuJoCo on ``THREADS`` threads (as
``bench/peer_mujoco.py`` steps it). All cases run in this interpreter, one after another.

The JSON goes to ``bench/results/swing-<host>-<time>.json``; a Markdown table to standard output.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from oriented_strands import core

from .peer_mujoco import THREADS, Block, build_blocks
from .workload import Workload

FRAME_RATE = 24.0
AMPLITUDE = 0.1  # m
FREQUENCY = 1.0  # Hz
SECONDS = 2.0
SUBSTEPS = (2, 4, 8, 16, 32)
TOLERANCES = (1e-3, 1e-4, 1e-5)  # m
REFERENCE_SUBSTEPS = 512


def base_offset(time: float) -> tuple[float, float, float]:
    """The base's sideways position (m), velocity (m/s) and acceleration (m/s²) along x."""
    rate = 2.0 * math.pi * FREQUENCY
    phase = rate * time
    return (
        AMPLITUDE * math.sin(phase),
        AMPLITUDE * rate * math.cos(phase),
        -AMPLITUDE * rate * rate * math.sin(phase),
    )


def roots(strands: int) -> np.ndarray:
    """(strands, 3) root positions: 2 cm apart along y (the strands never meet)."""
    return np.stack((np.zeros(strands), 0.02 * np.arange(strands), np.zeros(strands)), axis=1)


class Engine:
    """The engine's strands, stepped with one implicit ``order``."""

    def __init__(
        self,
        workload: Workload,
        substeps: int,
        order: int,
        tolerance: float | None = None,
        workers: int | None = 1,
    ) -> None:
        down = np.array([0.0, 0.0, -1.0])
        along = np.linspace(0.0, workload.length, workload.links + 1)
        specs = [core.StrandSpec(root + along[:, None] * down) for root in roots(workload.strands)]
        self.model = core.build_model(specs, workload.strand_parameters(core, drag=0.0))
        self.simulation = core.Simulation(
            self.model,
            core.SolverSettings(
                substeps=substeps, order=order, tolerance=tolerance, workers=workers
            ),
        )
        self.frame = 0
        self.steps: list[int] = []

    def base(self, time: float) -> core.BaseMotion:
        position, velocity, acceleration = base_offset(time)
        bases = self.model.n_bases
        zero = np.zeros((bases, 3))

        def along_x(value: float) -> np.ndarray:
            return np.broadcast_to([value, 0.0, 0.0], (bases, 3))

        return core.BaseMotion(
            np.broadcast_to(np.eye(3), (bases, 3, 3)),
            along_x(position),
            zero,
            along_x(velocity),
            zero,
            along_x(acceleration),
        )

    def advance(self) -> None:
        self.steps.append(self.simulation.advance(1.0 / FRAME_RATE, self.base).substeps)
        self.frame += 1

    def tips(self) -> np.ndarray:
        """(strands, 3) tip positions, m, relative to each root."""
        ends = self.model.point_offsets[1:] - 1
        return self.simulation.points()[ends] - roots(self.model.n_strands)


class MuJoCo:
    """MuJoCo's ball-joint chains (``implicitfast``), in blocks stepped on ``threads`` threads."""

    def __init__(self, workload: Workload, substeps: int, threads: int) -> None:
        down = np.tile([0.0, 0.0, -1.0], (workload.strands, 1))
        timestep = 1.0 / (FRAME_RATE * substeps)
        self.blocks = build_blocks(workload, roots(workload.strands), down, timestep, threads)
        self.substeps, self.threads, self.links, self.frame = substeps, threads, workload.links, 0
        self.segment = workload.segment_length

    def _step_blocks(self, blocks: Sequence[Block], first_step: int) -> None:
        step = 1.0 / (FRAME_RATE * self.substeps)
        for substep in range(self.substeps):
            _, _, acceleration = base_offset((first_step + substep) * step)
            for block in blocks:
                block.model.opt.gravity[:] = (-acceleration, 0.0, -9.81)
                mujoco.mj_step(block.model, block.data)

    def advance(self, pool: ThreadPoolExecutor | None = None) -> None:
        first_step = self.frame * self.substeps
        if pool is None:
            self._step_blocks(self.blocks, first_step)
        else:
            shares = [self.blocks[k :: self.threads] for k in range(self.threads)]
            for done in [pool.submit(self._step_blocks, s, first_step) for s in shares]:
                done.result()
        self.frame += 1

    def tips(self) -> np.ndarray:
        """(strands, 3) tip positions relative to each root, m: the last link's frame plus one
        segment along its z axis. Bodies 0 and 1 are the world and the head; each chain is its
        root body (placed at the root) and then its links."""
        tips = []
        per_chain = self.links + 1
        for block in self.blocks:
            model, data = block.model, block.data
            mujoco.mj_kinematics(model, data)
            for root in range(2, model.nbody, per_chain):
                last = root + self.links
                axis = data.xmat[last].reshape(3, 3)[:, 2]
                tips.append(data.xpos[last] + self.segment * axis - model.body_pos[root])
        return np.array(tips)


def path(simulator: Any, frames: int) -> np.ndarray:
    """(frames, 3) the first strand's tip relative to its root, frame by frame."""
    points = []
    for _ in range(frames):
        simulator.advance()
        points.append(simulator.tips()[0])
    return np.array(points)


def seconds_per_frame(advance: Callable[[], None], frames: int) -> float:
    """The mean seconds per frame of ``frames`` calls of ``advance``."""
    start = time.perf_counter()
    for _ in range(frames):
        advance()
    return (time.perf_counter() - start) / frames


SERIES_COLOURS = ("#1f77b4", "#2ca02c", "#d62728", "#7f7f7f", "#9467bd")


def plot(rows: Sequence[dict], title: str) -> str:
    """An SVG chart of tip error against seconds per frame, both on log scales: one line per
    simulator (the tolerance runs as one series, labelled by tolerance), each point labelled
    with its steps per frame."""
    series: dict[str, list[dict]] = {}
    for row in rows:
        name = row["simulator"].split(", tolerance")[0]
        if "tolerance" in row["simulator"]:
            name += " by error"
        series.setdefault(name, []).append(row)
    width, height, margin = 720, 460, 70
    xs = [math.log10(row["seconds_per_frame"]) for row in rows]
    ys = [math.log10(1000 * row["tip_error_m"]) for row in rows]
    x_low, x_high = math.floor(min(xs) * 2) / 2, math.ceil(max(xs) * 2) / 2
    y_low, y_high = math.floor(min(ys)), math.ceil(max(ys))

    def at(row: dict) -> tuple[float, float]:
        x = math.log10(row["seconds_per_frame"])
        y = math.log10(1000 * row["tip_error_m"])
        return (
            margin + (x - x_low) / (x_high - x_low) * (width - 2 * margin),
            height - margin - (y - y_low) / (y_high - y_low) * (height - 2 * margin),
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="14">{title}</text>',
    ]
    for decade in range(y_low, y_high + 1):
        y = at({"seconds_per_frame": 10**x_low, "tip_error_m": 10**decade / 1000})[1]
        parts.append(
            f'<line x1="{margin}" x2="{width - margin}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#ddd"/>'
            f'<text x="{margin - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0**decade:g}</text>'
        )
    tick = x_low
    while tick <= x_high + 1e-9:
        x = at({"seconds_per_frame": 10**tick, "tip_error_m": 10**y_low / 1000})[0]
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{margin}" y2="{height - margin}" '
            'stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - margin + 16}" text-anchor="middle">'
            f"{10**tick:.2g}</text>"
        )
        tick += 0.5
    parts.append(
        f'<text x="{width / 2}" y="{height - 24}" text-anchor="middle">'
        "seconds per frame, 1,000 strands (log)</text>"
        f'<text x="20" y="{height / 2}" text-anchor="middle" '
        f'transform="rotate(-90 20 {height / 2})">tip error, mm (log)</text>'
    )
    for index, (name, members) in enumerate(series.items()):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        points = [at(row) for row in members]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}"/>')
        for (x, y), row in zip(points, members, strict=True):
            label = (
                row["simulator"].split("tolerance ")[1]
                if "tolerance" in row["simulator"]
                else f"{row['substeps']:g}"
            )
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>'
                f'<text x="{x + 6:.1f}" y="{y - 6:.1f}" fill="{colour}">{label}</text>'
            )
        # Bottom left: no simulator is both that fast and that accurate.
        legend_y = height - margin - 18 * (len(series) - index)
        parts.append(
            f'<rect x="{margin + 10}" y="{legend_y - 9}" width="12" height="12" '
            f'fill="{colour}"/>'
            f'<text x="{margin + 28}" y="{legend_y + 2}">{name}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strands", type=int, default=1000, help="strands of the timed case")
    parser.add_argument("--output", type=Path, help="JSON file (default: bench/results/...)")
    parser.add_argument(
        "--plot", type=Path, help="also write an SVG chart of error against time here"
    )
    parser.add_argument(
        "--no-processes",
        dest="processes",
        action="store_false",
        help="time the engine in one process only",
    )
    args = parser.parse_args(argv)
    single, many = Workload(1, 25, length=0.5), Workload(args.strands, 25, length=0.5)
    frames = int(round(SECONDS * FRAME_RATE))

    def mujoco_single(substeps: int) -> MuJoCo:
        return MuJoCo(single, substeps, 1)

    references = {
        "engine": path(Engine(single, REFERENCE_SUBSTEPS, 2), frames),
        "mujoco": path(mujoco_single(REFERENCE_SUBSTEPS), frames),
    }
    rows = []

    def record(name: str, steps: float, error: np.ndarray, cost: float) -> None:
        rows.append(
            {
                "simulator": name,
                "substeps": steps,
                "tip_error_m": float(error.max()),
                "seconds_per_frame": cost,
            }
        )
        print(rows[-1], file=sys.stderr, flush=True)

    def engine_rows(
        name: str, substeps: int, order: int, tolerance: float | None, processes: bool
    ) -> None:
        accuracy = Engine(single, substeps, order, tolerance)
        error = np.linalg.norm(path(accuracy, frames) - references["engine"], axis=1)
        steps = float(np.mean(accuracy.steps))
        for workers, label in ((1, ""), (None, ", automatic processes"))[: 1 + processes]:
            timed = Engine(many, substeps, order, tolerance, workers)
            cost = seconds_per_frame(timed.advance, frames)
            timed.simulation.close()
            record(name + label, steps, error, cost)

    for substeps in SUBSTEPS:
        engine_rows("engine BDF2", substeps, 2, None, args.processes)
        engine_rows("engine backward Euler", substeps, 1, None, False)
        error = np.linalg.norm(path(mujoco_single(substeps), frames) - references["mujoco"], axis=1)
        timed = MuJoCo(many, substeps, THREADS)
        with ThreadPoolExecutor(THREADS) as pool:
            cost = seconds_per_frame(lambda timed=timed, pool=pool: timed.advance(pool), frames)
        record("MuJoCo implicitfast", substeps, error, cost)
    for tolerance in TOLERANCES:
        engine_rows(f"engine BDF2, tolerance {1000 * tolerance:g} mm", 4, 2, tolerance, False)
    between = float(np.linalg.norm(references["engine"] - references["mujoco"], axis=1).max())
    result = {
        "strands": args.strands,
        "links": 25,
        "frames": frames,
        "reference_substeps": REFERENCE_SUBSTEPS,
        "references_apart_m": between,
        "rows": rows,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "threads": THREADS,
    }
    output = args.output or Path("bench/results") / (
        f"swing-{platform.node()}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1))
    if args.plot is not None:
        args.plot.write_text(
            plot(rows, "A 0.5 m strand swung near resonance for 2 s: accuracy against cost")
        )
    print(f"| simulator | substeps | tip error, mm | s/frame ({args.strands} strands) |")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['simulator']} | {row['substeps']:.3g} | {1000 * row['tip_error_m']:.1f} "
            f"| {row['seconds_per_frame']:.3f} |"
        )
    print(f"\nconverged engine and MuJoCo apart by {1000 * between:.1f} mm at most")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
