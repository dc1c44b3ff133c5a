"""Worker processes: a model stepped in groups of trees side by side (core/workers.py).

They run on the NumPy backend only, so these tests do not take the backend fixture.
"""

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from oriented_strands.core import (
    Backend,
    BaseMotion,
    BaseTrajectory,
    ForceFields,
    JointLimits,
    PointPath,
    PoseTrajectory,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    Turbulence,
    Wind,
    WorkerError,
    build_model,
    presets,
    spatial,
    workers,
)
from oriented_strands.core.model import select_trees
from strands import STILL, hair_on_head, polyline, random_tree, soft_hair, turning_head
from strict_xp import strict_xp


def _forest(backend="numpy"):
    """Four serial strands of 6-9 links and two random branched trees."""
    specs = [
        StrandSpec(polyline(6 + k, 0.3, direction=(0.3, 0.1 * k, -1.0), start=(0.1 * k, 0.0, 0.0)))
        for k in range(4)
    ]
    rng = np.random.default_rng(7)
    for _ in range(2):
        offset = len(specs)
        specs += [
            StrandSpec(s.points, parent=s.parent and (s.parent[0] + offset, s.parent[1]))
            for s in random_tree(rng)
        ]
    return build_model(
        specs, StrandParameters(bend_stiffness=0.05, twist_stiffness=0.05), backend=backend
    )


def _swaying(model):
    times = np.arange(-2, 15) / 24
    matrices = np.broadcast_to(model.base_rest_poses, (len(times), *model.base_rest_poses.shape))
    matrices = matrices.copy()
    matrices[:, :, 0, 3] += 0.2 * np.sin(4.0 * times)[:, None]
    return BaseTrajectory(times, matrices)


def _run(model, settings, frames, base):
    sim = Simulation(model, settings)
    for _ in range(frames):
        sim.advance(1 / 24, base)
    sim.close()
    return sim


def test_stepping_groups_of_trees_in_worker_processes_gives_the_same_result():
    """Trees are independent and each converges on its own, so splitting the forest into groups
    stepped in processes changes the result by rounding only (serial strands and trees alike)."""
    model = _forest()
    base = _swaying(model)
    one = _run(model, SolverSettings(workers=1), 8, base)
    three = Simulation(model, SolverSettings(workers=3))
    assert (one.processes, three.processes) == (1, 3)
    for _ in range(8):
        three.advance(1 / 24, base)
    three.close()
    np.testing.assert_allclose(three.state.q, one.state.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(three.state.w, one.state.w, rtol=0, atol=1e-10)
    np.testing.assert_allclose(three.points(), one.points(), rtol=0, atol=1e-12)
    assert three.time == one.time
    assert np.abs(one.state.q - model.rest_rotation).max() > 0.05


def test_workers_take_the_steps_of_one_process_under_a_tolerance():
    """With error control the parent chooses each frame's steps from the smallest step the
    groups' estimates ask for, and the groups redo the same trees in halves: the same steps,
    estimates and motion as in one process."""
    model = _forest()
    base = _swaying(model)
    one = Simulation(model, SolverSettings(workers=1, tolerance=2e-4))
    three = Simulation(model, SolverSettings(workers=3, tolerance=2e-4))
    counts, redone = [], 0
    for _ in range(8):
        alone, grouped = one.advance(1 / 24, base), three.advance(1 / 24, base)
        assert grouped.substeps == alone.substeps
        # Each group counts its own redone steps.
        assert (grouped.subdivisions > 0) == (alone.subdivisions > 0)
        assert grouped.local_error == pytest.approx(alone.local_error, rel=1e-6)
        assert grouped.next_step == pytest.approx(alone.next_step, rel=1e-9)
        counts.append(alone.substeps)
        redone += alone.subdivisions
    three.close()
    assert len(set(counts)) > 1, counts
    assert redone > 0
    np.testing.assert_allclose(three.points(), one.points(), rtol=0, atol=1e-10)


def test_workers_give_the_same_result_with_an_animated_pose_and_fields():
    """The pose and animated parameters are sampled once per substep in the parent and the
    fields are evaluated in each worker on its own trees: still the same result, and the same
    fields held after."""
    specs = [
        StrandSpec(polyline(5, 0.2, direction=(0.2 * k, 0.1, -1.0), start=(0.1 * k, 0.0, 0.0)))
        for k in range(4)
    ]
    parameters = StrandParameters(
        bend_stiffness=0.01, twist_stiffness=0.01, drag=0.1, pose_strength=0.05, pose_damping=1e-3
    )
    model = build_model(specs, parameters)
    rest = model.to_strand_order(model.rest_rotation)
    rng = np.random.default_rng(5)
    keys = [
        spatial.quat_multiply(
            np, rest.T, spatial.quat_exp(np, rng.uniform(-0.5, 0.5, (3, model.n_links)))
        ).T
        for _ in range(6)
    ]
    pose = PoseTrajectory(np.arange(6) / 24, np.stack(keys))
    fields = ForceFields(wind=[Wind((0.0, 2.0, 0.0), turbulence=Turbulence(1.0, 0.5, 0.3))])
    sims = []
    for count in (1, 2):
        sim = Simulation(model, SolverSettings(workers=count))
        sim.set_parameter("pose_strength", lambda t: np.linspace(0.05, 0.01, 20) * (1 + 10 * t))
        sim.set_parameter("gravity", lambda t: (0.0, 20.0 * t, -9.81))
        for _ in range(3):
            sim.advance(1 / 24, STILL, pose=pose, fields=fields)
        sim.close()
        sims.append(sim)
    one, two = sims
    np.testing.assert_allclose(two.state.q, one.state.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(two.state.w, one.state.w, rtol=0, atol=1e-10)
    for name in ("wind_velocity", "pose_rotation", "pose_velocity", "pose_strength", "gravity"):
        expected = getattr(one.control, name)
        np.testing.assert_allclose(getattr(two.control, name), expected, atol=1e-12)
    assert np.abs(one.state.q - model.rest_rotation).max() > 0.05


# Three Newton iterations a step: the collapsing trees' steps fail from time to time (at the
# default cap they converge).
CAPPED = 3


def _floppy_trees():
    """Two 1 m trunks of 8 links, each with a 4-link branch, of a 1 mm rod of E = 0.05 GPa: far
    too soft to stand, so they collapse and whip about, and with their Newton iteration capped
    (:data:`CAPPED`) their steps need subdividing."""
    parameters = presets.strand_parameters(
        density=1000.0,
        youngs_modulus=0.05e9,
        radius=1e-3,
        poisson_ratio=0.3,
        bend_damping=1e-6,
        twist_damping=1e-6,
    )
    specs = []
    for k, x in enumerate((0.0, 0.5)):
        trunk = polyline(8, 1.0, direction=(0.0, 0.0, 1.0), start=(x, 0.0, 0.0))
        branch = trunk[4] + np.linspace(0.0, 1.0, 5)[:, None] * np.array([0.5, 0.0, 0.2])
        specs += [StrandSpec(trunk), StrandSpec(branch, parent=(2 * k, 4))]
    return build_model(specs, parameters)


def test_a_step_subdivided_in_a_worker_is_driven_by_the_parent_at_the_halves():
    """A worker subdivides its own group's failing steps, asking the parent for the base at the
    halves (the base is a callable only the parent can call): each group ends as a simulation of
    its trees alone does, and as the whole model in one process does (a step failing on one
    tree is halved for that tree only)."""
    model = _floppy_trees()
    times = np.arange(-2, 19) / 24
    matrices = np.broadcast_to(model.base_rest_poses, (len(times), 1, 4, 4)).copy()
    matrices[:, :, 0, 3] += 0.1 * np.sin(2 * np.pi * times)[:, None]
    trajectory = BaseTrajectory(times, matrices)
    sampled = []

    def base(t):
        sampled.append(round(t, 12))
        return trajectory(t)

    frames = 16
    sim = Simulation(model, SolverSettings(workers=2, newton_max_iterations=CAPPED))
    subdivisions = sum(sim.advance(1 / 24, base).subdivisions for _ in range(frames))
    sim.close()
    one = _run(model, SolverSettings(workers=1, newton_max_iterations=CAPPED), frames, trajectory)
    np.testing.assert_array_equal(sim.state.q, one.state.q)
    np.testing.assert_array_equal(sim.state.w, one.state.w)
    alone = []
    for trees in workers.tree_groups(model, 2):
        part, links = select_trees(model, trees)
        settings = SolverSettings(workers=1, newton_max_iterations=CAPPED)
        alone.append((_run(part, settings, frames, trajectory), links))
    assert subdivisions > 0
    assert set(sampled) - {round(k / 96, 12) for k in range(1, 4 * frames + 1)}
    for part_sim, links in alone:
        np.testing.assert_allclose(sim.state.q[:, links], part_sim.state.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sim.state.w[:, links], part_sim.state.w, rtol=0, atol=1e-9)
    # It collapsed: both trunks' tips hang below their bases.
    points = sim.points()
    assert points[8, 2] < 0.0
    assert points[22, 2] < 0.0


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
def test_a_sample_that_fails_while_a_worker_waits_for_it_leaves_no_trace(failure):
    """The base fails (an error, or Ctrl-C) at the half of a subdivided step, which a worker
    asked for: the exception comes through, every worker goes back as the call found it and
    stays, and the frames after it equal, bit for bit, a run where the call was never made."""
    model = _floppy_trees()
    times = np.arange(-2, 19) / 24
    matrices = np.broadcast_to(model.base_rest_poses, (len(times), 1, 4, 4)).copy()
    matrices[:, :, 0, 3] += 0.1 * np.sin(2 * np.pi * times)[:, None]
    trajectory = BaseTrajectory(times, matrices)
    substep_ends = {round(k / 96, 12) for k in range(1, 200)}
    halved = []

    def base(t):
        if round(t, 12) not in substep_ends:
            halved.append(t)
            raise failure(f"no base at {t}")
        return trajectory(t)

    settings = SolverSettings(workers=2, newton_max_iterations=CAPPED)
    sim = Simulation(model, settings)
    failed_at = None
    try:
        for frame in range(16):
            try:
                sim.advance(1 / 24, base)
            except failure:
                failed_at = frame
                break
        assert failed_at is not None
        assert halved
        assert sim.processes == 2
        for _ in range(3):
            sim.advance(1 / 24, trajectory)
        failed = sim.points()
    finally:
        sim.close()
    clean = _run(model, settings, failed_at + 3, trajectory)
    np.testing.assert_array_equal(failed, clean.points())


def test_a_worker_whose_step_diverges_names_the_strand_and_leaves_the_state_as_it_was():
    model = soft_hair("numpy", 2)
    # One Newton iteration can never meet this threshold, so every step fails.
    settings = SolverSettings(
        substeps=1,
        newton_max_iterations=1,
        subdivision_threshold=1e-12,
        max_subdivision_depth=2,
        strict=True,
        workers=2,
    )
    sim = Simulation(model, settings, gravity=(9.81, 0.0, 0.0))
    before = sim.state.copy()
    with pytest.raises(SimulationDivergedError, match=r"strand [01] \('hair[01]'\).*halved 2"):
        sim.advance(0.25, STILL)
    assert sim.time == 0.0
    np.testing.assert_array_equal(sim.state.q, before.q)
    np.testing.assert_array_equal(sim.state.w, before.w)
    sim.close()


def _stiff_and_soft():
    """A stiff strand and, half a metre away (a group of its own in two processes), a soft one
    that a jolt of the base makes diverge."""
    specs = [
        StrandSpec(polyline(10, 0.3, direction=(0.0, 0.0, -1.0), start=(x, 0.0, 0.0)))
        for x in (0.0, 0.5)
    ]
    rigidity = np.repeat([1e-2, 1e-6], 10)
    parameters = StrandParameters(
        bend_stiffness=rigidity, twist_stiffness=rigidity, bend_damping=1e-8, twist_damping=1e-8
    )
    return build_model(specs, parameters)


@pytest.mark.parametrize("processes", [1, 2])
def test_an_advance_that_fails_in_a_worker_leaves_no_trace(processes):
    """In strict mode a jolt of the base makes the soft strand diverge while the stiff one
    steps: the advance raises, every group goes back as the call found it (the step history,
    the Newton predictor, the control), and the frames after it equal, bit for bit, a run where
    the call was never made, in one process and in two (one group failing, one stepping)."""
    model = _stiff_and_soft()
    jolt = BaseMotion(
        rotation=np.eye(3)[None],
        position=np.zeros((1, 3)),
        angular_velocity=np.array([[0.0, 0.0, 100.0]]),
        linear_velocity=np.zeros((1, 3)),
        angular_acceleration=np.zeros((1, 3)),
        linear_acceleration=np.array([[100.0, 0.0, 0.0]]),
    )
    settings = SolverSettings(
        strict=True, max_subdivision_depth=1, newton_max_iterations=4, workers=processes
    )
    sway = _swaying(model)
    runs = []
    for failing in (False, True):
        sim = Simulation(model, settings)
        try:
            assert sim.processes == processes
            for _ in range(2):
                sim.advance(1 / 24, sway)
            if failing:
                with pytest.raises(SimulationDivergedError, match="strand 1"):
                    sim.advance(1 / 24, jolt)
                assert sim.processes == processes
            for _ in range(4):
                sim.advance(1 / 24, sway)
            runs.append((sim.points(), sim.state.w.copy(), sim.stats))
        finally:
            sim.close()
    (points, w, stats), (failed_points, failed_w, failed_stats) = runs
    np.testing.assert_array_equal(failed_points, points)
    np.testing.assert_array_equal(failed_w, w)
    assert failed_stats == stats


def test_trees_that_fall_back_in_workers_are_reported_as_in_one_process():
    """Every step of both strands fails (one Newton iteration, an unreachable threshold): in
    two worker processes the advance reports the same fallbacks, by whole-model strand, and
    ends in the same state as in one."""
    model = soft_hair("numpy", 2)
    runs = []
    for processes in (1, 2):
        settings = SolverSettings(
            substeps=1,
            newton_max_iterations=1,
            subdivision_threshold=1e-12,
            max_subdivision_depth=2,
            workers=processes,
        )
        sim = Simulation(model, settings, gravity=(9.81, 0.0, 0.0))
        assert sim.processes == processes
        runs.append((sim.advance(0.25, STILL).fallbacks, sim.points()))
        sim.close()
    (one, one_points), (two, two_points) = runs
    assert len(one) == 8
    assert one == two
    np.testing.assert_array_equal(one_points, two_points)


def test_a_worker_that_dies_is_reported_and_the_state_is_kept():
    model = _forest()
    sim = Simulation(model, SolverSettings(workers=2))
    sim.advance(1 / 24, STILL)
    before = sim.state.copy()
    # Fault injection: no public handle kills a worker.
    process = sim._stepping._workers[1]._process
    process.kill()
    process.wait()
    with pytest.raises(WorkerError, match=r"worker process 1 .*exited with status -9"):
        sim.advance(1 / 24, STILL)
    np.testing.assert_array_equal(sim.state.q, before.q)
    sim.close()


def test_worker_processes_need_the_numpy_backend():
    model = _forest(Backend("strict", strict_xp, "float64"))
    with pytest.raises(WorkerError, match="NumPy backend only"):
        Simulation(model, SolverSettings(workers=2))
    # Left to itself, a model on another backend steps in this process.
    assert Simulation(model).processes == 1


def test_closing_or_dropping_a_simulation_ends_its_workers():
    model = _forest()
    sim = Simulation(model, SolverSettings(workers=2))
    processes = [worker._process for worker in sim._stepping._workers]
    sim.close()
    assert all(process.poll() is not None for process in processes)
    # Closed, it steps on in this process.
    assert sim.processes == 1
    sim.advance(1 / 24, STILL)
    sim = Simulation(model, SolverSettings(workers=2))
    processes = [worker._process for worker in sim._stepping._workers]
    del sim
    gc.collect()
    for process in processes:
        assert process.wait(timeout=10) == 0


def test_a_reset_makes_the_workers_start_afresh():
    """After a reset the next step starts from the rest velocities, not from the last frame's
    velocity change (the Newton predictor, which the workers keep)."""
    model = _forest()
    base = _swaying(model)
    fresh = _run(model, SolverSettings(workers=1), 3, base)
    sim = Simulation(model, SolverSettings(workers=2))
    for _ in range(5):
        sim.advance(1 / 24, base)
    sim.reset()
    for _ in range(3):
        sim.advance(1 / 24, base)
    sim.close()
    np.testing.assert_allclose(sim.state.q, fresh.state.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sim.state.w, fresh.state.w, rtol=0, atol=1e-10)


def _strands(count, links=2):
    specs = [StrandSpec(polyline(links, 0.1, start=(0.01 * k, 0.0, 0.0))) for k in range(count)]
    return build_model(specs, StrandParameters())


def test_automatic_worker_count_follows_cores_and_level_width(monkeypatch):
    """Automatic splitting needs wide depth levels: many links in few, long strands do not."""
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    automatic = SolverSettings()
    width = workers.MIN_LEVEL_WIDTH_PER_WORKER
    assert workers.worker_count(_strands(2 * width), automatic) == 2
    assert workers.worker_count(_strands(2 * width - 1, 8), automatic) == 1
    strict = build_model(
        [StrandSpec(polyline(2, 0.1, start=(0.01 * k, 0.0, 0.0))) for k in range(2 * width)],
        StrandParameters(),
        backend=Backend("strict", strict_xp),
    )
    assert workers.worker_count(strict, automatic) == 1
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert workers.worker_count(_strands(64 * width), automatic) == workers.MAX_AUTOMATIC_WORKERS
    # Asked for, it is at most one per tree.
    assert workers.worker_count(_strands(3), SolverSettings(workers=5)) == 3


def test_workers_step_obstacles_and_joint_limits_as_one_process_does():
    """Each worker resolves the contacts and joint limits of its own trees: hair on a turning
    head with per-link swing limits ends as in one process, with the same contacts counted, also
    when the obstacles' last motion is then held. The parent samples the head once per substep
    start and end, before the workers step, so they need not ask for it."""
    model, obstacles = hair_on_head("numpy", n_strands=6, n_links=6)
    swing = np.tile(np.linspace(0.6, 0.15, 6), 6)  # per link, strand order: tighter to the tip
    turning, obstacle_motion = turning_head(obstacles)
    sampled = []

    def head(t):
        sampled.append(t)
        return turning(t)

    runs = []
    for count in (1, 2):
        sim = Simulation(
            model,
            SolverSettings(workers=count),
            obstacles=obstacles,
            joint_limits=JointLimits(swing=swing),
        )
        assert sim.processes == count
        contacts = limit_rows = subdivisions = 0
        for frame in range(10):
            sampled.clear()
            # The last frames hold the obstacles where the last substep saw them.
            stats = sim.advance(
                1 / 24, head, obstacle_motion=obstacle_motion if frame < 8 else None
            )
            # Sampled once each, before the workers step: none had to ask for a sample.
            assert count == 1 or len(set(sampled)) == len(sampled)
            subdivisions += stats.subdivisions
            contacts += sim.constraint_stats.contacts
            limit_rows += sim.constraint_stats.limit_rows
        sim.close()
        runs.append((sim, contacts, limit_rows, subdivisions))
    (one, *one_counts), (two, *two_counts) = runs
    assert one_counts == two_counts
    assert one_counts[0] > 0
    assert one_counts[1] > 0
    assert one_counts[2] == 0  # else each group would be halved on its own
    # Each worker's group of three trees solves densely by LAPACK (its BLAS runs one thread),
    # the one process by the block factorisation (dynamics.DenseTrees): solves equal to rounding
    # end the Newton and contact iterations at their tolerances a little apart (0.24 µrad and
    # 14 nm measured; the sweeps and LAPACK in one process part by as much).
    np.testing.assert_allclose(two.state.q, one.state.q, rtol=0, atol=1e-6)
    np.testing.assert_allclose(two.points(), one.points(), rtol=0, atol=1e-7)


def test_an_animated_constraint_brings_the_simulation_back_into_one_process():
    """Also one with obstacles: the path is followed, in this process, and so are the
    obstacles."""
    model, obstacles = hair_on_head("numpy", n_strands=4, n_links=6)
    sim = Simulation(model, SolverSettings(workers=2), obstacles=obstacles)
    sim.advance(1 / 24, STILL)
    tip = sim.points()[model.point_offsets[1] - 1]
    sim.add_constraint(PointPath(strand=0, link=5, path=lambda t: tip))
    assert sim.processes == 1
    for _ in range(3):
        sim.advance(1 / 24, STILL)
    np.testing.assert_allclose(sim.points()[model.point_offsets[1] - 1], tip, atol=2e-3)
    assert sim.constraint_stats.bilateral_rows == 3
    assert sim.constraint_stats.contacts > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_processes_run_their_blas_on_one_thread_and_the_host_keeps_its_own():
    """Each worker has a core of its own; the BLAS threads of the host are not its business."""
    before = {name: os.environ.get(name) for name in workers.ONE_THREAD}
    sim = Simulation(soft_hair("numpy", 4), SolverSettings(workers=2))
    try:
        assert sim.processes == 2
        for worker in sim._stepping._workers:
            environment = Path(f"/proc/{worker._process.pid}/environ").read_bytes().split(b"\0")
            for name in workers.ONE_THREAD:
                assert f"{name}=1".encode() in environment
    finally:
        sim.close()
    assert {name: os.environ.get(name) for name in workers.ONE_THREAD} == before
