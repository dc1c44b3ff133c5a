"""Hashes of the frames of a fixed set of engine scenes, to show a restructuring changed nothing.

Run it at two revisions and compare the lines: a change meant to leave the engine's behaviour
as it was gives the same hash for every scene, bit for bit::

    .venv/engine/bin/python tools/frame_hashes.py > before.txt
    git switch my-branch
    .venv/engine/bin/python tools/frame_hashes.py > after.txt
    diff before.txt after.txt

The scenes cover the paths a restructuring can disturb: one process and worker processes,
branched trees, contacts on a turning head (with and without workers and strand interaction),
hair draped over a head, joint limits, an animated path, a target pose, force fields, strand
interaction and error control. Each hash covers every frame's points. About 15 s.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

import strands  # the tests' scene builders
from oriented_strands.core import (
    BaseMotion,
    ForceFields,
    JointLimits,
    PointPath,
    Pose,
    Simulation,
    SolverSettings,
    StrandInteraction,
    Turbulence,
    Wind,
    build_model,
    get_backend,
    pose_rotations,
)

FRAME = 1.0 / 24.0


def _still(bases: int) -> BaseMotion:
    zero = np.zeros((bases, 3))
    return BaseMotion(np.tile(np.eye(3), (bases, 1, 1)), zero, zero, zero, zero, zero)


def _swaying(bases: int) -> Callable[[float], BaseMotion]:
    """Every base swaying as :func:`strands.swaying_base`."""

    def motion(t: float) -> BaseMotion:
        one = strands.swaying_base(t)
        fields = (
            one.rotation,
            one.position,
            one.angular_velocity,
            one.linear_velocity,
            one.angular_acceleration,
            one.linear_acceleration,
        )
        return BaseMotion(*(np.repeat(np.asarray(field), bases, axis=0) for field in fields))

    return motion


def _digest(simulation: Simulation, frames: int, base, **options) -> str:
    digest = hashlib.sha256()
    try:
        for _ in range(frames):
            simulation.advance(FRAME, base, **options)
            digest.update(np.ascontiguousarray(simulation.points()).tobytes())
    finally:
        simulation.close()
    return digest.hexdigest()[:16]


def scenes() -> dict[str, Callable[[], str]]:
    """Each scene's name and the function that steps it and returns its hash."""
    backend = get_backend("numpy")

    def serial() -> str:
        return _digest(Simulation(strands.soft_hair(backend, 3)), 20, _swaying(1))

    def branched() -> str:
        model = build_model(
            strands.random_tree(np.random.default_rng(3)),
            strands.hair_parameters(),
            backend=backend,
        )
        return _digest(Simulation(model), 12, _swaying(model.n_bases))

    def workers() -> str:
        model = strands.hanging_curtain(backend, np.linspace(0.0, 0.5, 24))
        return _digest(Simulation(model, SolverSettings(workers=2)), 12, _swaying(1))

    def contacts() -> str:
        model, obstacles = strands.hair_on_head(backend, 30, 12)
        head, motion = strands.turning_head(obstacles)
        return _digest(Simulation(model, obstacles=obstacles), 10, head, obstacle_motion=motion)

    def contacts_in_workers() -> str:
        model, obstacles = strands.hair_on_head(backend, 30, 12)
        head, motion = strands.turning_head(obstacles)
        simulation = Simulation(
            model,
            SolverSettings(workers=2),
            obstacles=obstacles,
            interaction=StrandInteraction(friction=0.5, volume=0.3),
        )
        return _digest(simulation, 8, head, obstacle_motion=motion)

    def drape() -> str:
        model, obstacles = strands.hair_combed_over_scalp(backend, 60, 12)
        return _digest(Simulation(model, obstacles=obstacles), 8, _still(model.n_bases))

    def limits() -> str:
        limits = JointLimits(swing=math.radians(10.0), twist_min=-0.1, twist_max=0.1)
        simulation = Simulation(strands.soft_hair(backend, 3), joint_limits=limits)
        return _digest(simulation, 12, _swaying(1))

    def path() -> str:
        simulation = Simulation(strands.soft_hair(backend, 3))
        target = lambda t: (0.1 * math.sin(3.0 * t), 0.05, -0.15)  # noqa: E731
        simulation.add_constraint(PointPath(0, 7, target))
        return _digest(simulation, 12, _still(1))

    def pose() -> str:
        model = strands.soft_hair(backend, 3)
        simulation = Simulation(model)
        shifted = simulation.points() + np.linspace(0.0, 0.05, model.n_points)[:, None] * (
            1.0,
            0.0,
            0.0,
        )
        simulation.set_parameter("pose_strength", 1e-3)
        return _digest(simulation, 12, _still(1), pose=Pose(pose_rotations(model, shifted)))

    def fields() -> str:
        turbulence = Turbulence(amplitude=1.5, length_scale=0.4, time_scale=0.8)
        wind = Wind((2.0, 0.0, 0.5), turbulence=turbulence)
        simulation = Simulation(strands.soft_hair(backend, 3))
        return _digest(simulation, 12, _still(1), fields=ForceFields(wind=[wind]))

    def interaction() -> str:
        model = strands.hanging_curtain(backend, np.linspace(0.0, 0.05, 12))
        settings = StrandInteraction(friction=0.5, volume=0.5, target_density=5.0)
        return _digest(Simulation(model, interaction=settings), 12, _swaying(1))

    def error_control() -> str:
        simulation = Simulation(strands.soft_hair(backend, 3), SolverSettings(tolerance=2e-4))
        return _digest(simulation, 12, _swaying(1))

    return {
        "serial": serial,
        "branched": branched,
        "workers": workers,
        "contacts": contacts,
        "contacts_in_workers": contacts_in_workers,
        "drape": drape,
        "limits": limits,
        "path": path,
        "pose": pose,
        "fields": fields,
        "interaction": interaction,
        "error_control": error_control,
    }


def main() -> None:
    for name, run in scenes().items():
        print(name, run(), flush=True)


if __name__ == "__main__":
    main()
