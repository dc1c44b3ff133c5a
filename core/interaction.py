"""Strand–strand interaction through a grid: hair keeps its volume and moves as one mass (§6.7).

The paper attaches a continuum to the strands (after Hadap & Magnenat-Thalmann 2001); production
tools do the same on a grid (Petrovic, Henne & Anderson 2005, Blender's legacy hair *Volume*):
no pair of strands is ever looked at, so the cost is linear in the links.

At the start of every substep the links' centres of mass (mass ``m``, position ``x``, velocity
``v``) are splatted trilinearly onto a grid of cubic cells ``ℓ`` over their bounds, giving every
node a mass ``M`` and a velocity ``V = Σ w m v / Σ w m`` (the particle-in-cell transfer), and
gathered back with the same weights. Two forces on each link's centre of mass follow, held
through the substep:

- **friction** (coherence): a damping toward the hair's velocity around the link,
  ``−k (v − V(x))`` with ``k = m λ``, ``λ = −24 ln(1 − friction)``: ``friction`` is the fraction of
  a link's velocity relative to its neighbourhood removed in 1/24 s, whatever the step (friction
  1 keeps a millionth). ``V(x)`` is held, so the damping's derivative ``k`` is link-local and
  enters the articulated-body factorisation exactly, like air drag: the damping is implicit,
  stable at any strength. Splat and gather share their weights, so the transfer itself conserves
  momentum exactly and never adds kinetic energy (``V`` is a mass-weighted mean);
- **volume**: where the density ``ρ = S M / ℓ³`` exceeds the target density ``ρ₀`` (by default
  each link's own density in the rest pose, so a groom keeps its shape), the excess
  ``E = max(0, ρ/ρ₀ − 1)`` pushes links apart down ``g = −ℓ ∇E(x)`` (its fall across a cell) with
  ``24 m c min(|g|, 1) ĝ``, ``c`` = ``volume`` (m/s): hair packed to twice its target density or
  more gains ``c`` in 1/24 s (at 0.5 m/s the push is 1.2 g: packed hair holds itself up against
  gravity). A bounded pressure, it depends on positions only. ``∇E`` is taken by central
  differences at the nodes and interpolated like the rest, and the grid lies on the lattice of
  its cell, so the push changes smoothly as hair moves (a grid sliding with the hair's bounds, or
  the trilinear interpolant's own gradient, which jumps across cell faces, made the push jump
  from substep to substep and doubled the Newton iterations on the benchmark's head). ``S``
  smooths the nodes' mass (and the targets' sums) by (1/4, 1/2, 1/4) along each axis, the
  trilinear tent convolved with itself, over three cells: on the benchmark's shaking head links
  move half a cell a substep, and with the plain trilinear density a link's push changed from
  one substep to the next by 61 % of its size (rms, its second difference by 104 %), so the
  Newton iteration's first guess, which extrapolates the last steps, missed by 0.2 rad/s and
  the steps took 3.16 residual evaluations instead of 2.27 without interaction; smoothed, the
  change is 19 % (22 %), the miss 0.05 rad/s and the steps take 2.75.

Both are scaled per link by ``weight`` (a root-to-tip profile).

Why forces in the step rather than a velocity filter after it: the filter (the velocity change
``m Δv`` applied as an impulse through the step's factorisation, the rotations then made
consistent with the new velocities) was measured first. An impulse ``m Δv`` on a link deep in a
chain changes the link's velocity by more than ``Δv`` (its effective mass is smaller than
``m``), so the relaxation overshot: 150 strands falling onto a head diverged within a second at
friction 0.2 and volume 0.5 m/s, and applied after the constraint pass the filter pushed hair
2.8 cm into the head. As forces, damping implicit and push bounded, the same scene ran 2 s at
every setting tried (friction 0–1, volume 0.5–2 m/s). Why no pressure projection (FLIP-style
incompressibility): hair is not incompressible, it packs and fluffs; a target density with a
bounded spreading speed gives artists the *Volume* behaviour they know, without a global linear
solve on the grid per substep.

Groups of trees stepped in worker processes meet on one grid (:class:`GridExchange`): every
grid of a cell lies on that cell's :class:`Lattice`, each group splats onto its own window of it
(two nodes past its links' cells, all that the smoothing and the gradient there read), and the
windows' sums are added where they overlap, so each group's forces are those of one grid over
every link, up to the order in which the sums add.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from . import dynamics
from .backend import Backend
from .dynamics import Data
from .errors import InvalidInputError
from .model import Model
from .spatial import cross
from .state import Control, State
from .validation import finite_number, real_array

# The grid is never larger than this many nodes: larger bounds take larger cells.
MAX_GRID_NODES = 2**21
# Friction and volume are given per 1/24 s (a frame at the film rate), whatever the step.
FRICTION_INTERVAL = 1.0 / 24.0
# Friction 1 removes all but this fraction of a link's relative velocity in 1/24 s.
FRICTION_FLOOR = 1e-6

# Revisions of interactions (Interaction.revision): distinct across every interaction made.
_REVISIONS = itertools.count()


@dataclass(frozen=True)
class StrandInteraction:
    """How the strands of a simulation act on each other (see the module docstring).

    Attributes
    ----------
    friction : float in [0, 1]
        The fraction of a link's velocity relative to its neighbourhood's removed in 1/24 s: 0
        lets strands pass each other freely, 1 makes hair move as one mass.
    volume : float >= 0, m/s
        The speed hair packed to twice its target density (or more) gains in 1/24 s as it is
        pushed apart; 0 turns the volume off.
    target_density : float > 0 or None, kg/m³
        The density above which hair pushes apart; None: each link's own density in the rest
        pose (a groom keeps its shape).
    cell_size : float > 0 or None, m
        The grid's cell; None: twice the median link length.
    weight : float or (n_links,) floats >= 0
        Scales both effects per link (strand order): a root-to-tip profile, e.g. 0 at roots.
    enabled : bool
        False leaves the strands alone (the settings are kept).
    """

    friction: float = 0.2
    volume: float = 0.5
    target_density: float | None = None
    cell_size: float | None = None
    weight: Any = 1.0
    enabled: bool = True

    def __post_init__(self) -> None:
        friction = finite_number("StrandInteraction.friction", self.friction)
        if not 0.0 <= friction <= 1.0:
            raise InvalidInputError(
                f"StrandInteraction.friction must lie in [0, 1], got {self.friction!r}"
            )
        if finite_number("StrandInteraction.volume", self.volume) < 0.0:
            raise InvalidInputError(
                f"StrandInteraction.volume must be >= 0 (m/s), got {self.volume!r}"
            )
        for name in ("target_density", "cell_size"):
            value = getattr(self, name)
            if value is not None and not finite_number(f"StrandInteraction.{name}", value) > 0.0:
                raise InvalidInputError(
                    f"StrandInteraction.{name} must be a number > 0 or None, got {value!r}"
                )
        if not isinstance(self.enabled, bool):
            raise InvalidInputError(
                f"StrandInteraction.enabled must be True or False, got {self.enabled!r}"
            )


@dataclass(frozen=True)
class InteractionStats:
    """What the last substep's interaction did.

    Attributes
    ----------
    cells : int
        Grid nodes used.
    peak_density_ratio : float
        The largest density over its target at a grid node (1: as dense as the target).
    """

    cells: int = 0
    peak_density_ratio: float = 0.0

    @classmethod
    def combined(cls, parts: list[InteractionStats], grid_nodes: int) -> InteractionStats:
        """The statistics of strands stepped in groups that met on one grid of ``grid_nodes``
        nodes, from each group's (no grid where no group used one)."""
        return cls(
            grid_nodes if any(part.cells for part in parts) else 0,
            max(part.peak_density_ratio for part in parts),
        )


class GridExchange(Protocol):
    """Where a group of strands meets the others on one grid (:class:`LonelyGrid` where there
    are no others: the strands of one process)."""

    def cell(self, bounds: np.ndarray, cell: float) -> float:
        """The cell every group's grid takes this substep, the group's points lying within
        ``bounds`` (2, 3) and ``cell`` being the cell asked for."""

    def total(self, lattice: Lattice, sums: Any) -> Any:
        """Every group's node sums (k, nodes) over ``lattice``, the window of the common lattice
        that this group's ``sums`` cover."""


class LonelyGrid:
    """The grid of strands that meet no others: their own bounds make it, their own sums are
    the total."""

    def cell(self, bounds: np.ndarray, cell: float) -> float:
        return fitting_cell(bounds, cell)

    def total(self, lattice: Lattice, sums: Any) -> Any:
        return sums


@dataclass(frozen=True)
class InteractionShare:
    """What a group of a model's links (a worker's) needs of its :class:`Interaction`: the
    settings, the cell asked for, and the group's weights and targets (host arrays, the group's
    link order). The whole model's rest density is a target, not the group's alone."""

    settings: StrandInteraction
    cell: float
    weight: np.ndarray
    target: np.ndarray


class Interaction:
    """A :class:`StrandInteraction` bound to a model: the cell asked for, per-link weights and
    target densities, and the exchange its grid meets other groups' on (:meth:`for_model`
    computes them for a whole model).

    Parameters
    ----------
    model : Model
    settings : StrandInteraction
    cell : float, m
    weight, target : (n_links,) arrays on the model's backend, link order
    exchange : GridExchange

    Every interaction and every renewal of one's settings has a revision of its own
    (:attr:`revision`), by which worker processes know whether their share is current.
    """

    def __init__(
        self,
        model: Model,
        settings: StrandInteraction,
        cell: float,
        weight: Any,
        target: Any,
        exchange: GridExchange,
    ) -> None:
        self.model, self.settings, self.cell = model, settings, cell
        self.weight, self.target, self.exchange = weight, target, exchange
        self.stats = InteractionStats()
        self.revision = next(_REVISIONS)

    def renew(self, settings: StrandInteraction) -> None:
        """Take ``settings`` that keep the grid (:meth:`keeps_grid`) from the next substep on;
        the interaction gets a new :attr:`revision`."""
        self.settings = settings
        self.revision = next(_REVISIONS)

    @classmethod
    def for_model(cls, model: Model, settings: StrandInteraction) -> Interaction:
        """``settings`` bound to all of ``model``, stepped in one process."""
        if not isinstance(settings, StrandInteraction):
            raise InvalidInputError(
                f"interaction must be a StrandInteraction, got {type(settings).__name__}"
            )
        length = model.backend.to_host(model.length)
        cell = 2.0 * float(np.median(length)) if settings.cell_size is None else settings.cell_size
        weight = real_array("StrandInteraction.weight", settings.weight)
        try:
            weight = np.broadcast_to(weight, (model.n_links,))
        except ValueError as error:
            raise InvalidInputError(
                f"StrandInteraction.weight: expected a scalar or {model.n_links} per-link values "
                f"in strand order, got shape {weight.shape}"
            ) from error
        if not (np.isfinite(weight).all() and (weight >= 0).all()):
            raise InvalidInputError("StrandInteraction.weight must be finite and >= 0")
        weight = model.from_strand_order(weight, "StrandInteraction.weight")
        if settings.target_density is None:
            rest = State.at_rest(model)
            data = Data.for_model(model, kinematics_only=True)
            positions, _ = centres(model, data, rest, None)
            target = density_at_points(model.backend, positions, model.mass, cell)
        else:
            target = model.xp.full(
                model.n_links, float(settings.target_density), dtype=model.backend.float
            )
        return cls(model, settings, cell, weight, target, LonelyGrid())

    def share(self, links: np.ndarray) -> InteractionShare:
        """What the group of ``links`` (the model's, host indices) needs to step in a worker."""
        to_host = self.model.backend.to_host
        return InteractionShare(
            self.settings, self.cell, to_host(self.weight)[links], to_host(self.target)[links]
        )

    @classmethod
    def from_share(
        cls, model: Model, share: InteractionShare, exchange: GridExchange
    ) -> Interaction:
        """The interaction of a group's ``model`` from its ``share``, meeting the other groups
        through ``exchange``."""
        from_host = model.backend.from_host
        return cls(
            model,
            share.settings,
            share.cell,
            from_host(share.weight),
            from_host(share.target),
            exchange,
        )

    def keeps_grid(self, settings: StrandInteraction) -> bool:
        """Whether ``settings`` differ from this one's only in what does not shape the grid and
        its targets (friction, volume, enabled): then they may simply replace them."""
        current = self.settings
        return (
            settings.target_density == current.target_density
            and settings.cell_size == current.cell_size
            and np.array_equal(np.asarray(settings.weight), np.asarray(current.weight))
        )

    def drive(self, data: Data, state: State, control: Control) -> None:
        """Set in ``control`` the interaction of the substep starting at ``state`` (the bases
        moving as ``control`` says): each link's damping toward the hair's velocity around it
        and its push (module docstring). Uses ``data`` as workspace (kinematics only)."""
        settings, model = self.settings, self.model
        if not settings.enabled or (settings.friction == 0.0 and settings.volume == 0.0):
            control.set_interaction(None, None, None)
            self.stats = InteractionStats()
            return
        xp, backend = model.xp, model.backend
        positions, velocities = centres(model, data, state, control)
        bounds = point_bounds(backend, positions)
        lattice = Lattice.around(bounds, self.exchange.cell(bounds, self.cell))
        grid = Grid(backend, positions, lattice)
        # The node sums: mass, mass times target density, and momentum where friction acts.
        rows = [model.mass, model.mass * self.target]
        if settings.friction > 0.0:
            rows += [model.mass * velocities[axis] for axis in range(3)]
        sums = self.exchange.total(lattice, grid.splat(xp.stack(rows)))
        node_mass = sums[0]
        ratio = grid.density_ratio(node_mass, sums[1])
        hair_velocity = push = xp.zeros_like(velocities)
        if settings.friction > 0.0:
            hair_velocity = grid.velocity(node_mass, sums[2:])
        if settings.volume > 0.0:
            # Down the excess, g = -ℓ ∇E (its fall across a cell), at 24 c min(|g|, 1).
            fall = -lattice.cell * grid.gradient(xp.maximum(ratio - 1.0, 0.0))
            size = xp.sqrt(xp.sum(fall * fall, axis=0))
            direction = fall / xp.maximum(size, xp.finfo(size.dtype).tiny)
            spreading = settings.volume * xp.minimum(size, 1.0)
            push = (spreading / FRICTION_INTERVAL) * direction
        rate = -math.log(max(1.0 - settings.friction, FRICTION_FLOOR)) / FRICTION_INTERVAL
        weighted_mass = model.mass * self.weight
        control.set_interaction(weighted_mass * rate, hair_velocity, weighted_mass * push)
        # Over the inner nodes: a window's outermost ones miss what lies beyond it (and hold
        # nothing of its own points).
        inner = ratio.reshape(lattice.shape)[1:-1, 1:-1, 1:-1]
        self.stats = InteractionStats(lattice.nodes, float(backend.to_host(xp.max(inner))))


def centres(model: Model, data: Data, state: State, control: Control | None) -> tuple[Any, Any]:
    """World positions and velocities (3, N) of the links' centres of mass in ``state`` (the
    bases' velocities from ``control``; velocities None without it)."""
    xp = model.xp
    if control is None:
        dynamics.forward_kinematics(model, data, state.q, state.base_rotation, state.base_position)
        data.c[...] = data.r + data.oR[:, 1] * (0.5 * model.length)
        return data.c + state.base_position[:, model.link_base], None
    dynamics.link_velocities(model, data, state.q, state.w, control)
    velocity = data.v[3:] + cross(xp, data.v[:3], data.c)
    return data.c + state.base_position[:, model.link_base], velocity


def point_bounds(backend: Backend, positions: Any) -> np.ndarray:
    """The lowest and highest coordinates (2, 3) of ``positions`` (3, P), on the host."""
    xp = backend.xp
    return backend.to_host(xp.stack((xp.min(positions, axis=1), xp.max(positions, axis=1)))).astype(
        np.float64
    )


def fitting_cell(bounds: np.ndarray, cell: float) -> float:
    """``cell`` (m), doubled until a grid over ``bounds`` (2, 3) holds at most
    :data:`MAX_GRID_NODES` nodes."""
    cell = float(cell)
    while np.prod((bounds[1] - bounds[0]) / cell + 6.0) > MAX_GRID_NODES:
        cell *= 2.0
    return cell


@dataclass(frozen=True)
class Lattice:
    """A box of grid nodes on the lattice of a cell: every grid of that cell lies on it, so that
    from one substep to the next it does not slide under the hair (the interpolated fields, and
    so the forces, would jump as it did), and the grids of several groups add node by node.

    Attributes
    ----------
    cell : float, m
    first : (3,) ints
        The box's first node, in cells from the origin.
    shape : (3,) ints
        Nodes along each axis.
    """

    cell: float
    first: tuple[int, int, int]
    shape: tuple[int, int, int]

    @classmethod
    def around(cls, bounds: np.ndarray, cell: float) -> Lattice:
        """The nodes around points within ``bounds`` (2, 3): every corner of their cells and
        two nodes more on each side (the smoothing and the gradient reach two nodes past the
        splat's)."""
        first = np.floor(bounds[0] / cell) - 2.0
        shape = np.floor(bounds[1] / cell) - first + 4.0
        return cls(float(cell), tuple(int(n) for n in first), tuple(int(n) for n in shape))

    @property
    def nodes(self) -> int:
        return math.prod(self.shape)


def add_windows(windows: list[tuple[Lattice, np.ndarray]]) -> tuple[Lattice, list[np.ndarray]]:
    """Node sums (k, nodes) over windows of one lattice, added where they overlap: the lattice
    covering them all and, for each window, the total over it (k, its nodes)."""
    cell = windows[0][0].cell
    first = np.min([lattice.first for lattice, _ in windows], axis=0)
    end = np.max([np.add(lattice.first, lattice.shape) for lattice, _ in windows], axis=0)
    union = Lattice(cell, tuple(int(n) for n in first), tuple(int(n) for n in end - first))
    rows = windows[0][1].shape[0]
    total = np.zeros((rows, *union.shape), dtype=windows[0][1].dtype)
    boxes = []
    for lattice, sums in windows:
        low = np.subtract(lattice.first, first)
        box = (slice(None), *(slice(a, a + n) for a, n in zip(low, lattice.shape, strict=True)))
        total[box] += sums.reshape(rows, *lattice.shape)
        boxes.append(box)
    return union, [total[box].reshape(rows, -1) for box in boxes]


def density_at_points(backend: Backend, positions: Any, mass: Any, cell: float) -> Any:
    """The grid's density (P,), kg/m³, at points (3, P) of ``mass`` (P,) that meet no others,
    on cells of ``cell`` (m) or larger (:func:`fitting_cell`): what the interaction compares
    with its targets."""
    bounds = point_bounds(backend, positions)
    grid = Grid(backend, positions, Lattice.around(bounds, fitting_cell(bounds, cell)))
    return grid.gather(grid.node_density(grid.splat(mass)))


class Grid:
    """Points (3, P) on a :class:`Lattice`: the eight corners of each point's cell and their
    trilinear weights, to splat values onto the nodes and gather fields back at the points
    with the same weights; the density, and the targets it is compared with, from the nodes'
    sums smoothed (:meth:`smoothed`, module docstring).

    Each splat is one bincount, each gather one take of the eight corners of every point's
    cell.
    """

    def __init__(self, backend: Backend, positions: Any, lattice: Lattice) -> None:
        xp = backend.xp
        self.xp, self.lattice, self.cell = xp, lattice, lattice.cell
        self.shape, self.nodes = lattice.shape, lattice.nodes
        first = backend.from_host(np.asarray(lattice.first, dtype=np.float64))
        scaled = positions * (1.0 / lattice.cell) - first[:, None]
        low_corner = xp.floor(scaled)
        high = scaled - low_corner
        low = 1.0 - high
        low_corner = low_corner.astype(xp.int64)
        strides = (self.shape[1] * self.shape[2], self.shape[2], 1)
        origin = sum(low_corner[axis] * strides[axis] for axis in range(3))
        corners = [(dx, dy, dz) for dx in (0, 1) for dy in (0, 1) for dz in (0, 1)]
        # The eight corners of each point's cell (8, P) and their weights (8, P).
        self.corner = xp.stack([origin + int(np.dot(c, strides)) for c in corners])
        self.weight = xp.stack(
            [
                (high[0] if dx else low[0])
                * (high[1] if dy else low[1])
                * (high[2] if dz else low[2])
                for dx, dy, dz in corners
            ]
        )

    def splat(self, values: Any) -> Any:
        """The nodes' sums (k, nodes) of the points' ``values`` (k, P), weighted (one row:
        (P,) to (nodes,)); a bincount per row (one for all rows would take k times the
        corners' memory: 200 MB more at 10,000 strands of 32 links)."""
        xp = self.xp
        corners = self.corner.reshape(-1)
        rows = values.reshape(-1, values.shape[-1])
        # bincount adds in float64 whatever it is given; the sums come back in the points'
        # precision, as every array of a float32 model is.
        sums = xp.stack(
            [
                xp.bincount(
                    corners, weights=(self.weight * rows[row]).reshape(-1), minlength=self.nodes
                )
                for row in range(rows.shape[0])
            ]
        ).astype(self.weight.dtype)
        return sums.reshape(values.shape[:-1] + (self.nodes,))

    def gather(self, node_values: Any) -> Any:
        """The nodes' ``node_values`` (nodes,) interpolated at the points (P,)."""
        return self.xp.sum(self.weight * self.xp.take(node_values, self.corner), axis=0)

    def velocity(self, node_mass: Any, node_momentum: Any) -> Any:
        """The grid's velocity (3, P) at the points, from the nodes' sums of the points' mass
        (nodes,) and momentum (3, nodes): the mass-weighted mean of the points' velocities
        around them (the particle-in-cell transfer)."""
        xp = self.xp
        occupied = node_mass > 0.0
        node_velocity = xp.where(occupied, node_momentum / xp.where(occupied, node_mass, 1.0), 0.0)
        return xp.stack([self.gather(node_velocity[axis]) for axis in range(3)])

    def smoothed(self, node_values: Any) -> Any:
        """``node_values`` (nodes,) filtered by (1/4, 1/2, 1/4) along each axis, their sum kept."""
        values = node_values.reshape(self.shape)
        for axis in range(3):
            inner = [slice(None)] * 3
            lower, upper = list(inner), list(inner)
            lower[axis], upper[axis] = slice(None, -1), slice(1, None)
            filtered = 0.5 * values
            filtered[tuple(upper)] += 0.25 * values[tuple(lower)]
            filtered[tuple(lower)] += 0.25 * values[tuple(upper)]
            values = filtered
        return values.reshape(-1)

    def node_density(self, node_mass: Any) -> Any:
        """The nodes' density (nodes,), kg/m³, from their mass (nodes,): smoothed, over a
        cell's volume."""
        return self.smoothed(node_mass) * (1.0 / self.cell**3)

    def density_ratio(self, node_mass: Any, node_target_mass: Any) -> Any:
        """Each node's density over its target (nodes,; 0 where empty), from the nodes' sums of
        the points' mass and of their mass times their target density (kg²/m³): a node's
        target is the mass-weighted mean of its points' targets."""
        xp = self.xp
        smooth_mass = self.smoothed(node_mass)
        occupied = smooth_mass > 0.0
        safe_mass = xp.where(occupied, smooth_mass, 1.0)
        target = xp.where(occupied, self.smoothed(node_target_mass) / safe_mass, 1.0)
        return smooth_mass * (1.0 / self.cell**3) / target

    def gradient(self, node_values: Any) -> Any:
        """The gradient (3, P), per metre, of ``node_values`` (nodes,) at the points: central
        differences at the nodes, interpolated, a field continuous across cells, so the push on
        a link changes smoothly as it moves."""
        components = self.xp.gradient(node_values.reshape(self.shape), self.cell)
        return self.xp.stack([self.gather(component.reshape(-1)) for component in components])
