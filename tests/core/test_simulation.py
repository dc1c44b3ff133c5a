"""The scripting API: what a pipeline TD drives without Blender."""

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    BaseTrajectory,
    InvalidInputError,
    Pose,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
    spatial,
)
from oriented_strands.core.base_motion import CUT_ACCELERATION
from strands import STILL, hair_on_head, polyline, soft_hair, turning_head


def test_points_and_frames_have_the_documented_shapes(backend):
    model = soft_hair(backend)
    sim = Simulation(model)
    assert sim.points().shape == (model.n_points, 3) == (27, 3)
    rotations, positions = sim.link_frames()
    assert rotations.shape == (24, 3, 3)
    assert positions.shape == (24, 3)
    assert list(model.point_offsets) == [0, 9, 18, 27]


def test_a_stiff_strand_follows_a_translating_base_rigidly(backend):
    model = build_model(
        [StrandSpec(polyline(6, 0.2))],
        StrandParameters(bend_stiffness=10.0, twist_stiffness=10.0),
        backend=backend,
    )
    sim = Simulation(model, gravity=(0.0, 0.0, 0.0))
    times = np.arange(0, 30) / 24
    matrices = np.broadcast_to(np.eye(4), (30, 1, 4, 4)).copy()
    matrices[:, 0, 0, 3] = 0.5 * np.sin(times)  # half a metre sway
    trajectory = BaseTrajectory(times, matrices)
    for _ in range(24):
        sim.advance(1 / 24, trajectory)
    shift = np.array([0.5 * np.sin(sim.time), 0.0, 0.0])
    np.testing.assert_allclose(sim.points(), model.rest_points + shift, atol=2e-4)


def _teleported(
    backend, cut_acceleration: float, frames: int = 40
) -> tuple[Simulation, list[float]]:
    """Soft hanging hair on a base swaying 20 cm at 1 Hz and snapped 100 m sideways between
    frames 24 and 25; its largest joint speed (rad/s) after each of ``frames`` frames."""
    model = soft_hair(backend, 3)
    sim = Simulation(model)
    times = np.arange(48) / 24
    matrices = np.broadcast_to(np.eye(4), (48, 1, 4, 4)).copy()
    matrices[:, 0, 0, 3] = 0.2 * np.sin(2 * np.pi * times)
    matrices[24:, 0, 1, 3] += 100.0
    trajectory = BaseTrajectory(times, matrices, cut_acceleration=cut_acceleration)
    speeds = []
    for _ in range(frames):
        sim.advance(1 / 24, trajectory)
        speeds.append(float(np.abs(backend.to_host(sim.state.w)).max()))
    return sim, speeds


def test_a_teleported_base_carries_its_strands_across_the_cut(backend):
    """The cut is no motion: the hair arrives 100 m away hanging as it hung, its joints no
    faster than the sway makes them; through a spline the same jump whips it at once."""
    sim, speeds = _teleported(backend, CUT_ACCELERATION)
    before = max(speeds[:23])
    assert max(speeds[23:]) < 2.0 * before
    points = sim.points()
    assert np.isfinite(points).all()
    roots = points[np.asarray(sim.model.point_offsets[:-1])]
    np.testing.assert_allclose(roots[:, 1], 100.0, atol=1e-6)
    # Still hanging within a hair's length (20 cm) of the roots, not trailing behind.
    assert np.abs(points[:, 1] - 100.0).max() < 0.2
    # The spline through the jump shakes the hair frames before it (20 frames of it: past
    # them its steps are halved over and over).
    _, smeared = _teleported(backend, np.inf, frames=20)
    assert max(smeared) > 10.0 * max(speeds[:20])


def test_animated_parameters_take_effect(backend):
    model = soft_hair(backend, 1)
    still = BaseMotion.still(np.eye(4)[None])
    defaults = {name: backend.to_host(value).copy() for name, value in model.parameters.items()}
    sims = [Simulation(model, gravity=(9.81, 0.0, 0.0)) for _ in range(2)]
    sims[1].set_parameter("bend_stiffness", np.linspace(1e-2, 1e-3, model.n_links))
    sims[1].set_parameter("wind_velocity", (0.0, 2.0, 0.0))
    sims[1].set_parameter("drag", 0.5)
    for sim in sims:
        for _ in range(12):
            sim.advance(1 / 24, still)
    soft, stiff = (np.abs(s.points()[-1, 0] - model.rest_points[-1, 0]) for s in sims)
    assert stiff < 0.5 * soft
    assert sims[1].points()[-1, 1] > 1e-3  # blown along +y
    # A simulation starts from the model's own parameter arrays, and setting one replaces it.
    for name, value in model.parameters.items():
        np.testing.assert_array_equal(backend.to_host(value), defaults[name])


def test_bad_parameters_are_refused(backend):
    sim = Simulation(soft_hair(backend))
    with pytest.raises(InvalidInputError, match="unknown parameter 'stiffness'"):
        sim.set_parameter("stiffness", 1.0)
    with pytest.raises(InvalidInputError, match="non-negative and finite"):
        sim.set_parameter("bend_damping", np.nan)
    with pytest.raises(InvalidInputError, match="wind_velocity"):
        sim.set_parameter("wind_velocity", np.zeros((2, 3)))
    with pytest.raises(InvalidInputError, match="dt must be a positive number"):
        sim.advance(0.0, BaseMotion.still(np.eye(4)[None]))
    with pytest.raises(InvalidInputError, match="base motion has 2 base"):
        sim.advance(1 / 24, BaseMotion.still(np.broadcast_to(np.eye(4), (2, 4, 4))))
    with pytest.raises(InvalidInputError, match="substeps"):
        SolverSettings(substeps=0)


def test_reset_returns_to_the_rest_shape_on_new_base_poses(backend):
    model = soft_hair(backend, 2)
    sim = Simulation(model)
    for _ in range(5):
        sim.advance(1 / 24, BaseMotion.still(np.eye(4)[None]))
    pose = np.eye(4)
    pose[:3, 3] = (1.0, 2.0, 3.0)
    sim.reset(pose[None], time=2.0)
    assert sim.time == 2.0
    np.testing.assert_allclose(sim.points(), model.rest_points + (1.0, 2.0, 3.0), atol=1e-12)
    assert sim.stats.iterations == 0


def test_parameters_animated_by_callables_are_sampled_at_every_substep(backend):
    """A callable parameter is sampled at each substep's end: four substeps per frame equal
    single substeps with the parameter set before each."""
    model = soft_hair(backend, 2)
    rest = model.to_strand_order(model.rest_rotation)
    turn = spatial.quat_exp(np, np.tile([[0.3], [0.0], [0.0]], model.n_links))
    pose = Pose(spatial.quat_multiply(np, rest.T, turn).T)  # every joint bent by 0.3 rad

    def strength(t):
        return np.linspace(1e-3, 1e-4, model.n_links) * (1.0 + 40.0 * t)

    def wind(t):
        return (np.sin(30.0 * t), 0.0, 0.0)

    animated = Simulation(model, SolverSettings(substeps=4))
    animated.set_parameter("pose_strength", strength)
    animated.set_parameter("wind_velocity", wind)
    animated.set_parameter("drag", 0.1)
    stepped = Simulation(model, SolverSettings(substeps=1))
    stepped.set_parameter("drag", 0.1)
    for frame in range(3):
        animated.advance(1 / 24, STILL, pose=pose)
        for k in range(1, 5):
            t = frame / 24 + k / 96
            stepped.set_parameter("pose_strength", strength(t))
            stepped.set_parameter("wind_velocity", wind(t))
            stepped.advance(1 / 96, STILL, pose=pose)
    to_host = model.backend.to_host
    np.testing.assert_allclose(to_host(animated.state.q), to_host(stepped.state.q), atol=1e-12)
    np.testing.assert_allclose(to_host(animated.state.w), to_host(stepped.state.w), atol=1e-9)
    assert np.abs(to_host(animated.state.q) - to_host(model.rest_rotation)).max() > 0.01
    # Setting a plain value ends the animation; a bad callable is refused at once.
    animated.set_parameter("pose_strength", 0.0)
    animated.advance(1 / 24, STILL)
    assert np.abs(to_host(animated.control.pose_strength)).max() == 0.0
    with pytest.raises(InvalidInputError, match="drag must be non-negative"):
        animated.set_parameter("drag", lambda t: -t - 1.0)


class _Interrupted(BaseException):
    """Stands for Ctrl-C or any BaseException a caller's callback raises."""


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt, _Interrupted])
def test_a_failed_advance_leaves_the_simulation_as_it_found_it(failure):
    """Hair on a turning head with joint limits and strand interaction: a call whose base
    motion raises at its third substep, then more frames, ends bit for bit where a run without
    that call ends (state, step history, contact memory, control and statistics put back)."""
    from oriented_strands.core import JointLimits, StrandInteraction, get_backend

    backend = get_backend("numpy")
    model, obstacles = hair_on_head(backend, 6, 8)
    head, obstacle_motion = turning_head(obstacles)
    runs = []
    for interrupted in (False, True):
        sim = Simulation(
            model,
            SolverSettings(workers=1),
            obstacles=obstacles,
            joint_limits=JointLimits(swing=0.5),
            interaction=StrandInteraction(friction=0.3, volume=1.0),
        )
        for frame in range(8):
            if interrupted and frame == 5:
                with pytest.raises(failure):
                    sim.advance(
                        1 / 24, _failing_at(3, head, failure), obstacle_motion=obstacle_motion
                    )
            stats = sim.advance(1 / 24, head, obstacle_motion=obstacle_motion)
        runs.append((sim, stats, sim.constraint_stats, sim.interaction_stats))
    (plain, *plain_stats), (again, *again_stats) = runs
    assert plain_stats[1].contacts > 0
    assert plain_stats == again_stats
    np.testing.assert_array_equal(again.state.q, plain.state.q)
    np.testing.assert_array_equal(again.state.w, plain.state.w)
    assert again.time == plain.time


def _failing_at(call, motion, failure):
    """``motion`` that raises ``failure`` at its ``call``-th sample."""
    calls = []

    def failing(t):
        calls.append(t)
        if len(calls) == call:
            raise failure("interrupted")
        return motion(t)

    return failing
