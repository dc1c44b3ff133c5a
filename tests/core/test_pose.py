"""Posable dynamics (paper §6.5) against the damped oscillator's closed form and SciPy's ODE
solver, Euler–Bernoulli, steady tracking of a moving target, the dense Newton reference, and the
rest shape's own construction."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from oriented_strands.core import (
    InvalidInputError,
    InvalidStrandError,
    Pose,
    PoseTrajectory,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
    pose_rotations,
    spatial,
)
from oriented_strands.core.dynamics import Data
from oriented_strands.core.integrators import step_dense_reference
from oriented_strands.core.state import Control, State
from strands import FREE, STILL, polyline, random_tree, step_afresh, swaying_base


def _turned(rotations, angles, axis=0):
    """Joint rotations (n, 4) turned by ``angles`` (n,) about each link's own axis ``axis``."""
    vectors = np.zeros((3, len(rotations)))
    vectors[axis] = angles
    return spatial.quat_multiply(np, rotations.T, spatial.quat_exp(np, vectors)).T


def _angles_from(target, q, axis=0):
    """Signed rotation (n,) of joint rotations ``q`` (n, 4) away from ``target`` about ``axis``."""
    deviation = spatial.quat_normalize(
        np, spatial.quat_multiply(np, spatial.quat_conjugate(np, target.T), q.T)
    )
    return 2.0 * np.arctan2(deviation[1 + axis], deviation[0])


def _joint_state(model, sim):
    return model.to_strand_order(sim.state.q), model.to_strand_order(sim.state.w)


# --- one joint: the damped oscillator ----------------------------------------------------------

LENGTH, RADIUS, MASS_PER_LENGTH = 0.2, 1e-3, 0.05
# Inertia of the rod about its joint, and the natural angular frequency of the pose spring.
INERTIA = MASS_PER_LENGTH * LENGTH * (LENGTH**2 / 3 + RADIUS**2 / 4)
OMEGA = 2 * np.pi * 1.5
STIFFNESS = INERTIA * OMEGA**2  # K, N·m/rad: pose_strength / joint length


def _single_joints(backend, damping_ratios):
    """One free rod per damping ratio, hanging from a still base, with a pose spring only."""
    specs = [
        StrandSpec(polyline(1, LENGTH, start=(0.1 * k, 0.0, 0.0)))
        for k in range(len(damping_ratios))
    ]
    joint_length = LENGTH / 2  # a root joint stands for half its segment
    damping = 2 * np.asarray(damping_ratios) * np.sqrt(STIFFNESS * INERTIA)
    parameters = StrandParameters(
        mass_per_length=MASS_PER_LENGTH,
        radius=RADIUS,
        pose_strength=STIFFNESS * joint_length,
        pose_damping=damping * joint_length,
        **FREE,
    )
    return build_model(specs, parameters, backend=backend), damping


def _release(backend, damping_ratios, amplitudes, steps_per_tau, duration, order=2):
    """Each rod released ``amplitudes`` rad away from its target about its x axis, no gravity,
    stepped with the implicit method of ``order``; returns the model, damping coefficients,
    times and angles from the target (F, n)."""
    model, damping = _single_joints(backend, damping_ratios)
    rest = model.to_strand_order(model.rest_rotation)
    target = _turned(rest, -np.asarray(amplitudes))  # the rods start at rest, off the target
    settings = SolverSettings(
        order=order, substeps=1, newton_tolerance=1e-12, newton_max_iterations=30
    )
    sim = Simulation(model, settings, gravity=(0.0, 0.0, 0.0))
    h = 1.0 / (OMEGA * steps_per_tau)
    pose = Pose(target)
    times, angles = [0.0], [np.asarray(amplitudes, dtype=float)]
    for _ in range(int(round(duration * steps_per_tau))):
        sim.advance(h, STILL, pose=pose)
        times.append(sim.time)
        angles.append(_angles_from(target, _joint_state(model, sim)[0]))
    return model, damping, np.array(times), np.array(angles)


@pytest.mark.parametrize(
    ("order", "largest_errors", "slowest", "fastest"),
    [(1, (0.006, 0.035, 0.05), 1.8, 2.2), (2, (0.001, 0.001, 0.002), 3.2, 4.2)],
)
def test_a_pose_spring_on_one_joint_is_the_damped_oscillator(
    backend, order, largest_errors, slowest, fastest
):
    """Without gravity a rod with pose strength and damping obeys
    ``I θ'' + D θ' + 2K tan(θ/2) = 0``: for small angles the closed form (critically damped:
    within 1% of the target after 7 τ, ``τ = √(I/K)``; underdamped at ζ = 0.2), for a 115°
    release SciPy's integration of the non-linear law. Backward Euler converges to them at first
    order in the step, BDF2 at second."""
    ratios, amplitudes = (1.0, 0.2, 0.2), (1e-3, 1e-3, 2.0)
    errors = []
    for steps_per_tau in (16, 32):
        _, damping, times, angles = _release(backend, ratios, amplitudes, steps_per_tau, 7.0, order)
        wt = OMEGA * times
        critical = amplitudes[0] * (1 + wt) * np.exp(-wt)
        damped = np.sqrt(1 - ratios[1] ** 2)
        underdamped = (
            amplitudes[1]
            * np.exp(-ratios[1] * wt)
            * (np.cos(damped * wt) + ratios[1] / damped * np.sin(damped * wt))
        )
        solution = solve_ivp(
            lambda t, y, d=damping[2]: [
                y[1],
                -(d * y[1] + 2 * STIFFNESS * np.tan(y[0] / 2)) / INERTIA,
            ],
            (0.0, times[-1]),
            [amplitudes[2], 0.0],
            t_eval=times,
            rtol=1e-11,
            atol=1e-12,
        )
        expected = np.stack((critical, underdamped, solution.y[0]), axis=1)
        errors.append(np.abs(angles - expected).max(axis=0) / amplitudes)
    coarse, fine = errors
    assert np.all(fine < largest_errors), fine
    ratio = coarse / fine
    assert np.all((slowest < ratio) & (ratio < fastest)), ratio
    # The critically damped joint has come within 1% of its target after 7 τ.
    index = np.argmin(np.abs(times - 7.0 / OMEGA))
    assert abs(angles[index, 0]) < 0.01 * amplitudes[0]


def _zero_crossings(times, angles):
    """The times where ``angles`` crosses zero downward, linearly interpolated."""
    at = np.nonzero((angles[:-1] > 0) & (angles[1:] <= 0))[0]
    return times[at] + (times[at + 1] - times[at]) * angles[at] / (angles[at] - angles[at + 1])


def test_bdf2_keeps_the_amplitude_and_phase_of_a_lightly_damped_oscillator(backend):
    """A rod on a pose spring at 1.5 Hz with 2 % of critical damping, released at 1 mrad and
    stepped at 96 steps per second (4 substeps of a 24 fps frame): after ten periods BDF2's
    amplitude is within 1 % of the closed form's and its phase within 1 % of the ten periods'
    (measured: 0.9 % low, 0.03 periods late); backward Euler keeps 6 % of the amplitude."""
    ratio, periods = 0.02, 10
    damped = np.sqrt(1 - ratio**2)
    period = 2 * np.pi / (OMEGA * damped)
    duration = (periods + 0.25) * period * OMEGA  # in τ, as _release counts it

    def last_period(order):
        _, _, times, angles = _release(backend, (ratio,), (1e-3,), 96 / OMEGA, duration, order)
        return times, angles[:, 0] / 1e-3

    times, angles = last_period(2)
    wt = OMEGA * times
    exact = np.exp(-ratio * wt) * (np.cos(damped * wt) + ratio / damped * np.sin(damped * wt))
    window = times > (periods - 1) * period
    amplitude = np.abs(angles[window]).max() / np.abs(exact[window]).max()
    assert amplitude == pytest.approx(1.0, abs=0.01)
    late = _zero_crossings(times, angles)[periods - 1] - _zero_crossings(times, exact)[periods - 1]
    assert abs(late) < 0.01 * periods * period
    times, first_order = last_period(1)
    assert np.abs(first_order[times > (periods - 1) * period]).max() < 0.1 * amplitude


def test_pose_damping_acts_relative_to_the_moving_target(backend):
    """A target turning at a steady rate Ω: with the target's own angular velocity (what
    :class:`PoseTrajectory` gives) the joint tracks it without lag; damping against a still
    target instead lags by ``2 atan(D Ω / 2K)``, the steady state of the spring law."""
    model, damping = _single_joints(backend, (1.0, 1.0))
    rest = model.to_strand_order(model.rest_rotation)
    rate = 0.3 * 2 * STIFFNESS / damping[0]  # lag of 2 atan(0.3) = 33°
    frames = np.arange(-2, 60) / 24
    keys = np.stack([_turned(rest, rate * t * np.ones(2)) for t in frames])
    trajectory = PoseTrajectory(frames, keys)

    def target(t):
        moving = trajectory(t)
        velocity = moving.angular_velocity.copy()
        velocity[1] = 0.0  # the second rod's damping pulls towards a still target
        return Pose(moving.rotation, velocity)

    settings = SolverSettings(substeps=4, newton_tolerance=1e-12, newton_max_iterations=30)
    sim = Simulation(model, settings, gravity=(0.0, 0.0, 0.0))
    for _ in range(48):  # 2 s: over 18 τ
        sim.advance(1 / 24, STILL, pose=target)
    q, w = _joint_state(model, sim)
    lag = _angles_from(target(sim.time).rotation, q)
    assert abs(lag[0]) < 1e-6
    assert lag[1] == pytest.approx(-2 * np.arctan(damping[1] * rate / (2 * STIFFNESS)), rel=1e-5)
    np.testing.assert_allclose(w[:, 0], rate, rtol=1e-6)


# --- strands ------------------------------------------------------------------------------------


def _arc(n_links, length, angle, start=(0.0, 0.0, 0.0)):
    """A polyline of ``n_links`` segments of equal length, hanging down and curling towards +x
    by ``angle`` in total (equal turns between segments)."""
    turns = (np.arange(n_links) + 0.5) * angle / n_links
    steps = (length / n_links) * np.stack((np.sin(turns), 0 * turns, -np.cos(turns)), axis=1)
    return np.vstack([start, np.asarray(start) + np.cumsum(steps, axis=0)])


def test_pose_strength_stiffens_like_a_bending_rigidity(backend):
    """Posed to its own rest shape, a horizontal cantilever sags by Euler–Bernoulli's
    ``wL⁴ / 8(EI + P)``: pose strength ``P`` adds to the bending rigidity ``EI``."""
    length, mass_per_length, g, n = 0.3, 0.01, 9.81, 16
    load = mass_per_length * g
    total = load * length**3 / (8 * 0.01)  # tip deflection of 1% of the length
    rigidity, strength = 0.2 * total, 0.8 * total
    parameters = StrandParameters(
        mass_per_length=mass_per_length,
        radius=1e-3,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=0.02 * rigidity,
        twist_damping=0.02 * rigidity,
        pose_strength=strength,
        pose_damping=0.02 * strength,
    )
    model = build_model(
        [StrandSpec(polyline(n, length, direction=(1.0, 0.0, 0.0)))], parameters, backend=backend
    )
    sim = Simulation(
        model, SolverSettings(substeps=4, newton_tolerance=1e-10, newton_max_iterations=30)
    )
    pose = Pose(model.to_strand_order(model.rest_rotation))
    for _ in range(36):
        sim.advance(1 / 24, STILL, pose=pose)
    deflection = -sim.points()[-1, 2]
    # The trapezoidal joints sag (1 + 1/n²) times the continuous rod (docs/physics.md).
    expected = load * length**4 / (8 * (rigidity + strength)) * (1 + 1 / n**2)
    assert deflection == pytest.approx(expected, rel=0.01)


def _hanging_strand(backend, strength, pose_damping, n=16, length=0.3, rigidity=1e-4):
    parameters = StrandParameters(
        mass_per_length=0.01,
        radius=1e-3,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=1e-6,
        twist_damping=1e-6,
        pose_strength=strength,
        pose_damping=pose_damping,
    )
    return build_model([StrandSpec(polyline(n, length))], parameters, backend=backend)


def test_strand_reaches_the_target_pose(backend):
    """A 30 cm strand hanging straight, posed to curl 120°, under gravity: with pose strength
    3000 times its rigidity it is within 0.2% of its length of the target everywhere after a
    quarter of a second. It settles at the pose's static sag under its weight ``w``, below the
    ``wL⁴/8P`` (0.11% of its length) of a horizontal cantilever of that rigidity, the worst
    case, and above half of it."""
    length, strength = 0.3, 0.3
    model = _hanging_strand(backend, strength, 1e-3)
    target = _arc(16, length, 2 * np.pi / 3)
    sim = Simulation(model, SolverSettings(substeps=4))
    pose = Pose(pose_rotations(model, target))
    assert np.abs(sim.points() - target).max() > 0.3 * length
    for _ in range(6):
        sim.advance(1 / 24, STILL, pose=pose)
    assert np.abs(sim.points() - target).max() < 0.002 * length
    for _ in range(18):
        sim.advance(1 / 24, STILL)
    sag = 0.01 * 9.81 * length**4 / (8 * strength)
    assert 0.5 * sag < np.abs(sim.points() - target).max() < sag


def test_animated_pose_strength_takes_effect(backend):
    """Pose strength is animatable with a root-to-tip profile: zero, the strand hangs as it
    would without a pose; raised on frame 6, it curls to the target."""
    length = 0.3
    model = _hanging_strand(backend, 0.0, 1e-3)
    target = _arc(16, length, np.pi / 2)
    sim = Simulation(model, SolverSettings(substeps=4))
    pose = Pose(pose_rotations(model, target))
    for _ in range(6):
        sim.advance(1 / 24, STILL, pose=pose)
    np.testing.assert_allclose(sim.points(), model.rest_points, atol=1e-12)
    sim.set_parameter("pose_strength", np.linspace(0.6, 0.3, model.n_links))
    for _ in range(12):
        sim.advance(1 / 24, STILL)  # the pose holds
    assert np.abs(sim.points() - target).max() < 0.002 * length


def _waving_pose(model, frames, amplitude=0.8):
    """A pose curling back and forth by ``amplitude`` rad in total, keyed at ``frames``."""
    n = model.n_links
    length = float(np.linalg.norm(model.rest_points[-1] - model.rest_points[0]))
    keys = [pose_rotations(model, _arc(n, length, amplitude * np.sin(3 * t))) for t in frames]
    return PoseTrajectory(frames, np.stack(keys))


def test_very_high_pose_strength_is_stable_at_four_substeps_per_frame(backend):
    """Pose strength 10⁶ times the strand's rigidity, an animated pose on a swaying base under
    gravity, four substeps per 24 fps frame: the implicit step holds the pose to 0.1% of the
    length; the explicit step diverges."""
    rigidity, length = 1e-4, 0.3
    model = _hanging_strand(backend, 1e6 * rigidity, 1e-6, rigidity=rigidity)
    trajectory = _waving_pose(model, np.arange(-2, 30) / 24)
    sim = Simulation(model, SolverSettings(substeps=4))
    posed = Simulation(model)
    for _ in range(24):
        sim.advance(1 / 24, swaying_base, pose=trajectory)
        posed.state.q = model.from_strand_order(trajectory(sim.time).rotation)
        posed.state.base_rotation[...] = sim.state.base_rotation
        assert np.abs(sim.points() - posed.points()).max() < 1e-3 * length
    explicit = Simulation(model, SolverSettings(method="explicit", substeps=4, strict=True))
    with pytest.raises(SimulationDivergedError, match="strand 0"):
        _advance_frames(explicit, 24, trajectory)


def _advance_frames(sim, frames, pose):
    for _ in range(frames):
        sim.advance(1 / 24, swaying_base, pose=pose)


def test_zero_pose_strength_is_bit_identical_to_no_pose(backend):
    model = build_model(
        random_tree(np.random.default_rng(3)),
        StrandParameters(bend_stiffness=2e-3, twist_stiffness=2e-3, drag=0.02),
        backend=backend,
    )
    trajectory = _random_poses(model, np.random.default_rng(4), np.arange(-2, 10) / 24)
    states = []
    for pose in (None, trajectory):
        sim = Simulation(model, SolverSettings(substeps=2))
        for _ in range(6):
            sim.advance(1 / 24, swaying_base, pose=pose)
        states.append(_joint_state(model, sim))
    assert np.abs(states[0][0] - model.to_strand_order(model.rest_rotation)).max() > 1e-2
    for without, with_zero_pose in zip(states[0], states[1], strict=True):
        assert np.array_equal(without, with_zero_pose)


def _random_poses(model, rng, frames):
    """Random target poses keyed at ``frames``: every joint up to 0.5 rad off its rest."""
    rest = model.to_strand_order(model.rest_rotation)
    keys = []
    for _ in frames:
        turn = spatial.quat_exp(np, rng.uniform(-0.3, 0.3, (3, model.n_links)))
        keys.append(spatial.quat_multiply(np, rest.T, turn).T)
    return PoseTrajectory(frames, np.stack(keys))


def test_articulated_newton_step_matches_dense_jacobian_with_pose_springs(backend):
    rng = np.random.default_rng(12)
    parameters = StrandParameters(
        mass_per_length=0.05,
        radius=5e-3,
        bend_stiffness=1e-3,
        twist_stiffness=5e-4,
        bend_damping=1e-5,
        twist_damping=1e-5,
        drag=0.05,
        pose_strength=rng.uniform(1e-3, 5e-2, 12),
        pose_damping=rng.uniform(1e-5, 1e-3, 12),
    )
    model = build_model(random_tree(rng), parameters, backend=backend)
    assert model.n_links == 12
    control = Control.from_model(model)
    control.set_base_motion(model, swaying_base(0.1))
    target = _random_poses(model, rng, np.array([0.0, 0.5]))(0.2)
    velocity = rng.normal(size=(model.n_links, 3))
    control.set_pose(model, Pose(target.rotation, velocity))
    state = State.at_rest(model)
    state.w = backend.from_host(rng.normal(size=(3, model.n_links)))
    settings = SolverSettings(newton_tolerance=1e-12, newton_max_iterations=60)
    out, stats = step_afresh(model, state, control, 1 / 96, settings)
    dense = step_dense_reference(model, Data.for_model(model), state, control, 1 / 96)
    assert stats.iterations < settings.newton_max_iterations
    assert np.abs(backend.to_host(out.w) - backend.to_host(dense.w)).max() < 1e-8
    # The pose springs moved the step: without them it lands elsewhere.
    control.set_pose(model, None)
    plain = step_dense_reference(model, Data.for_model(model), state, control, 1 / 96)
    assert np.abs(backend.to_host(plain.w) - backend.to_host(dense.w)).max() > 1e-2


# --- poses from points and from keys ------------------------------------------------------------


def test_pose_from_the_modelled_points_is_the_rest_shape(backend):
    model = build_model(random_tree(np.random.default_rng(8)), backend=backend)
    rotations = pose_rotations(model, model.rest_points)
    rest = model.to_strand_order(model.rest_rotation)
    np.testing.assert_allclose(np.abs((rotations * rest).sum(axis=1)), 1.0, atol=1e-14)
    # A pose given on a moved base is the same relative pose.
    moved = np.eye(4)
    turn = spatial.quat_exp(np, np.array([[0.3], [-1.0], [0.5]]))
    moved[:3, :3] = spatial.quat_to_matrix(np, turn)[:, :, 0]
    moved[:3, 3] = (0.5, -2.0, 1.0)
    points = model.rest_points @ moved[:3, :3].T + moved[:3, 3]
    again = pose_rotations(model, points, base_poses=moved[None])
    np.testing.assert_allclose(np.abs((again * rest).sum(axis=1)), 1.0, atol=1e-12)


def test_pose_from_points_reproduces_the_points(backend):
    """Points of any configuration of a branched tree, turned into a pose and back through
    forward kinematics, are the same points."""
    rng = np.random.default_rng(9)
    model = build_model(random_tree(rng), backend=backend)
    sim = Simulation(model)
    turns = spatial.quat_exp(np, rng.uniform(-1.0, 1.0, (3, model.n_links)))
    sim.state.q = spatial.quat_multiply(model.xp, sim.state.q, backend.from_host(turns))
    points = sim.points()
    assert np.abs(points - model.rest_points).max() > 0.1
    sim.reset()
    sim.state.q = model.from_strand_order(pose_rotations(model, points))
    np.testing.assert_allclose(sim.points(), points, atol=1e-12)


def test_pose_trajectory_interpolates_keys_with_their_exact_rate():
    rng = np.random.default_rng(10)
    frames = np.arange(8) / 24
    start = spatial.quat_normalize(np, rng.normal(size=(4, 5)))
    keys = np.stack(
        [
            spatial.quat_multiply(
                np, start, spatial.quat_exp(np, 0.4 * np.sin(5 * t) + 0.1 * rng.normal(size=(3, 5)))
            ).T
            for t in frames
        ]
    )
    trajectory = PoseTrajectory(frames, keys)
    for f in (0, 3, 7):
        sample = trajectory(frames[f]).rotation
        np.testing.assert_allclose(np.abs((sample * keys[f]).sum(axis=1)), 1.0, atol=1e-12)
    # The angular velocity in the link frame is 2 vec(q⁻¹ dq/dt), by central differences.
    t, step = 0.13, 1e-6
    now = trajectory(t)
    before, after = (trajectory(t + sign * step).rotation.copy() for sign in (-1, 1))
    before *= np.sign((before * now.rotation).sum(axis=1))[:, None]
    after *= np.sign((after * now.rotation).sum(axis=1))[:, None]
    rate = (after - before) / (2 * step)
    expected = 2 * spatial.quat_multiply(np, spatial.quat_conjugate(np, now.rotation.T), rate.T)
    np.testing.assert_allclose(now.angular_velocity, expected[1:].T, atol=1e-7)
    assert np.abs(now.angular_velocity).max() > 0.1


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Pose(np.ones((3, 4))), r"Pose.rotation must hold unit quaternions.*link 0"),
        (lambda: Pose(np.full((3, 4), np.nan)), r"Pose.rotation must be finite"),
        (lambda: Pose(np.eye(4)[:3, :3]), r"Pose.rotation must have shape \(n_links, 4\)"),
        (
            lambda: Pose(np.tile([1.0, 0, 0, 0], (3, 1)), np.zeros((2, 3))),
            r"Pose.angular_velocity must have shape \(3, 3\)",
        ),
        (
            lambda: PoseTrajectory([0.0, 0.0], np.tile([1.0, 0, 0, 0], (2, 3, 1))),
            r"PoseTrajectory: BaseTrajectory times must be strictly increasing",
        ),
        (lambda: PoseTrajectory([0.0], np.ones((1, 3))), r"PoseTrajectory rotations must have"),
    ],
)
def test_bad_poses_are_refused(make, message):
    with pytest.raises(InvalidInputError, match=message):
        make()


def test_poses_must_fit_the_model(backend):
    model = _hanging_strand(backend, 1e-3, 1e-5, n=4)
    sim = Simulation(model)
    with pytest.raises(InvalidInputError, match=r"pose has 3 link\(s\), the model has 4"):
        sim.advance(1 / 24, STILL, pose=Pose(np.tile([1.0, 0, 0, 0], (3, 1))))
    with pytest.raises(InvalidInputError, match="pose must be a Pose"):
        sim.advance(1 / 24, STILL, pose=lambda t: np.tile([1.0, 0, 0, 0], (4, 1)))
    with pytest.raises(InvalidInputError, match=r"pose points must be finite with shape \(5, 3\)"):
        pose_rotations(model, np.zeros((4, 3)))
    with pytest.raises(InvalidStrandError, match="strand 0: segment 1"):
        pose_rotations(model, np.repeat(model.rest_points[:4], [1, 2, 1, 1], axis=0))
    with pytest.raises(InvalidInputError, match="pose_rotations base_poses"):
        pose_rotations(model, model.rest_points, base_poses=2 * np.eye(4)[None])
    with pytest.raises(InvalidInputError, match="pose_strength must be non-negative"):
        sim.set_parameter("pose_strength", -1.0)
    with pytest.raises(InvalidInputError, match="parameter 'pose_damping' must not be negative"):
        build_model([StrandSpec(polyline(2, 0.1))], StrandParameters(pose_damping=-1.0))
