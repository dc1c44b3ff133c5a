"""Time scale and local dynamics (eq. 19) against finite differences of rigid motions, steady
rotations, and simulations on still and moving bases."""

import re
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from oriented_strands.core import (
    BaseMotion,
    BaseTrajectory,
    InvalidInputError,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
)
from oriented_strands.core.art_direction import ArtDirectedBase, art_directed_motion
from strands import polyline

FIELDS = (
    "angular_velocity",
    "linear_velocity",
    "angular_acceleration",
    "linear_acceleration",
)


def _vee(skew):
    return np.array([skew[2, 1] - skew[1, 2], skew[0, 2] - skew[2, 0], skew[1, 0] - skew[0, 1]]) / 2


def _derivative(f, t, h):
    """Fourth-order central difference of ``f`` at ``t``."""
    return (-f(t + 2 * h) + 8 * f(t + h) - 8 * f(t - h) + f(t - 2 * h)) / (12 * h)


def _motion_by_differences(pose, t, h=1e-3):
    """BaseMotion of ``pose(t) -> (R (n, 3, 3), p (n, 3))`` by finite differences (world frame)."""

    def omega(s):
        rotation = pose(s)[0]
        rate = _derivative(lambda u: pose(u)[0], s, h)
        return np.array([_vee(r_dot @ r.T) for r_dot, r in zip(rate, rotation, strict=True)])

    rotation, position = pose(t)
    return BaseMotion(
        rotation=rotation,
        position=position,
        angular_velocity=omega(t),
        linear_velocity=_derivative(lambda s: pose(s)[1], t, h),
        angular_acceleration=_derivative(omega, t, h),
        linear_acceleration=_derivative(lambda s: _derivative(lambda u: pose(u)[1], s, h), t, h),
    )


def _head(t):
    """A wobbling, bobbing, travelling head: a rotation about a moving axis and a translation."""
    rotation = (
        Rotation.from_rotvec([0.0, 0.0, 0.8 * np.sin(2.0 * t)])
        * Rotation.from_rotvec([0.5 * np.sin(3.0 * t + 1.0), 0.3 * t, 0.0])
    ).as_matrix()
    position = np.array([1.5 * t + 0.2 * t**2, 0.3 * np.sin(4.0 * t), 1.6 + 0.05 * np.cos(7.0 * t)])
    return rotation[None], position[None]


def _assert_motion_close(got, expected, atol):
    for name in ("rotation", "position", *FIELDS):
        np.testing.assert_allclose(
            getattr(got, name), getattr(expected, name), atol=atol, err_msg=name
        )


def test_unit_time_scale_without_local_dynamics_leaves_the_motion_unchanged():
    motion = _motion_by_differences(_head, 0.7)
    _assert_motion_close(art_directed_motion(motion), motion, atol=1e-14)
    _assert_motion_close(art_directed_motion(motion, 1.0, 0.0, reference=motion), motion, 1e-14)


def test_local_dynamics_removes_a_rigidly_attached_reference_at_any_offset():
    """γ = 1 with a reference rigidly attached to the base (a hip 60 cm below and behind the
    head): the reference's velocity and acceleration fields at the base origin, with their
    ω × r, α × r and ω × (ω × r) terms, are exactly the base's, so nothing is left."""
    offset, turn = np.array([0.1, -0.2, -0.6]), Rotation.from_rotvec([0.3, 0.0, 0.2]).as_matrix()

    def hip(t):
        rotation, position = _head(t)
        return rotation @ turn, position + rotation @ offset

    for t in (0.0, 0.45, 1.3):
        head, reference = _motion_by_differences(_head, t), _motion_by_differences(hip, t)
        relative = art_directed_motion(head, 1.0, 1.0, reference=reference)
        for name in FIELDS:
            np.testing.assert_allclose(getattr(relative, name), 0.0, atol=1e-7, err_msg=name)
        # Half of it leaves half the motion (eq. 19 is linear in γ at β = 1).
        half = art_directed_motion(head, 1.0, 0.5, reference=reference)
        for name in ("angular_velocity", "linear_velocity", "angular_acceleration"):
            np.testing.assert_allclose(getattr(half, name), 0.5 * getattr(head, name), atol=1e-7)


def test_time_scale_turns_a_carousel_into_a_slower_carousel():
    """β scales the spatial motion, so a steady spin at Ω becomes a steady spin at β Ω: the
    strand feels the centripetal acceleration β² Ω² R of a real, slower carousel."""
    spin, seat = 2.5, np.array([1.2, 0.4, 0.3])
    tilt = Rotation.from_rotvec([0.2, -0.1, 0.4])

    def carousel(rate):
        def pose(t):
            turn = Rotation.from_rotvec([0.0, 0.0, rate * t])
            return (turn * tilt).as_matrix()[None], turn.apply(seat)[None]

        return pose

    beta, t = 0.5, 0.8
    scaled = art_directed_motion(_motion_by_differences(carousel(spin), t), beta)
    slower = _motion_by_differences(carousel(beta * spin), t / beta)  # the same pose
    _assert_motion_close(scaled, slower, atol=1e-7)
    # Scaling the classical acceleration instead would not be a carousel's.
    fast = _motion_by_differences(carousel(spin), t)
    assert np.linalg.norm(beta * fast.linear_acceleration - slower.linear_acceleration) > 1.0


def test_animated_controls_are_sampled_at_each_time():
    times = np.arange(30) / 24
    trajectory = BaseTrajectory(times, _sampled(times))
    hip = BaseTrajectory(times, _sampled(times, shift=(0.0, 0.0, -0.5)))

    def beta(t):
        return 1.0 - t

    source = ArtDirectedBase(trajectory, beta, lambda t: 0.25 * t, reference=hip)
    for t in (0.1, 0.5, 0.9):
        expected = art_directed_motion(trajectory(t), beta(t), 0.25 * t, reference=hip(t))
        _assert_motion_close(source(t), expected, atol=0.0)


def _sampled(times, shift=(0.0, 0.0, 0.0)):
    """(F, 1, 4, 4) samples of the head's pose, optionally with a point offset in its frame."""
    matrices = np.zeros((len(times), 1, 4, 4))
    for f, t in enumerate(times):
        rotation, position = _head(t)
        matrices[f, 0, :3, :3] = rotation[0]
        matrices[f, 0, :3, 3] = position[0] + rotation[0] @ np.asarray(shift)
        matrices[f, 0, 3, 3] = 1.0
    return matrices


def _simulations(backend, *sources, gravity=(0.0, 0.0, 0.0), frames=8):
    """Run one strand per base source from the same start (a nudge so it moves); returns sims."""
    model = build_model(
        [StrandSpec(polyline(6, 0.3, direction=(0.3, 0.0, -1.0)))],
        StrandParameters(mass_per_length=0.02, bend_stiffness=2e-3, twist_stiffness=2e-3,
                         bend_damping=1e-5, twist_damping=1e-5, drag=0.05),
        backend=backend,
    )  # fmt: skip
    nudge = np.random.default_rng(0).normal(scale=2.0, size=(3, model.n_links))
    settings = SolverSettings(substeps=1, newton_tolerance=1e-11, newton_max_iterations=30)
    sims = []
    for source in sources:
        sim = Simulation(model, settings, gravity=gravity)
        motion = source(0.0) if callable(source) else source
        sim.reset(_pose_matrices(motion))
        sim.state.w = backend.from_host(nudge)
        for _ in range(frames):
            sim.advance(1 / 24, source)
        sims.append(sim)
    return model, sims


def _pose_matrices(motion):
    matrices = np.zeros((motion.n_bases, 4, 4))
    matrices[:, :3, :3] = motion.rotation
    matrices[:, :3, 3] = motion.position
    matrices[:, 3, 3] = 1.0
    return matrices


def test_zero_time_scale_moves_the_strand_rigidly_with_its_base(backend):
    """β = 0 on a turning, travelling base equals a still base, carried along by the base's pose
    (without gravity, which would turn relative to the strand)."""
    times = np.arange(20) / 24
    trajectory = BaseTrajectory(times, _sampled(times))
    still = BaseMotion.still(np.eye(4)[None])
    model, (moving, reference) = _simulations(backend, ArtDirectedBase(trajectory, 0.0), still)
    np.testing.assert_allclose(
        backend.to_host(moving.state.q), backend.to_host(reference.state.q), atol=1e-10
    )
    pose = trajectory(moving.time)
    carried = reference.points() @ pose.rotation[0].T + pose.position[0]
    np.testing.assert_allclose(moving.points(), carried, atol=1e-10)
    moved = backend.to_host(reference.state.q - model.rest_rotation)
    assert np.abs(moved).max() > 1e-2  # the nudge made it swing


def test_zero_time_scale_under_gravity_on_a_translating_base(backend):
    times = np.arange(20) / 24
    matrices = np.broadcast_to(np.eye(4), (20, 1, 4, 4)).copy()
    matrices[:, 0, :3, 3] = np.stack(
        (np.sin(6 * times), 0.5 * times**2, 0.3 * np.cos(9 * times)), 1
    )
    trajectory = BaseTrajectory(times, matrices)
    model, (moving, reference) = _simulations(
        backend, ArtDirectedBase(trajectory, 0.0), BaseMotion.still(np.eye(4)[None]),
        gravity=(0.0, 0.0, -9.81),
    )  # fmt: skip
    shift = trajectory(moving.time).position[0]
    np.testing.assert_allclose(moving.points(), reference.points() + shift, atol=1e-10)


def test_unit_time_scale_is_the_plain_simulation(backend):
    times = np.arange(20) / 24
    trajectory = BaseTrajectory(times, _sampled(times))
    _, (directed, plain) = _simulations(
        backend, ArtDirectedBase(trajectory, 1.0, 0.0), trajectory, gravity=(0.0, 0.0, -9.81)
    )
    np.testing.assert_allclose(
        backend.to_host(directed.state.q), backend.to_host(plain.state.q), rtol=0, atol=1e-12
    )


def test_full_local_dynamics_relative_to_the_base_leaves_no_inertial_response(backend):
    times = np.arange(20) / 24
    trajectory = BaseTrajectory(times, _sampled(times))
    model = build_model(
        [StrandSpec(polyline(6, 0.3, direction=(0.3, 0.0, -1.0)))],
        StrandParameters(mass_per_length=0.02, bend_stiffness=2e-3, twist_stiffness=2e-3),
        backend=backend,
    )
    settings = SolverSettings(substeps=1, newton_tolerance=1e-11, newton_max_iterations=30)
    sources = (ArtDirectedBase(trajectory, 1.0, 1.0, reference=trajectory), trajectory)
    deviations = []
    for source in sources:
        sim = Simulation(model, settings, gravity=(0.0, 0.0, 0.0))
        sim.reset(_pose_matrices(trajectory(0.0)))
        for _ in range(8):
            sim.advance(1 / 24, source)
        deviations.append(np.abs(backend.to_host(sim.state.q - model.rest_rotation)).max())
    locked, free = deviations
    assert locked < 1e-12
    assert free > 1e-2  # the same motion without local dynamics swings the strand


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"time_scale": -0.5}, r"time_scale \(β\) must be finite and non-negative"),
        ({"time_scale": np.nan}, r"time_scale \(β\) must be finite"),
        ({"time_scale": [1.0, 1.0]}, r"time_scale \(β\) must be a scalar or have shape \(1,\)"),
        ({"local_dynamics": 0.5}, r"local_dynamics \(γ\) needs a reference frame"),
        ({"local_dynamics": -1.0}, r"local_dynamics \(γ\) must be finite and non-negative"),
    ],
)
def test_bad_controls_are_refused(arguments, message):
    with pytest.raises(InvalidInputError, match=message):
        art_directed_motion(_motion_by_differences(_head, 0.2), **arguments)


def test_reference_must_match_the_bases():
    still = BaseMotion.still(np.broadcast_to(np.eye(4), (3, 4, 4)))
    with pytest.raises(
        InvalidInputError, match=r"reference must have 1 frame or one per base \(3\)"
    ):
        art_directed_motion(
            still, 1.0, 1.0, reference=BaseMotion.still(np.broadcast_to(np.eye(4), (2, 4, 4)))
        )
    # One reference frame serves every base.
    art_directed_motion(still, 1.0, 1.0, reference=BaseMotion.still(np.eye(4)[None]))


def test_documentation_example_runs():
    text = (Path(__file__).resolve().parents[2] / "docs" / "art-direction.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/art-direction.md", "exec"), {})
