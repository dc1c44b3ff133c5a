"""Random simulations the way a pipeline feeds them (property-based, fixed seed): random strands,
parameters over many orders of magnitude and violent base motions (held, shaken, spun,
accelerated, teleported). Whatever comes, an advance returns finite points or raises one of the
documented errors; with fallback on (the default) no frame stops, every tree that fell back is
reported by strand, and the work of a frame is bounded by its substeps and halvings.

``ORIENTED_STRANDS_FUZZ_SCALE`` multiplies the 25 simulations drawn (a release runs thousands:
``docs/development.md``)."""

import math
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oriented_strands.core import (
    BaseMotion,
    BaseTrajectory,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
)

FUZZ = settings(
    max_examples=25 * int(os.environ.get("ORIENTED_STRANDS_FUZZ_SCALE", "1")),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FRAME = 1.0 / 24.0
FRAMES = 6


def log_uniform(low, high):
    return st.floats(math.log10(low), math.log10(high)).map(lambda power: 10.0**power)


@st.composite
def models(draw):
    """1-6 strands of 2-20 links (5-40 cm) hanging from a row of roots, with rigidity, mass and
    damping each drawn over orders of magnitude."""
    strands = draw(st.integers(1, 6))
    links = draw(st.integers(2, 20))
    length = draw(st.floats(0.05, 0.4))
    heights = np.linspace(0.0, -length, links + 1)
    specs = [
        StrandSpec(np.stack((np.full(links + 1, 0.05 * k), np.zeros(links + 1), heights), axis=1))
        for k in range(strands)
    ]
    rigidity = draw(log_uniform(1e-9, 1e2))
    damping = draw(log_uniform(1e-12, 1e-2))
    parameters = StrandParameters(
        mass_per_length=draw(log_uniform(1e-6, 1.0)),
        radius=1e-3,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=damping,
        twist_damping=damping,
    )
    return build_model(specs, parameters)


def _pose(translation, angle=0.0):
    matrix = np.eye(4)
    matrix[:3, 3] = translation
    cos, sin = math.cos(angle), math.sin(angle)
    matrix[:2, :2] = [[cos, -sin], [sin, cos]]
    return matrix


@st.composite
def motions(draw):
    """The base's motion over the frames: a callable of time (the engine samples it at every
    substep), or a BaseMotion held."""
    kind = draw(st.sampled_from(["held", "shaken", "spun", "accelerated", "teleported"]))
    if kind == "held":
        return BaseMotion.still(_pose((0.0, 0.0, 0.0))[None])
    if kind == "accelerated":
        acceleration = draw(log_uniform(1.0, 1e3))
        return BaseMotion(
            rotation=np.eye(3)[None],
            position=np.zeros((1, 3)),
            angular_velocity=np.zeros((1, 3)),
            linear_velocity=np.zeros((1, 3)),
            angular_acceleration=np.zeros((1, 3)),
            linear_acceleration=np.array([[acceleration, 0.0, 0.0]]),
        )
    times = np.arange(-2, FRAMES + 3) * FRAME
    if kind == "shaken":
        amplitude = draw(log_uniform(1e-3, 0.3))
        frequency = draw(st.floats(0.5, 12.0))
        offsets = amplitude * np.sin(2.0 * math.pi * frequency * times)
        matrices = [_pose((offset, 0.0, 0.0)) for offset in offsets]
    elif kind == "spun":
        rate = draw(st.floats(1.0, 50.0))
        matrices = [_pose((0.0, 0.0, 0.0), rate * t) for t in times]
    else:
        jump = draw(log_uniform(0.01, 100.0))
        at = draw(st.integers(1, FRAMES - 1))
        matrices = [_pose((jump if k - 2 >= at else 0.0, 0.0, 0.0)) for k in range(len(times))]
    return BaseTrajectory(times, np.array(matrices)[:, None])


@FUZZ
@given(model=models(), motion=motions(), substeps=st.integers(1, 16))
def test_a_random_simulation_never_stops_and_reports_what_fell_back(model, motion, substeps):
    solver = SolverSettings(substeps=substeps, workers=1)
    simulation = Simulation(model, solver)
    for _ in range(FRAMES):
        stats = simulation.advance(FRAME, motion)
        assert np.isfinite(simulation.points()).all()
        # Every halving splits a step in two, at most max_subdivision_depth times deep.
        halvings = substeps * (2**solver.max_subdivision_depth - 1)
        assert stats.subdivisions <= halvings
        for fallback in stats.fallbacks:
            assert 0 <= fallback.strand < model.n_strands
            assert fallback.reason
            assert simulation.time - FRAME - 1e-9 <= fallback.time <= simulation.time + 1e-9
