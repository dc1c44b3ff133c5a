"""What every peer's worker shares: its command line, the frame-timing loop and its JSON answer.

A worker runs one case (one peer, one strand count, one link count) in a fresh interpreter, so
no peer's threads, caches or allocator state leak into another's timings, and each case's peak
memory is its own. It prints one JSON object as the last line of its standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .workload import SUBSTEPS_PER_FRAME, Workload


@dataclass(frozen=True)
class FramePolicy:
    """How many frames to simulate and time.

    Untimed warm-up frames come first (first-touch allocations, caches, the strands leaving their
    rest shape). Timing then goes on until at least ``min_frames`` frames and ``min_seconds``
    have passed, or ``max_frames`` frames: small cases get many frames and a stable median, large
    ones stay within their time budget.
    """

    warmup_frames: int = 1
    min_frames: int = 3
    min_seconds: float = 4.0
    max_frames: int = 48

    def as_arguments(self) -> list[str]:
        """The command-line options that give this policy to a worker."""
        return [
            f"--warmup-frames={self.warmup_frames}",
            f"--min-frames={self.min_frames}",
            f"--min-seconds={self.min_seconds}",
            f"--max-frames={self.max_frames}",
        ]


def parse_case(argv: Sequence[str] | None, description: str) -> tuple[Workload, FramePolicy]:
    """Read a worker's command line: the case's size and its frame policy."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--strands", type=int, required=True)
    parser.add_argument("--links", type=int, required=True)
    defaults = FramePolicy()
    parser.add_argument("--warmup-frames", type=int, default=defaults.warmup_frames)
    parser.add_argument("--min-frames", type=int, default=defaults.min_frames)
    parser.add_argument("--min-seconds", type=float, default=defaults.min_seconds)
    parser.add_argument("--max-frames", type=int, default=defaults.max_frames)
    args = parser.parse_args(argv)
    policy = FramePolicy(args.warmup_frames, args.min_frames, args.min_seconds, args.max_frames)
    return Workload(args.strands, args.links), policy


def warm_up(advance_frame: Callable[[int], None], policy: FramePolicy) -> int:
    """Run the untimed warm-up frames ``0 .. warmup_frames - 1``; return the next frame's index."""
    for frame in range(policy.warmup_frames):
        advance_frame(frame)
    return policy.warmup_frames


@dataclass(frozen=True)
class FrameTimes:
    """What the timed frames took.

    Attributes
    ----------
    seconds : wall-clock seconds of each timed frame
    process_cores : CPU time of this process and its child processes (the engine's worker
        processes) over the timed frames / their wall time: how many cores the peer kept busy
    other_load_cores : CPU time of everything else on the machine over the same wall time (from
        ``/proc/stat``; None where there is none): above a few hundredths, other processes
        competed for the cores and the figures are pessimistic
    """

    seconds: list[float]
    process_cores: float
    other_load_cores: float | None


def _machine_busy_seconds() -> float | None:
    """CPU seconds all processes on the machine have used since boot (Linux), else None."""
    stat = Path("/proc/stat")
    if not stat.exists():
        return None
    ticks = [int(field) for field in stat.read_text().split("\n", 1)[0].split()[1:]]
    idle_ticks = ticks[3] + ticks[4]  # idle and waiting for I/O
    return (sum(ticks) - idle_ticks) / os.sysconf("SC_CLK_TCK")


def child_pids() -> list[str]:
    """Process ids of this process's running children (Linux; elsewhere none)."""
    return [
        pid
        for children in Path("/proc/self/task").glob("*/children")
        for pid in children.read_text().split()
    ]


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of its running child processes (Linux; elsewhere this
    process only): children's time reaches ``os.times`` only once they have ended."""
    total = time.process_time()
    for pid in child_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        # utime and stime, fields 14 and 15 of stat(5), in clock ticks.
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def time_frames(
    advance_frame: Callable[[int], None],
    policy: FramePolicy,
    first_frame: int,
    after_frame: Callable[[int], None] | None = None,
) -> FrameTimes:
    """Call ``advance_frame(k)`` for ``k = first_frame, ...`` as the policy says, timing each;
    ``after_frame(k)`` after each, untimed (a measurement of the frame)."""
    seconds: list[float] = []
    frame = first_frame
    busy_before, cpu_before = _machine_busy_seconds(), _own_cpu_seconds()
    while len(seconds) < policy.max_frames and (
        len(seconds) < policy.min_frames or sum(seconds) < policy.min_seconds
    ):
        start = time.perf_counter()
        advance_frame(frame)
        seconds.append(time.perf_counter() - start)
        if after_frame is not None:
            after_frame(frame)
        frame += 1
    busy_after, cpu_used = _machine_busy_seconds(), _own_cpu_seconds() - cpu_before
    wall = sum(seconds)
    other_load = None
    if busy_before is not None and busy_after is not None:
        other_load = max(0.0, (busy_after - busy_before - cpu_used) / wall)
    return FrameTimes(seconds, cpu_used / wall, other_load)


def frame_budget(policy: FramePolicy) -> int:
    """The most frames a case can simulate (warm-up and timed): how far animation must reach."""
    return policy.warmup_frames + policy.max_frames


def emit(peer: str, workload: Workload, times: FrameTimes, **details: Any) -> None:
    """Print the case's result as one JSON line: timings, rates and the peer's own details."""
    # The median, not the mean: on a shared machine another process can stall a frame or two,
    # and one stalled frame should not decide the figure.
    median = statistics.median(times.seconds)
    result = {
        "peer": peer,
        "strands": workload.strands,
        "links": workload.links,
        "workload": asdict(workload),
        "timed_frames": len(times.seconds),
        "seconds_per_frame": median,
        "mean_seconds_per_frame": statistics.fmean(times.seconds),
        "frame_seconds": times.seconds,
        # Link-steps per second count SUBSTEPS_PER_FRAME steps per frame for every peer, whatever
        # steps a peer takes internally, so the rates compare the work done per simulated frame.
        "link_steps_per_second": workload.strands * workload.links * SUBSTEPS_PER_FRAME / median,
        "process_cores": times.process_cores,
        "other_load_cores": times.other_load_cores,
        **details,
    }
    print(json.dumps(result))
