"""Time stepping against closed forms, conservation laws, convergence and Pinocchio's ABA."""

import numpy as np
import pytest

from oriented_strands.core import (
    Backend,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    build_model,
    dynamics,
    spatial,
)
from oriented_strands.core.dynamics import Data
from oriented_strands.core.integrators import (
    REFACTORIZE_AFTER,
    Scheme,
    first_guess,
    integrate_rotation,
    joint_block,
    residual,
    step_dense_reference,
    step_implicit,
)
from oriented_strands.core.model import select_trees
from oriented_strands.core.state import Control, PreviousStep, State, StepMemory
from strands import (
    FREE,
    STILL,
    hanging_hair,
    polyline,
    random_tree,
    scene_frames,
    skip_where_rounding_depends_on_batch,
    soft_hair,
    step_afresh,
    swaying_base,
    swung_sideways,
)


def _swing_single_link(
    backend, h, duration, method, amplitude=1e-3, length=1.0, radius=0.01, order=2, ratios=(1,)
):
    """A rigid rod hanging from a pivot, released at ``amplitude`` rad; returns (times, angles).
    The steps cycle through ``h`` times ``ratios``."""
    model = build_model(
        [StrandSpec(polyline(1, length))],
        StrandParameters(mass_per_length=1.0, radius=radius, **FREE),
        backend=backend,
    )
    sim = Simulation(
        model,
        SolverSettings(
            method=method, order=order, substeps=1, newton_tolerance=1e-13, newton_max_iterations=30
        ),
    )
    q = backend.to_host(sim.state.q)
    q = spatial.quat_multiply(np, q, spatial.quat_exp(np, np.array([[amplitude], [0.0], [0.0]])))
    sim.state.q = backend.from_host(q)
    times, angles = [0.0], [amplitude]
    for k in range(int(round(duration / h))):
        sim.advance(h * ratios[k % len(ratios)], STILL)
        deviation = spatial.quat_multiply(
            np,
            spatial.quat_conjugate(np, backend.to_host(model.rest_rotation)),
            backend.to_host(sim.state.q),
        )
        times.append(sim.time)
        angles.append(2.0 * np.arctan2(deviation[1, 0], deviation[0, 0]))
    return np.array(times), np.array(angles)


def _compound_pendulum_period(length=1.0, radius=0.01, g=9.81):
    # Thin solid rod about its end: I = m (L²/3 + r²/4), restoring torque m g L/2 per radian.
    return 2 * np.pi * np.sqrt((length**2 / 3 + radius**2 / 4) / (g * length / 2))


def _stiff_hair() -> StrandParameters:
    """Hair a million times stiffer than the benchmark's, lightly damped."""
    rigidity = 1e-4 * 1e6
    return StrandParameters(
        mass_per_length=5e-3,
        radius=5e-4,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=1e-6,
        twist_damping=1e-6,
    )


def test_bdf2_damps_the_fastest_twist_of_a_stiff_strand_at_once(backend):
    """L-stability: a strand at 10⁶ times the hair's rigidity, stepping in second order, has
    every joint kicked to twist at 1 rad/s; its twist modes are far above the step's rate, and
    BDF2 takes them out within a step instead of ringing (measured: 8·10⁻⁹ rad/s after the
    step, 10⁻¹⁵ four steps later)."""
    parameters = _stiff_hair()
    model = build_model([StrandSpec(polyline(16, 0.3))], parameters, backend=backend)
    sim = Simulation(model, SolverSettings(substeps=1, newton_tolerance=1e-12))
    for _ in range(3):
        sim.advance(1 / 96, STILL)
    kicked = backend.to_host(sim.state.w).copy()
    kicked[1] += 1.0  # about each link's own axis
    sim.state.w = backend.from_host(kicked)
    twists = []
    for _ in range(6):
        assert sim.advance(1 / 96, STILL).second_order_trees == 1
        twists.append(np.abs(backend.to_host(sim.state.w)[1]).max())
    assert max(twists) < 1e-6
    assert twists[-1] < 1e-10


def test_compound_pendulum_period_matches_closed_form(backend):
    period = _compound_pendulum_period()
    times, angles = _swing_single_link(backend, period / 400, 2.2 * period, "implicit")
    # Downward zero crossings, linearly interpolated, are one period apart.
    crossing = np.nonzero((angles[:-1] > 0) & (angles[1:] <= 0))[0]
    exact = times[crossing] + (times[crossing + 1] - times[crossing]) * angles[crossing] / (
        angles[crossing] - angles[crossing + 1]
    )
    measured = np.diff(exact)
    assert len(measured) >= 1
    assert measured[0] == pytest.approx(period, rel=2e-3)


@pytest.mark.parametrize(("order", "least", "most"), [(1, 1.7, 2.3), (2, 3.5, 4.5)])
def test_implicit_step_converges_at_its_order(backend, order, least, most):
    """Backward Euler's error halves with the step, BDF2's falls four times."""
    period = _compound_pendulum_period()
    errors = []
    for divisions in (50, 100, 200):
        _, angles = _swing_single_link(backend, period / divisions, period, "implicit", order=order)
        errors.append(abs(angles[-1] - 1e-3))  # closed form: back at the amplitude after one period
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((least < ratios) & (ratios < most)), ratios


def test_bdf2_with_varying_steps_converges_at_second_order(backend):
    """Steps alternating between one and two units (step ratios 2 and 1/2, variable-step BDF2):
    the error after one period still falls about four times per halving of the unit."""
    period = _compound_pendulum_period()
    errors = []
    for divisions in (96, 192, 384):
        _, angles = _swing_single_link(
            backend, period / divisions, period / 1.5, "implicit", ratios=(1, 2)
        )
        errors.append(abs(angles[-1] - 1e-3))
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    # Measured 4.56 and 4.30, falling to 4 (4.15 at the next halving).
    assert np.all((3.5 < ratios) & (ratios < 4.7)), ratios


def test_cantilever_sags_to_euler_bernoulli_deflection(backend):
    length, mass_per_length, g, n = 0.3, 0.01, 9.81, 32
    load = mass_per_length * g
    rigidity = load * length**3 / (8 * 0.01)  # tip deflection of 1% of the length
    parameters = StrandParameters(
        mass_per_length=mass_per_length,
        radius=1e-3,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=0.02 * rigidity,
        twist_damping=0.02 * rigidity,
    )
    model = build_model(
        [StrandSpec(polyline(n, length, direction=(1.0, 0.0, 0.0)))], parameters, backend=backend
    )
    sim = Simulation(
        model, SolverSettings(substeps=4, newton_tolerance=1e-10, newton_max_iterations=30)
    )
    for _ in range(48):
        sim.advance(1 / 24, STILL)
    deflection = -sim.points()[-1, 2]
    assert deflection == pytest.approx(load * length**4 / (8 * rigidity), rel=0.02)
    static = residual(
        model,
        sim.data,
        Scheme.backward_euler(sim.state.w, 1.0),
        sim.state.q,
        backend.from_host(np.zeros((3, n))),
        sim.control,
    )
    assert np.abs(backend.to_host(static)).max() < 1e-9 * load * length**2 / 2


def _spinning_strand(backend, method, order=2):
    """A strand spinning about its fixed root at 1 rev/s, slightly disturbed, without loads."""
    parameters = StrandParameters(mass_per_length=0.02, radius=2e-3, drag=0.0, **FREE)
    model = build_model(
        [StrandSpec(polyline(8, 0.3, direction=(1.0, 0.2, 0.1)))], parameters, backend=backend
    )
    settings = SolverSettings(
        method=method, order=order, substeps=1, newton_tolerance=1e-12, newton_max_iterations=60
    )
    sim = Simulation(model, settings, gravity=(0.0, 0.0, 0.0))
    w = np.random.default_rng(7).normal(size=(3, model.n_links)) * 0.05
    w[:, 0] += (0.0, 0.5, 2 * np.pi)
    sim.state.w = backend.from_host(w)
    return sim


def test_explicit_mode_conserves_energy_at_small_steps(backend):
    sim = _spinning_strand(backend, "explicit")
    start = sum(sim.energy())
    energies = []
    for _ in range(1000):
        sim.advance(1e-4, STILL)
        energies.append(sum(sim.energy()))
    assert np.abs(np.array(energies) / start - 1).max() < 1e-3


def test_backward_euler_never_gains_energy(backend):
    sim = _spinning_strand(backend, "implicit", order=1)
    energies = [sum(sim.energy())]
    for _ in range(96):
        sim.advance(1 / 96, STILL)
        energies.append(sum(sim.energy()))
    energies = np.array(energies)
    assert np.all(np.diff(energies) <= 1e-12 * energies[0])
    assert energies[-1] < energies[0]


def test_stiff_strand_is_stable_at_four_substeps_per_frame(backend):
    parameters = _stiff_hair()
    model = build_model(
        [StrandSpec(polyline(16, 0.3, direction=(1.0, 0.0, -0.2)))], parameters, backend=backend
    )
    implicit = Simulation(model, SolverSettings(method="implicit", substeps=4))
    for _ in range(48):
        implicit.advance(1 / 24, swaying_base)
    points = implicit.points()
    assert np.isfinite(points).all()
    # So stiff it moves as one rigid body with the base: segment lengths and the shape hold.
    rest = model.rest_points
    rotation = swaying_base(implicit.time).rotation[0]
    assert np.abs(points - rest @ rotation.T).max() < 1e-3 * 0.3
    explicit = Simulation(model, SolverSettings(method="explicit", substeps=4, strict=True))
    # The explicit method overflows on the way to diverging: an error, not NumPy's warnings.
    with pytest.raises(SimulationDivergedError, match="strand 0"):
        _advance_frames(explicit, 48)


def _advance_frames(sim, frames):
    for _ in range(frames):
        sim.advance(1 / 24, swaying_base)


def test_symmetric_tree_under_symmetric_load_stays_symmetric(backend):
    """A Y: a vertical trunk, two branches mirrored in x, swayed about x (keeping the mirror)."""
    trunk = polyline(4, 0.4, direction=(0.0, 0.0, 1.0))
    left = polyline(3, 0.3, direction=(-1.0, 0.0, 1.0), start=trunk[-1])
    right = polyline(3, 0.3, direction=(1.0, 0.0, 1.0), start=trunk[-1])
    specs = [StrandSpec(trunk), StrandSpec(left, parent=(0, 3)), StrandSpec(right, parent=(0, 3))]
    parameters = StrandParameters(
        mass_per_length=0.05,
        radius=5e-3,
        bend_stiffness=2e-3,
        twist_stiffness=2e-3,
        bend_damping=1e-5,
        twist_damping=1e-5,
    )
    model = build_model(specs, parameters, backend=backend)
    sim = Simulation(
        model, SolverSettings(substeps=4, newton_tolerance=1e-10, newton_max_iterations=20)
    )
    for _ in range(24):
        sim.advance(1 / 24, swaying_base)
    points = sim.points()
    left_points, right_points = points[5:9], points[9:13]
    mirrored = right_points * np.array([-1.0, 1.0, 1.0])
    assert np.abs(left_points - mirrored).max() < 1e-9
    assert np.abs(points[:5, 0]).max() < 1e-9  # the trunk stays in the mirror plane
    assert np.abs(points - model.rest_points).max() > 0.01  # and it did move


def _swaying_at_random_velocities(backend, rng, specs, parameters):
    """The model of ``specs``, a control with its base swaying, and a state at rest but for
    joint velocities drawn from a standard normal."""
    model = build_model(specs, parameters, backend=backend)
    control = Control.from_model(model)
    control.set_base_motion(model, swaying_base(0.1))
    state = State.at_rest(model)
    state.w = backend.from_host(rng.normal(size=(3, model.n_links)))
    return model, control, state


# A branched tree with springs, damping and drag, for the steps checked against the dense
# reference.
DAMPED_TREE = StrandParameters(
    mass_per_length=0.05,
    radius=5e-3,
    bend_stiffness=1e-3,
    twist_stiffness=5e-4,
    bend_damping=1e-5,
    twist_damping=1e-5,
    drag=0.05,
)


def test_implicit_step_converges_to_dense_reference(backend):
    rng = np.random.default_rng(11)
    specs = random_tree(rng)
    model, control, state = _swaying_at_random_velocities(backend, rng, specs, DAMPED_TREE)
    settings = SolverSettings(newton_tolerance=1e-12, newton_max_iterations=60)
    out, stats = step_afresh(model, state, control, 1 / 96, settings)
    dense = step_dense_reference(model, Data.for_model(model), state, control, 1 / 96)
    assert stats.iterations < settings.newton_max_iterations
    assert np.abs(backend.to_host(out.w) - backend.to_host(dense.w)).max() < 1e-8


def test_trees_left_unconverged_take_newtons_method_with_the_exact_jacobian(backend):
    """Capped at 3 iterations with a tolerance of 1e-10 rad/s, the articulated-body iteration,
    which converges linearly, leaves both trees unfinished: asked to finish exactly (as the
    stepping does at the deepest halving), Newton's method with each tree's exact Jacobian
    finishes them (a branched tree and a strand of another size, whose systems are padded to
    one size), and the step equals the dense reference's."""
    rng = np.random.default_rng(11)
    specs = [*random_tree(rng), StrandSpec(polyline(3, 0.2))]
    parameters = StrandParameters(
        mass_per_length=0.05, radius=5e-3, bend_stiffness=1e-3, twist_stiffness=5e-4, drag=0.05
    )
    model, control, state = _swaying_at_random_velocities(backend, rng, specs, parameters)
    assert model.n_trees == 2
    settings = SolverSettings(newton_tolerance=1e-10, newton_max_iterations=3)
    _, unfinished = step_afresh(model, state, control, 1 / 96, settings)
    assert unfinished.largest_update > 1e-3
    out, stats = step_afresh(model, state, control, 1 / 96, settings, finish_exactly=True)
    dense = step_dense_reference(model, Data.for_model(model), state, control, 1 / 96)
    assert stats.iterations > settings.newton_max_iterations
    assert stats.largest_update <= settings.newton_tolerance
    assert np.abs(backend.to_host(out.w) - backend.to_host(dense.w)).max() < 1e-8


def test_explicit_acceleration_matches_pinocchio_forward_dynamics(backend):
    pin = pytest.importorskip("pinocchio")
    import pinocchio_reference as reference

    rng = np.random.default_rng(5)
    model = build_model(
        random_tree(rng),
        StrandParameters(mass_per_length=0.5, radius=0.01, drag=0.0, **FREE),
        backend=backend,
    )
    state = State.at_rest(model)
    q = rng.normal(size=(model.n_links, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = rng.normal(size=(model.n_links, 3))
    state.q, state.w = backend.from_host(q.T), backend.from_host(w.T)
    control = Control.from_model(model)
    out = state.copy()
    from oriented_strands.core.integrators import step_explicit

    h = 1e-3
    step_explicit(model, Data.for_model(model), StepMemory.for_model(model), state, control, h, out)
    acceleration = (backend.to_host(out.w).T - w) / h

    pin_model, order = reference.build(model, free_flyer=False)
    pin_model.gravity.linear[:] = (0.0, 0.0, -9.81)
    expected = pin.aba(
        pin_model,
        pin_model.createData(),
        reference.configuration(order, q),
        reference.joint_vector(order, w),
        np.zeros(3 * model.n_links),
    )
    expected = reference.engine_vector(order, expected, 3)
    assert np.abs(acceleration - expected).max() <= 1e-9 * np.abs(expected).max()


def test_a_float32_model_steps_in_float32(backend):
    """Nothing in a step may promote single precision to double (on a GPU that doubles the
    memory traffic and, on consumer cards, costs far more arithmetic); the state's arrays would
    hide it by casting back, so the step's own results are checked."""
    single = Backend(backend.name, backend.xp, "float32")
    model = build_model(random_tree(np.random.default_rng(5)), backend=single)
    data, state, control = Data.for_model(model), State.at_rest(model), Control.from_model(model)
    h = 1 / 96
    w_new = state.w + 0.1
    q_new = integrate_rotation(model.xp, state.q, w_new, h)
    assert q_new.dtype == single.float
    assert residual(
        model, data, Scheme.backward_euler(state.w, h), q_new, w_new, control
    ).dtype == (single.float)
    out, memory = state.copy(), StepMemory.for_model(model)
    step_implicit(model, data, memory, state, control, h, SolverSettings(), out)
    assert memory.dw.dtype == data.x.dtype == out.q.dtype == single.float
    assert np.isfinite(backend.to_host(out.q)).all()


def _first_guess_errors(backend, h, duration=0.25):
    """A swaying strand stepped by ``h`` for ``duration``; the next step's first-guess error
    (largest joint-velocity difference from the converged step, rad/s) of the linear
    extrapolation and of the last velocity change alone."""
    model = build_model(
        [StrandSpec(polyline(6, 0.3, direction=(0.0, 1.0, -1.0)))],
        StrandParameters(),
        backend=backend,
    )
    settings = SolverSettings(substeps=1, newton_tolerance=1e-12, newton_max_iterations=30)
    sim = Simulation(model, settings)
    for _ in range(int(round(duration / h))):
        sim.advance(h, swaying_base)
    assert sim.memory.dw_count == 2
    extrapolated = backend.to_host(first_guess(sim.memory, sim.state.w))
    last_change = backend.to_host(sim.state.w + sim.memory.dw)
    sim.advance(h, swaying_base)
    converged = backend.to_host(sim.state.w)
    return np.abs(extrapolated - converged).max(), np.abs(last_change - converged).max()


def test_first_guess_extrapolation_is_third_order(backend):
    """Halving the step divides the extrapolated guess's error by 8 (the velocity change of a
    step is smooth in time, so a linear extrapolation of it errs by O(h³)), and the last change
    alone, the guess before extrapolation, by 4."""
    coarse = _first_guess_errors(backend, 1 / 400)
    fine = _first_guess_errors(backend, 1 / 800)
    extrapolated_ratio, last_change_ratio = coarse[0] / fine[0], coarse[1] / fine[1]
    assert 6 < extrapolated_ratio < 10, extrapolated_ratio
    assert 3 < last_change_ratio < 5, last_change_ratio
    assert fine[0] < 0.2 * fine[1]


def test_a_reset_forgets_the_steps_the_first_guess_extrapolates(backend):
    model = build_model([StrandSpec(polyline(3, 0.1))], backend=backend)
    sim = Simulation(model, SolverSettings(substeps=1))
    sim.advance(1 / 96, swaying_base)
    sim.advance(1 / 96, swaying_base)
    assert sim.memory.dw_count == 2
    sim.reset()
    assert sim.memory.dw_count == 0
    guess = first_guess(sim.memory, sim.state.w)
    np.testing.assert_array_equal(backend.to_host(guess), backend.to_host(sim.state.w))


def _soft_strand(backend, direction, links=16):
    """25 cm of soft hair (a wisp's bending rigidity, 2·10⁻⁷ N·m²) in ``links`` links, straight
    along ``direction``."""
    return build_model(
        [StrandSpec(polyline(links, 0.25, direction))],
        StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=2e-7,
            twist_stiffness=2e-7,
            bend_damping=2e-9,
            twist_damping=2e-9,
        ),
        backend=backend,
    )


def _forces_at_rest(backend, model):
    """``Data`` after inverse dynamics at the rest pose, joints still, under gravity."""
    control, state, data = Control.from_model(model), State.at_rest(model), Data.for_model(model)
    still = backend.from_host(np.zeros((3, model.n_links)))
    dynamics.inverse_dynamics(model, data, state.q, state.w, still, control)
    return data


def test_tension_stiffness_of_a_hanging_chain_is_its_weight_below_times_its_length(backend):
    """Hanging at rest, link ``k`` of ``n`` carries the weight of the links below it at its
    child joint and its own at its centre (statics): ``s_k = g μ ℓ² (n - k - ½)``. A strand lying
    horizontal carries its loads across its links, one standing up is compressed: both zero."""
    links, length = 16, 0.25
    segment = length / links
    hanging = _soft_strand(backend, (0.0, 0.0, -1.0), links)
    stiffness = backend.to_host(
        dynamics.tension_stiffness(hanging, _forces_at_rest(backend, hanging))
    )
    expected = 9.81 * 0.01 * segment**2 * (links - np.arange(links) - 0.5)
    np.testing.assert_allclose(stiffness, expected, rtol=1e-9)
    for direction in ((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)):
        model = _soft_strand(backend, direction, links)
        stiffness = backend.to_host(
            dynamics.tension_stiffness(model, _forces_at_rest(backend, model))
        )
        assert np.abs(stiffness).max() < 1e-12 * expected.max()


def _newton_iteration_radius(backend, model, tension_step):
    """The spectral radius of ``1 - A⁻¹ J`` at the rest pose for a step of 1/96 s: ``J`` the
    Jacobian of the backward-Euler residual (times ``h``) in the joint velocities, by central
    differences, ``A`` the articulated-body Newton matrix of :func:`.integrators.step_implicit`.
    Below 1 the modified Newton iteration converges at that rate; above 1 it diverges."""
    h = 1 / 96
    control, state, data = Control.from_model(model), State.at_rest(model), Data.for_model(model)
    size = 3 * model.n_links

    def scaled_residual(w):
        w = backend.from_host(w.reshape(model.n_links, 3).T)
        q = integrate_rotation(model.xp, state.q, w, h)
        scheme = Scheme.backward_euler(state.w, h)
        return h * backend.to_host(residual(model, data, scheme, q, w, control)).T.ravel()

    jacobian = np.empty((size, size))
    for column in range(size):
        shift = np.zeros(size)
        shift[column] = 1e-6
        jacobian[:, column] = (scaled_residual(shift) - scaled_residual(-shift)) / 2e-6
    scaled_residual(np.zeros(size))
    q = integrate_rotation(model.xp, state.q, state.w, h)
    data.tension[...] = dynamics.tension_stiffness(model, data)
    dynamics.factorize(
        model,
        data,
        joint_block(model, control, q, h),
        velocity_step=h,
        control=control,
        tension_step=tension_step,
    )
    inverse = np.empty((size, size))
    for column in range(size):
        unit = np.zeros(size)
        unit[column] = 1.0
        inverse[:, column] = backend.to_host(
            dynamics.solve(model, data, backend.from_host(unit.reshape(model.n_links, 3).T))
        ).T.ravel()
    return np.abs(np.linalg.eigvals(np.eye(size) - inverse @ jacobian)).max()


def test_the_newton_matrix_with_the_tension_is_the_jacobian_of_a_hanging_soft_strand(backend):
    """A hanging chain's weight makes it stiff against turning (a taut string): for 16 links of
    soft hair at 96 steps per second that stiffness is ten times the links' inertia, and a
    Newton matrix without it (springs, damping and inertia only) makes an iteration whose
    updates grow 2.5 times each time. With the tension's stiffness the matrix is the residual's
    Jacobian there, up to the differences' error."""
    model = _soft_strand(backend, (0.0, 0.0, -1.0))
    assert _newton_iteration_radius(backend, model, tension_step=0.0) > 2.0
    assert _newton_iteration_radius(backend, model, tension_step=1 / 96) < 1e-5


def test_soft_strand_falls_at_the_default_substeps_without_halving(backend):
    """Released horizontally, a soft strand falls and swings through to the other side in half a
    second at the default 4 substeps per 24 fps frame with no step halved: its Newton iteration
    converges (when the Newton matrix left out the tension, steps were halved 27 times), and its
    tip ends within 4 % of its length of one stepped at 64 substeps. (Whipping back, its links
    turn against each other fast enough that a few steps are still halved: the Coriolis
    coupling between links is not in the matrix.) Backward Euler: BDF2 resolves more of the whip
    (its joints turn at up to 18 rad/s at 4 substeps, 6 with backward Euler, 100 converged), and
    its Newton iteration takes more iterations there and halves a step or two."""
    frames = scene_frames(backend, 12)
    tips = []
    for substeps in (4, 64):
        model = _soft_strand(backend, (1.0, 0.0, 0.0))
        sim = Simulation(model, SolverSettings(substeps=substeps, strict=True, order=1))
        halved = 0
        for _ in range(frames):
            halved += sim.advance(1 / 24, STILL).subdivisions
        if substeps == 4:
            assert halved == 0
        tips.append(sim.points()[-1])
    assert np.linalg.norm(tips[0] - tips[1]) < 0.1 * 0.25


def test_trees_refactorised_on_a_model_of_their_own_step_as_in_the_whole(backend):
    """Soft strands falling from horizontal go on iterating after their first two Newton
    iterations, factorised again at every iterate, on the whole model while half its trees
    iterate and on a model of just those trees once fewer do: each tree's step is the one it
    takes alone."""
    # The soft strands whip: rounding grows to 4e-6 rad/s within three frames on CuPy.
    skip_where_rounding_depends_on_batch(backend)
    soft = [
        StrandSpec(polyline(16, 0.25, direction, start=(0.0, y, 0.0)))
        for direction, y in (((1.0, 0.0, 0.0), 0.0), ((0.0, 1.0, -0.3), 1.0))
    ]
    stiff = [StrandSpec(polyline(8, 0.2, (0.3, 0.0, -1.0), start=(0.0, y, 0.0))) for y in (2, 3)]
    parameters = StrandParameters(
        mass_per_length=0.01,
        radius=1e-3,
        bend_stiffness=np.array([2e-7] * 32 + [2e-4] * 16),
        twist_stiffness=2e-7,
        bend_damping=2e-9,
        twist_damping=2e-9,
    )
    model = build_model([*soft, *stiff], parameters, backend=backend)
    # Backward Euler: BDF2 resolves more of the soft strands' whip and halves a step there.
    settings = SolverSettings(strict=True, order=1)
    together = Simulation(model, settings)
    stats = [together.advance(1 / 24, STILL) for _ in range(scene_frames(backend, 6))]
    # No step halved: a halving would halve every tree's step.
    assert not any(frame.subdivisions for frame in stats)
    assert max(frame.iterations for frame in stats) > REFACTORIZE_AFTER
    for tree in range(model.n_trees):
        part, links = select_trees(model, [tree])
        alone = Simulation(part, settings)
        for _ in range(scene_frames(backend, 6)):
            alone.advance(1 / 24, STILL)
        chosen = backend.from_host(links)
        for name in ("q", "w"):
            np.testing.assert_allclose(
                backend.to_host(getattr(together.state, name)[:, chosen]),
                backend.to_host(getattr(alone.state, name)),
                rtol=0,
                atol=1e-10,
            )


def _with_history(backend, model, state, rng, h):
    """``state`` with a last step of ``h`` behind it: joint rotations a few degrees and
    velocities a little away from the current ones, every tree's history usable."""
    xp = model.xp
    turn = backend.from_host(rng.normal(size=(3, model.n_links)) * 0.05)
    state.previous = PreviousStep(
        integrate_rotation(xp, state.q, turn, 1.0),
        state.w - backend.from_host(rng.normal(size=(3, model.n_links)) * 0.1),
        xp.full(model.n_trees, h),
        xp.ones(model.n_trees, dtype=bool),
        xp.zeros(model.n_trees, dtype=bool),
        xp.zeros(model.n_trees, dtype=state.w.dtype),
    )
    return state


@pytest.mark.parametrize("ratio", [1.0, 2.0, 0.5])
def test_bdf2_step_converges_to_dense_reference(backend, ratio):
    """The articulated-body Newton iteration with BDF2's coefficients ends where Newton's method
    with the dense finite-difference Jacobian of the BDF2 residual does, on a branched tree with
    springs, damping and drag whose base sways; at a fixed step and after a step of half and of
    twice this one's size (variable-step BDF2, step ratios 2 and 1/2)."""
    rng = np.random.default_rng(11)
    model, control, state = _swaying_at_random_velocities(
        backend, rng, random_tree(rng), DAMPED_TREE
    )
    h = 1 / 96
    state = _with_history(backend, model, state, rng, h / ratio)
    settings = SolverSettings(newton_tolerance=1e-12, newton_max_iterations=60)
    scheme = Scheme.for_step(model, state, h, settings, model.xp.zeros(model.n_trees, dtype=bool))
    assert scheme.offset is not None
    out, stats = step_afresh(model, state, control, h, settings)
    dense = step_dense_reference(model, Data.for_model(model), state, control, h, scheme=scheme)
    assert stats.iterations < settings.newton_max_iterations
    assert np.abs(backend.to_host(out.w) - backend.to_host(dense.w)).max() < 1e-8
    assert np.abs(backend.to_host(out.q) - backend.to_host(dense.q)).max() < 1e-10


def test_bdf2_keeps_the_energy_of_an_undamped_spinning_strand(backend):
    """Spinning at 1 rev/s without damping, drag or gravity for 10 s (5 on the stand-in) at 96
    steps per second, BDF2 loses under 0.1 % of the energy; backward Euler loses 2.3 % in 10 s
    (measured)."""
    sim = _spinning_strand(backend, "implicit")
    start = sum(sim.energy())
    for _ in range(scene_frames(backend, 960)):
        sim.advance(1 / 96, STILL)
    assert abs(sum(sim.energy()) / start - 1.0) < 1e-3


@pytest.mark.slow
def test_bdf2_converges_at_second_order_on_a_strand_swung_near_resonance():
    """A 25 cm strand of 8 links hangs from a base swung ±5 cm at 1.4 Hz, near its first mode,
    for half a second: against the same strand at 256 substeps a frame, the tip's largest error
    falls at least 3.5 times per doubling of the substeps from 4 to 32 with BDF2, and backward
    Euler's at 4 substeps is more than five times BDF2's (9.8 mm against 1.1 mm)."""
    base = swung_sideways(0.05, 1.4)
    model = hanging_hair(8, 0.25)

    def tips(substeps, order=2):
        sim = Simulation(
            model, SolverSettings(substeps=substeps, order=order, newton_tolerance=1e-9)
        )
        path = []
        for _ in range(12):
            sim.advance(1 / 24, base)
            path.append(sim.points()[-1])
        return np.array(path)

    reference = tips(256)
    errors = np.array(
        [np.linalg.norm(tips(substeps) - reference, axis=1).max() for substeps in (4, 8, 16, 32)]
    )
    assert np.all(errors[:-1] / errors[1:] > 3.5), errors
    first_order = np.linalg.norm(tips(4, order=1) - reference, axis=1).max()
    assert first_order > 5 * errors[0]


def test_a_step_after_a_reset_is_of_first_order(backend):
    """The first step has no history and is of first order, the next ones of second; after a
    reset again."""
    sim = Simulation(soft_hair(backend, 2), SolverSettings(substeps=1))
    counts = [sim.advance(1 / 96, swaying_base).second_order_trees for _ in range(3)]
    sim.reset()
    counts += [sim.advance(1 / 96, swaying_base).second_order_trees for _ in range(2)]
    assert counts == [0, 2, 2, 0, 2]
    first_order = Simulation(soft_hair(backend, 2), SolverSettings(substeps=1, order=1))
    assert [first_order.advance(1 / 96, swaying_base).second_order_trees for _ in range(3)] == [
        0
    ] * 3


@pytest.mark.slow
def test_bdf2_gives_nearly_the_same_motion_at_24_30_and_60_fps():
    """The resonant swing of a 0.5 m strand of 25 links (base ±10 cm at 1 Hz), stepped at 4
    substeps per frame at 24, 30 and 60 frames per second: sampled every sixth of a second over
    2 s, BDF2's tips are within 10 mm (2 % of the length; 8.1 mm measured) of the 60 fps run;
    backward Euler's 24 fps run is 82 mm from its 60 fps one."""
    base = swung_sideways(0.1, 1.0)
    model = hanging_hair(25, 0.5)

    def tips(fps, order=2):
        sim = Simulation(model, SolverSettings(order=order))
        samples = []
        for frame in range(1, 2 * fps + 1):
            sim.advance(1 / fps, base)
            if (6 * frame) % fps == 0:
                samples.append(sim.points()[-1])
        return np.array(samples)

    finest = tips(60)
    for fps in (24, 30):
        assert np.linalg.norm(tips(fps) - finest, axis=1).max() < 0.01
    first_order = np.linalg.norm(tips(24, order=1) - tips(60, order=1), axis=1).max()
    assert first_order > 0.05
