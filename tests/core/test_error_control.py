"""Error control (``SolverSettings.tolerance``): the local error estimate against the true local
error of a converged reference, the step sizes it chooses, and what it leaves in the state."""

import numpy as np
import pytest

from oriented_strands.core import InvalidInputError, Simulation, SolverSettings
from oriented_strands.core.state import PreviousStep
from strands import hanging_hair, swung_sideways

H = 1 / 96
# A 25 cm strand of 8 links hanging from a base swung ±5 cm at 1.4 Hz, near its first mode.
BASE = swung_sideways(0.05, 1.4)


def _strand():
    return hanging_hair(8, 0.25)


def _reference_states(model, until, per_half_step=32):
    """The strand's state and points at every multiple of ``H/2`` up to ``until`` s, stepped at
    ``H / (2 per_half_step)`` (converged far below the errors measured here)."""
    sim = Simulation(model, SolverSettings(substeps=per_half_step, newton_tolerance=1e-12))
    states = [(sim.state.copy(), sim.points())]
    while sim.time < until - 1e-9:
        sim.advance(H / 2, BASE)
        states.append((sim.state.copy(), sim.points()))
    return states


def _one_step(model, history, start, h, order):
    """One step of ``h`` from ``start`` with the last step's start ``history`` behind it (its
    size the time between them): the estimate and the state reached."""
    state = start.copy()
    trees = model.n_trees
    state.previous = PreviousStep(
        history.q.copy(),
        history.w.copy(),
        np.full(trees, start.time - history.time),
        np.ones(trees, dtype=bool),
        np.zeros(trees, dtype=bool),
        np.zeros(trees),
    )
    sim = Simulation(
        model, SolverSettings(substeps=1, order=order, tolerance=1.0, newton_tolerance=1e-12)
    )
    sim.state = state
    stats = sim.advance(h, BASE)
    return stats.local_error, sim.points()


def test_the_local_error_estimate_follows_the_true_local_error():
    """From states of a converged run, one step of BDF2 after a step of half, the same and
    twice its size (ω = 2, 1, 1/2): the estimate of the step's local error is within 0.6 and
    1.5 times the distance between the points it reached and the converged ones (measured
    0.75–1.13); one backward-Euler step, within 0.5 and 2 times (0.58–1.17: its leading error
    term passes through zero where the acceleration turns, and the next one shows)."""
    model = _strand()
    states = _reference_states(model, 0.5)
    for start_index in (48, 60, 72, 84, 94):  # t = 0.25 to 0.49 s
        start = states[start_index][0]
        _, reached = states[start_index + 2]
        for back, order, least, most in (
            (1, 2, 0.6, 1.5),
            (2, 2, 0.6, 1.5),
            (4, 2, 0.6, 1.5),
            (2, 1, 0.5, 2.0),
        ):
            estimate, points = _one_step(model, states[start_index - back][0], start, H, order)
            true = np.linalg.norm(points - reached, axis=1).max()
            assert true > 1e-7
            assert least < estimate / true < most, (start_index, back, order, estimate, true)


def _tips(settings, fps=24, seconds=1.0):
    sim = Simulation(_strand(), settings)
    tips, stats = [], []
    for _ in range(int(round(seconds * fps))):
        stats.append(sim.advance(1 / fps, BASE))
        tips.append(sim.points()[-1])
    return np.array(tips), stats


@pytest.mark.slow
def test_a_tolerance_chooses_the_steps_its_error_asks_for():
    """Over a second of the swing, every step a tree keeps meets the tolerance; the steps per
    frame follow the motion; a tolerance ten times tighter takes more steps and brings the tip
    at least 3 times closer to the converged motion (global error ∝ tolerance^(2/3) for a
    second-order method: 4.6 times)."""
    reference, _ = _tips(SolverSettings(substeps=256, newton_tolerance=1e-10))
    errors, means = [], []
    for tolerance in (1e-4, 1e-5):
        tips, stats = _tips(SolverSettings(tolerance=tolerance, newton_tolerance=1e-10))
        counts = [item.substeps for item in stats]
        assert all(item.local_error <= tolerance for item in stats)
        assert all(0 < item.next_step < np.inf for item in stats)
        assert len(set(counts[1:])) > 1, counts
        errors.append(np.linalg.norm(tips - reference, axis=1).max())
        means.append(np.mean(counts))
    assert means[1] > means[0]
    assert errors[0] / errors[1] > 3.0, errors


@pytest.mark.slow
def test_with_a_tolerance_the_motion_is_the_same_at_24_and_60_fps():
    """The steps follow the error, not the frame: sampled every twelfth of a second over 1 s,
    the tips at 24 and at 60 fps with a tolerance of 10 µm are within 1 mm (0.4 % of the
    strand's length) of each other."""
    settings = SolverSettings(tolerance=1e-5, newton_tolerance=1e-10)
    at_24, _ = _tips(settings, 24)
    at_60, _ = _tips(settings, 60)
    assert np.linalg.norm(at_24[1::2] - at_60[4::5], axis=1).max() < 1e-3


def test_a_step_that_misses_the_tolerance_is_redone_in_halves():
    """One step per frame allowed: the frames whose step misses the tolerance are halved until
    their halves meet it."""
    sim = Simulation(_strand(), SolverSettings(substeps=1, max_substeps=1, tolerance=2e-5))
    stats = [sim.advance(1 / 24, BASE) for _ in range(12)]
    assert all(item.substeps == 1 for item in stats)
    assert sum(item.subdivisions for item in stats) > 0
    assert all(item.local_error <= 2e-5 for item in stats)


def test_without_a_tolerance_nothing_is_estimated():
    stats = Simulation(_strand()).advance(1 / 24, BASE)
    assert stats.substeps == 4
    assert stats.local_error is None
    assert stats.next_step is None


def test_a_state_saved_and_restored_goes_on_with_the_same_steps():
    """The step size the estimates ask for is part of the state: stepping on from a saved state
    repeats the same steps and motion (to the Newton iteration's tolerance: its first guess
    extrapolates the simulation's last steps, which the state does not hold)."""
    sim = Simulation(_strand(), SolverSettings(tolerance=1e-5, newton_tolerance=1e-12))
    for _ in range(6):
        sim.advance(1 / 24, BASE)
    saved = sim.state.copy()
    first = [sim.advance(1 / 24, BASE).substeps for _ in range(4)]
    points = sim.points()
    sim.state = saved
    second = [sim.advance(1 / 24, BASE).substeps for _ in range(4)]
    assert first == second
    np.testing.assert_allclose(sim.points(), points, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tolerance": 0.0}, "tolerance must be a positive length"),
        ({"tolerance": float("nan")}, "tolerance must be a positive length"),
        ({"tolerance": "1 mm"}, "tolerance must be a positive length"),
        ({"tolerance": 1e-4, "method": "explicit"}, "needs the implicit method"),
        ({"max_substeps": 0}, "max_substeps must be a whole number"),
    ],
)
def test_bad_error_control_settings_are_refused_by_name(settings, message):
    with pytest.raises(InvalidInputError, match=message):
        SolverSettings(**settings)
