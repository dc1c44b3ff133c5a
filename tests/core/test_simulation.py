"""The scripting API: what a pipeline TD drives without Blender."""

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    BaseTrajectory,
    ForceFields,
    InvalidInputError,
    Pose,
    PoseTrajectory,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    Turbulence,
    Wind,
    build_model,
    presets,
    spatial,
)
from strands import polyline, random_tree

STILL_BASE = BaseMotion.still(np.eye(4)[None])


def _hair(backend, n_strands=3):
    specs = [
        StrandSpec(
            polyline(8, 0.2, direction=(0.2 * k, 0.0, -1.0), start=(0.05 * k, 0.0, 0.0)),
            name=f"hair{k}",
        )
        for k in range(n_strands)
    ]
    return build_model(
        specs, StrandParameters(bend_stiffness=1e-5, twist_stiffness=1e-5), backend=backend
    )


def test_points_and_frames_have_the_documented_shapes(backend):
    model = _hair(backend)
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


def test_animated_parameters_take_effect(backend):
    model = _hair(backend, 1)
    still = BaseMotion.still(np.eye(4)[None])
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


def test_bad_parameters_are_refused(backend):
    sim = Simulation(_hair(backend))
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
    model = _hair(backend, 2)
    sim = Simulation(model)
    for _ in range(5):
        sim.advance(1 / 24, BaseMotion.still(np.eye(4)[None]))
    pose = np.eye(4)
    pose[:3, 3] = (1.0, 2.0, 3.0)
    sim.reset(pose[None], time=2.0)
    assert sim.time == 2.0
    np.testing.assert_allclose(sim.points(), model.rest_points + (1.0, 2.0, 3.0), atol=1e-12)
    assert sim.stats.iterations == 0


def test_stepping_groups_of_trees_in_threads_gives_the_same_result(backend):
    """Trees are independent and each converges on its own, so splitting the forest into groups
    stepped in threads changes the result by rounding only (serial strands and trees alike)."""
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
    model = build_model(
        specs, StrandParameters(bend_stiffness=0.05, twist_stiffness=0.05), backend=backend
    )
    times = np.arange(-2, 12) / 24
    matrices = np.broadcast_to(model.base_rest_poses, (len(times), *model.base_rest_poses.shape))
    matrices = matrices.copy()
    matrices[:, :, 0, 3] += 0.2 * np.sin(4.0 * times)[:, None]
    trajectory = BaseTrajectory(times, matrices)
    states = []
    for threads in (1, 3):
        sim = Simulation(model, SolverSettings(threads=threads))
        for _ in range(8):
            sim.advance(1 / 24, trajectory)
        states.append(sim.state)
    to_host = model.backend.to_host
    np.testing.assert_allclose(to_host(states[0].q), to_host(states[1].q), rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_host(states[0].w), to_host(states[1].w), rtol=0, atol=1e-10)


def _floppy_tree(backend):
    """A 1 m trunk of 8 links with a 4-link branch on its fifth link, a 1 mm rod of E = 0.05 GPa
    and density 1,000 kg/m³: far too soft to stand (it exceeds its critical self-buckling
    length about five times), so it collapses and whips about."""
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
    return build_model(specs, parameters, backend=backend)


def _swaying_base(frames):
    times = np.arange(-2, frames + 3) / 24
    matrices = np.broadcast_to(np.eye(4), (len(times), 1, 4, 4)).copy()
    matrices[:, 0, 0, 3] = 0.1 * np.sin(2 * np.pi * times)
    return BaseTrajectory(times, matrices)


def test_a_collapsing_floppy_tree_is_stepped_through_by_subdividing_failing_steps(backend):
    """At 4 substeps per frame the Newton iteration fails on this tree within half a second (it
    ran into NaN before steps were subdivided); halving the failing steps carries it through."""
    model = _floppy_tree(backend)
    sim = Simulation(model)
    trajectory = _swaying_base(16)
    subdivisions = 0
    with np.errstate(over="ignore", invalid="ignore"):  # the failed attempts may overflow
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


def test_a_step_that_keeps_failing_is_halved_down_to_the_depth_limit_and_names_the_strand(
    backend,
):
    """A failing step is redone as two halves with the base sampled at their ends, recursively;
    only at the depth limit does the simulation give up, naming the strand."""
    model = _hair(backend, 2)
    # One Newton iteration can never meet this threshold, so every step fails.
    settings = SolverSettings(
        substeps=1, newton_max_iterations=1, subdivision_threshold=1e-12, max_subdivision_depth=2
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


def test_threads_give_the_same_result_with_an_animated_pose_and_fields(backend):
    """The pose and animated parameters are sampled once per substep for every group and the
    fields are evaluated in each group on its own trees: still the same result, and the same
    fields held after."""
    specs = [
        StrandSpec(polyline(5, 0.2, direction=(0.2 * k, 0.1, -1.0), start=(0.1 * k, 0.0, 0.0)))
        for k in range(4)
    ]
    parameters = StrandParameters(
        bend_stiffness=0.01, twist_stiffness=0.01, drag=0.1, pose_strength=0.05, pose_damping=1e-3
    )
    model = build_model(specs, parameters, backend=backend)
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
    for threads in (1, 2):
        sim = Simulation(model, SolverSettings(threads=threads))
        sim.set_parameter("pose_strength", lambda t: np.linspace(0.05, 0.01, 20) * (1 + 10 * t))
        sim.set_parameter("gravity", lambda t: (0.0, 20.0 * t, -9.81))
        for _ in range(3):
            sim.advance(1 / 24, BaseMotion.still(np.eye(4)[None]), pose=pose, fields=fields)
        sims.append(sim)
    to_host = model.backend.to_host
    one, two = sims
    np.testing.assert_allclose(to_host(one.state.q), to_host(two.state.q), rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_host(one.state.w), to_host(two.state.w), rtol=0, atol=1e-10)
    for name in ("wind_velocity", "pose_rotation", "pose_velocity", "pose_strength", "gravity"):
        expected = to_host(getattr(one.control, name))
        np.testing.assert_allclose(to_host(getattr(two.control, name)), expected, atol=1e-12)
    assert np.abs(to_host(one.state.q) - to_host(model.rest_rotation)).max() > 0.05


def test_parameters_animated_by_callables_are_sampled_at_every_substep(backend):
    """A callable parameter is sampled at each substep's end: four substeps per frame equal
    single substeps with the parameter set before each."""
    model = _hair(backend, 2)
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
        animated.advance(1 / 24, STILL_BASE, pose=pose)
        for k in range(1, 5):
            t = frame / 24 + k / 96
            stepped.set_parameter("pose_strength", strength(t))
            stepped.set_parameter("wind_velocity", wind(t))
            stepped.advance(1 / 96, STILL_BASE, pose=pose)
    to_host = model.backend.to_host
    np.testing.assert_allclose(to_host(animated.state.q), to_host(stepped.state.q), atol=1e-12)
    np.testing.assert_allclose(to_host(animated.state.w), to_host(stepped.state.w), atol=1e-9)
    assert np.abs(to_host(animated.state.q) - to_host(model.rest_rotation)).max() > 0.01
    # Setting a plain value ends the animation; a bad callable is refused at once.
    animated.set_parameter("pose_strength", 0.0)
    animated.advance(1 / 24, STILL_BASE)
    assert np.abs(to_host(animated.control.pose_strength)).max() == 0.0
    with pytest.raises(InvalidInputError, match="drag must be non-negative"):
        animated.set_parameter("drag", lambda t: -t - 1.0)
