"""Zero-gravity rest shape: statics closed form, exact spring balance, and strands that keep their
modelled shape under gravity (and visibly sag without the correction)."""

import numpy as np
import pytest

from oriented_strands.core import (
    InvalidInputError,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
    dynamics,
    spatial,
)
from oriented_strands.core.rest_shape import zero_gravity_model
from oriented_strands.core.state import Control
from strands import STILL, polyline, random_walk

GRAVITY = (0.0, 0.0, -9.81)


def _arc(n_links, radius, sweep, start=(0.0, 0.0, 0.0), plane_angle=0.0):
    """A circular arc leaving ``start`` horizontally and curving down, in a vertical plane."""
    theta = np.linspace(0.0, sweep, n_links + 1)
    horizontal = radius * np.sin(theta)
    c, s = np.cos(plane_angle), np.sin(plane_angle)
    return np.asarray(start) + np.stack(
        (c * horizontal, s * horizontal, radius * (np.cos(theta) - 1.0)), axis=1
    )


def _serial(backend):
    return build_model(
        [StrandSpec(_arc(12, 0.2, 1.2), name="bang")],
        StrandParameters(mass_per_length=0.01, bend_stiffness=2e-4, twist_stiffness=2e-4,
                         bend_damping=1e-5, twist_damping=1e-5),
        backend=backend,
    )  # fmt: skip


def _branched(backend):
    """A twig with two side branches leaving it out of its plane (so joints also twist)."""
    trunk = _arc(8, 0.3, 1.0)
    return build_model(
        [
            StrandSpec(trunk, name="twig"),
            StrandSpec(_arc(5, 0.15, 0.9, start=trunk[3], plane_angle=1.2), parent=(0, 3)),
            StrandSpec(_arc(4, 0.1, 0.8, start=0.5 * (trunk[5] + trunk[6]), plane_angle=-1.4),
                       parent=(0, 5)),
        ],
        StrandParameters(mass_per_length=0.01, bend_stiffness=(1e-3, 1.5e-3), twist_stiffness=5e-4,
                         bend_damping=1e-5, twist_damping=1e-5),
        backend=backend,
    )  # fmt: skip


def test_single_horizontal_link_matches_the_statics_of_the_tan_law():
    """A rigid rod of weight m g on a root joint of stiffness K = EI / (L/2) must be held by a
    moment m g L / 2; the tan law gives it for a rest tilt θ with 2 K tan(θ/2) = m g L / 2."""
    length, mass_per_length, rigidity = 0.2, 0.05, 0.01
    model = build_model(
        [StrandSpec(polyline(1, length, direction=(1.0, 0.0, 0.0)))],
        StrandParameters(mass_per_length=mass_per_length, bend_stiffness=rigidity),
    )
    shaped = zero_gravity_model(model, GRAVITY)
    stiffness = rigidity / (length / 2)
    moment = mass_per_length * length * 9.81 * length / 2
    tilt = 2 * np.arctan(moment / (2 * stiffness))
    rest_tip = shaped.model.rest_points[-1]
    assert np.arctan2(rest_tip[2], rest_tip[0]) == pytest.approx(tilt, rel=1e-12)  # tilted up
    np.testing.assert_allclose(shaped.modelled_q, model.rest_rotation)


@pytest.mark.parametrize("make", [_serial, _branched])
def test_springs_balance_the_inverse_dynamics_torques_exactly(backend, make):
    model = make(backend)
    shaped = zero_gravity_model(model, GRAVITY)
    xp = model.xp
    control = Control.from_model(shaped.model, GRAVITY)
    data = dynamics.Data.for_model(model)
    zero = xp.zeros((3, model.n_links), dtype=model.backend.float)
    held = dynamics.inverse_dynamics(shaped.model, data, shaped.modelled_q, zero, zero, control)
    held = backend.to_host(held)
    spring = backend.to_host(dynamics.joint_torques(shaped.model, control, shaped.modelled_q, zero))
    np.testing.assert_allclose(spring, held, rtol=0, atol=1e-12 * np.abs(held).max())
    if make is _branched:  # the branches load joints in twist too, exercising the coupling
        assert np.abs(held[1]).max() > 1e-2 * np.abs(held).max()


def _max_deviation_over_length(model, points):
    worst = 0.0
    for strand in range(model.n_strands):
        rows = slice(model.point_offsets[strand], model.point_offsets[strand + 1])
        rest = model.rest_points[rows]
        length = np.linalg.norm(np.diff(rest, axis=0), axis=1).sum()
        worst = max(worst, np.abs(points[rows] - rest).max() / length)
    return worst


@pytest.mark.parametrize("make", [_serial, _branched])
def test_zero_gravity_rest_shape_holds_the_modelled_shape_for_two_seconds(backend, make):
    model = make(backend)
    shaped = zero_gravity_model(model, GRAVITY)
    # One substep per frame: an exact equilibrium is a fixed point of backward Euler whatever
    # the step, and any error (Newton tolerance) must neither grow nor drift over 48 steps.
    sim = Simulation(shaped.model, SolverSettings(substeps=1), gravity=GRAVITY)
    sim.state.q = shaped.modelled_q.copy()
    for _ in range(48):
        sim.advance(1 / 24, STILL)
    assert _max_deviation_over_length(model, sim.points()) < 1e-3


@pytest.mark.parametrize("make", [_serial, _branched])
def test_without_the_correction_the_same_strands_sag_visibly(make):
    model = make("numpy")
    sim = Simulation(model, SolverSettings(substeps=1), gravity=GRAVITY)
    for _ in range(48):
        sim.advance(1 / 24, STILL)
    assert _max_deviation_over_length(model, sim.points()) > 5e-2


def test_rest_shape_curls_against_gravity():
    model = _serial("numpy")
    shaped = zero_gravity_model(model, GRAVITY)
    assert shaped.model.rest_points[-1, 2] > model.rest_points[-1, 2] + 0.02
    np.testing.assert_allclose(shaped.model.rest_points[0], model.rest_points[0])


def test_a_joint_too_soft_for_its_load_is_named():
    model = build_model(
        [StrandSpec(polyline(6, 0.3, direction=(1.0, 0.0, 0.0)), name="limp")],
        StrandParameters(mass_per_length=0.01, bend_stiffness=1e-6),
    )
    with pytest.raises(InvalidInputError, match=r"strand 0 \('limp'\), link \d .* bend .*limit 90"):
        zero_gravity_model(model, GRAVITY)
    # The same strand under a gentler gravity is fine.
    zero_gravity_model(model, (0.0, 0.0, -1e-4))


def test_a_joint_without_twist_stiffness_cannot_hold_a_twisting_load():
    rng = np.random.default_rng(3)
    trunk = random_walk(rng, 4, np.zeros(3))
    model = build_model(
        [StrandSpec(trunk, name="trunk"),
         StrandSpec(random_walk(rng, 3, trunk[2]), parent=(0, 1), name="branch")],
        StrandParameters(mass_per_length=0.01, bend_stiffness=1.0, twist_stiffness=0.0),
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match=r"strand 0 \('trunk'\), link \d cannot hold"):
        zero_gravity_model(model, GRAVITY)


def test_max_angle_must_be_below_half_a_turn():
    model = _serial("numpy")
    for bad in (0.0, np.pi, np.nan):
        with pytest.raises(InvalidInputError, match="max_angle"):
            zero_gravity_model(model, GRAVITY, max_angle=bad)


def test_rest_rotations_stay_unit_quaternions(backend):
    shaped = zero_gravity_model(_branched(backend), GRAVITY)
    rest = backend.to_host(shaped.model.rest_rotation)
    np.testing.assert_allclose(np.linalg.norm(rest, axis=0), 1.0, rtol=1e-14)
    deviation = spatial.quat_multiply(
        np, spatial.quat_conjugate(np, rest), backend.to_host(shaped.modelled_q)
    )
    assert (np.abs(deviation[0]) > np.cos(np.pi / 4)).all()  # every joint within 90°


def test_single_precision_models_stay_single_precision():
    model = build_model(
        [StrandSpec(_arc(12, 0.2, 1.2))],
        StrandParameters(mass_per_length=0.01, bend_stiffness=2e-4, twist_stiffness=2e-4),
        dtype="float32",
    )
    shaped = zero_gravity_model(model, GRAVITY)
    assert shaped.model.rest_rotation.dtype == np.float32
    control = Control.from_model(shaped.model, GRAVITY)
    zero = np.zeros((3, model.n_links), dtype=np.float32)
    data = dynamics.Data.for_model(model)
    held = dynamics.inverse_dynamics(shaped.model, data, shaped.modelled_q, zero, zero, control)
    spring = dynamics.joint_torques(shaped.model, control, shaped.modelled_q, zero)
    np.testing.assert_allclose(spring, held, rtol=0, atol=1e-5 * np.abs(held).max())
