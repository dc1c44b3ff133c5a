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
- **volume**: where the density ``ρ = M / ℓ³`` exceeds the target density ``ρ₀`` (by default each
  link's own density in the rest pose, so a groom keeps its shape), the excess
  ``E = max(0, ρ/ρ₀ − 1)`` pushes links apart down ``g = −ℓ ∇E(x)`` (its fall across a cell) with
  ``24 m c min(|g|, 1) ĝ``, ``c`` = ``volume`` (m/s): hair packed to twice its target density or
  more gains ``c`` in 1/24 s (at 0.5 m/s the push is 1.2 g: packed hair holds itself up against
  gravity). A bounded pressure, it depends on positions only. ``∇E`` is taken by central
  differences at the nodes and interpolated like the rest, and the grid lies on the lattice of
  its cell, so the push changes smoothly as hair moves (a grid sliding with the hair's bounds, or
  the trilinear interpolant's own gradient, which jumps across cell faces, made the push jump
  from substep to substep and doubled the Newton iterations on the benchmark's head).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics
from .backend import Backend
from .dynamics import Data
from .errors import InvalidInputError
from .model import Model
from .spatial import cross
from .state import Control, State

# The grid is never larger than this many nodes: larger bounds take larger cells.
MAX_GRID_NODES = 2**21
# Friction and volume are given per 1/24 s (a frame at the film rate), whatever the step.
FRICTION_INTERVAL = 1.0 / 24.0
# Friction 1 removes all but this fraction of a link's relative velocity in 1/24 s.
FRICTION_FLOOR = 1e-6


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
        friction = _number("friction", self.friction)
        if not 0.0 <= friction <= 1.0:
            raise InvalidInputError(
                f"StrandInteraction.friction must lie in [0, 1], got {self.friction!r}"
            )
        if _number("volume", self.volume) < 0.0:
            raise InvalidInputError(
                f"StrandInteraction.volume must be >= 0 (m/s), got {self.volume!r}"
            )
        for name in ("target_density", "cell_size"):
            value = getattr(self, name)
            if value is not None and not _number(name, value) > 0.0:
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


class Interaction:
    """A :class:`StrandInteraction` bound to a model: its cell, per-link weights and targets.

    Parameters
    ----------
    model : Model
    settings : StrandInteraction
    """

    def __init__(self, model: Model, settings: StrandInteraction) -> None:
        if not isinstance(settings, StrandInteraction):
            raise InvalidInputError(
                f"interaction must be a StrandInteraction, got {type(settings).__name__}"
            )
        self.model, self.settings = model, settings
        self.stats = InteractionStats()
        length = model.backend.to_host(model.length)
        self.cell = (
            2.0 * float(np.median(length)) if settings.cell_size is None else settings.cell_size
        )
        weight = np.asarray(settings.weight, dtype=np.float64)
        try:
            weight = np.broadcast_to(weight, (model.n_links,))
        except ValueError as error:
            raise InvalidInputError(
                f"StrandInteraction.weight: expected a scalar or {model.n_links} per-link values "
                f"in strand order, got shape {weight.shape}"
            ) from error
        if not (np.isfinite(weight).all() and (weight >= 0).all()):
            raise InvalidInputError("StrandInteraction.weight must be finite and >= 0")
        self.weight = model.from_strand_order(weight, "StrandInteraction.weight")
        if settings.target_density is None:
            rest = State.at_rest(model)
            data = Data.for_model(model, kinematics_only=True)
            positions, _ = centres(model, data, rest, None)
            self.target = grid_transfer(
                model.backend, positions, None, model.mass, self.cell, model.mass
            ).density
        else:
            self.target = model.xp.full(
                model.n_links, float(settings.target_density), dtype=model.backend.float
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
        xp = model.xp
        positions, velocities = centres(model, data, state, control)
        transfer = grid_transfer(
            model.backend, positions, velocities, model.mass, self.cell, model.mass * self.target
        )
        rate = -math.log(max(1.0 - settings.friction, FRICTION_FLOOR)) / FRICTION_INTERVAL
        weighted_mass = model.mass * self.weight
        push = xp.zeros_like(velocities)
        if settings.volume > 0.0:
            # Down the excess, g = -ℓ ∇E (its fall across a cell), at 24 c min(|g|, 1).
            fall = -self.cell * transfer.excess_gradient
            size = xp.sqrt(xp.sum(fall * fall, axis=0))
            direction = fall / xp.maximum(size, 1e-300)
            spreading = settings.volume * xp.minimum(size, 1.0)
            push = (spreading / FRICTION_INTERVAL) * direction
        control.set_interaction(weighted_mass * rate, transfer.velocity, weighted_mass * push)
        self.stats = InteractionStats(
            transfer.nodes, float(model.backend.to_host(transfer.peak_ratio))
        )


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


@dataclass(eq=False)
class GridTransfer:
    """What a splat onto the grid gives back at every point (device arrays, ``P`` points).

    Attributes
    ----------
    velocity : (3, P) float or None, m/s
        The grid's velocity at each point (None when no velocities were splatted).
    density : (P,) float, kg/m³
        The grid's density at each point.
    excess_gradient : (3, P) float, 1/m
        The gradient of ``max(0, ρ/ρ₀ − 1)`` at each point: central differences at the nodes,
        interpolated.
    nodes : int
        Grid nodes.
    peak_ratio : 0-d float
        The largest node density over its target.
    """

    velocity: Any
    density: Any
    excess_gradient: Any
    nodes: int
    peak_ratio: Any


def grid_transfer(
    backend: Backend,
    positions: Any,
    velocities: Any,
    mass: Any,
    cell: float,
    target_mass: Any,
) -> GridTransfer:
    """Splat points (3, P) of ``mass`` (P,) (and ``velocities`` (3, P), if given) onto a grid of
    ``cell`` (m) on its lattice over their bounds and gather its velocity, density and density
    excess's gradient at them.

    The target density of a node is the mass-weighted mean of its points' targets: ``target_mass``
    (P,) is each point's mass times its target density (kg²/m³). One host transfer reads the
    grid's size; the splats are one bincount per quantity.
    """
    xp, cell = backend.xp, float(cell)
    bounds = backend.to_host(
        xp.stack((xp.min(positions, axis=1), xp.max(positions, axis=1)))
    ).astype(np.float64)
    # Cells double until the grid fits; the grid lies on the lattice of its cell, so that from
    # one substep to the next it does not slide under the hair (the interpolated fields, and so
    # the forces, would jump as it did).
    while np.prod((bounds[1] - bounds[0]) / cell + 4.0) > MAX_GRID_NODES:
        cell *= 2.0
    first = np.floor(bounds[0] / cell) - 1.0
    shape = (np.floor(bounds[1] / cell) - first + 2.0).astype(np.int64)
    scaled = positions * (1.0 / cell) - backend.from_host(first)[:, None]
    base = xp.floor(scaled)
    fraction = scaled - base
    base = base.astype(xp.int64)
    strides = (int(shape[1] * shape[2]), int(shape[2]), 1)
    nodes = int(np.prod(shape))
    corners, weights = [], []
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                offset = (dx, dy, dz)
                corners.append(
                    sum((base[axis] + offset[axis]) * strides[axis] for axis in range(3))
                )
                factors = [
                    fraction[axis] if offset[axis] else 1.0 - fraction[axis] for axis in (0, 1, 2)
                ]
                weights.append(factors[0] * factors[1] * factors[2])
    corner = xp.concatenate(corners)
    weight = xp.concatenate(weights)

    def splat(values: Any) -> Any:
        return xp.bincount(corner, weights=weight * xp.tile(values, 8), minlength=nodes)

    def gather(values: Any) -> Any:
        # Field by field: random gathers from a row of nodes beat gathers of several fields.
        return sum(w * values[c] for c, w in zip(corners, weights, strict=True))

    node_mass = splat(mass)
    occupied = node_mass > 0.0
    safe_mass = xp.where(occupied, node_mass, 1.0)
    node_density = node_mass * (1.0 / cell**3)
    node_target = xp.where(occupied, splat(target_mass) / safe_mass, 1.0)
    ratio = node_density / node_target
    excess = xp.where(occupied, xp.maximum(ratio - 1.0, 0.0), 0.0)
    # The excess's gradient at the nodes (central differences), interpolated like the rest: a
    # field continuous across cells, so the push on a link changes smoothly as it moves.
    node_gradient = xp.gradient(excess.reshape(tuple(int(n) for n in shape)), cell)
    gradient = xp.stack([gather(component.reshape(-1)) for component in node_gradient])
    velocity = None
    if velocities is not None:
        velocity = xp.stack(
            [
                gather(xp.where(occupied, splat(mass * velocities[axis]) / safe_mass, 0.0))
                for axis in range(3)
            ]
        )
    return GridTransfer(
        velocity, gather(node_density), gradient, nodes, xp.max(xp.where(occupied, ratio, 0.0))
    )


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"StrandInteraction.{name} must be a finite number, got {value!r}")
    return float(value)
