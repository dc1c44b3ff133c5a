"""Dense per-tree solves against the articulated-body sweeps, on the soft drape.

Usage (from the repository root, in ``.venv/blender``; the BLAS's threads are the command's)::

    python bench/dense_solves.py                             # threaded BLAS: block factorisation
    OPENBLAS_NUM_THREADS=1 python bench/dense_solves.py      # one thread, as in the workers: LAPACK

The soft drape of ``bench/collisions.py`` (300 strands of 25 links, bending rigidity
2·10⁻⁷ N·m², combed over the turning head) settles ``--settle`` frames, then each of the next
``--frames`` frames is stepped from the same state twice: once with the models of a few small
trees solved densely as the engine chooses (``dynamics.dense_pays``), once with every model
through the sweeps. The soft drape is chaotic, so whole runs of the two would part after a few
frames and compare different motions; stepping each frame from one state compares the solves
alone. Reports each frame's seconds, CPU seconds and halvings, and the totals.

``--solves TREES LINKS`` times one factorisation and solve instead, of TREES random strands of
LINKS links, through the sweeps and densely (best of a second of repeats each)::

    python bench/dense_solves.py --solves 2 25
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import oriented_strands.core as core
from bench import collisions
from bench.peer_engine import head_motion
from oriented_strands.core import dynamics
from oriented_strands.core.state import Control

FRAME = 1.0 / 24.0


def solve_times(trees: int, links: int) -> dict[str, float]:
    """Seconds per factorisation and solve of ``trees`` strands of ``links`` links at random
    joint rotations, turning, with drag and link blocks: through the sweeps, and densely as
    ``dynamics.DenseTrees`` solves in this process."""
    rng = np.random.default_rng(0)
    specs = []
    for tree in range(trees):
        steps = rng.normal(size=(links, 3))
        steps *= 0.01 / np.linalg.norm(steps, axis=1, keepdims=True)
        specs.append(core.StrandSpec(np.cumsum(np.vstack(([tree, 0.0, 0.0], steps)), axis=0)))
    model = core.build_model(specs, core.StrandParameters(radius=1e-3, drag=0.5))
    n = model.n_links
    data = dynamics.Data.for_model(model)
    control = Control.from_model(model, (0.0, 0.0, -9.81))
    rotations = rng.normal(size=(4, n))
    rotations /= np.linalg.norm(rotations, axis=0)
    dynamics.inverse_dynamics(
        model, data, rotations, rng.normal(size=(3, n)), np.zeros((3, n)), control
    )
    joint_block = 1e-9 * rng.normal(size=(3, 3, n))
    link_block = 1e-6 * np.abs(rng.normal(size=(6, 6, n)))
    load = rng.normal(size=(3, n))
    options = {"velocity_step": 0.01, "control": control, "tension_step": 0.01}
    layout = dynamics.DenseLayout.of(model)

    def sweeps() -> None:
        dynamics.factorize(model, data, joint_block, link_block, **options)
        dynamics.solve(model, data, load)

    def dense() -> None:
        matrix = dynamics.DenseTrees.of(model, data, layout, joint_block, **options)
        matrix.set_link_block(model, link_block)
        matrix.solve(model, load)

    times = {}
    for name, run in (("sweeps", sweeps), ("dense", dense)):
        run()
        best, start = np.inf, time.perf_counter()
        while time.perf_counter() - start < 1.0:
            began = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - began)
        times[name] = best
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strands", type=int, default=300)
    parser.add_argument("--links", type=int, default=25)
    parser.add_argument("--bend-rigidity", type=float, default=2e-7)
    parser.add_argument("--settle", type=int, default=24, help="frames before the timed ones")
    parser.add_argument("--frames", type=int, default=4, help="frames timed")
    parser.add_argument("--solves", type=int, nargs=2, metavar=("TREES", "LINKS"))
    arguments = parser.parse_args(argv)
    if arguments.solves:
        times = solve_times(*arguments.solves)
        print(
            f"{arguments.solves[0]} trees of {arguments.solves[1]} links: sweeps "
            f"{times['sweeps'] * 1e3:.3f} ms, dense {times['dense'] * 1e3:.3f} ms per "
            "factorisation and solve"
        )
        return

    base = functools.partial(head_motion, core)
    workload = collisions.soft_workload(arguments.strands, arguments.links, arguments.bend_rigidity)
    simulation, motion = collisions.build(core, workload, True)
    for _ in range(arguments.settle):
        simulation.advance(FRAME, base, obstacle_motion=motion)
    chosen = dynamics.dense_pays
    variants = {"dense": chosen, "sweeps": lambda model: False}
    totals = {name: [0.0, 0.0, 0] for name in variants}
    try:
        for frame in range(arguments.settle, arguments.settle + arguments.frames):
            for name, pays in variants.items():
                dynamics.dense_pays = pays
                trial = copy.deepcopy(simulation)
                wall, cpu = time.perf_counter(), time.process_time()
                stats = trial.advance(FRAME, base, obstacle_motion=motion)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                totals[name] = [
                    totals[name][0] + wall,
                    totals[name][1] + cpu,
                    totals[name][2] + stats.subdivisions,
                ]
                print(
                    f"frame {frame + 1} {name:6s} {wall:6.2f} s (CPU {cpu:6.2f} s), "
                    f"{stats.subdivisions} halvings",
                    flush=True,
                )
            dynamics.dense_pays = chosen
            simulation.advance(FRAME, base, obstacle_motion=motion)
    finally:
        dynamics.dense_pays = chosen
    for name, (wall, cpu, halvings) in totals.items():
        print(f"{name:6s} {wall:7.2f} s (CPU {cpu:7.2f} s), {halvings} halvings")
    print(f"dense / sweeps: {totals['dense'][0] / totals['sweeps'][0]:.3f}")


if __name__ == "__main__":
    main()
