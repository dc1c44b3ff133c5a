"""Time our engine beside Blender's legacy hair dynamics and MuJoCo on the same strands.

Usage (from the repository root, in ``.venv/blender``, which has NumPy 1.26, bpy and MuJoCo)::

    python bench/run.py                  # the full grid: B in 10..10,000, n in 8..64, + 1,000 x 25
    python bench/run.py --quick          # a small grid, under two minutes
    python bench/run.py --only engine --strands 1000 --links 16,64
    python bench/run.py --only engine --strands 10000 --links 32 --engine-workers 1

Every case (one peer, one size) runs in its own interpreter (:mod:`bench.worker`). Sizes go in
order of link count, then strand count, the peers taking turns on each; a case whose run time,
estimated from the peer's largest smaller case, exceeds ``--max-case-seconds`` is skipped and
reported as such. The table goes to
standard output, and the same figures, with the machine's description, to a JSON file under
``bench/results/`` (kept out of git). See ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script (``python bench/run.py``, as ``make bench`` does): put the repository root
    # on the path so that ``bench`` imports as the package it is under ``python -m bench.run``.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import PEERS, TARGET_CASE, TARGET_MEMORY_CASE, render, summarize
from bench.worker import FramePolicy

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"

FULL_STRANDS = (10, 100, 1000, 10000)
FULL_LINKS = (8, 16, 32, 64)
QUICK_STRANDS = (10, 100)
QUICK_LINKS = (8, 16)
DEFAULT_MAX_CASE_SECONDS = 60.0
# A case still running after this many times its budget is stopped: the estimate was wrong.
TIMEOUT_FACTOR = 5.0


@dataclass(frozen=True)
class Peer:
    """A simulator under test: its worker module, how its cost grows with links, its frames.

    ``links_exponent`` is the exponent used to extrapolate a case's time from a smaller one (cost
    is linear in strands for all peers: strands are independent). MuJoCo's is 2 because the
    joint-space mass matrix of a serial chain is dense: its factorisation touches every pair of
    joints of a strand.
    """

    worker: str
    links_exponent: float
    policy: FramePolicy
    quick_policy: FramePolicy

    def frames(self, quick: bool) -> FramePolicy:
        """The frame policy of a full or a ``--quick`` run."""
        return self.quick_policy if quick else self.policy


QUICK_POLICY = FramePolicy(warmup_frames=1, min_frames=2, min_seconds=0.2, max_frames=4)
PEER_SETTINGS = {
    "engine": Peer("bench.peer_engine", 1.0, FramePolicy(), QUICK_POLICY),
    # Blender's first frames after the rest frame also fill its caches: two untimed frames.
    "blender": Peer(
        "bench.peer_blender",
        1.0,
        FramePolicy(warmup_frames=2),
        FramePolicy(warmup_frames=2, min_frames=2, min_seconds=0.2, max_frames=4),
    ),
    "mujoco": Peer("bench.peer_mujoco", 2.0, FramePolicy(), QUICK_POLICY),
}


def sizes(strand_counts: Sequence[int], link_counts: Sequence[int]) -> list[tuple[int, int]]:
    """``(strands, links)`` pairs, by links then strands, so smaller cases come first."""
    return sorted({(b, n) for b in strand_counts for n in link_counts}, key=lambda s: (s[1], s[0]))


def estimate_seconds(
    done: Sequence[dict[str, Any]], peer: Peer, policy: FramePolicy, strands: int, links: int
) -> float | None:
    """Expected run time of a case, from the peer's largest measured case no larger in either
    size; None if there is none.

    Seconds per frame and the fixed part of the run (interpreter start, imports, building the
    model) are both scaled by the case's growth, which over-estimates the fixed part; the frame
    count follows the frame policy, since a slower case runs fewer timed frames.
    """
    smaller = [
        case
        for case in done
        if case["status"] == "measured" and case["strands"] <= strands and case["links"] <= links
    ]
    if not smaller:
        return None
    reference = max(smaller, key=lambda case: case["strands"] * case["links"])
    growth = (strands / reference["strands"]) * (links / reference["links"]) ** peer.links_exponent
    frame_seconds = reference["seconds_per_frame"]
    frames_run = policy.warmup_frames + reference["timed_frames"]
    fixed_seconds = max(0.0, reference["wall_seconds"] - frames_run * frame_seconds)
    expected_frame_seconds = frame_seconds * growth
    timed_frames = min(
        policy.max_frames,
        max(policy.min_frames, math.ceil(policy.min_seconds / expected_frame_seconds)),
    )
    return (fixed_seconds + (policy.warmup_frames + timed_frames) * frame_seconds) * growth


def run_worker(
    name: str,
    peer: Peer,
    strands: int,
    links: int,
    policy: FramePolicy,
    timeout: float,
    arguments: Sequence[str] = (),
) -> dict[str, Any]:
    """Run one case in a fresh interpreter, with the peer's extra command-line ``arguments``;
    its result, with ``status`` and ``wall_seconds``."""
    command = [sys.executable, "-m", peer.worker, f"--strands={strands}", f"--links={links}"]
    command += [*policy.as_arguments(), *arguments]
    case: dict[str, Any] = {"peer": name, "strands": strands, "links": links}
    with tempfile.TemporaryDirectory(prefix="bench-blender-") as blender_resources:
        # A fresh Blender configuration folder per case: Blender's factory settings, and nothing
        # written to the user's home.
        environment = {**os.environ, "BLENDER_USER_RESOURCES": blender_resources}
        start = time.perf_counter()
        try:
            finished = subprocess.run(
                command,
                cwd=REPO_ROOT,
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {**case, "status": "failed", "reason": f"stopped after {timeout:.0f} s"}
        wall_seconds = time.perf_counter() - start
    lines = finished.stdout.strip().splitlines()
    if finished.returncode != 0 or not lines:
        tail = (finished.stderr.strip() or finished.stdout.strip()).splitlines()[-3:]
        reason = " | ".join(tail) or f"exit status {finished.returncode}"
        return {**case, "status": "failed", "reason": reason}
    return {**json.loads(lines[-1]), "status": "measured", "wall_seconds": wall_seconds}


def fastest(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The measured run with the least seconds per frame (the one other processes disturbed
    least), listing every measured run's figure; the last failure if none was measured."""
    measured_runs = [run for run in runs if run["status"] == "measured"]
    if not measured_runs:
        return runs[-1]
    best = min(measured_runs, key=lambda run: run["seconds_per_frame"])
    return {**best, "repeat_seconds_per_frame": [run["seconds_per_frame"] for run in measured_runs]}


def run_grid(
    peers: Sequence[str],
    grid: Sequence[tuple[int, int]],
    quick: bool,
    max_case_seconds: float,
    repeats: int,
    peer_arguments: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """Every peer on every size, ``repeats`` times, skipping what would take too long; progress
    on stderr. ``peer_arguments`` are extra command-line arguments of a peer's worker.

    The peers take turns on each size (and repeats go round all peers), so that whatever else
    loads the machine weighs on all of them alike and the side-by-side ratios stay fair. The
    issue's target cases are never skipped: the verdicts need them.
    """
    done: dict[str, list[dict[str, Any]]] = {name: [] for name in peers}
    for strands, links in grid:
        runs: dict[str, list[dict[str, Any]]] = {}
        for name in peers:
            peer = PEER_SETTINGS[name]
            estimate = estimate_seconds(done[name], peer, peer.frames(quick), strands, links)
            too_long = estimate is not None and estimate > max_case_seconds
            if too_long and (strands, links) not in (TARGET_CASE, TARGET_MEMORY_CASE):
                reason = f"estimated {estimate:.0f} s > {max_case_seconds:.0f} s"
                print(f"[bench] {name} {strands} x {links} skipped: {reason}", file=sys.stderr)
                done[name].append(
                    {
                        "peer": name,
                        "strands": strands,
                        "links": links,
                        "status": "skipped",
                        "estimated_seconds": estimate,
                        "reason": reason,
                    }
                )
            else:
                runs[name] = []
        for _ in range(repeats):
            for name, peer_runs in runs.items():
                peer = PEER_SETTINGS[name]
                estimate = estimate_seconds(done[name], peer, peer.frames(quick), strands, links)
                timeout = max(120.0, TIMEOUT_FACTOR * max(max_case_seconds, estimate or 0.0))
                print(f"[bench] {name} {strands} x {links} ...", file=sys.stderr, flush=True)
                peer_runs.append(
                    run_worker(
                        name,
                        peer,
                        strands,
                        links,
                        peer.frames(quick),
                        timeout,
                        (peer_arguments or {}).get(name, ()),
                    )
                )
                if peer_runs[-1]["status"] != "measured":
                    print(f"[bench]   failed: {peer_runs[-1]['reason']}", file=sys.stderr)
        for name, peer_runs in runs.items():
            done[name].append(fastest(peer_runs))
    return [case for name in peers for case in done[name]]


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        cpu = found.group(1) if found else cpu
    memory = None
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "host": socket.gethostname(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_bytes": memory,
        "system": platform.platform(),
        "python": sys.version.split()[0],
        "git_revision": revision.stdout.strip() or None,
        "thread_variables": {
            name: os.environ[name]
            for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            if name in os.environ
        },
    }


def results_path(host: str, when: datetime) -> Path:
    """``bench/results/<host>-<UTC date and time>.json``."""
    safe_host = re.sub(r"[^A-Za-z0-9_.-]", "_", host)
    return RESULTS_DIR / f"{safe_host}-{when.strftime('%Y%m%dT%H%M%SZ')}.json"


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    def counts(text: str) -> list[int]:
        return [int(item) for item in text.split(",") if item]

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a small grid with few frames (under two minutes)"
    )
    parser.add_argument(
        "--only", action="append", choices=PEERS, help="time only this peer (repeatable)"
    )
    parser.add_argument("--strands", type=counts, help="strand counts, comma-separated")
    parser.add_argument("--links", type=counts, help="link counts, comma-separated")
    parser.add_argument(
        "--max-case-seconds",
        type=float,
        default=DEFAULT_MAX_CASE_SECONDS,
        help="skip cases estimated to run longer than this (default %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every case this many times and keep the fastest (default %(default)s)",
    )
    parser.add_argument(
        "--engine-workers",
        type=int,
        help="worker processes the engine steps in (default: its automatic choice)",
    )
    parser.add_argument("--output", type=Path, help="JSON file (default: bench/results/...)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 if every case that ran succeeded."""
    args = parse_arguments(argv)
    strand_counts = args.strands or (QUICK_STRANDS if args.quick else FULL_STRANDS)
    link_counts = args.links or (QUICK_LINKS if args.quick else FULL_LINKS)
    grid = sizes(strand_counts, link_counts)
    if not (args.quick or args.strands or args.links):
        # The speed targets are stated at 1,000 strands x 25 links.
        grid = sorted({*grid, TARGET_CASE}, key=lambda size: (size[1], size[0]))
    started = datetime.now(UTC)
    peer_arguments = {"engine": [f"--workers={args.engine_workers}"]} if args.engine_workers else {}
    cases = run_grid(
        args.only or PEERS, grid, args.quick, args.max_case_seconds, args.repeat, peer_arguments
    )
    summary = summarize(cases)
    print(render(cases, summary))
    host = machine()
    output = args.output or results_path(host["host"], started)
    output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "started": started.isoformat(),
        "machine": host,
        "settings": {
            "quick": args.quick,
            "max_case_seconds": args.max_case_seconds,
            "repeat": args.repeat,
            "grid": grid,
        },
        "cases": cases,
        "summary": summary,
    }
    output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nJSON: {output}")
    return 1 if any(case["status"] == "failed" for case in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
