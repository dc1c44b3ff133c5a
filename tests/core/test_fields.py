"""Force fields against falloff laws, vector calculus (Rankine vortex, point source), the
statistics and smoothness of the turbulence, and strands in wind."""

import numpy as np
import pytest

from oriented_strands.core import (
    InvalidInputError,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    apply_fields,
    build_model,
    dynamics,
)
from oriented_strands.core.fields import (
    Falloff,
    ForceFields,
    PointField,
    RootToTip,
    Turbulence,
    VortexField,
    Wind,
    evaluate_fields,
    link_centres,
    strand_coordinate,
)
from strands import STILL, polyline


def _host(field, positions, time=0.0):
    """Evaluate on NumPy with (N, 3) positions; returns (N, 3)."""
    return field.evaluate(np, np.asarray(positions, dtype=float).T, time).T


def _jacobian(field, points, time=0.0, step=1e-5):
    """Central-difference Jacobians (N, 3, 3), ``J[:, i, j] = ∂u_i/∂x_j``."""
    columns = []
    for j in range(3):
        shift = np.zeros(3)
        shift[j] = step
        columns.append((_host(field, points + shift, time) - _host(field, points - shift, time))
                       / (2 * step))  # fmt: skip
    return np.stack(columns, axis=-1)


def test_falloff_follows_blenders_power_laws():
    d = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 7.9, 8.0, 8.1])
    radius, max_distance = 1.0, 8.0
    for power in (0.0, 1.0, 2.0, 3.0):
        factor = Falloff(power, radius, max_distance).factor(np, d)
        expected = np.where(d <= radius, 1.0, (radius / np.maximum(d, radius)) ** power)
        np.testing.assert_allclose(factor, np.where(d <= max_distance, expected, 0.0), rtol=1e-15)
    inverse_square = Falloff(2.0, radius).factor(np, np.array([2.0, 4.0]))
    assert inverse_square[1] / inverse_square[0] == pytest.approx(0.25)  # double distance: 1/4


def test_point_field_is_radial_and_a_source_free_inverse_square_field_outside_its_radius():
    centre = np.array([0.3, -0.2, 1.0])
    field = PointField(centre, strength=2.0, falloff=Falloff(2.0, radius=0.5))
    rng = np.random.default_rng(1)
    directions = rng.normal(size=(50, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    distance = rng.uniform(0.6, 3.0, 50)
    points = centre + distance[:, None] * directions
    u = _host(field, points)
    np.testing.assert_allclose(u, (2.0 * (0.5 / distance) ** 2)[:, None] * directions, rtol=1e-12)
    # Gauss: a point source's inverse-square field has no divergence away from the source.
    divergence = np.trace(_jacobian(field, points), axis1=1, axis2=2)
    assert np.abs(divergence).max() < 1e-6 * np.abs(u).max()
    inward = _host(PointField(centre, 2.0, inward=True, falloff=field.falloff), points)
    np.testing.assert_allclose(inward, -u)
    assert np.all(_host(field, centre[None]) == 0.0)


def test_vortex_is_a_rankine_vortex_tangential_and_divergence_free():
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    centre = np.array([0.1, 0.0, -0.4])
    core, strength = 0.5, 3.0
    # Falloff with power 1 from the core radius: outside the core the speed is strength R/ρ.
    vortex = VortexField(centre, axis * 7.0, strength, core, Falloff(1.0, core))
    rng = np.random.default_rng(2)
    points = centre + rng.uniform(-1.5, 1.5, (200, 3))
    u = _host(vortex, points)
    offset = points - centre
    radial = offset - (offset @ axis)[:, None] * axis
    rho = np.linalg.norm(radial, axis=1)
    # Tangential everywhere: no component along the axis or away from it.
    assert np.abs(u @ axis).max() < 1e-13
    assert np.abs(np.einsum("ij,ij->i", u, radial)).max() < 1e-13
    jacobian = _jacobian(vortex, points)
    assert np.abs(np.trace(jacobian, axis1=1, axis2=2)).max() < 1e-6 * strength / core
    # In the plane through the centre (where the spherical falloff distance is ρ): the Rankine
    # profile, solid-body rotation with vorticity 2 strength / R inside, irrotational outside.
    plane = rng.normal(size=(100, 3))
    plane -= (plane @ axis)[:, None] * axis
    plane *= rng.uniform(0.05, 2.0, (100, 1)) / np.linalg.norm(plane, axis=1, keepdims=True)
    rho = np.linalg.norm(plane, axis=1)
    speed = np.linalg.norm(_host(vortex, centre + plane), axis=1)
    np.testing.assert_allclose(speed, strength * np.minimum(rho / core, core / rho), rtol=1e-12)
    jacobian = _jacobian(vortex, centre + plane)
    curl = np.stack(
        (jacobian[:, 2, 1] - jacobian[:, 1, 2],
         jacobian[:, 0, 2] - jacobian[:, 2, 0],
         jacobian[:, 1, 0] - jacobian[:, 0, 1]), axis=1,
    )  # fmt: skip
    away = np.abs(rho - core) > 1e-3  # the profile has a kink at the core's edge
    expected = np.where(rho[:, None] < core, 2 * strength / core * axis, 0.0)
    np.testing.assert_allclose(curl[away], expected[away], atol=1e-6 * strength / core)


def _turbulence(**overrides):
    return Turbulence(**{"amplitude": 1.5, "length_scale": 0.4, "time_scale": 0.8, **overrides})


def test_turbulence_is_reproducible_and_has_the_stated_rms_speed():
    rng = np.random.default_rng(3)
    points = rng.uniform(-20.0, 20.0, (20000, 3))
    u = _host(_turbulence(seed=7), points, time=0.3)
    np.testing.assert_array_equal(u, _host(_turbulence(seed=7), points, time=0.3))
    assert not np.allclose(u, _host(_turbulence(seed=8), points, time=0.3))
    # Space average of |u|² over a region of many wavelengths is Σ A_j²/2 = amplitude².
    assert np.sqrt((u * u).sum(axis=1).mean()) == pytest.approx(1.5, rel=0.03)
    assert abs(u.mean(axis=0)).max() < 0.05


def test_turbulence_is_smooth_and_divergence_free():
    modes, amplitude, length, period = 16, 1.5, 0.4, 0.8
    turbulence = _turbulence(modes=modes)
    rng = np.random.default_rng(4)
    points = rng.uniform(-2.0, 2.0, (500, 3))
    # Bounds from the construction's parameters: every wave number is at most 4π/L, every
    # frequency at most 4π/T, and the modes' amplitudes add up to amplitude sqrt(2 modes).
    total_amplitude = amplitude * np.sqrt(2 * modes)
    jacobian = _jacobian(turbulence, points, time=0.2)
    assert (
        np.linalg.norm(jacobian, ord=2, axis=(1, 2)).max() <= total_amplitude * 4 * np.pi / length
    )
    assert np.abs(np.trace(jacobian, axis1=1, axis2=2)).max() < 1e-7 * amplitude / length
    # Continuous in time, with a bounded rate, and C²: second differences shrink as δ².
    for delta in (1e-2, 1e-3):
        before, now, after = (_host(turbulence, points, t) for t in (0.2 - delta, 0.2, 0.2 + delta))
        assert np.abs(after - now).max() <= total_amplitude * 4 * np.pi / period * delta
        second = np.abs(after - 2 * now + before).max()
        assert second <= total_amplitude * (4 * np.pi / period) ** 2 * delta**2


def test_wind_carries_its_turbulence_downstream():
    # Eddies that do not change in place (very long time scale) are carried at the mean wind.
    mean = np.array([3.0, 1.0, 0.0])
    wind = Wind(mean, turbulence=_turbulence(time_scale=1e9))
    points = np.random.default_rng(5).uniform(-1.0, 1.0, (100, 3))
    np.testing.assert_allclose(
        _host(wind, points + 0.25 * mean, 0.25), _host(wind, points, 0.0), atol=1e-7
    )
    calm = Wind(mean)
    np.testing.assert_allclose(_host(calm, points), np.broadcast_to(mean, points.shape))


def test_fields_give_the_same_values_on_every_backend(backend):
    fields = [
        Wind((1.0, 0.0, 0.5), origin=(0.0, 1.0, 0.0), falloff=Falloff(1.0, 0.5, 3.0),
             turbulence=_turbulence()),
        PointField((0.2, 0.0, 0.0), 0.7, falloff=Falloff(2.0, 0.1)),
        VortexField((0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 1.2, core_radius=0.3),
    ]  # fmt: skip
    points = np.random.default_rng(6).uniform(-2.0, 2.0, (3, 64))
    device_points = backend.from_host(points)
    for field in fields:
        expected = field.evaluate(np, points, 0.4)
        got = backend.to_host(field.evaluate(backend.xp, device_points, 0.4))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_fields_keep_the_precision_of_the_positions():
    points = np.random.default_rng(7).uniform(-1.0, 1.0, (3, 16)).astype(np.float32)
    fields = [
        Wind((1.0, 0.0, 0.0), turbulence=_turbulence()),
        PointField((0.0, 0.0, 0.0), 1.0),
        VortexField((0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 1.0),
        VortexField((0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 1.0, 0.2, Falloff(2.0, 0.5)),
    ]
    for field in fields:
        assert field.evaluate(np, points, 0.5).dtype == np.float32


def test_root_to_tip_weights_ramp_along_each_strand(backend):
    trunk = polyline(4, 0.4, direction=(1.0, 0.0, 0.0))
    model = build_model(
        [StrandSpec(trunk), StrandSpec(polyline(2, 0.1, start=trunk[2]), parent=(0, 1))],
        backend=backend,
    )
    s = strand_coordinate(model)
    np.testing.assert_allclose(s, [0.125, 0.375, 0.625, 0.875, 0.25, 0.75])
    weights = model.to_strand_order(RootToTip(root=1.0, tip=0.0, exponent=2.0).values(model))
    np.testing.assert_allclose(weights, 1.0 - s**2)


def _hanging_strand(backend, stiffness, drag=0.2, length=0.3, n=10):
    return build_model(
        [StrandSpec(polyline(n, length))],
        StrandParameters(mass_per_length=0.01, bend_stiffness=stiffness, twist_stiffness=stiffness,
                         bend_damping=1e-4, twist_damping=1e-4, drag=drag),
        backend=backend,
    )  # fmt: skip


def test_strand_held_rigid_in_steady_wind_feels_drag_c_length_speed_at_its_root(backend):
    drag, length, wind = 0.2, 0.3, np.array([0.0, 2.0, 0.0])
    model = _hanging_strand(backend, stiffness=50.0, drag=drag, length=length)
    sim = Simulation(model, SolverSettings(substeps=2), gravity=(0.0, 0.0, 0.0))
    for _ in range(6):
        apply_fields(sim, wind=[Wind(wind)])
        sim.advance(1 / 24, STILL)
    xp = model.xp
    zero = xp.zeros((3, model.n_links), dtype=model.backend.float)
    dynamics.inverse_dynamics(model, sim.data, sim.state.q, zero, zero, sim.control)
    # The base holds the strand against the air: the force through the root joint is −c L v.
    root_force = backend.to_host(sim.data.f[3:, 0])
    np.testing.assert_allclose(root_force, -drag * length * wind, rtol=1e-3, atol=1e-9)
    # and its moment about the root is that of a uniform load, c |v| L² / 2.
    root_moment = np.linalg.norm(backend.to_host(sim.data.tau[:, 0]))
    assert root_moment == pytest.approx(drag * 2.0 * length**2 / 2, rel=1e-3)


def test_soft_strand_bends_downwind_unless_weighted_out(backend):
    model = _hanging_strand(backend, stiffness=2e-4)
    tips = []
    for weight in (RootToTip(), RootToTip(root=0.0, tip=0.0)):
        sim = Simulation(model, SolverSettings(substeps=2))
        for _ in range(12):
            apply_fields(sim, wind=[Wind((3.0, 0.0, 0.0), weight=weight)])
            sim.advance(1 / 24, STILL)
        tips.append(sim.points()[-1] - model.rest_points[-1])
    blown, still = tips
    assert blown[0] > 0.05 * 0.3  # downwind by more than 5% of its length
    assert abs(blown[1]) < 1e-9
    np.testing.assert_allclose(still, 0.0, atol=1e-12)


def test_force_fields_apply_force_per_length_at_each_link(backend):
    model = _hanging_strand(backend, stiffness=1.0)
    sim = Simulation(model)
    density = np.array([0.0, 0.5, -0.1])  # N/m
    apply_fields(sim, force=[Wind(density, weight=RootToTip(root=1.0, tip=0.0))])
    force = model.to_strand_order(sim.control.external_force)
    s = strand_coordinate(model)
    np.testing.assert_allclose(force, (1.0 - s)[:, None] * density * 0.03, rtol=1e-12)
    np.testing.assert_allclose(model.to_strand_order(sim.control.wind_velocity), 0.0)
    centres = model.to_strand_order(
        link_centres(model, sim.data, sim.state.q, sim.state.base_rotation, sim.state.base_position)
    )
    np.testing.assert_allclose(centres[:, 2], -0.3 * s)
    summed = evaluate_fields(
        model, [Wind(density), Wind(density)], backend.from_host(centres.T), 0.0
    )
    np.testing.assert_allclose(model.to_strand_order(summed), np.tile(2 * density, (10, 1)))


def test_fields_evaluated_at_every_substep_converge_at_first_order(backend):
    """Gusts that change within a frame (periods of 0.1 to 0.4 s, at 24 fps): evaluated at every
    substep the motion converges at first order as substeps are added (successive differences
    halve; backward Euler, so that the step's own error is of the fields' order); sampled once
    per frame it converges to another motion, further from it than five times the per-substep
    error."""
    model = _hanging_strand(backend, stiffness=2e-4, n=6)
    gust = Wind(
        (0.0, 2.0, 0.0),
        turbulence=Turbulence(amplitude=3.0, length_scale=1.0, time_scale=0.2, seed=2),
    )

    def tips(substeps, per_substep):
        settings = SolverSettings(
            order=1, substeps=substeps, newton_tolerance=1e-10, newton_max_iterations=30
        )
        sim = Simulation(model, settings)
        for _ in range(4):
            if per_substep:
                sim.advance(1 / 24, STILL, fields=ForceFields(wind=[gust]))
            else:
                apply_fields(sim, wind=[gust])
                sim.advance(1 / 24, STILL)
        return sim.points()

    every = {substeps: tips(substeps, True) for substeps in (4, 8, 16)}
    coarse, fine = (np.abs(every[s] - every[2 * s]).max() for s in (4, 8))
    assert 1.5 < coarse / fine < 2.5, (coarse, fine)
    assert np.abs(tips(16, False) - every[16]).max() > 5 * fine
    assert np.abs(every[16] - model.rest_points).max() > 0.1  # the gusts move the strand


def test_fields_per_substep_are_taken_at_the_substeps_start_and_end_time(backend):
    """A substep's fields are evaluated at the links' positions at its start and at its end
    time, as the implicit step takes the bases' motion; their values hold after the call."""
    model = _hanging_strand(backend, stiffness=2e-4, n=4)
    wind, force = [Wind((1.0, 0.0, 0.0), turbulence=_turbulence())], [PointField((0, 0, 1), 0.2)]
    sim = Simulation(model, SolverSettings(substeps=1))
    sim.state.q = sim.state.q[:, ::-1].copy()  # somewhere off the rest shape
    reference = Simulation(model)
    reference.state = sim.state.copy()
    apply_fields(reference, wind=wind, force=force, time=1 / 24)
    sim.advance(1 / 24, STILL, fields=ForceFields(wind, force))
    for name in ("wind_velocity", "external_force"):
        expected = backend.to_host(getattr(reference.control, name))
        assert np.array_equal(backend.to_host(getattr(sim.control, name)), expected)
        assert np.abs(expected).max() > 1e-3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Falloff(power=-1.0), "Falloff.power must not be negative"),
        (lambda: Falloff(power=2.0, radius=0.0), "radius must be positive when power > 0"),
        (lambda: Falloff(max_distance=0.0), "max_distance must be > 0"),
        (lambda: PointField((0, 0, 0), strength=-1.0), "PointField.strength must not be negative"),
        (lambda: PointField((0, 0, np.nan), strength=1.0), "centre must be 3 finite numbers"),
        (lambda: VortexField((0, 0, 0), (0, 0, 0), 1.0), "axis must not be the zero vector"),
        (lambda: VortexField((0, 0, 0), (0, 0, 1), 1.0, core_radius=-1), "core_radius"),
        (lambda: Wind((1.0, 2.0)), "Wind.velocity must be 3 finite numbers"),
        (lambda: Turbulence(-1.0, 1.0, 1.0), "amplitude must not be negative"),
        (lambda: Turbulence(1.0, 0.0, 1.0), "length_scale must be > 0"),
        (lambda: Turbulence(1.0, 1.0, 1.0, modes=0), "modes must be a positive integer"),
        (lambda: RootToTip(exponent=0.0), "exponent must be > 0"),
        (lambda: Wind((1, 0, 0)).evaluate(np, np.zeros((5, 3)), 0.0), r"\(3, N\)"),
        (lambda: Wind((1, 0, 0)).evaluate(np, np.zeros((3, 5)), np.nan), "time must be finite"),
        (lambda: ForceFields(wind=[(1.0, 0.0, 0.0)]), "ForceFields.wind must hold Wind"),
    ],
)
def test_bad_field_input_is_refused(make, message):
    with pytest.raises(InvalidInputError, match=message):
        make()
