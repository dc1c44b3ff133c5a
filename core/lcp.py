"""Batched projected SOR for the linear complementarity problems of constraints (paper §4, Alg. 2).

The problem
-----------
Each of ``B`` independent problems (one per strand tree with active constraints) has ``m`` rows
(padded to the largest problem) and asks for forces ``x`` with

    w = A x − b,    lowerᵢ ≤ xᵢ ≤ upperᵢ,
    xᵢ = lowerᵢ ⇒ wᵢ ≥ 0,    xᵢ = upperᵢ ⇒ wᵢ ≤ 0,    lowerᵢ < xᵢ < upperᵢ ⇒ wᵢ = 0.

With ``lower = 0`` and ``upper = +inf`` this is the paper's eq. 14, in Algorithm 2's form
``w = A x − b ≥ 0, x ≥ 0, xᵀw = 0``: ``A = K`` is the constraint operator (Delassus matrix, the
constraint accelerations per unit constraint force), ``b = a^d − a^0`` the desired accelerations
minus those without constraint forces, ``x = f`` the force magnitudes along the constraint
directions and ``w = a − a^d``. Other bounds give the other rows of the engine:

- **unilateral** (contact normal, joint limit): ``[0, +inf)``;
- **bilateral** (point on a path, joint following a rotation): ``(−inf, +inf)``, ``w = 0``;
- **friction** (eq. 16–17): ``|x_t| ≤ μ x_n``: the row's bounds are ``lower·x_n`` and
  ``upper·x_n`` (``lower = −μ``, ``upper = μ``), ``x_n`` being the *current* value of its
  normal row (``normal_row``). The paper writes the friction row one-sided (``f_t ≥ 0``) along
  ``t = unit(a_t + v_t/h)`` with ``a_t^d = −|v_t|/h``; the two-sided box is the same problem
  whenever the friction force opposes the sliding direction (its sign comes out negative along
  ``t``), and it also lets static friction hold against a tangential pull in either direction
  when ``t`` is the previous step's tangent;
- **padding** of a smaller problem: a zero row and column of ``A``, ``b = 0``,
  ``lower = upper = 0`` (the row's force stays 0 and disturbs nothing).

The iteration
-------------
Algorithm 2 is Gauss–Seidel on ``A + εI`` with each new value relaxed by ``ω`` and projected on
its bounds (line 14), for a fixed number of sweeps: ``ε`` makes a positive semi-definite ``A``
definite and keeps a zero diagonal finite, and no convergence test is made because the problem may
have no solution. Here each sweep visits the rows in **blocks** of ``block_size`` consecutive rows;
a block's rows are updated together, each by its residual of ``A + εI`` divided by the block's
row sum ``sᵢ = Σ_{j in block} |A_ij| + ε``, then projected (normal rows first, then the friction
rows with the new normal values). With ``block_size = 1``, ``sᵢ = A_ii + ε`` and this *is*
Algorithm 2. Why blocks:

- **Dependent rows share the load.** Several contacts on one link act on the same few degrees of
  freedom, so their rows are (nearly) linearly dependent and the forces are not unique. Row by row,
  the first row visited takes the whole load and keeps it: an exact solution is a fixed point of
  Gauss–Seidel, so the order of the rows, not the physics, decides who pushes. Rows updated
  together see the same state and are updated alike: identical rows keep identical forces, and
  proportional rows (contacts along one link pressing the same way) get equal forces, at every
  sweep. Put each link's contact rows in one block.
- **Safe steps.** ``sᵢ`` bounds the block's largest eigenvalue row by row (Gershgorin), so every
  block update is a descent step of ``½ xᵀ(A + εI)x − bᵀx`` for ``0 < ω < 2``: for symmetric
  positive semi-definite ``A`` and fixed bounds the sweeps converge to the (unique) solution of the
  regularised problem, as Algorithm 2 does.
- **Fewer sequential steps.** The sweep is sequential over blocks only; each block is one batched
  matrix product over all problems, which matters on a GPU.

Every answer is finite for finite input, also when ``A`` is singular or the problem has no
solution (forces then grow at most linearly with the number of sweeps, as in the paper's
"bail out early").

Arrays are batch-first (problem, row), on the array namespace ``xp`` passed first, as in
:mod:`.spatial`; nothing is copied to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidInputError
from .validation import positive_whole


def solve_lcp(
    xp: Any,
    A: Any,
    b: Any,
    lower: Any,
    upper: Any,
    normal_row: Any = None,
    *,
    iterations: int,
    regularization: float | Any,
    relaxation: float = 1.0,
    block_size: int = 1,
    initial: Any = None,
) -> Any:
    """Forces ``x`` (B, m) of ``B`` bounded LCPs by projected block SOR (paper's Algorithm 2).

    Parameters
    ----------
    xp : module
        Array namespace of the arrays (``numpy``, ``cupy``, …).
    A : (B, m, m) float
        Constraint operators (response of row ``i`` to a unit force of row ``j``), symmetric
        positive semi-definite for the convergence guarantee; any finite matrix gives a finite
        answer.
    b : (B, m) float
        Right-hand sides: desired minus unconstrained constraint accelerations.
    lower, upper : (B, m) float
        Bounds (``±inf`` allowed); for friction rows (``normal_row >= 0``) multiples of the normal
        row's force: ``−μ`` and ``μ``.
    normal_row : (B, m) int, optional
        For a friction row, the index of its normal row in the same problem (which should come
        earlier in the sweep: same block or before, and have ``lower >= 0``); ``-1`` for rows
        with fixed bounds. ``None``: no friction rows.
    iterations : int
        Number of sweeps ``K_iter`` (fixed; no convergence test).
    regularization : float or (B, m) float
        ``ε > 0`` added to the diagonal, in the units of ``A``.
    relaxation : float
        ``ω`` in (0, 2); 1 is projected Gauss–Seidel.
    block_size : int
        Rows updated together (see the module docstring); must divide ``m``.
    initial : (B, m) float, optional
        Warm start (e.g. the previous step's forces); zeros (Algorithm 2, line 1) by default.

    Returns
    -------
    x : (B, m) float
        A new array, within its bounds.

    Raises
    ------
    InvalidInputError
        For inconsistent shapes, a non-integer ``normal_row``, ``m`` not divisible by
        ``block_size``, or ``iterations``, ``relaxation``, ``regularization`` out of range.
    """
    n_problems, m = _check_shapes(A, b, lower, upper, normal_row, initial)
    iterations = positive_whole("iterations", iterations)
    block_size = positive_whole("block_size", block_size)
    if m % block_size:
        raise InvalidInputError(f"block_size {block_size} does not divide the row count {m}")
    relaxation = float(relaxation)
    if not 0.0 < relaxation < 2.0:
        raise InvalidInputError(f"relaxation must lie in (0, 2), got {relaxation}")
    epsilon = _regularization(xp, regularization, (n_problems, m), A.dtype)

    blocks = [slice(start, start + block_size) for start in range(0, m, block_size)]
    block_sum = xp.concatenate([xp.abs(A[:, rows, rows]).sum(axis=2) for rows in blocks], axis=1)
    step = relaxation / (block_sum + epsilon)

    friction = normal_row is not None
    if friction:
        is_friction = normal_row >= 0
        # Friction rows skip the fixed clamp; their own bounds follow their normal's force.
        fixed_lower = xp.where(is_friction, -xp.inf, lower)
        fixed_upper = xp.where(is_friction, xp.inf, upper)
        friction_lower = xp.where(is_friction, lower, 0.0)
        friction_upper = xp.where(is_friction, upper, 0.0)
        problem = xp.arange(n_problems)[:, None]
        normal_index = xp.where(is_friction, normal_row, 0)
    else:
        fixed_lower, fixed_upper = lower, upper

    # Each block's slices taken once: the sweeps below are bound by the number of array calls.
    block_data = [
        (
            rows,
            A[:, rows, :],
            b[:, rows],
            epsilon[:, rows],
            step[:, rows],
            fixed_lower[:, rows],
            fixed_upper[:, rows],
            (
                normal_index[:, rows],
                is_friction[:, rows],
                friction_lower[:, rows],
                friction_upper[:, rows],
            )
            if friction
            else None,
        )
        for rows in blocks
    ]
    x = xp.zeros((n_problems, m), dtype=A.dtype) if initial is None else initial.astype(A.dtype)
    for _ in range(iterations):
        for rows, A_rows, b_rows, eps_rows, step_rows, low, high, bounds in block_data:
            current = x[:, rows]
            residual = b_rows - (A_rows @ x[:, :, None])[:, :, 0] - eps_rows * current
            trial = xp.minimum(xp.maximum(current + step_rows * residual, low), high)
            x[:, rows] = trial
            if bounds is not None:
                normals, is_friction_rows, mu_lower, mu_upper = bounds
                normal_force = x[problem, normals]
                bounded = xp.minimum(
                    xp.maximum(trial, mu_lower * normal_force), mu_upper * normal_force
                )
                x[:, rows] = xp.where(is_friction_rows, bounded, trial)
    return x


def _check_shapes(A: Any, b: Any, lower: Any, upper: Any, normal_row: Any, initial: Any) -> tuple:
    if len(A.shape) != 3 or A.shape[1] != A.shape[2]:
        raise InvalidInputError(f"A must have shape (B, m, m), got {tuple(A.shape)}")
    n_problems, m = A.shape[0], A.shape[1]
    named = {"b": b, "lower": lower, "upper": upper, "normal_row": normal_row, "initial": initial}
    for name, value in named.items():
        if value is not None and tuple(value.shape) != (n_problems, m):
            raise InvalidInputError(
                f"{name} must have shape (B, m) = {(n_problems, m)} to match A, got "
                f"{tuple(value.shape)}"
            )
    if np.dtype(A.dtype).kind != "f":
        raise InvalidInputError(f"A must be a floating-point array, got dtype {A.dtype}")
    if normal_row is not None and np.dtype(normal_row.dtype).kind not in "iu":
        raise InvalidInputError(
            f"normal_row must be an integer array, got dtype {normal_row.dtype}"
        )
    return n_problems, m


def _regularization(xp: Any, value: Any, shape: tuple, dtype: Any) -> Any:
    """``ε`` as a (B, m) array; a number is checked here, an array's values are the caller's."""
    if isinstance(value, int | float | np.integer | np.floating):
        value = float(value)
        if not (np.isfinite(value) and value > 0.0):
            raise InvalidInputError(f"regularization must be a positive number, got {value}")
        return xp.full(shape, value, dtype=dtype)
    if tuple(value.shape) != shape:
        raise InvalidInputError(
            f"regularization must be a number or have shape {shape}, got {tuple(value.shape)}"
        )
    return value.astype(dtype)
