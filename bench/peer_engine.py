"""Worker: our engine on one case, through its public scripting API (docs/scripting.md).

Run as ``python -m bench.peer_engine --strands B --links n`` from the repository root.

Memory is measured two ways. ``peak_traced_bytes`` is the peak of everything Python and NumPy
allocated (``tracemalloc``, which NumPy reports its array buffers to) from before the model is
built until the warm-up frames are done: model, state, workspace and the temporaries a step
creates, at their worst moment. ``resident_array_bytes`` sums the arrays that the model and the
simulation keep between frames. The issue's memory target is checked against the peak, plus
the peak resident memory of the worker processes where there are some.
``peak_resident_bytes`` is this process's own peak resident memory, its interpreter included
(and ``tracemalloc``'s bookkeeping while it traced).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .worker import FramePolicy, child_pids, emit, parse_case, time_frames, warm_up
from .workload import (
    FRAME_RATE,
    SUBSTEPS_PER_FRAME,
    Workload,
    head_angular_motion,
    head_rotation,
)

# Some strand point must move at least this far (m) relative to the head, or the engine did not
# simulate.
MIN_POINT_MOTION = 1e-4


def head_motion(core: ModuleType, time: float) -> Any:
    """The head's :class:`BaseMotion` at ``time``, with exact velocity and acceleration."""
    angular_velocity, angular_acceleration = head_angular_motion(time)
    still = np.zeros((1, 3))
    return core.BaseMotion(
        rotation=head_rotation(time)[None],
        position=still,
        angular_velocity=angular_velocity[None],
        linear_velocity=still,
        angular_acceleration=angular_acceleration[None],
        linear_acceleration=still,
    )


def build_simulation(core: ModuleType, workload: Workload, workers: int | None = None) -> Any:
    """The workload as an engine model and an implicit simulation at 4 substeps per frame, in
    ``workers`` processes (None: the engine's automatic choice)."""
    strands = [core.StrandSpec(points=points) for points in workload.rest_points()]
    model = core.build_model(strands, workload.strand_parameters(core))
    settings = core.SolverSettings(method="implicit", substeps=SUBSTEPS_PER_FRAME, workers=workers)
    return core.Simulation(model, settings)


def array_bytes(*roots: Any) -> int:
    """Bytes of the distinct arrays reachable from ``roots`` through the engine's own objects.

    Follows dataclass fields and attributes of objects defined by the engine, and the items of
    lists, tuples and dicts; never enters modules (a backend holds its array module). A view
    counts as the array it views, once (the groups of trees of a threaded simulation work in
    views of the whole model's workspace).
    """
    seen: set[int] = set()
    total = 0
    pending = list(roots)
    while pending:
        item = pending.pop()
        if id(item) in seen or isinstance(item, (ModuleType, str, bytes, type)):
            continue
        seen.add(id(item))
        if hasattr(item, "nbytes") and hasattr(item, "dtype"):
            owner = item
            while getattr(owner, "base", None) is not None:
                owner = owner.base
            if owner is not item:
                pending.append(owner)
            else:
                total += int(item.nbytes)
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif dataclasses.is_dataclass(item) or type(item).__module__.startswith("oriented_strands"):
            pending.extend(vars(item).values() if hasattr(item, "__dict__") else ())
    return total


def head_local_points(simulation: Any) -> np.ndarray:
    """(n_points, 3) strand points in the head's frame: what moves only if the strands simulate."""
    return simulation.points() @ head_rotation(simulation.time)


def peak_resident_bytes(pid: int | str = "self") -> int:
    """Peak resident memory (``VmHWM``) of a process (Linux; 0 elsewhere, or if it has ended):
    its interpreter and NumPy included, which ``tracemalloc`` does not see."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def workers_peak_resident_bytes() -> int:
    """Peak resident memory of this process's children, the engine's worker processes,
    summed."""
    return sum(peak_resident_bytes(pid) for pid in child_pids())


def run_case(workload: Workload, policy: FramePolicy, workers: int | None = None) -> None:
    """Build, warm up and time the engine on ``workload`` in ``workers`` processes; print the
    result."""
    core = importlib.import_module("oriented_strands.core")
    base = functools.partial(head_motion, core)
    frame_time = 1.0 / FRAME_RATE
    newton_iterations: list[int] = []
    tracemalloc.start()
    start = time.perf_counter()
    simulation = build_simulation(core, workload, workers)
    build_seconds = time.perf_counter() - start
    rest = head_local_points(simulation)

    def advance_frame(_: int) -> None:
        newton_iterations.append(simulation.advance(frame_time, base).iterations)

    # Warm-up runs under tracemalloc, so the peak includes a step's temporaries; the timed
    # frames run without tracemalloc's overhead.
    first_timed_frame = warm_up(advance_frame, policy)
    peak_traced_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    newton_iterations.clear()
    times = time_frames(advance_frame, policy, first_timed_frame)
    moved = head_local_points(simulation) - rest
    if not np.isfinite(moved).all():
        raise SystemExit("the engine produced non-finite strand points")
    point_motion = float(np.linalg.norm(moved, axis=1).max())
    if point_motion < MIN_POINT_MOTION:
        raise SystemExit(f"the strands did not move relative to the head ({point_motion:.2e} m)")
    model = simulation.model
    simulation_processes = simulation.processes
    workers_bytes = workers_peak_resident_bytes()
    main_resident_bytes = peak_resident_bytes()
    resident_bytes = array_bytes(model, simulation)
    simulation.close()
    emit(
        "engine",
        workload,
        times,
        build_seconds=build_seconds,
        newton_iterations_mean=float(np.mean(newton_iterations)),
        newton_iterations_max=int(np.max(newton_iterations)),
        peak_traced_bytes=peak_traced_bytes,
        resident_array_bytes=resident_bytes,
        processes=simulation_processes,
        workers_peak_resident_bytes=workers_bytes,
        peak_resident_bytes=main_resident_bytes,
        max_point_motion=point_motion,
        method="implicit",
        substeps=SUBSTEPS_PER_FRAME,
        backend=model.backend.name,
        dtype=model.backend.dtype,
        numpy=np.__version__,
        engine_path=core.__file__,
        python=sys.version.split()[0],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--workers", type=int)
    known, rest = parser.parse_known_args(argv)
    run_case(*parse_case(rest, "Time the Oriented Strands engine on one case."), known.workers)


if __name__ == "__main__":
    main()
