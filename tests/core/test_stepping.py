"""Stepping a frame: adaptive subdivision of failing substeps (core/stepping.py)."""

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    BaseTrajectory,
    InvalidInputError,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
    integrators,
    presets,
)
from oriented_strands.core.model import select_trees
from strands import STILL, batch_rounding, hair_parameters, polyline, soft_hair


def _floppy_tree(backend, beside=()):
    """A 1 m trunk of 8 links with a 4-link branch on its fifth link, a 1 mm rod of E = 0.05 GPa
    and density 1,000 kg/m³: far too soft to stand (it exceeds its critical self-buckling
    length about five times), so it collapses and whips about; ``beside``: more strands of the
    same rod on the same base."""
    youngs_modulus, radius = 0.05e9, 1e-3
    trunk = polyline(8, 1.0, direction=(0.0, 0.0, 1.0))
    branch = trunk[4] + np.linspace(0.0, 1.0, 5)[:, None] * np.array([0.5, 0.0, 0.2])
    parameters = presets.strand_parameters(
        density=1000.0,
        youngs_modulus=youngs_modulus,
        radius=radius,
        poisson_ratio=0.3,
        bend_damping=1e-6,
        twist_damping=1e-6,
    )
    specs = [StrandSpec(trunk, name="trunk"), StrandSpec(branch, parent=(0, 4), name="branch")]
    return build_model(specs + list(beside), parameters, backend=backend)


def _swaying_base(frames):
    times = np.arange(-2, frames + 3) / 24
    matrices = np.broadcast_to(np.eye(4), (len(times), 1, 4, 4)).copy()
    matrices[:, 0, 0, 3] = 0.1 * np.sin(2 * np.pi * times)
    return BaseTrajectory(times, matrices)


def test_a_collapsing_floppy_tree_is_stepped_through_by_subdividing_failing_steps(backend):
    """With its Newton iteration capped at 3 iterations, steps of this tree at 4 substeps per
    frame fail within half a second (at the default cap they converge: the Newton matrix has
    the tension of the whipping links); halving the failing steps carries it through."""
    model = _floppy_tree(backend)
    sim = Simulation(model, SolverSettings(newton_max_iterations=3))
    trajectory = _swaying_base(16)
    subdivisions = 0
    for _ in range(16):
        subdivisions += sim.advance(1 / 24, trajectory).subdivisions
    assert subdivisions > 0
    points = sim.points()
    assert np.isfinite(points).all()
    # The links are rigid, so the shape is made of the rest segments whatever happened.
    lengths = np.linalg.norm(np.diff(points[:9], axis=0), axis=1)
    np.testing.assert_allclose(lengths, 0.125, rtol=1e-9)
    # It collapsed: the trunk's tip hangs below its base.
    assert points[8, 2] < 0.0


def _assert_stepped_as_alone(backend, together, alone, links) -> None:
    """The links ``links`` of the simulation ``together`` end where ``alone``, a simulation of
    just their trees, ends them: exactly on NumPy and the stand-in, within
    :func:`batch_rounding` on CuPy."""
    for name in ("q", "w"):
        np.testing.assert_allclose(
            backend.to_host(getattr(together.state, name))[:, links],
            backend.to_host(getattr(alone.state, name)),
            rtol=0,
            atol=batch_rounding(backend),
        )


def test_only_the_trees_whose_step_fails_are_halved(backend):
    """The collapsing tree beside a short strand hanging from the same swaying base, with the
    Newton iteration capped at 3: the tree's failing steps are halved on a model of its own
    while the strand keeps its whole steps, so each ends exactly as stepped alone (the strand
    alone is never halved)."""
    model = _floppy_tree(backend, [StrandSpec(polyline(3, 0.2, start=(0.3, 0.0, 0.0)))])
    trajectory = _swaying_base(12)
    settings = SolverSettings(newton_max_iterations=3)

    def run(part):
        sim = Simulation(part, settings)
        subdivisions = sum(sim.advance(1 / 24, trajectory).subdivisions for _ in range(12))
        return sim, subdivisions

    together, subdivisions = run(model)
    assert subdivisions > 0
    for trees, halved in (([0], True), ([1], False)):
        part, links = select_trees(model, trees)
        alone, part_subdivisions = run(part)
        assert (part_subdivisions > 0) == halved
        _assert_stepped_as_alone(backend, together, alone, links)


def test_a_tree_whose_iteration_runs_away_is_redone_without_the_others(backend):
    """One of two strands set spinning at 10¹⁶⁰ rad/s: its Newton iteration overflows at every
    halving, down to the deepest, where it falls back; the other strand takes its one whole step
    and ends exactly as stepped alone."""
    specs = [StrandSpec(polyline(4, 0.2, start=(0.3 * k, 0.0, 0.0))) for k in range(2)]
    model = build_model(specs, StrandParameters(bend_stiffness=2e-5), backend=backend)
    settings = SolverSettings(substeps=1)

    def run(part, spinning):
        sim = Simulation(part, settings)
        if spinning:
            sim.state.w[:, part.link_tree == 0] = 1e160
        return sim, sim.advance(1 / 96, STILL)

    together, stats = run(model, True)
    assert stats.subdivisions == settings.max_subdivision_depth
    assert [fallback.strand for fallback in stats.fallbacks] == [0]
    part, links = select_trees(model, [1])
    alone, alone_stats = run(part, False)
    assert alone_stats.subdivisions == 0
    _assert_stepped_as_alone(backend, together, alone, links)


def test_a_tree_running_away_late_in_its_iteration_leaves_the_others_iterating(backend):
    """Two soft strands, one spun at 1,500 rad/s, the other at 10: the first one's Newton
    iteration overflows only after more than a dozen iterations, once refactorised at every
    iterate, and starts again from the step's start, while the other (held to a tolerance of
    1e-10 rad/s, so that it still iterates then) goes on and takes its whole step, exactly as
    stepped alone. An overflow used to end every tree's iteration, and the other strand's step
    was halved along with the runaway one."""
    specs = [
        StrandSpec(polyline(16, 0.25, (1.0, 0.0, 0.0), start=(0.0, y, 0.0))) for y in (0.0, 1.0)
    ]
    parameters = hair_parameters(
        bend_stiffness=2e-7, twist_stiffness=2e-7, bend_damping=2e-9, twist_damping=2e-9
    )
    model = build_model(specs, parameters, backend=backend)
    settings = SolverSettings(substeps=1, order=1, newton_max_iterations=32, newton_tolerance=1e-10)
    restarted_at = []
    restart = integrators._restart_runaway_trees

    def spied(model, state, newton):
        restarted_at.append((model.n_trees, newton.iterations))
        restart(model, state, newton)

    def run(part, speeds):
        sim = Simulation(part, settings)
        spin = np.zeros((3, part.n_links))
        for tree, speed in enumerate(speeds):
            spin[2, backend.to_host(part.link_tree) == tree] = speed
        sim.state.w[...] = backend.from_host(spin)
        return sim, sim.advance(1 / 96, STILL)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(integrators, "_restart_runaway_trees", spied)
        together, stats = run(model, (1500.0, 10.0))
    assert stats.subdivisions > 0
    part, links = select_trees(model, [1])
    alone, alone_stats = run(part, (10.0,))
    assert alone_stats.subdivisions == 0
    # The overflow came in the refactorised iterations of both strands' step, while the other
    # strand iterated.
    trees, iteration = restarted_at[0]
    assert trees == 2
    assert integrators.REFACTORIZE_AFTER < iteration < alone_stats.iterations
    _assert_stepped_as_alone(backend, together, alone, links)


def test_a_step_that_keeps_failing_is_halved_down_to_the_depth_limit_and_names_the_strand(
    backend,
):
    """A failing step is redone as two halves with the base sampled at their ends, recursively;
    only at the depth limit does the simulation give up, naming the strand."""
    model = soft_hair(backend, 2)
    # One Newton iteration can never meet this threshold, so every step fails.
    settings = SolverSettings(
        substeps=1,
        newton_max_iterations=1,
        subdivision_threshold=1e-12,
        max_subdivision_depth=2,
        strict=True,
    )
    sim = Simulation(model, settings, gravity=(9.81, 0.0, 0.0))
    sampled, animated = [], []

    def base(t):
        sampled.append(t)
        return BaseMotion.still(np.eye(4)[None])

    def drag(t):
        animated.append(t)
        return 0.0

    sim.set_parameter("drag", drag)
    message = r"strand [01] \('hair[01]'\).*halved 2 times"
    with pytest.raises(SimulationDivergedError, match=message):
        sim.advance(0.25, base)
    # The whole step, its first half, then the first quarter, where the depth limit is reached;
    # animated parameters are sampled with the base (and once when set).
    assert sampled == [0.25, 0.125, 0.0625]
    assert animated == [0.0, 0.25, 0.125, 0.0625]
    assert sim.time == 0.0


def test_trees_still_failing_at_the_deepest_halving_fall_back_and_are_reported(backend):
    """Without ``strict``, the trees whose step still fails at the deepest halving are carried
    rigidly with their bases for that step (here every step of both strands, at each quarter
    of the frame: their shape stays the rest pose under a sideways gravity) and the advance
    reports them by strand, time and reason instead of stopping."""
    model = soft_hair(backend, 2)
    settings = SolverSettings(
        substeps=1, newton_max_iterations=1, subdivision_threshold=1e-12, max_subdivision_depth=2
    )
    sim = Simulation(model, settings, gravity=(9.81, 0.0, 0.0))
    stats = sim.advance(0.25, STILL)
    assert sim.time == 0.25
    np.testing.assert_allclose(sim.points(), model.rest_points, atol=1e-12)
    assert [(f.strand, f.time) for f in stats.fallbacks] == [
        (strand, quarter * 0.0625) for quarter in (1, 2, 3, 4) for strand in (0, 1)
    ]
    assert all("did not converge" in f.reason for f in stats.fallbacks)
    # The next frame starts from rest, not from the change that failed.
    assert np.isfinite(sim.advance(0.25, STILL).largest_update)


def test_an_explicit_step_that_overflows_falls_back_for_that_strand_alone(backend):
    """A strand far too stiff for the explicit method beside a springless one, on a swaying
    base: the stiff one overflows and falls back, the other swings on and is never reported,
    and no value is left non-finite (a velocity large enough to overflow only the rotation
    once went unnoticed)."""
    # Per link: 16 of rigidity 100 N·m² (the stable implicit case of test_integrators), then 8
    # of a springless chain, which the explicit method steps at 4 substeps.
    stiff = np.r_[np.full(16, 1.0), np.full(8, 0.0)]
    parameters = StrandParameters(
        mass_per_length=5e-3,
        radius=np.r_[np.full(16, 5e-4), np.full(8, 2e-3)],
        bend_stiffness=100.0 * stiff,
        twist_stiffness=100.0 * stiff,
        bend_damping=1e-6 * stiff,
        twist_damping=1e-6 * stiff,
    )
    specs = [
        StrandSpec(polyline(16, 0.3, direction=(1.0, 0.0, -0.2)), name="stiff"),
        StrandSpec(polyline(8, 0.2, start=(0.0, 0.1, 0.0)), name="soft"),
    ]
    model = build_model(specs, parameters, backend=backend)
    sim = Simulation(model, SolverSettings(method="explicit", substeps=4))
    trajectory = _swaying_base(6)
    strands = set()
    for _ in range(6):
        strands |= {f.strand for f in sim.advance(1 / 24, trajectory).fallbacks}
    assert strands == {0}
    assert np.isfinite(sim.points()).all()


def test_bad_strict_setting_is_refused():
    with pytest.raises(InvalidInputError, match="strict"):
        SolverSettings(strict=1)


def test_a_failed_advance_leaves_the_state_as_it_was(backend):
    """An animated parameter that turns invalid at the third substep's end stops the advance
    there: two substeps have stepped (the second into the state's own arrays), but the
    simulation's state is the one before the call."""
    model = soft_hair(backend, 2)
    sim = Simulation(model, gravity=(9.81, 0.0, 0.0))
    sim.advance(1 / 24, STILL)
    before = sim.state.copy()
    sim.set_parameter("drag", lambda t: 0.0 if t < 1 / 24 + 0.025 else -1.0)
    with pytest.raises(InvalidInputError, match="drag must be non-negative"):
        sim.advance(1 / 24, STILL)
    to_host = model.backend.to_host
    assert sim.time == before.time
    np.testing.assert_array_equal(to_host(sim.state.q), to_host(before.q))
    np.testing.assert_array_equal(to_host(sim.state.w), to_host(before.w))
