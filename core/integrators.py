"""Time stepping: fully implicit BDF2 (default) or backward Euler, and explicit semi-implicit Euler.

Implicit step
-------------
Backward Euler on the unknown joint velocities ``w⁺`` with ``q⁺ = q ⊗ exp(h w⁺)``:

    R(w⁺) = M(q⁺)(w⁺ − w)/h + c(q⁺, w⁺) − τ_spring(q⁺) − τ_damp(w⁺) − τ_ext = 0.

BDF2 is the same equation with ``γ = 2h/3`` for ``h``, ``(4w − w⁻)/3`` for ``w`` and
``q⁺ = q ⊗ exp(γ w⁺ − log(q⁻¹ q⁻)/3)``, ``q⁻, w⁻`` the last step's start (:class:`Scheme`;
``docs/physics.md``, *Second order*); below, ``h`` stands for ``γ``.
``R`` is evaluated exactly by recursive Newton–Euler (:func:`.dynamics.inverse_dynamics`). Newton
updates solve ``(M + h D + h² K) Δ = −h R`` in linear time with the articulated-body recursion,
``D`` and ``K`` being the joint-local damping and spring tangent stiffness. The link-local
derivative of the velocity-dependent forces (gyroscopic, centripetal, drag) and the geometric
stiffness of the tension the links carry (:func:`.dynamics.tension_stiffness`) are folded into
each link's inertia the same way. The factorisation is made at the first guess and reused
(modified Newton); trees still iterating after :data:`REFACTORIZE_AFTER` iterations get theirs
again at every new iterate. Terms that are neither joint- nor link-local (the Coriolis coupling
between links) stay exact in ``R``, so the iteration still converges to the backward-Euler
solution, linearly rather than quadratically. :func:`step_dense_reference` solves
the same equations with a dense finite-difference Jacobian, as the reference for tests; a step
halved as often as it may be finishes the trees the iteration leaves unfinished the same way,
tree by tree (:func:`_newton_exact`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dynamics, spatial
from .dynamics import Data
from .errors import InvalidInputError, SimulationDivergedError
from .model import Model, select_trees
from .spatial import dot
from .state import Control, PreviousStep, State, StepMemory
from .validation import is_real, is_whole

METHODS = ("implicit", "explicit")
ORDERS = (1, 2)
# The largest ratio of a step to the one before that BDF2 takes (zero-stable below 1 + √2);
# a step growing faster, such as the whole step after a halved one's quarters, restarts in first
# order.
MAX_STEP_RATIO = 2.0


@dataclass(frozen=True)
class SolverSettings:
    """How to step.

    Attributes
    ----------
    method : ``"implicit"`` (stable for stiff strands; see ``order``) or ``"explicit"``
        (articulated-body forward dynamics with semi-implicit Euler; cheap, for soft setups).
    order : 1 or 2
        The implicit method's order: 2 is BDF2, which keeps the slow swinging of hair alive and
        the motion nearly the same at any step size; a tree takes a first-order step where it
        has no usable history (the first step, after a reset, a step more than twice the last,
        constraint forces, the first half of a failed step and the step after its halves:
        :class:`Scheme`, :class:`.state.StepMemory`) and goes on in second order; steps of
        changing size take variable-step BDF2. 1 is backward Euler throughout,
        which damps the slow modes (a strand swinging near its first mode loses much of its
        swing at 4 substeps a frame).
    substeps : int
        Steps per :meth:`Simulation.advance` call (per frame in Blender); with a ``tolerance``,
        those of the first call.
    tolerance : float or None, m
        Error control: None takes ``substeps`` equal steps per call. A length takes, per call,
        as many equal steps as the last steps' local error estimates ask for
        (:func:`local_errors`, :func:`next_step`), between 1 and ``max_substeps``, and a tree
        whose step's estimate exceeds it is redone in halves, as a failed step is, down to
        ``max_subdivision_depth``. The estimate is the largest distance by which a step moves a
        point of a tree from the method's error, so the tolerance is the local error of a point
        per step; trees taking constraint forces are not held to it (their corrections close
        gaps and hold limits exactly within each step).
    max_substeps : int
        With a ``tolerance``, the most steps one call takes.
    newton_tolerance : float, rad/s
        The Newton iteration stops once its largest joint-velocity update is at most this (the
        joint rotations of a converged substep are then within ``h * tolerance`` rad of the
        backward-Euler solution).
    newton_max_iterations : int
        The most Newton iterations of a step. Most steps converge in 1 to 3; a step far from
        the last one's change (a strand under constraint forces whose joints were just turned
        back to their limits) can converge at 0.3–0.6 per iteration from a first update of tens
        of rad/s, and halving such a step does not help, as the joint velocities, not the step,
        slow the iteration (``docs/collisions.md``, *Limits*). At the deepest halving, trees
        left unfinished go on with Newton's method and their exact Jacobian (up to
        :data:`EXACT_NEWTON_MAX_ITERATIONS` iterations more, for trees of at most
        :data:`EXACT_NEWTON_MAX_LINKS` links).
    subdivision_threshold : float, rad/s
        A step whose Newton iteration stops at its cap with an update still above this did not
        converge (or diverged); :class:`.Simulation` then redoes it as two half steps.
    max_subdivision_depth : int
        How many times a step may be halved (down to ``h / 2**depth``); 0 never subdivides. A
        tree whose step still fails there falls back (:class:`Fallback`) or, ``strict``, stops
        the simulation.
    strict : bool
        Raise :class:`.SimulationDivergedError` where a tree's step still fails at the deepest
        halving, instead of letting that tree fall back for the step (:class:`Fallback`): for
        tests, and for pipelines that would rather stop than bake a strand that fell back.
    workers : int or None
        How many processes :class:`.Simulation` steps groups of trees in, side by side (see
        :mod:`.workers`); None picks one per core (at most eight) on the NumPy backend for
        models whose depth levels hold at least 250 links per process, and one otherwise
        (:func:`.workers.worker_count`). The result depends on it only through rounding. A
        simulation with constraints (obstacles, joint limits) always steps in one process, and
        more than one process needs the NumPy backend.
    """

    method: str = "implicit"
    order: int = 2
    substeps: int = 4
    tolerance: float | None = None
    max_substeps: int = 64
    newton_tolerance: float = 3e-3
    newton_max_iterations: int = 16
    subdivision_threshold: float = 1e-2
    max_subdivision_depth: int = 5
    strict: bool = False
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidInputError(f"method must be one of {METHODS}, got {self.method!r}")
        if not is_whole(self.order) or self.order not in ORDERS:
            raise InvalidInputError(f"order must be one of {ORDERS}, got {self.order!r}")
        for name, least in (
            ("substeps", 1),
            ("max_substeps", 1),
            ("newton_max_iterations", 1),
            ("max_subdivision_depth", 0),
        ):
            value = getattr(self, name)
            if not is_whole(value) or value < least:
                raise InvalidInputError(f"{name} must be a whole number >= {least}, got {value!r}")
        for name in ("newton_tolerance", "subdivision_threshold"):
            value = getattr(self, name)
            if not is_real(value) or not (math.isfinite(value) and value > 0):
                raise InvalidInputError(f"{name} must be a positive number, got {value!r}")
        if self.tolerance is not None and not (
            is_real(self.tolerance) and math.isfinite(self.tolerance) and self.tolerance > 0
        ):
            raise InvalidInputError(
                f"tolerance must be a positive length in metres or None, got {self.tolerance!r}"
            )
        if self.tolerance is not None and self.method != "implicit":
            raise InvalidInputError(
                "tolerance (error control) needs the implicit method; the explicit method takes "
                "fixed substeps"
            )
        if not isinstance(self.strict, bool):
            raise InvalidInputError(f"strict must be True or False, got {self.strict!r}")
        if self.workers is not None and (not is_whole(self.workers) or self.workers < 1):
            raise InvalidInputError(
                f"workers must be a whole number >= 1 or None, got {self.workers!r}"
            )


@dataclass(frozen=True)
class Fallback:
    """A tree whose step failed even halved as often as it may be, so that for that step it was
    carried rigidly with its base (joint velocities zero, rotations those of the step's start)
    while the other trees took their step.

    Attributes
    ----------
    strand : int
        The tree's root strand, as numbered in the whole model (``Model.strand_index``).
    time : float, s
        The end of the step it fell back in.
    reason : str
        What failed, for messages.
    """

    strand: int
    time: float
    reason: str


@dataclass(frozen=True)
class StepStats:
    """What the last step did.

    Attributes
    ----------
    iterations : int
        Newton iterations used (0 for the explicit method).
    residual_norm : float, N·m
        The final residual's largest entry; NaN where the step was asked not to report it or
        some of its trees were redone in halves on a model of their own (the attempt's residual
        includes theirs), 0 for the explicit method (not computed).
    largest_update : float, rad/s
        The largest joint-velocity update of the last Newton iteration (0 for the explicit
        method): at most ``newton_tolerance`` when every tree converged.
    subdivisions : int
        How many steps :meth:`.Simulation.advance` redid as two half steps, for every tree or
        for those whose step failed (see ``SolverSettings.subdivision_threshold``).
    fallbacks : tuple of Fallback
        The trees that fell back, step by step, in time order (over a whole
        :meth:`.Simulation.advance`).
    second_order_trees : int
        How many trees took the last step in second order (BDF2, :class:`Scheme`); the others
        took a first-order step.
    substeps : int
        How many steps :meth:`.Simulation.advance` took (halves of a redone step not counted).
    local_error : float or None, m
        With ``SolverSettings.tolerance``: the largest local error estimate of a step a tree
        kept over the advance (:func:`local_errors`); None without a tolerance.
    next_step : float or None, s
        With ``SolverSettings.tolerance``: the step size the estimates ask for next
        (:func:`next_step`, the smallest over the advance's steps); None without a tolerance.
    """

    iterations: int
    residual_norm: float
    largest_update: float = 0.0
    subdivisions: int = 0
    fallbacks: tuple[Fallback, ...] = ()
    second_order_trees: int = 0
    substeps: int = 0
    local_error: float | None = None
    next_step: float | None = None

    @classmethod
    def combined(cls, parts: list[StepStats]) -> StepStats:
        """The statistics of a model stepped in groups of trees, from each group's."""
        return cls(
            max(part.iterations for part in parts),
            # NaN where any group's is (not computed), as np.max has it.
            float(np.max([part.residual_norm for part in parts])),
            max(part.largest_update for part in parts),
            sum(part.subdivisions for part in parts),
            tuple(
                sorted(
                    (fallback for part in parts for fallback in part.fallbacks),
                    key=lambda fallback: (fallback.time, fallback.strand),
                )
            ),
            sum(part.second_order_trees for part in parts),
            max(part.substeps for part in parts),
            _extreme(max, [part.local_error for part in parts]),
            _extreme(min, [part.next_step for part in parts]),
        )


def _extreme(choose: Callable, values: list[float | None]) -> float | None:
    """``choose`` (max or min) of the ``values`` that are not None; None where none is."""
    known = [value for value in values if value is not None]
    return choose(known) if known else None


def integrate_rotation(xp: Any, q: Any, w: Any, h: float | Any) -> Any:
    """``q ⊗ exp(h w)``, renormalised (``h`` a float or per link, (N,))."""
    return spatial.quat_normalize(xp, spatial.quat_multiply(xp, q, spatial.quat_exp(xp, h * w)))


@dataclass(frozen=True, eq=False)
class Scheme:
    """How an implicit step's new joint velocities ``w⁺`` give its rotations and accelerations:
    ``q⁺ = q ⊗ exp(γ w⁺ + offset)`` and ``ẇ⁺ = (w⁺ − start)/γ``.

    Backward Euler: ``γ = h``, ``start = w``, no offset. BDF2, in the chart of the step's start
    ``q`` (``ξ = log(q⁻¹ ·)``, so ``ξ(q) = 0`` and ``ξ⁻ = log(q⁻¹ q⁻)`` of the last step's start
    ``q⁻``): ``ξ⁺ − (4/3)·0 + (1/3) ξ⁻ = (2/3) h w⁺`` and ``w⁺ − (4/3) w + (1/3) w⁻ = (2/3) h ẇ⁺``,
    that is ``γ = 2h/3``, ``start = (4w − w⁻)/3``, ``offset = −ξ⁻/3`` (``docs/physics.md``,
    *Second order*). Both make the Newton matrix ``M + γ D + γ² K``, so the step is the same
    code with ``γ`` for ``h``.

    Attributes
    ----------
    gamma : float where every tree takes the same method, else per link (N,)
    start : (3, N)
    offset : (3, N) or None (no tree of second order)
    second_order : (T,) bool or None (no tree), the trees that take BDF2
    """

    gamma: float | Any
    start: Any
    offset: Any = None
    second_order: Any = None

    @classmethod
    def backward_euler(cls, w: Any, h: float) -> Scheme:
        return cls(h, w)

    @classmethod
    def for_step(
        cls, model: Model, state: State, h: float, settings: SolverSettings, first_order: Any
    ) -> Scheme:
        """The scheme of a step of ``h`` from ``state``: BDF2 with the step ratio
        ``ω = h / h⁻`` for the trees whose last step (``state.previous``) left a usable history
        and was at least ``1 / MAX_STEP_RATIO`` of this one, but for those ``first_order``
        ((T,) bool) names; backward Euler for the others.

        Variable-step BDF2 in the chart of the step's start: ``ξ⁺ + a ξ⁻ = γ w⁺`` and
        ``w⁺ − (1 + a) w + a w⁻ = γ ẇ⁺`` with ``a = ω²/(1 + 2ω)`` and
        ``γ = h (1 + ω)/(1 + 2ω)`` (``docs/physics.md``, *Second order*); ``ω = 1`` is the
        fixed-step method. It is zero-stable for ``ω < 1 + √2``."""
        previous = state.previous
        if settings.order == 1 or previous is None:
            return cls.backward_euler(state.w, h)
        xp = model.xp
        ratio = h / previous.h
        trees = previous.usable & ~first_order & (ratio <= MAX_STEP_RATIO * (1.0 + 1e-9))
        some, every, least, most = model.backend.to_host(
            xp.stack(
                (
                    xp.any(trees) * 1.0,
                    xp.all(trees) * 1.0,
                    xp.min(xp.where(trees, ratio, xp.inf)),
                    xp.max(xp.where(trees, ratio, -xp.inf)),
                )
            )
        )
        if not some:
            return cls.backward_euler(state.w, h)
        back = spatial.quat_log(
            xp, spatial.quat_multiply(xp, spatial.quat_conjugate(xp, state.q), previous.q)
        )
        if most - least <= 1e-6 * most:
            # One ratio for every tree that takes BDF2 (a fixed step: exactly 1).
            omega = 1.0 if abs(most - 1.0) <= 1e-6 else float(most)
        else:
            omega = xp.where(trees, ratio, 1.0)[model.link_tree].astype(state.w.dtype)
        share = omega * omega / (1.0 + 2.0 * omega)
        gamma = h * (1.0 + omega) / (1.0 + 2.0 * omega)
        start = (1.0 + share) * state.w - share * previous.w
        offset = -share * back
        if every and isinstance(omega, float):
            return cls(gamma, start, offset, trees)
        links = trees[model.link_tree]
        return cls(
            xp.where(links, gamma, h).astype(state.w.dtype),
            xp.where(links, start, state.w),
            xp.where(links, offset, 0.0).astype(state.w.dtype),
            trees,
        )

    def rotations(self, xp: Any, q: Any, w: Any) -> Any:
        """``q ⊗ exp(γ w + offset)``, renormalised."""
        if self.offset is None:
            return integrate_rotation(xp, q, w, self.gamma)
        turn = self.gamma * w + self.offset
        return spatial.quat_normalize(xp, spatial.quat_multiply(xp, q, spatial.quat_exp(xp, turn)))

    def acceleration(self, w: Any) -> Any:
        """``(w − start)/γ``."""
        return (w - self.start) * (1.0 / self.gamma)

    def at_links(self, links: Any) -> Scheme:
        """The scheme of a model of some of the trees: its level-major ``links`` (device;
        ``second_order`` is left out: those who take the part's scheme do not read it)."""
        gamma = self.gamma if isinstance(self.gamma, float) else self.gamma[links]
        offset = None if self.offset is None else self.offset[:, links]
        return Scheme(gamma, self.start[:, links], offset)


def residual(
    model: Model, data: Data, scheme: Scheme, q_new: Any, w_new: Any, control: Control
) -> Any:
    """Implicit residual ``R(w⁺)`` (3, N), N·m, at ``q_new = scheme.rotations(q, w_new)``."""
    wdot = scheme.acceleration(w_new)
    tau = dynamics.inverse_dynamics(model, data, q_new, w_new, wdot, control)
    return tau - dynamics.joint_torques(model, control, q_new, w_new)


def _check_step(h: float) -> float:
    h = float(h)
    if not (np.isfinite(h) and h > 0):
        raise InvalidInputError(f"step size must be a positive number, got {h}")
    return h


def _finish(
    model: Model, state: State, control: Control, q: Any, w: Any, h: float, out: State
) -> None:
    out.q[...] = q
    out.w[...] = w
    out.base_rotation[...] = control.base_rotation
    out.base_position[...] = control.base_position
    out.time = state.time + h


def _remember_start(model: Model, state: State, h: float, second_order: Any, out: State) -> None:
    """Record the start of the step from ``state`` to ``out`` in ``out.previous`` (every tree's
    history usable until the constraint pass or a fallback says otherwise; ``second_order``
    (T,) bool or None: the trees that took it in second order), into the arrays
    ``out.previous`` already holds where it can: ``out`` is the spare of two steps ago."""
    xp, previous = model.xp, out.previous
    if previous is None or previous.q.shape != state.q.shape:
        previous = out.previous = PreviousStep(
            state.q.copy(),
            state.w.copy(),
            xp.empty(model.n_trees, dtype=state.w.dtype),
            xp.empty(model.n_trees, dtype=bool),
            xp.empty(model.n_trees, dtype=bool),
            xp.empty(model.n_trees, dtype=state.w.dtype),
        )
    else:
        previous.q[...] = state.q
        previous.w[...] = state.w
    previous.h[...] = h
    previous.usable[...] = True
    previous.second_order[...] = False if second_order is None else second_order
    previous.error[...] = 0.0


def first_order_step(state: State, trees: Any) -> None:
    """Record that ``trees`` ((T,) bool device array) reached ``state`` by a first-order step
    whose history a second-order step cannot go on from (constraint forces changed its
    velocities, or it fell back): their next step is of first order."""
    if state.previous is not None:
        state.previous.usable &= ~trees
        state.previous.second_order &= ~trees
        state.previous.error[trees] = 0.0


def local_errors(model: Model, workspace: Data, state: State, out: State) -> Any:
    """The local error estimate (m) of each tree's step from ``state`` to ``out`` ((T,)): how
    far the difference between the step's rotations and those its start extrapolates moves the
    links' ends, at most, times the ratio of the method's error to that difference.

    In the chart of the step's start ``q`` (``ξ = log(q⁻¹ ·)``), the step reached
    ``ξ⁺ = log(q⁻¹ q⁺)``. A first-order (backward-Euler) step is compared with ``P = h w``:
    its error, ``−h² ξ̈/2``, is half of ``ξ⁺ − P``. A BDF2 step of ratio ``ω = h/h⁻`` is
    compared with the quadratic through the last step's start ``ξ⁻``, ``0`` and the start
    velocity ``w``, ``P = h w + ω² (ξ⁻ + h⁻ w)``, which misses by ``C_p h³ ξ⃛`` with
    ``C_p = (1 + 1/ω)/6`` where BDF2 misses by ``C h³ ξ⃛`` with
    ``C = (1 − 1/(ω(1 + 2ω)) − 3(1 + ω)/(1 + 2ω))/6`` (−2/9 at ``ω = 1``): the error is
    ``|C|/(C_p − C)`` of ``ξ⁺ − P`` (0.4 at ``ω = 1``). The difference is carried to the
    links' ends to first order (:func:`.dynamics.end_displacements`) at ``out``'s
    configuration, with forward kinematics in ``workspace`` (kinematics only:
    :meth:`.dynamics.Data.for_model`).

    ``out.previous`` says which trees took the step in second order and its size;
    ``state.previous`` holds the history they extrapolated.
    """
    xp = model.xp
    record = out.previous
    inverse = spatial.quat_conjugate(xp, state.q)
    difference = spatial.quat_log(xp, spatial.quat_multiply(xp, inverse, out.q))
    difference -= record.h[model.link_tree] * state.w
    factor = xp.full(model.n_trees, 0.5, dtype=state.w.dtype)
    history = state.previous
    if history is not None and bool(model.backend.to_host(xp.any(record.second_order))):
        bdf2 = record.second_order
        omega = xp.where(bdf2, record.h / history.h, 1.0)
        back = spatial.quat_log(xp, spatial.quat_multiply(xp, inverse, history.q))
        squared = (omega * omega)[model.link_tree]
        extrapolation = squared * (back + history.h[model.link_tree] * state.w)
        difference -= xp.where(bdf2[model.link_tree], extrapolation, 0.0)
        widened = 1.0 + 2.0 * omega
        method = (1.0 - 1.0 / (omega * widened) - 3.0 * (1.0 + omega) / widened) / 6.0
        predictor = (1.0 + 1.0 / omega) / 6.0
        factor = xp.where(bdf2, -method / (predictor - method), factor)
    dynamics.forward_kinematics(model, workspace, out.q, out.base_rotation, out.base_position)
    moved = dynamics.end_displacements(model, workspace, difference)
    return factor * dynamics.tree_max(model, xp.sqrt(xp.sum(moved * moved, axis=0)))


def next_step(model: Model, previous: PreviousStep, tolerance: float) -> tuple[float, float]:
    """The largest of the trees' last local error estimates (m; ``previous``, of the step that
    reached a state) and the step size (s) they ask for next: each tree's step times
    ``0.9 (tolerance/error)^(1/p)``, ``p`` the power of the step its error grows with (3 for
    BDF2, 2 for a first-order step), bounded to a quarter and ``MAX_STEP_RATIO`` times it; the
    smallest over the trees. One transfer to the host for both."""
    xp = model.xp
    power = xp.where(previous.second_order, 3.0, 2.0)
    ratio = xp.maximum(previous.error / tolerance, 1e-30)
    change = xp.clip(0.9 * ratio ** (-1.0 / power), 0.25, MAX_STEP_RATIO)
    largest, step = model.backend.to_host(
        xp.stack((xp.max(previous.error), xp.min(previous.h * change)))
    )
    return float(largest), float(step)


def _raise_diverged(model: Model, *values: Any) -> None:
    """Raise :class:`.SimulationDivergedError` naming the first link with a non-finite entry in
    any of ``values`` (k, N)."""
    link = int(np.argmax(model.backend.to_host(_non_finite_links(model.xp, *values))))
    strand, index = model.link_strand_and_index(link)
    raise SimulationDivergedError(
        f"the simulation diverged: {model.describe_strand(strand)}, link {index} has non-finite "
        "velocity; lower the step size (more substeps), or check for extreme parameters"
    )


def fall_back(
    model: Model, memory: StepMemory, state: State, reasons: dict[int, str], out: State
) -> tuple[Fallback, ...]:
    """Carry the trees ``reasons`` names (host tree indices, with what failed) rigidly with their
    bases through the step from ``state`` into ``out``: their joint velocities zero, their
    rotations the start's, their last velocity changes forgotten (the next step starts from
    rest, not from the failed change). Returns their :class:`Fallback` records."""
    xp = model.xp
    trees = tree_mask(model, reasons)
    links = trees[model.link_tree]
    first_order_step(out, trees)
    out.w[...] = xp.where(links, 0.0, out.w)
    out.q[...] = xp.where(links, state.q, out.q)
    memory.dw[...] = xp.where(links, 0.0, memory.dw)
    memory.dw_previous[...] = xp.where(links, 0.0, memory.dw_previous)
    records = []
    for tree, reason in sorted(reasons.items()):
        strand, _ = model.link_strand_and_index(tree)
        records.append(Fallback(int(model.strand_index[strand]), out.time, reason))
    return tuple(records)


def tree_mask(model: Model, trees: Any) -> Any:
    """(T,) bool device array, True at the host tree indices ``trees``."""
    mask = model.xp.zeros(model.n_trees, dtype=bool)
    mask[model.backend.from_host(np.fromiter(trees, dtype=np.int64))] = True
    return mask


def non_finite_trees(model: Model, *values: Any) -> np.ndarray:
    """Host indices of the trees with a non-finite entry in any of ``values`` (k, N) (per-link
    arrays: velocities, rotations)."""
    flags = _non_finite_links(model.xp, *values) * 1.0
    return np.nonzero(model.backend.to_host(dynamics.tree_max(model, flags) > 0.0))[0]


def _non_finite_links(xp: Any, *values: Any) -> Any:
    """(N,) bool: the links with a non-finite entry in any of ``values`` (k, N)."""
    flags = xp.zeros(values[0].shape[-1], dtype=bool)
    for array in values:
        flags |= xp.any(~xp.isfinite(array), axis=0)
    return flags


NON_FINITE = "its velocities or rotations became non-finite"


def _failing_trees(model: Model, w: Any, q: Any, change: Any, threshold: float) -> dict[int, str]:
    """The trees (host indices) whose velocities ``w`` or rotations ``q`` are not finite, or
    whose last Newton update ``change`` (T,) is above ``threshold``, with what failed."""
    reasons = dict.fromkeys(non_finite_trees(model, w, q).tolist(), NON_FINITE)
    updates = model.backend.to_host(change)
    for tree in np.nonzero(~(updates <= threshold))[0]:
        reasons.setdefault(
            int(tree),
            f"its Newton iteration did not converge (last update {updates[tree]:.3g} rad/s)",
        )
    return reasons


def joint_block(model: Model, control: Control, q: Any, h: float) -> Any:
    """The joint-local part ``h D + h² K`` (3, 3, N) of the Newton matrix at rotations ``q``."""
    xp = model.xp
    stiffness = dynamics.spring_tangent_stiffness(model, control, q)
    damping = dynamics.joint_damping(model, control)
    block = (h * h) * stiffness
    block += h * xp.eye(3, dtype=model.backend.float)[:, :, None] * damping[None]
    return block


def step_implicit(
    model: Model,
    data: Data,
    memory: StepMemory,
    state: State,
    control: Control,
    h: float,
    settings: SolverSettings,
    out: State,
    report_residual: bool = True,
    finish_exactly: bool = False,
) -> StepStats:
    """Advance ``state`` by ``h`` with BDF2 or backward Euler (``settings.order``, tree by tree:
    :class:`Scheme`) into ``out``, recording the step's start in ``out.previous`` and its
    velocity change in ``memory``; returns the Newton statistics.

    The first guess is :func:`first_guess`. The residual of the returned state costs a whole
    evaluation that the iteration itself does not need, so ``report_residual=False`` skips it
    (the statistics then carry NaN).

    Each iteration takes the articulated-body Newton update ``g`` and mixes it with the last
    ``ANDERSON_DEPTH`` updates (Anderson acceleration): the mix that best cancels the updates'
    changes fixes most of what the joint- and link-local Jacobian leaves out (the Coriolis
    coupling of fast-spinning chains), at the price of a few dot products per iteration. The
    Newton matrix is factorised at the first guess; trees still iterating after
    :data:`REFACTORIZE_AFTER` iterations are factorised again at each new iterate (the tension
    of a swinging soft strand, and with it its stiffness, follows its velocities), and mix only
    updates made through their new factors.

    Trees (root strands with their branches) are independent systems, so the acceleration, the
    refactorisation and the convergence test act per tree: each tree gets its own mixing weights,
    and a tree whose largest update has fallen to the tolerance takes that iteration's step (in
    the refactorised iterations the update itself, not the mixed step) and then stays put while
    the others iterate on. A tree's step therefore does not depend on the other trees of
    the model, which is what lets :class:`.Simulation` step groups of trees separately with the
    same result.

    Trees whose iteration runs away to non-finite velocities end the step at their start
    velocities with an infinite last update (``data.tree_update``), so that the step fails for
    them alone; where every tree (or none it can name) runs away the step raises
    :class:`.SimulationDivergedError`.

    With ``finish_exactly``, trees still unfinished at ``settings.newton_max_iterations`` go on
    with Newton's method and their exact Jacobian (:func:`_newton_exact`). The stepping asks for
    it only for a step halved as often as it may be (:mod:`.stepping`): a smaller step is more
    accurate, and where halving helps it is what the stepping does first.
    """
    xp, to_host = model.xp, model.backend.to_host
    h = _check_step(h)
    # Trees that took constraint forces in the last step take a first-order step: the
    # constraint pass reuses their factorisation, which is backward Euler's (constraints module,
    # step 4). So do the trees restarting after a failed step (StepMemory.restart).
    scheme = Scheme.for_step(model, state, h, settings, memory.constrained | memory.restart)
    memory.restart[...] = False
    gamma = scheme.gamma
    w_new = first_guess(memory, state.w)
    q_new = scheme.rotations(xp, state.q, w_new)
    r = residual(model, data, scheme, q_new, w_new, control)
    # Those trees also leave the velocity derivative out, as the constraint pass needs it.
    velocity_step = xp.where(memory.constrained[model.link_tree], 0.0, gamma)
    _factorize_newton(model, data, control, q_new, gamma, velocity_step)
    data.plain_trees[...] = memory.constrained
    newton = _Newton(w_new, xp.zeros(model.n_trees, dtype=bool))
    cap = int(settings.newton_max_iterations)
    finished = _modified_iterations(
        _NewtonPart(model, data, state, control, scheme, velocity_step),
        settings,
        newton,
        r,
        min(cap, REFACTORIZE_AFTER),
    )
    if not newton.finite and not finish_exactly:
        _restart_runaway_trees(model, state, newton)
        finished = bool(to_host(xp.all(newton.converged)))
    # Trees that run away while refactorised restart as above, and the others iterate on: a
    # few strands whipped to overflow would otherwise end every tree's iteration, and send
    # trees that were converging to be halved with them.
    while newton.finite and not finished and newton.iterations < cap:
        _refactorized_iterations(
            model, data, state, control, scheme, settings, velocity_step, newton
        )
        if newton.finite or finish_exactly:
            break
        _restart_runaway_trees(model, state, newton)
        finished = bool(to_host(xp.all(newton.converged)))
    # At the deepest halving the trees that ran away start again from the step's start (below).
    w_new, change, converged = newton.w, newton.change, newton.converged
    largest, iterations = newton.largest, newton.iterations
    # A tree counts as converged once its update fell to the tolerance; its last update (which
    # the step is judged by) can have grown again since.
    unfinished = ~converged | ~(change <= settings.subdivision_threshold)
    if finish_exactly:
        unfinished |= dynamics.tree_max(model, xp.any(~xp.isfinite(w_new), axis=0) * 1.0) > 0.0
    if finish_exactly and bool(to_host(xp.any(unfinished))):
        stalled = np.nonzero(to_host(unfinished))[0]
        exact = None
        if newton.finite:
            exact = _newton_exact(model, state, control, w_new, scheme, settings, stalled)
        if exact is None:
            exact = _newton_exact(
                model, state, control, state.w, scheme, settings, stalled, damped=True
            )
        if exact is not None:
            w_new[:, model.backend.from_host(exact.links)] = exact.w
            change[model.backend.from_host(stalled)] = exact.change
            largest = float(to_host(xp.max(change)))
            iterations += exact.iterations
    # Trees that still fail fall back (fall_back, once the step is done); the rest keep it.
    reasons: dict[int, str] = {}
    if finish_exactly and not settings.strict:
        q_new = scheme.rotations(xp, state.q, w_new)
        reasons = _failing_trees(model, w_new, q_new, change, settings.subdivision_threshold)
        if reasons:
            failing = tree_mask(model, reasons)
            w_new = xp.where(failing[model.link_tree], 0.0, w_new)
            change = xp.where(failing, 0.0, change)
            largest = float(to_host(xp.max(change)))
    if finish_exactly and (
        not np.isfinite(largest) or not bool(to_host(xp.all(xp.isfinite(w_new))))
    ):
        _raise_diverged(model, w_new)
    q_new = scheme.rotations(xp, state.q, w_new)
    residual_norm = float("nan")
    if report_residual:
        r = residual(model, data, scheme, q_new, w_new, control)
        residual_norm = float(to_host(xp.max(xp.abs(r))))
    memory.dw_previous[...] = memory.dw
    memory.dw[...] = w_new - state.w
    memory.dw_count = min(memory.dw_count + 1, 2)
    data.tree_update[...] = change
    _finish(model, state, control, q_new, w_new, h, out)
    _remember_start(model, state, h, scheme.second_order, out)
    fallbacks = fall_back(model, memory, state, reasons, out) if reasons else ()
    return StepStats(iterations, residual_norm, float(largest), fallbacks=fallbacks)


def _restart_runaway_trees(model: Model, state: State, newton: _Newton) -> None:
    """Where some trees' iteration ran away to non-finite velocities, those trees take their
    start velocities and an infinite last update, and stay put while the others iterate on, so
    that the step fails for them alone and the stepping redoes just them (:mod:`.stepping`);
    :class:`.SimulationDivergedError` where none or all did (every tree is redone)."""
    xp = model.xp
    ran_away = non_finite_trees(model, newton.w)
    if not len(ran_away) or len(ran_away) == model.n_trees:
        _raise_diverged(model, newton.w)
    restarted = tree_mask(model, ran_away)
    newton.w = xp.where(restarted[model.link_tree], state.w, newton.w)
    newton.change = xp.where(restarted, math.inf, newton.change)
    # Held where they are while the others iterate on.
    newton.converged = newton.converged | restarted
    newton.largest = math.inf
    newton.finite = True


def _factorize_newton(
    model: Model,
    data: Data,
    control: Control,
    q: Any,
    h: float | Any,
    velocity_step: Any,
    iterating: Any = None,
    dense: dynamics.DenseLayout | None = None,
) -> dynamics.DenseTrees | None:
    """Factorise the step's Newton matrix (``h`` the scheme's ``γ``) at rotations ``q``, at the
    kinematics and forces of the residual evaluated there, for the trees ``iterating`` ((T,)
    bool; all by default), the others' factors and tension kept: each tree's links take the
    tension those forces give (``data.tension``, :func:`.dynamics.tension_stiffness`). With a
    ``dense`` layout, returns the matrix as dense per-tree blocks instead, every tree's, the
    factors in ``data`` left as they are."""
    tension = dynamics.tension_stiffness(model, data)
    options = {"velocity_step": velocity_step, "control": control, "tension_step": h}
    if iterating is None:
        data.tension[...] = tension
    else:
        data.tension[...] = model.xp.where(iterating[model.link_tree], tension, data.tension)
    blocks = joint_block(model, control, q, h)
    if dense is not None:
        return dynamics.DenseTrees.of(model, data, dense, blocks, **options)
    if iterating is None:
        dynamics.factorize(model, data, blocks, **options)
    else:
        dynamics.factorize_trees(model, data, iterating, blocks, **options)
    return None


@dataclass(eq=False)
class _Newton:
    """Where the Newton iteration of a step stands.

    ``w`` (3, N) is the iterate, ``converged`` (T,) the trees whose update has fallen to the
    tolerance (they stay put), ``change`` (T,) each tree's last update's largest entry and
    ``largest`` its maximum (host); ``finite`` is False once an update or a step overflowed.
    ``mixed_w`` and ``mixed_g`` hold the last refactorised iterates and their updates (3, N
    each, at most :data:`ANDERSON_DEPTH`, meaningful for the trees still iterating), which the
    refactorised iterations mix (:func:`_refactorized_iterations`)."""

    w: Any
    converged: Any
    change: Any = None
    largest: float = 0.0
    finite: bool = True
    iterations: int = 0
    mixed_w: list[Any] = field(default_factory=list)
    mixed_g: list[Any] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class _NewtonPart:
    """The trees a step's Newton iterations run on: the whole model, or a model of some of its
    trees (:func:`.dynamics.tree_part`) with their state, inputs and scheme. ``trees`` (host)
    and ``chosen`` (device links, level-major) place a part in the whole, whose workspace is
    ``whole_data``; all three are None for the whole."""

    model: Model
    data: Data
    state: State
    control: Control
    scheme: Scheme
    velocity_step: Any
    trees: np.ndarray | None = None
    chosen: Any = None
    whole_data: Data | None = None

    def narrowed(self, trees: np.ndarray, gathered: tuple = ()) -> _NewtonPart:
        """The part of this whole's ``trees`` (host indices, sorted), its workspace holding the
        whole's ``Data`` fields ``gathered``."""
        part = dynamics.tree_part(self.model, self.data, trees, gathered)
        chosen, state = part.chosen, self.state
        return _NewtonPart(
            part.model,
            part.data,
            State(
                state.q[:, chosen],
                state.w[:, chosen],
                state.base_rotation,
                state.base_position,
                state.time,
            ),
            self.control.at_links(chosen),
            self.scheme.at_links(chosen),
            self.velocity_step[chosen],
            trees,
            chosen,
            self.data,
        )

    def take(self, newton: _Newton) -> tuple[Any, Any, Any]:
        """The iterate, the converged trees and the last updates of ``newton`` (the whole's) on
        this part; a part starts with every tree iterating."""
        if self.chosen is None:
            return newton.w, newton.converged, newton.change
        trees = self.model.backend.from_host(self.trees)
        converged = self.model.xp.zeros(self.model.n_trees, dtype=bool)
        return newton.w[:, self.chosen], converged, newton.change[trees]

    def gathered(self, values: list[Any]) -> list[Any]:
        """Per-link arrays (3, N) of the whole, on this part."""
        return values if self.chosen is None else [value[:, self.chosen] for value in values]

    def spread(self, values: list[Any], like: Any) -> list[Any]:
        """Per-link arrays (3, n) of this part, on the whole (zero on the other trees), shaped
        ``like`` one of the whole's."""
        if self.chosen is None:
            return values
        spread = []
        for value in values:
            whole = self.model.xp.zeros_like(like)
            whole[:, self.chosen] = value
            spread.append(whole)
        return spread

    def give(
        self, newton: _Newton, w: Any, converged: Any, change: Any, fields: tuple = ()
    ) -> None:
        """Put this part's iterate, converged trees and last updates into ``newton`` (the
        whole's), and its ``Data`` fields ``fields`` into the whole's workspace."""
        if self.chosen is None:
            newton.w, newton.converged, newton.change = w, converged, change
            return
        trees = self.model.backend.from_host(self.trees)
        newton.w[:, self.chosen] = w
        newton.converged[trees] = converged
        newton.change[trees] = change
        for name in fields:
            getattr(self.whole_data, name)[..., self.chosen] = getattr(self.data, name)


def _modified_iterations(
    whole: _NewtonPart, settings: SolverSettings, newton: _Newton, r: Any, most: int
) -> bool:
    """The first Newton iterations of a step (:func:`step_implicit`) on the factors in
    ``whole.data``, from ``newton`` and its residual ``r``, up to ``most`` iterations in all;
    updates ``newton`` in place and returns whether every tree converged.

    Once at most one in :data:`NARROW_SHARE` of the trees iterates (and a part pays,
    :func:`.dynamics.parts_pay`), they go on, on a model of their own, their factors and mixing
    history gathered: those few trees' iterations then cost what they do, not a whole-forest
    pass each. A tree's updates depend only on the tree, so it steps as it would in the whole
    (to rounding)."""
    model = whole.model
    xp, to_host = model.xp, model.backend.to_host
    part = whole
    w, converged, _ = part.take(newton)
    past_w: list[Any] = []
    past_g: list[Any] = []
    while True:
        newton.iterations += 1
        g = dynamics.solve(part.model, part.data, -part.scheme.gamma * r).copy()
        change = dynamics.tree_max(part.model, xp.max(xp.abs(g), axis=0))
        if past_g:
            step = g - _anderson_correction(part.model, w, g, past_w, past_g)
        else:
            step = g
        past_w = (past_w + [w])[-ANDERSON_DEPTH:]
        past_g = (past_g + [g])[-ANDERSON_DEPTH:]
        # Converged trees keep their velocities: their updates are below the tolerance already.
        w = w + xp.where(converged[part.model.link_tree], 0.0, step)
        converged = converged | (change <= settings.newton_tolerance)
        # One explicit device-to-host transfer per iteration: the largest update, how many trees
        # iterate on, and the largest step taken (the mixed step can overflow where the update
        # did not).
        largest, remaining, largest_step = to_host(
            xp.stack((xp.max(change), xp.sum(~converged) * 1.0, xp.max(xp.abs(step))))
        )
        newton.finite = bool(np.isfinite(largest) and np.isfinite(largest_step))
        if not newton.finite or not remaining or newton.iterations >= most:
            break
        if (
            part is whole
            and NARROW_SHARE * remaining <= model.n_trees
            and dynamics.parts_pay(model)
        ):
            part.give(newton, w, converged, change)
            part = whole.narrowed(np.nonzero(to_host(~converged))[0], dynamics.FACTORS)
            w, converged, change = part.take(newton)
            past_w = [past[:, part.chosen] for past in past_w]
            past_g = [past[:, part.chosen] for past in past_g]
        q = part.scheme.rotations(xp, part.state.q, w)
        r = residual(part.model, part.data, part.scheme, q, w, part.control)
    part.give(newton, w, converged, change)
    newton.largest = float(to_host(xp.max(newton.change)))
    return not remaining


def _refactorized_iterations(
    model: Model,
    data: Data,
    state: State,
    control: Control,
    scheme: Scheme,
    settings: SolverSettings,
    velocity_step: Any,
    newton: _Newton,
) -> None:
    """Go on with the trees ``newton`` leaves iterating, up to the iteration cap, each
    factorised again at every iterate, its updates mixed by Anderson acceleration with those
    made on the same model since it was narrowed; updates ``newton`` in place.

    The refactorised matrix still leaves out the Coriolis coupling between links, so a whipping
    strand's updates shrink only linearly (by 0.3-0.5 an iteration); mixed, fewer of its steps
    stop at the cap and are halved (docs/performance.md, *Collisions*).

    The tension a soft strand carries follows its velocities, so the factors of the first guess
    can be far from the iterate's (:func:`step_implicit`). The iteration runs on a model of just
    the trees iterating when they are fewer than half (:func:`.model.select_trees`, their
    factors put back into ``data``): a few trees' iterations then cost what those trees do, and
    that model is narrowed again whenever fewer than half of its trees still iterate. A tree's
    updates and factors depend only on the tree, so it steps as it would in the whole model. A
    model of a few small trees is solved through dense per-tree blocks
    (:class:`.dynamics.DenseTrees`, :func:`.dynamics.dense_pays`), and factorised once, at its
    last iterate, for the factors it gives back.
    """
    xp, to_host = model.xp, model.backend.to_host
    cap = int(settings.newton_max_iterations)
    whole = _NewtonPart(model, data, state, control, scheme, velocity_step)
    while newton.iterations < cap:
        trees = np.nonzero(to_host(~newton.converged))[0]
        part = whole.narrowed(trees) if 2 * len(trees) < model.n_trees else whole
        w, converged, change = part.take(newton)
        dense = dynamics.DenseLayout.of(part.model) if dynamics.dense_pays(part.model) else None
        iterated = ~converged
        # Each tree's mixing history is its own, kept through narrowing and restarts, so that
        # it steps as it would alone.
        past_w, past_g = part.gathered(newton.mixed_w), part.gathered(newton.mixed_g)
        while newton.iterations < cap:
            newton.iterations += 1
            q = part.scheme.rotations(xp, part.state.q, w)
            r = residual(part.model, part.data, part.scheme, q, w, part.control)
            # The converged trees keep their factors. At least half the trees iterate here, so
            # the others' factors are restored rather than a model of these built.
            matrix = _factorize_newton(
                part.model,
                part.data,
                part.control,
                q,
                part.scheme.gamma,
                part.velocity_step,
                iterating=~converged,
                dense=dense,
            )
            load = -part.scheme.gamma * r
            if matrix is None:
                # The solve answers in the workspace, which the next overwrites.
                g = dynamics.solve(part.model, part.data, load).copy()
            else:
                g = matrix.solve(part.model, load)
            update = dynamics.tree_max(part.model, xp.max(xp.abs(g), axis=0))
            change = xp.where(converged, change, update)
            finishing = update <= settings.newton_tolerance
            step = g
            if past_g:
                # A tree whose update fell to the tolerance takes that update: the mixed step,
                # an extrapolation, can leave it far from the solution it has reached (replayed
                # from the frame before, taking it left a soft strand of the dense drape
                # benchmark whipping at 500 rad/s).
                mixed = g - _anderson_correction(part.model, w, g, past_w, past_g)
                step = xp.where(finishing[part.model.link_tree], g, mixed)
            past_w = (past_w + [w])[-ANDERSON_DEPTH:]
            past_g = (past_g + [g])[-ANDERSON_DEPTH:]
            # The converged trees' updates come through factors they no longer keep current
            # (those of trees restarted after running away can be non-finite).
            step = xp.where(converged[part.model.link_tree], 0.0, step)
            w = w + step
            converged = converged | finishing
            largest, remaining, largest_step = to_host(
                xp.stack(
                    (
                        xp.max(xp.where(converged, 0.0, update)),
                        xp.sum(~converged) * 1.0,
                        xp.max(xp.abs(step)),
                    )
                )
            )
            newton.finite = bool(np.isfinite(largest) and np.isfinite(largest_step))
            if not newton.finite or 2 * remaining < part.model.n_trees:
                break
        if dense is not None:
            # The whole keeps articulated-body factors (the constraint pass solves with them):
            # those of the last iterate, for the trees that iterated here.
            _factorize_newton(
                part.model,
                part.data,
                part.control,
                q,
                part.scheme.gamma,
                part.velocity_step,
                iterating=iterated,
            )
        part.give(newton, w, converged, change, (*dynamics.FACTORS, "tension"))
        newton.mixed_w = part.spread(past_w, newton.w)
        newton.mixed_g = part.spread(past_g, newton.w)
        newton.largest = float(to_host(xp.max(newton.change)))
        if not newton.finite or bool(to_host(xp.all(newton.converged))):
            return


# A tree whose Newton iteration stops at the cap is solved again by Newton's method with its exact
# Jacobian when it has at most this many links: the Jacobian costs three residual evaluations
# per link of the largest such tree, and its solve is cubic in them.
EXACT_NEWTON_MAX_LINKS = 64
# Its iteration cap: it converges quadratically, so a tree it has not finished by then is one
# whose step fails (and is halved) as before.
EXACT_NEWTON_MAX_ITERATIONS = 8
# The damped iteration from the step's start (see _newton_exact): its cap, and how many times a
# step may be halved to lower a tree's residual.
DAMPED_NEWTON_MAX_ITERATIONS = 30
DAMPED_NEWTON_HALVINGS = 12


@dataclass(frozen=True, eq=False)
class ExactNewton:
    """Where :func:`_newton_exact` ended: the level-major links of its trees (host), their new
    velocities (3, n), each tree's last update (T,), rad/s, and the iterations taken."""

    links: np.ndarray
    w: Any
    change: Any
    iterations: int


def _newton_exact(
    model: Model,
    state: State,
    control: Control,
    w_start: Any,
    scheme: Scheme,
    settings: SolverSettings,
    trees: np.ndarray,
    damped: bool = False,
) -> ExactNewton | None:
    """Newton's method with each tree's exact Jacobian, by finite differences of the residual,
    for ``trees`` (host indices), from ``w_start`` (3, N): where the modified iteration stopped,
    or, ``damped``, the step's start.

    The iteration matrix of :func:`step_implicit` leaves out the Coriolis coupling between
    links; when a constraint pass has left neighbouring links counter-rotating at tens of rad/s,
    that coupling dominates and the modified iteration converges too slowly to finish (docs/
    collisions.md, *Limits*), while Newton's method with the exact Jacobian converges in a few
    iterations from where it stopped. (From the step's first guess it can overshoot: on a tree
    whose joints turn at 1 rad/s its first update was 8 rad/s.) The trees are independent, so
    one residual evaluation of a model of all of them gives one column of every tree's
    Jacobian.

    Where the modified iteration has gone astray (an obstacle at several m/s leaves strands
    wrapped round it turning at hundreds of rad/s, and its updates grew to 10⁶ rad/s), the
    damped iteration starts again from the step's start and halves each tree's update until the
    tree's squared residual falls (at most :data:`DAMPED_NEWTON_HALVINGS` times): the exact
    Newton direction lowers it, so the iteration cannot run away, and it ends quadratically.

    Returns where it ended (:class:`ExactNewton`); None if a tree has more than
    :data:`EXACT_NEWTON_MAX_LINKS` links, or the iteration does not converge within
    :data:`EXACT_NEWTON_MAX_ITERATIONS` (:data:`DAMPED_NEWTON_MAX_ITERATIONS` damped) or, not
    damped, lets an update grow (it started too far from the solution).
    """
    backend, xp = model.backend, model.xp
    part, links = select_trees(model, trees)
    tree_of = part.host_link_tree
    counts = np.bincount(tree_of, minlength=part.n_trees)
    if counts.max() > EXACT_NEWTON_MAX_LINKS:
        return None
    # Each link's joint index within its tree, and the rows of its three residual components in
    # its tree's system; the systems of smaller trees are padded with the identity.
    order = np.argsort(tree_of, kind="stable")
    local = np.empty(part.n_links, dtype=np.int64)
    local[order] = np.arange(part.n_links) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = 3 * local[None, :] + np.arange(3)[:, None]
    owners = np.broadcast_to(tree_of, rows.shape)
    size = 3 * int(counts.max())
    padded_tree, padded_row = np.nonzero(np.arange(size)[None, :] >= 3 * counts[:, None])
    chosen = backend.from_host(links)
    q = state.q[:, chosen]
    part_control = control.at_links(chosen)
    part_scheme = scheme.at_links(chosen)
    part_data = Data.for_model(part)

    def evaluate(w: np.ndarray) -> np.ndarray:
        w_device = backend.from_host(w)
        q_new = part_scheme.rotations(xp, q, w_device)
        return backend.to_host(
            residual(part, part_data, part_scheme, q_new, w_device, part_control)
        )

    def squared(r: np.ndarray) -> np.ndarray:
        return np.bincount(tree_of, weights=(r * r).sum(axis=0), minlength=part.n_trees)

    w = backend.to_host(w_start[:, chosen]).astype(np.float64)
    last_change = None
    cap = DAMPED_NEWTON_MAX_ITERATIONS if damped else EXACT_NEWTON_MAX_ITERATIONS
    for iteration in range(1, cap + 1):
        r = evaluate(w)
        # Each tree's difference step scales with its fastest joint.
        fastest = np.zeros(part.n_trees)
        np.maximum.at(fastest, tree_of, np.abs(w).max(axis=0))
        difference_step = np.sqrt(np.finfo(r.dtype).eps) * (1.0 + fastest)
        jacobian = np.zeros((part.n_trees, size, size))
        jacobian[padded_tree, padded_row, padded_row] = 1.0
        for column in range(size):
            joint, axis = divmod(column, 3)
            shifted = w.copy()
            moved = local == joint
            shifted[axis, moved] += difference_step[tree_of[moved]]
            jacobian[owners, rows, column] = (evaluate(shifted) - r) / difference_step[tree_of]
        right = np.zeros((part.n_trees, size))
        right[owners, rows] = -r
        try:
            delta = np.linalg.solve(jacobian, right[..., None])[..., 0]
        except np.linalg.LinAlgError:  # a singular Jacobian: the step fails as it would have
            return None
        if not np.isfinite(delta).all():
            return None
        # Converged when every tree's whole Newton update is within the tolerance.
        finished = (np.abs(delta).max(axis=1) <= settings.newton_tolerance).all()
        if damped and not finished:
            share, residual_now = np.ones(part.n_trees), squared(r)
            for _ in range(DAMPED_NEWTON_HALVINGS):
                rising = ~(
                    squared(evaluate(w + (share[:, None] * delta)[owners, rows])) < residual_now
                )
                if not rising.any():
                    break
                share = np.where(rising, 0.5 * share, share)
            delta = share[:, None] * delta
        change = np.abs(delta).max(axis=1)
        if not damped and last_change is not None and (change > last_change).any():
            # Newton's method shrinks its update from one iteration to the next near the
            # solution: this start is too far from it.
            return None
        w, last_change = w + delta[owners, rows], change
        if finished:
            return ExactNewton(links, backend.from_host(w), backend.from_host(change), iteration)
    return None


def first_guess(memory: StepMemory, w: Any) -> Any:
    """The Newton iteration's first guess at a step's end velocities from the start ones ``w``:
    the last two steps' velocity changes extrapolated linearly, ``w + 2 dw - dw_previous``
    (``w + dw`` after one step, ``w`` after none; see ``StepMemory.dw_count``).

    The velocity change of a step follows the forces, which change smoothly from step to step,
    so the linear extrapolation's error is of the order of ``h³``, one order below the last
    change alone: on the benchmark's shaking head it saves a fifth of the Newton iterations.
    """
    if not memory.dw_count:
        return w.copy()
    guess = w + memory.dw
    if memory.dw_count == 2:
        guess += memory.dw
        guess -= memory.dw_previous
    return guess


# How many past updates Anderson acceleration mixes; three is the usual sweet spot.
ANDERSON_DEPTH = 3
# After this many Newton iterations the trees still iterating are factorised again at every new
# iterate (step_implicit): most steps converge within two or three on the first guess's factors
# (the strand interaction's steps take three or four: after two it cost them 10 % more).
REFACTORIZE_AFTER = 3
# The first iterations go on, on a model of the trees still iterating, once those are at most
# this fraction of the trees (1 / NARROW_SHARE): building that model costs about what a
# whole-forest iteration does for a tenth of the trees (1,000 strands of 32 links: 1.2 ms for
# 20 trees, 3.8 ms for 200, against 7-8 ms for an iteration of all).
NARROW_SHARE = 8


def _anderson_correction(model: Model, w: Any, g: Any, past_w: list, past_g: list) -> Any:
    """``Σ γ_j (Δw_j + Δg_j)`` (3, N) with, per tree, ``γ`` minimising ``|g − Σ γ_j Δg_j|``.

    The least-squares problems of all trees are solved at once: their normal equations (at most
    3x3, padded with the identity) by the adjugate, on the device.
    """
    xp = model.xp
    dw = [w - old for old in past_w]
    dg = [g - old for old in past_g]
    depth = len(dg)
    pairs = [(j, k) for j in range(depth) for k in range(j, depth)]
    products = xp.stack(
        [dot(dg[j], dg[k]) for j, k in pairs] + [dot(dg[j], g) for j in range(depth)]
    )
    sums = dynamics.tree_sum(model, products)
    gram = xp.zeros((3, 3, model.n_trees), dtype=g.dtype)
    for index, (j, k) in enumerate(pairs):
        gram[j, k] = sums[index]
        gram[k, j] = sums[index]
    trace = gram[0, 0] + gram[1, 1] + gram[2, 2]
    # A tiny ridge keeps the small system solvable when two past updates are nearly parallel; a
    # tree whose updates no longer change (converged, or at rest) gets no correction.
    moving = trace > 0
    for axis in range(3):
        if axis < depth:
            gram[axis, axis] += 1e-12 * trace + xp.where(moving, 0.0, 1.0)
        else:
            gram[axis, axis] = 1.0
    rhs = sums[len(pairs) :]
    # Products summed term by term: einsum's sums round by the batch's size, and a tree's step
    # must not depend on the trees stepped with it.
    inverse = dynamics.inverse3(xp, gram)
    gamma = inverse[:depth, 0] * rhs[0]
    for j in range(1, depth):
        gamma = gamma + inverse[:depth, j] * rhs[j]
    gamma = xp.where(moving, gamma, 0.0)[:, model.link_tree]
    correction = gamma[0] * (dw[0] + dg[0])
    for j in range(1, depth):
        correction += gamma[j] * (dw[j] + dg[j])
    return correction


def step_explicit(
    model: Model,
    data: Data,
    memory: StepMemory,
    state: State,
    control: Control,
    h: float,
    out: State,
    fall_back_failing: bool = False,
) -> StepStats:
    """Advance by ``h`` with articulated-body forward dynamics and semi-implicit Euler; with
    ``fall_back_failing``, trees whose velocities become non-finite fall back (:func:`fall_back`)
    instead of raising."""
    xp = model.xp
    h = _check_step(h)
    bias = dynamics.inverse_dynamics(model, data, state.q, state.w, xp.zeros_like(state.w), control)
    bias = bias - dynamics.joint_torques(model, control, state.q, state.w)
    dynamics.factorize(model, data, xp.zeros((3, 3, model.n_links), dtype=model.backend.float))
    data.plain_trees[...] = False
    w_new = state.w + h * dynamics.solve(model, data, -bias)
    q_new = integrate_rotation(xp, state.q, w_new, h)
    # A finite velocity can still be large enough to overflow the rotation.
    failing = non_finite_trees(model, w_new, q_new)
    if len(failing) and not fall_back_failing:
        _raise_diverged(model, w_new, q_new)
    _finish(model, state, control, q_new, w_new, h, out)
    out.previous = None
    reasons = dict.fromkeys(failing.tolist(), NON_FINITE)
    fallbacks = fall_back(model, memory, state, reasons, out) if reasons else ()
    return StepStats(0, 0.0, fallbacks=fallbacks)


def step(
    model: Model,
    data: Data,
    memory: StepMemory,
    state: State,
    control: Control,
    h: float,
    settings: SolverSettings,
    out: State,
    report_residual: bool = True,
    finish_exactly: bool = False,
) -> StepStats:
    """Advance ``state`` by ``h`` into ``out`` with ``settings.method``. ``finish_exactly`` is
    for a step halved as often as it may be (:func:`step_implicit`); there, unless
    ``settings.strict``, trees that still fail fall back (:func:`fall_back`)."""
    if settings.method == "implicit":
        return step_implicit(
            model, data, memory, state, control, h, settings, out, report_residual, finish_exactly
        )
    return step_explicit(
        model, data, memory, state, control, h, out, finish_exactly and not settings.strict
    )


def step_dense_reference(
    model: Model,
    data: Data,
    state: State,
    control: Control,
    h: float,
    tolerance: float = 1e-11,
    max_iterations: int = 30,
    difference_step: float = 1e-7,
    scheme: Scheme | None = None,
) -> State:
    """The implicit step (backward Euler, or ``scheme``) with a dense finite-difference Jacobian
    of the full residual (tests only).

    Cost is cubic in the number of joints; this is the slow, obviously-correct reference the
    articulated-body step is checked against.
    """
    backend, xp = model.backend, model.xp
    h = _check_step(h)
    scheme = Scheme.backward_euler(state.w, h) if scheme is None else scheme
    n = 3 * model.n_links
    w_new = backend.to_host(state.w).reshape(n)

    def evaluate(w_flat: np.ndarray) -> np.ndarray:
        w_device = backend.from_host(w_flat.reshape(3, -1))
        q_device = scheme.rotations(xp, state.q, w_device)
        return backend.to_host(residual(model, data, scheme, q_device, w_device, control)).reshape(
            n
        )

    for _ in range(max_iterations):
        r = evaluate(w_new)
        jacobian = np.empty((n, n))
        for j in range(n):
            shifted = w_new.copy()
            shifted[j] += difference_step
            jacobian[:, j] = (evaluate(shifted) - r) / difference_step
        delta = np.linalg.solve(jacobian, -r)
        w_new = w_new + delta
        if np.abs(delta).max() <= tolerance:
            break
    out = state.copy()
    w_device = backend.from_host(w_new.reshape(3, -1))
    _finish(model, state, control, scheme.rotations(xp, state.q, w_device), w_device, h, out)
    return out
