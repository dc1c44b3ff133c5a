"""Base motion from per-frame samples: accuracy, C² continuity, exact derivatives, input checks.

References the project did not write: closed-form rigid motions, SciPy's ``Rotation`` (all
reference rotations are built with it) and SciPy's ``RotationSpline``, which interpolates with
the same family of curves (cubic rotation vectors between samples, C²) but other end conditions.
"""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, RotationSpline

from oriented_strands.core import BaseMotion, BaseTrajectory, InvalidInputError

FPS = 24.0
SUBSTEPS = 4
Z = np.array([0.0, 0.0, 1.0])


def rotation(rotation_vector) -> np.ndarray:
    """Rotation matrices of rotation vectors (..., 3), by SciPy."""
    rotation_vector = np.asarray(rotation_vector, dtype=float)
    flat = Rotation.from_rotvec(rotation_vector.reshape(-1, 3)).as_matrix()
    return flat.reshape(rotation_vector.shape[:-1] + (3, 3))


def transforms(rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Rigid 4x4 matrices (..., 4, 4) from rotations (..., 3, 3) and positions (..., 3)."""
    matrices = np.zeros(rotations.shape[:-2] + (4, 4))
    matrices[..., :3, :3] = rotations
    matrices[..., :3, 3] = positions
    matrices[..., 3, 3] = 1.0
    return matrices


def spin_and_cubic(rate: float):
    """Spin at ``rate`` rad/s about a fixed oblique axis; origin on a cubic in time.

    Returns ``motion(t) -> (R, x, omega, v, alpha, a)``, world frame.
    """
    axis = np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0)
    start = rotation([0.0, 0.4, 0.0])
    x0, v0, a0, j0 = np.array([[0.1, -0.2, 0.3], [1.0, 0.5, -2.0], [0.3, -4.0, 9.81], [2, 0, -1]])

    def motion(t):
        return (
            rotation(rate * t * axis) @ start,
            x0 + v0 * t + a0 * t**2 / 2 + j0 * t**3 / 6,
            rate * axis,
            v0 + a0 * t + j0 * t**2 / 2,
            np.zeros(3),
            a0 + j0 * t,
        )

    return motion


def precession(t):
    """``R = Rz(P t) Rx(tilt) Rz(S t)``: spin ``S`` about an axis precessing at ``P`` about z."""
    p_rate, s_rate, tilt = 1.3, 4.0, 0.7
    carrier = rotation(p_rate * t * Z) @ rotation([tilt, 0.0, 0.0])
    axis = carrier @ Z
    return (
        carrier @ rotation(s_rate * t * Z),
        np.array([np.sin(t), np.cos(2 * t), t**3]),
        p_rate * Z + s_rate * axis,
        np.array([np.cos(t), -2 * np.sin(2 * t), 3 * t**2]),
        s_rate * p_rate * np.cross(Z, axis),
        np.array([-np.sin(t), -4 * np.cos(2 * t), 6 * t]),
    )


def sampled(motion, fps: float, duration: float = 2.0) -> tuple[np.ndarray, BaseTrajectory]:
    """Trajectory of two bases through ``motion`` sampled at ``fps``: the motion itself, and its
    mirror image through the origin (inverse transform), so that bases are exercised together."""
    times = np.arange(round(duration * fps) + 1) / fps
    poses = [motion(t)[:2] for t in times]
    forward = transforms(np.array([r for r, _ in poses]), np.array([x for _, x in poses]))
    return times, BaseTrajectory(times, np.stack((forward, np.linalg.inv(forward)), axis=1))


def errors(trajectory: BaseTrajectory, motion, times: np.ndarray) -> np.ndarray:
    """Largest absolute error of R, x, ω, v, α, a of base 0 over ``times``."""
    worst = np.zeros(6)
    for t in times:
        got = trajectory(t)
        fields = (got.rotation, got.position, got.angular_velocity, got.linear_velocity)
        fields += (got.angular_acceleration, got.linear_acceleration)
        worst = np.maximum(
            worst, [np.abs(g[0] - r).max() for g, r in zip(fields, motion(t), strict=False)]
        )
    return worst


def substep_times(times: np.ndarray, margin: int = 0) -> np.ndarray:
    """Every substep time (SUBSTEPS per frame), leaving out ``margin`` frames at each end."""
    grid = np.linspace(times[0], times[-1], SUBSTEPS * (times.size - 1) + 1)
    return grid[SUBSTEPS * margin : grid.size - SUBSTEPS * margin]


def random_trajectory(seed: int, n_frames: int, n_bases: int, step: float):
    """Random rigid motion: each frame turns ``step`` rad about a random axis; random times."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.uniform(0.02, 0.06, n_frames))
    turns = rng.normal(size=(n_frames, n_bases, 3))
    turns *= step / np.linalg.norm(turns, axis=-1, keepdims=True)
    rotations = [rotation(turns[0])]
    for turn in rotation(turns[1:]):
        rotations.append(rotations[-1] @ turn)
    matrices = transforms(np.array(rotations), rng.normal(size=(n_frames, n_bases, 3)))
    return times, matrices, BaseTrajectory(times, matrices)


def motion_fields(motion: BaseMotion) -> tuple[np.ndarray, ...]:
    return (
        motion.rotation,
        motion.position,
        motion.angular_velocity,
        motion.linear_velocity,
        motion.angular_acceleration,
        motion.linear_acceleration,
    )


@pytest.mark.parametrize("rate", [0.7, 3 * 2 * np.pi, 10 * 2 * np.pi])
def test_fixed_axis_spin_and_cubic_translation_are_reproduced_exactly(rate):
    # The curve family holds these motions (rates up to 10 turns/s = 150 degrees per frame, 20
    # turns in all) and not-a-knot ends reproduce cubics, so everything matches to round-off,
    # ends included. Tolerance: 1e-9 of each quantity's scale (rad, m, rad/s, m/s, ...).
    motion = spin_and_cubic(rate)
    times, trajectory = sampled(motion, FPS)
    worst = errors(trajectory, motion, substep_times(times))
    scale = np.array([1.0, 10.0, rate, 10.0, rate, 20.0])
    np.testing.assert_array_less(worst, 1e-9 * scale)


def test_precessing_spin_is_accurate_and_converges_at_the_spline_orders():
    # A spin about a precessing axis is not in the curve family: the error is the cubic spline's,
    # O(h⁴) in pose, O(h³) in velocity and O(h²) in acceleration. At 24 fps with rates of a few
    # rad/s that is ~1e-7 in pose but ~1e-3 in acceleration, so 1e-6 everywhere is not reachable
    # by any C² cubic; we check the absolute error at 24 fps against bounds and the orders.
    worst = []
    for fps in (FPS, 2 * FPS, 4 * FPS):
        times, trajectory = sampled(precession, fps)
        worst.append(errors(trajectory, precession, substep_times(times, margin=1)))
    worst = np.array(worst)
    # R (1), x (m), ω (|ω| ≈ 4.8 rad/s), v (m/s), α (|α| ≈ 3.4 rad/s²), a (m/s²)
    np.testing.assert_array_less(worst[0], [2e-7, 1e-6, 5e-5, 1e-4, 5e-3, 5e-3])
    orders = np.log2(worst[:-1] / worst[1:])
    np.testing.assert_array_less([3.8, 3.8, 2.8, 2.8, 1.8, 1.8], orders.min(axis=0))


def test_matches_scipy_rotation_spline_away_from_the_ends():
    # Same curve family, other end conditions (SciPy: zero acceleration); their influence decays
    # by ~0.27 per sample, so 20 samples in the curves agree to round-off. SciPy returns rates in
    # body axes.
    times, matrices, _ = random_trajectory(3, 61, 1, 0.4)
    rotations = Rotation.from_matrix(matrices[:, 0, :3, :3])
    reference = RotationSpline(times, rotations)
    trajectory = BaseTrajectory(times, matrices)
    for t in np.linspace(times[20], times[40], 41):
        got = trajectory(t)
        body = got.rotation[0].T
        np.testing.assert_allclose(got.rotation[0], reference(t).as_matrix(), atol=1e-12)
        rate, acceleration = reference(t, 1), reference(t, 2)
        np.testing.assert_allclose(body @ got.angular_velocity[0], rate, atol=1e-10 * 30)
        np.testing.assert_allclose(
            body @ got.angular_acceleration[0], acceleration, atol=1e-8 * 1e3
        )


@pytest.mark.parametrize("step", [0.3, 2.5])
def test_velocities_and_accelerations_are_exact_derivatives_of_the_curve(step):
    # Fourth-order central differences of the interpolated pose and velocity, inside intervals.
    # Holds for wild motion too (2.5 rad per sample about random axes).
    times, _, trajectory = random_trajectory(7, 9, 3, step)
    delta = 1e-4 * np.diff(times).min()

    def derivative(t, get):
        values = [get(trajectory(t + k * delta)) for k in (-2, -1, 1, 2)]
        return (values[0] - 8 * values[1] + 8 * values[2] - values[3]) / (12 * delta)

    for t in np.linspace(times[0], times[-1], 37)[1:-1]:
        got = trajectory(t)
        spin = derivative(t, lambda m: m.rotation) @ np.swapaxes(got.rotation, 1, 2)
        omega = np.stack((spin[:, 2, 1], spin[:, 0, 2], spin[:, 1, 0]), axis=-1)
        pairs = (
            (omega, got.angular_velocity),
            (derivative(t, lambda m: m.angular_velocity), got.angular_acceleration),
            (derivative(t, lambda m: m.position), got.linear_velocity),
            (derivative(t, lambda m: m.linear_velocity), got.linear_acceleration),
        )
        for estimate, exact in pairs:
            np.testing.assert_allclose(exact, estimate, atol=1e-7 * np.abs(exact).max())


@pytest.mark.parametrize(("n_frames", "step"), [(4, 0.5), (12, 0.3), (12, 2.5), (40, 1.0)])
def test_curve_interpolates_samples_and_is_c2_across_them(n_frames, step):
    # One-sided limits at each interior sample, by linear extrapolation from two nearby times on
    # each side (error ~ δ² · jerk rate): pose, velocity and acceleration must not jump.
    times, matrices, trajectory = random_trajectory(11, n_frames, 4, step)
    delta = 1e-6 * np.diff(times).min()
    for k, t in enumerate(times):
        at = trajectory(t)
        np.testing.assert_allclose(at.rotation, matrices[k, :, :3, :3], atol=1e-13)
        np.testing.assert_allclose(at.position, matrices[k, :, :3, 3], atol=1e-13)
        if 0 < k < times.size - 1:
            sides = []
            for sign in (-1.0, 1.0):
                near, far = trajectory(t + sign * delta), trajectory(t + 2 * sign * delta)
                fields = zip(motion_fields(near), motion_fields(far), strict=False)
                sides.append([2 * a - b for a, b in fields])
            for before, after in zip(*sides, strict=False):
                scale = max(1.0, np.abs(after).max())
                np.testing.assert_allclose(before, after, atol=1e-8 * scale, rtol=0)


def test_rotations_stay_orthonormal():
    times, _, trajectory = random_trajectory(5, 30, 6, 2.0)
    for t in np.linspace(times[0], times[-1], 301):
        r = trajectory(t).rotation
        np.testing.assert_allclose(
            np.swapaxes(r, 1, 2) @ r, np.broadcast_to(np.eye(3), r.shape), atol=1e-14
        )
        np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-14)


def test_bases_are_independent():
    times, matrices, trajectory = random_trajectory(2, 10, 3, 1.0)
    alone = BaseTrajectory(times, matrices[:, 1:2])
    for t in np.linspace(times[0], times[-1], 23):
        for together, single in zip(
            motion_fields(trajectory(t)), motion_fields(alone(t)), strict=False
        ):
            np.testing.assert_allclose(together[1:2], single, rtol=1e-12, atol=1e-12)


def test_one_sample_is_motionless():
    matrices = random_trajectory(1, 1, 2, 1.0)[1]
    trajectory = BaseTrajectory([0.5], matrices)
    for t in (-1.0, 0.5, 3.0):
        got = trajectory(t)
        np.testing.assert_allclose(got.rotation, matrices[0, :, :3, :3], atol=1e-15)
        np.testing.assert_array_equal(got.position, matrices[0, :, :3, 3])
        assert not np.any(motion_fields(got)[2:])


def test_two_samples_give_constant_velocity():
    # slerp and lerp: constant world angular velocity R0 log(R0ᵀR1)/h and linear velocity.
    times, matrices, trajectory = random_trajectory(4, 2, 3, 1.2)
    h = times[1] - times[0]
    r0, r1 = matrices[:, :, :3, :3]
    turn = Rotation.from_matrix(np.swapaxes(r0, 1, 2) @ r1).as_rotvec()
    omega = np.einsum("bij,bj->bi", r0, turn) / h
    velocity = (matrices[1, :, :3, 3] - matrices[0, :, :3, 3]) / h
    for fraction in (0.0, 0.3, 1.0):
        got = trajectory(times[0] + fraction * h)
        np.testing.assert_allclose(got.rotation, r0 @ rotation(fraction * turn), atol=1e-13)
        np.testing.assert_allclose(got.angular_velocity, omega, rtol=1e-12)
        np.testing.assert_allclose(got.linear_velocity, velocity, rtol=1e-12)
        np.testing.assert_allclose(got.angular_acceleration, 0.0, atol=1e-10)
        np.testing.assert_allclose(got.linear_acceleration, 0.0, atol=1e-10)


def test_three_samples_give_constant_world_acceleration():
    # A parabola through three positions; the same world angular acceleration at all samples.
    times, matrices, trajectory = random_trajectory(6, 3, 2, 0.8)
    coefficients = np.polynomial.polynomial.polyfit(times, matrices[:, :, :3, 3].reshape(3, -1), 2)
    at = [trajectory(t) for t in times]
    for got in at:
        np.testing.assert_allclose(got.linear_acceleration.ravel(), 2 * coefficients[2], rtol=1e-9)
        np.testing.assert_allclose(got.angular_acceleration, at[0].angular_acceleration, rtol=1e-9)


def test_outside_the_samples_the_bases_hold_still():
    times, matrices, trajectory = random_trajectory(8, 6, 2, 0.5)
    for t, k in ((times[0] - 0.1, 0), (times[-1] + 0.1, -1)):
        got = trajectory(t)
        np.testing.assert_allclose(got.rotation, matrices[k, :, :3, :3], atol=1e-15)
        np.testing.assert_array_equal(got.position, matrices[k, :, :3, 3])
        assert not np.any(motion_fields(got)[2:])
    # Substep round-off just past the last sample still lands on the curve.
    np.testing.assert_array_equal(
        trajectory.sample(times[-1] * (1 + 1e-15)).linear_velocity,
        trajectory(times[-1]).linear_velocity,
    )
    assert np.any(trajectory(times[-1]).angular_velocity)


def test_still_is_motionless_and_read_only():
    matrices = transforms(
        rotation([[0.1, 0.2, 0.3], [0, 0, 3.0]]), np.array([[1, 2, 3], [4, 5, 6]])
    )
    still = BaseMotion.still(matrices)
    assert still.n_bases == 2
    np.testing.assert_allclose(still.rotation, matrices[:, :3, :3], atol=1e-15)
    np.testing.assert_array_equal(still.position, matrices[:, :3, 3])
    for field in motion_fields(still)[2:]:
        assert field.shape == (2, 3)
        assert not np.any(field)
    with pytest.raises(ValueError, match="read-only"):
        still.position[0, 0] = 1.0


def _scaled(matrices):
    matrices = matrices.copy()
    matrices[1, 0, :3, :3] *= 1.01
    return matrices


def _sheared(matrices):
    matrices = matrices.copy()
    matrices[0, 1, 0, 1] += 0.05
    return matrices


def _mirrored(matrices):
    matrices = matrices.copy()
    matrices[2, 0, :3, 0] *= -1
    return matrices


def _projective(matrices):
    matrices = matrices.copy()
    matrices[1, 1, 3, 2] = 0.1
    return matrices


def _nan(matrices):
    matrices = matrices.copy()
    matrices[2, 1, 0, 3] = np.nan
    return matrices


GOOD_TIMES = np.array([0.0, 0.1, 0.2, 0.3])
GOOD_MATRICES = random_trajectory(9, 4, 2, 0.5)[1]


@pytest.mark.parametrize(
    ("times", "matrices", "message"),
    [
        ([0.0, 0.1, 0.1, 0.3], GOOD_MATRICES, r"strictly increasing, got times\[1\] = 0.1"),
        ([0.0, 0.2, 0.1, 0.3], GOOD_MATRICES, "strictly increasing"),
        ([0.0, np.nan, 0.2, 0.3], GOOD_MATRICES, r"times must be finite"),
        ([], GOOD_MATRICES[:0], "at least one"),
        (GOOD_TIMES[:, None], GOOD_MATRICES, r"times must have shape \(n\)"),
        (GOOD_TIMES[:3], GOOD_MATRICES, r"matrices must have shape \(3, n, 4, 4\), got \(4, 2"),
        (GOOD_TIMES, GOOD_MATRICES[:, :, :3], r"shape \(4, n, 4, 4\), got \(4, 2, 3, 4\)"),
        (GOOD_TIMES, "identity", "matrices must be real numbers"),
        (
            GOOD_TIMES,
            _nan(GOOD_MATRICES),
            r"matrices must be finite, got nan at index \(2, 1, 0, 3\)",
        ),
        (GOOD_TIMES, _scaled(GOOD_MATRICES), r"matrices\[1, 0\] is not a rotation"),
        (GOOD_TIMES, _sheared(GOOD_MATRICES), r"matrices\[0, 1\] is not a rotation"),
        (GOOD_TIMES, _mirrored(GOOD_MATRICES), r"matrices\[2, 0\] is not a rotation"),
        (GOOD_TIMES, _projective(GOOD_MATRICES), r"matrices\[1, 1\] is not a rigid transform"),
    ],
)
def test_trajectory_rejects_bad_input(times, matrices, message):
    with pytest.raises(InvalidInputError, match=message):
        BaseTrajectory(times, matrices)


def test_sample_time_must_be_finite():
    with pytest.raises(InvalidInputError, match="sample time must be finite"):
        BaseTrajectory(GOOD_TIMES, GOOD_MATRICES)(np.nan)


def test_float32_round_off_is_accepted():
    # Blender hands over float32 matrices: their rotations are orthonormal only to ~1e-7.
    trajectory = BaseTrajectory(GOOD_TIMES, GOOD_MATRICES.astype(np.float32))
    r = trajectory(0.15).rotation
    np.testing.assert_allclose(
        np.swapaxes(r, 1, 2) @ r, np.broadcast_to(np.eye(3), r.shape), atol=1e-14
    )


def test_base_motion_rejects_bad_fields():
    still = BaseMotion.still(GOOD_MATRICES[0])
    fields = vars(still)
    with pytest.raises(
        InvalidInputError, match=r"BaseMotion.linear_velocity must have shape \(2, 3\)"
    ):
        BaseMotion(**{**fields, "linear_velocity": np.zeros((3, 3))})
    with pytest.raises(InvalidInputError, match=r"angular_acceleration must be finite"):
        BaseMotion(**{**fields, "angular_acceleration": np.full((2, 3), np.inf)})
    with pytest.raises(InvalidInputError, match=r"BaseMotion.rotation must have shape \(n, 3, 3\)"):
        BaseMotion(**{**fields, "rotation": np.eye(3)})
    with pytest.raises(InvalidInputError, match=r"BaseMotion.rotation\[1\] is not a rotation"):
        BaseMotion(**{**fields, "rotation": np.stack((np.eye(3), 2 * np.eye(3)))})
    with pytest.raises(InvalidInputError, match=r"still matrices must have shape \(n, 4, 4\)"):
        BaseMotion.still(np.eye(4))


def _moving(times: np.ndarray, position, angle=None) -> np.ndarray:
    """(F, 1, 4, 4) transforms: translations ``position`` (F, 3), turns ``angle`` (F,) about z."""
    matrices = np.broadcast_to(np.eye(4), (len(times), 1, 4, 4)).copy()
    matrices[:, 0, :3, 3] = position
    if angle is not None:
        c, s = np.cos(angle), np.sin(angle)
        matrices[:, 0, 0, 0], matrices[:, 0, 0, 1] = c, -s
        matrices[:, 0, 1, 0], matrices[:, 0, 1, 1] = s, c
    return matrices


def test_a_jump_is_a_cut_between_two_curves():
    """An arm swinging half a metre at 1 Hz, snapped 100 m sideways between frames 23 and 24:
    each side is the curve of its own samples, and the interval between holds the pose after
    it, still, instead of a spline's thousands of g."""
    times = np.arange(48) / 24
    position = np.zeros((48, 3))
    position[:, 0] = 0.5 * np.sin(2 * np.pi * times)
    position[24:, 1] = 100.0
    matrices = _moving(times, position)
    trajectory = BaseTrajectory(times, matrices)
    np.testing.assert_array_equal(trajectory.cuts, times[[24]])
    before, after = (
        BaseTrajectory(times[:24], matrices[:24]),
        BaseTrajectory(times[24:], matrices[24:]),
    )
    for t in np.linspace(0.0, times[23], 50):
        np.testing.assert_array_equal(
            trajectory(t).linear_acceleration, before(t).linear_acceleration
        )
    for t in np.linspace(times[24], times[-1], 50):
        np.testing.assert_array_equal(trajectory(t).position, after(t).position)
    held = trajectory(0.5 * (times[23] + times[24]))
    np.testing.assert_array_equal(held.position, position[24:25])
    np.testing.assert_array_equal(held.linear_velocity, np.zeros((1, 3)))
    swing = 0.5 * (2 * np.pi) ** 2
    peak = max(np.abs(trajectory(t).linear_acceleration).max() for t in np.linspace(0, 2, 500))
    assert peak < 1.1 * swing
    smeared = BaseTrajectory(times, matrices, cut_acceleration=np.inf)
    assert smeared.cuts.size == 0
    around = np.linspace(times[21], times[26], 200)
    assert max(np.abs(smeared(t).linear_acceleration).max() for t in around) > 1e4


def test_fast_smooth_motion_and_sudden_stops_are_not_cuts():
    """A car at 50 m/s braking at 8 m/s² while spinning at 20 rad/s, and a ball stopped dead
    from 20 m/s by a wall within a frame (its velocity changes on one side of an interval
    only): no cut. A base snapped 160° within a frame: a cut."""
    times = np.arange(48) / 24
    speed = np.maximum(50.0 - 8.0 * times, 0.0)
    car = _moving(times, np.outer(np.cumsum(speed) / 24, (1.0, 0.0, 0.0)), 20.0 * times)
    assert BaseTrajectory(times, car).cuts.size == 0
    ball = np.outer(np.minimum(times, 1.0) * 20.0, (0.0, 0.0, -1.0))
    assert BaseTrajectory(times, _moving(times, ball)).cuts.size == 0
    snapped = _moving(times, np.zeros((48, 3)), np.where(times > 1.0, np.radians(160.0), 0.0))
    np.testing.assert_array_equal(BaseTrajectory(times, snapped).cuts, times[[25]])


@pytest.mark.parametrize("limit", [0.0, -1.0, np.nan, "fast", True])
def test_cut_thresholds_are_checked(limit):
    times = np.arange(4) / 24
    with pytest.raises(InvalidInputError, match="cut_acceleration must be > 0"):
        BaseTrajectory(times, _moving(times, np.zeros((4, 3))), cut_acceleration=limit)
