"""Projected SOR for bounded LCPs against independent solutions: exhaustive enumeration of active
sets, SciPy's bounded least squares on the equivalent QP, and closed forms (a particle on a plane
with friction, dependent and contradictory constraints)."""

import itertools

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from oriented_strands.core import InvalidInputError
from oriented_strands.core.lcp import solve_lcp

INF = np.inf
# Tiny against the problems' diagonals (about 1), so the regularised answers agree with the exact
# ones to about 1e-9.
EPSILON = 1e-10


def _random_operator(rng, m: int, rank: int | None = None) -> np.ndarray:
    """A random symmetric positive (semi-)definite m x m matrix with diagonal entries about 1."""
    factor = rng.normal(size=(m, m if rank is None else rank))
    operator = factor @ factor.T / factor.shape[1]
    return operator + (0.2 * np.eye(m) if rank is None else 0.0)


def _random_bounds(rng, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Unilateral rows [0, inf), bilateral rows (-inf, inf) and boxed rows [-1, 2], mixed."""
    kind = rng.integers(0, 3, m)
    lower = np.select([kind == 0, kind == 1], [0.0, -INF], -1.0)
    upper = np.select([kind == 0, kind == 1], [INF, INF], 2.0)
    return lower, upper


def _enumerate(A, b, lower, upper, normal_row=None, tolerance=1e-9) -> list[np.ndarray]:
    """Every solution of the bounded LCP, by trying each row at its lower bound, its upper bound
    or free (w = 0), solving the linear system of that choice and keeping the consistent ones."""
    m = len(b)
    normal_row = np.full(m, -1) if normal_row is None else normal_row
    solutions = []
    for states in itertools.product(("lower", "free", "upper"), repeat=m):
        system, rhs = np.zeros((m, m)), np.zeros(m)
        for i, state in enumerate(states):
            bound = lower[i] if state == "lower" else upper[i]
            if state == "free":
                system[i], rhs[i] = A[i], b[i]
            elif normal_row[i] >= 0:  # x_i = bound * x_normal
                system[i, i], system[i, normal_row[i]] = 1.0, -bound
            elif np.isfinite(bound):
                system[i, i], rhs[i] = 1.0, bound
            else:
                break
        else:
            try:
                x = np.linalg.solve(system, rhs)
            except np.linalg.LinAlgError:
                continue
            w = A @ x - b
            scale = np.where(normal_row >= 0, x[np.maximum(normal_row, 0)], 1.0)
            low = np.where(normal_row >= 0, lower * scale, lower)
            high = np.where(normal_row >= 0, upper * scale, upper)
            at_low, at_high = (
                np.isclose(x, low, atol=tolerance),
                np.isclose(x, high, atol=tolerance),
            )
            ok = (
                np.all(x >= low - tolerance)
                and np.all(x <= high + tolerance)
                and np.all(at_low | at_high | (np.abs(w) <= tolerance))
                and np.all(~at_low | at_high | (w >= -tolerance))
                and np.all(~at_high | at_low | (w <= tolerance))
            )
            if ok:
                solutions.append(x)
    return solutions


def _solve(backend, A, b, lower, upper, normal_row=None, **settings):
    """``solve_lcp`` on the backend from host arrays; host result."""
    device = backend.from_host
    settings = {"iterations": 400, "regularization": EPSILON} | settings
    x = solve_lcp(
        backend.xp,
        device(A),
        device(b),
        device(lower),
        device(upper),
        None if normal_row is None else device(normal_row),
        **settings,
    )
    return backend.to_host(x)


def test_random_problems_match_enumerated_active_sets(backend):
    """Twenty positive definite problems of 1 to 6 rows, padded into one batch of 6."""
    rng = np.random.default_rng(4)
    m_max, n_problems = 6, 20
    A = np.zeros((n_problems, m_max, m_max))
    b = np.zeros((n_problems, m_max))
    lower, upper = np.zeros_like(b), np.zeros_like(b)
    sizes = rng.integers(1, m_max + 1, n_problems)
    for p, m in enumerate(sizes):
        A[p, :m, :m] = _random_operator(rng, m)
        b[p, :m] = rng.normal(size=m)
        lower[p, :m], upper[p, :m] = _random_bounds(rng, m)
    x = _solve(backend, A, b, lower, upper)
    for p, m in enumerate(sizes):
        (expected,) = _enumerate(A[p, :m, :m], b[p, :m], lower[p, :m], upper[p, :m])
        np.testing.assert_allclose(x[p, :m], expected, atol=1e-7)
        np.testing.assert_array_equal(x[p, m:], 0.0)  # padding rows stay at rest


def test_box_bounded_problems_match_scipy_bounded_least_squares(backend):
    """For symmetric positive definite ``A = L Lᵀ`` the bounded LCP is the QP
    ``min ½ xᵀAx − bᵀx`` over the box, i.e. ``min |Lᵀx − L⁻¹b|²``: SciPy's BVLS solves that."""
    rng = np.random.default_rng(7)
    m, n_problems = 8, 4
    A = np.stack([_random_operator(rng, m) for _ in range(n_problems)])
    b = rng.normal(size=(n_problems, m)) * 2.0
    bounds = [_random_bounds(rng, m) for _ in range(n_problems)]
    lower, upper = np.stack([lo for lo, _ in bounds]), np.stack([hi for _, hi in bounds])
    x = _solve(backend, A, b, lower, upper, iterations=800)
    for p in range(n_problems):
        factor = np.linalg.cholesky(A[p])
        reference = lsq_linear(
            factor.T,
            np.linalg.solve(factor, b[p]),
            bounds=(lower[p], upper[p]),
            method="bvls",
            tol=1e-14,
        )
        np.testing.assert_allclose(x[p], reference.x, atol=1e-7)


@pytest.mark.parametrize(("block_size", "relaxation"), [(2, 1.0), (3, 1.0), (1, 1.4), (2, 0.7)])
def test_blocks_and_relaxation_reach_the_same_solution(backend, block_size, relaxation):
    rng = np.random.default_rng(11)
    m = 6
    A = np.stack([_random_operator(rng, m) for _ in range(5)])
    b = rng.normal(size=(5, m))
    lower, upper = np.zeros_like(b), np.full_like(b, INF)
    x = _solve(backend, A, b, lower, upper, iterations=800, block_size=block_size)
    for p in range(5):
        (expected,) = _enumerate(A[p], b[p], lower[p], upper[p])
        np.testing.assert_allclose(x[p], expected, atol=1e-7)


def _friction_problems(rng, n_contacts: int, friction: float):
    """Rows (n_0, t_0, n_1, t_1, …): normal rows unilateral, friction rows |x_t| <= μ x_n."""
    m = 2 * n_contacts
    normal_row = np.full(m, -1)
    normal_row[1::2] = np.arange(0, m, 2)
    lower = np.where(normal_row >= 0, -friction, 0.0)
    upper = np.where(normal_row >= 0, friction, INF)
    A = _random_operator(rng, m)
    b = rng.normal(size=m) + np.where(normal_row >= 0, 0.0, 1.0)  # mostly pressing contacts
    return A, b, lower, upper, normal_row


def test_friction_matches_an_enumerated_solution_and_stays_in_the_cone(backend):
    rng = np.random.default_rng(3)
    problems = [_friction_problems(rng, 3, friction) for friction in (0.2, 0.5, 0.8) * 3]
    stacked = [np.stack(arrays) for arrays in zip(*problems, strict=True)]
    x = _solve(backend, *stacked, iterations=600, block_size=2)
    matched = 0
    for p, (A, b, lower, upper, normal_row) in enumerate(problems):
        normal, tangent = x[p, 0::2], x[p, 1::2]
        assert np.all(normal >= 0.0)
        assert np.all(np.abs(tangent) <= upper[1] * normal + 1e-12)
        solutions = _enumerate(A, b, lower, upper, normal_row)
        assert solutions, "every generated problem has a solution"
        matched += min(np.abs(x[p] - s).max() for s in solutions) < 1e-6
    # Friction LCPs need not have unique solutions, and the sweep need not converge on every one
    # (the paper's point); on these well-conditioned problems it does.
    assert matched == len(problems)


@pytest.mark.parametrize(
    ("pull", "expected_friction"),
    [(1.0, -1.0), (-2.5, 2.5), (5.0, -4.905), (-9.0, 4.905)],
    ids=["sticks", "sticks-other-way", "slides", "slides-other-way"],
)
def test_particle_on_a_plane_sticks_below_the_friction_limit_and_slides_above(
    backend, pull, expected_friction
):
    """A 1 kg particle resting on a plane under gravity, pulled sideways by ``pull`` newtons,
    with μ = 0.5: friction cancels the pull up to μ m g = 4.905 N and holds at that bound
    beyond (rows: normal, tangent; ``A = 1/m``, ``b`` = desired minus free acceleration)."""
    mass, gravity, mu = 1.0, 9.81, 0.5
    A = np.eye(2)[None] / mass
    b = np.array([[gravity, -pull / mass]])
    x = _solve(
        backend,
        A,
        b,
        np.array([[0.0, -mu]]),
        np.array([[INF, mu]]),
        np.array([[-1, 0]]),
        block_size=2,
    )
    np.testing.assert_allclose(x[0], [mass * gravity, expected_friction], rtol=1e-8)


def test_dependent_rows_in_one_block_share_the_load_evenly(backend):
    """Three contacts along one link pushing the same way (rows proportional to their lever arms
    0.2, 0.5, 1.0) beside two independent rows: the forces are not unique, and the block update
    gives the three equal shares. Row by row (block 1) the first row takes it all."""
    rng = np.random.default_rng(5)
    direction = rng.normal(size=5)
    levers = np.array([0.2, 0.5, 1.0])
    jacobian = np.vstack([np.outer(levers, direction), rng.normal(size=(2, 5))])
    mobility = _random_operator(rng, 5)
    A = (jacobian @ mobility @ jacobian.T)[None]
    demand = 3.0 * abs(direction @ mobility @ direction)
    b = np.concatenate([levers * demand, [0.1, -0.2]])[None]
    lower, upper = np.zeros((1, 5)), np.full((1, 5), INF)
    even = _solve(backend, A, b, lower, upper, iterations=300, block_size=5)[0]
    np.testing.assert_allclose(even[:3], even[0], rtol=1e-6)
    w = A[0] @ even - b[0]
    assert np.all(w >= -1e-7)
    assert np.all(np.abs(w[even > 1e-9]) < 1e-7)
    row_by_row = _solve(backend, A, b, lower, upper, iterations=300, block_size=1)[0]
    np.testing.assert_allclose(levers @ row_by_row[:3], levers @ even[:3], rtol=1e-6)
    assert row_by_row[1] < 1e-3 * row_by_row[0]


def test_identical_rows_share_and_padded_batches_match_single_solves(backend):
    """Two duplicated contacts (identical rows) split the force in halves; solving each problem
    alone or in a padded batch gives the same numbers."""
    A1 = np.array([[2.0, 2.0, 0.5], [2.0, 2.0, 0.5], [0.5, 0.5, 1.0]])
    b1 = np.array([4.0, 4.0, 0.5])
    A2 = np.zeros((3, 3))
    A2[:2, :2] = [[1.0, 0.3], [0.3, 1.0]]
    b2 = np.array([1.0, -1.0, 0.0])
    lower, upper = np.zeros((2, 3)), np.full((2, 3), INF)
    upper[1, 2] = 0.0  # the padding row of the smaller problem
    x = _solve(backend, np.stack([A1, A2]), np.stack([b1, b2]), lower, upper, block_size=3)
    (x1,) = _enumerate(A1[1:, 1:], b1[1:], lower[0, 1:], upper[0, 1:])
    np.testing.assert_allclose(x[0], [x1[0] / 2, x1[0] / 2, x1[1]], atol=1e-8)
    alone = _solve(backend, A2[None, :2, :2], b2[None, :2], lower[1:, :2], upper[1:, :2])
    np.testing.assert_allclose(x[1, :2], alone[0], atol=1e-12)
    assert x[1, 2] == 0.0


def test_singular_and_contradictory_problems_give_finite_balanced_forces(backend):
    """Problem 0: a point squeezed between two obstacles that both demand separation (no
    solution): equal, finite forces whose effects cancel. Problem 1: a constraint that cannot
    move (zero row) asking to move: finite. Problem 2: rank 1 of 3 (three contacts on a
    one-degree-of-freedom body), consistent: the demand is met."""
    A = np.zeros((3, 3, 3))
    A[0, :2, :2] = [[1.0, -1.0], [-1.0, 1.0]]
    A[2] = np.outer([1.0, 2.0, 0.5], [1.0, 2.0, 0.5])
    b = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 2.0, 0.5]])
    lower, upper = np.zeros((3, 3)), np.full((3, 3), INF)
    upper[0, 2] = upper[1, :2] = 0.0
    x = _solve(backend, A, b, lower, upper, iterations=50, regularization=1e-6, block_size=3)
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(x[0, 0], x[0, 1], rtol=1e-12)
    assert x[1, 2] <= 1.0 / 1e-6 + 1e-6
    np.testing.assert_allclose(A[2] @ x[2], b[2], atol=1e-5)


def test_warm_start_at_the_solution_stays_there(backend):
    rng = np.random.default_rng(9)
    A = _random_operator(rng, 5)[None]
    b = rng.normal(size=(1, 5))
    lower, upper = np.zeros((1, 5)), np.full((1, 5), INF)
    (expected,) = _enumerate(A[0], b[0], lower[0], upper[0])
    device = backend.from_host
    x = solve_lcp(
        backend.xp,
        device(A),
        device(b),
        device(lower),
        device(upper),
        iterations=1,
        regularization=1e-14,
        initial=device(expected[None]),
    )
    np.testing.assert_allclose(backend.to_host(x)[0], expected, atol=1e-12)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"A": np.zeros((2, 3, 4))}, "A must have shape"),
        ({"b": np.zeros((2, 4))}, "b must have shape"),
        ({"normal_row": np.zeros((2, 3))}, "normal_row must be an integer"),
        ({"iterations": 0}, "iterations must be a positive integer"),
        ({"relaxation": 2.0}, "relaxation must lie in"),
        ({"regularization": 0.0}, "regularization must be a positive"),
        ({"regularization": np.ones((3, 2))}, "regularization must be a number or have shape"),
        ({"block_size": 2}, "block_size 2 does not divide"),
    ],
)
def test_invalid_input_is_refused(backend, change, message):
    arrays = {"A": np.zeros((2, 3, 3)), "b": np.zeros((2, 3)), "normal_row": None}
    arrays |= {key: value for key, value in change.items() if key in arrays}
    settings = {"iterations": 5, "regularization": 1e-9}
    settings |= {key: value for key, value in change.items() if key not in arrays}
    if isinstance(settings["regularization"], np.ndarray):
        settings["regularization"] = backend.from_host(settings["regularization"])
    device = backend.from_host
    bounds = device(np.zeros((2, 3)))
    normal_row = arrays["normal_row"]
    with pytest.raises(InvalidInputError, match=message):
        solve_lcp(
            backend.xp,
            device(arrays["A"]),
            device(arrays["b"]),
            bounds,
            bounds,
            None if normal_row is None else device(normal_row),
            **settings,
        )
