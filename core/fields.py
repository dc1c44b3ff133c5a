"""Force fields at link positions: wind with turbulence, point (radial) and vortex fields.

Each field is a frozen description (host numbers) that evaluates a vector field at world
positions on any backend: ``field.evaluate(xp, positions, time)`` takes component-major
positions ``(3, N)`` (m) in the array namespace ``xp`` and returns ``(3, N)`` in the same
namespace and dtype, without host transfers other than the few numbers of a turbulence
(explicit ``xp.asarray``). A field's output is used in one of two ways
(:class:`ForceFields`):

- as **air velocity** (m/s): the engine's drag ``c ℓ (v_air − v_link)`` acts relative to it
  (``Control.wind_velocity``), so strands are blown and then settle at the air's speed;
- as **force** (``strength`` in N per metre of strand): multiplied by each link's length and
  applied at its centre of mass (``Control.external_force``), so a resampled strand feels the
  same total force.

:func:`.simulation.apply_fields` evaluates fields once, at the current positions, and the values
hold until the next call; ``Simulation.advance(dt, base, fields=ForceFields(...))`` evaluates
them at the start of every substep, so a field that changes within a frame is followed to first
order in the substep, as the rest of the step is.

Strength falloff (:class:`Falloff`), as Blender's force fields: full strength within
``radius`` of the field's origin, ``(radius / d)^power`` beyond (power 0: none, 1: Blender's
"linear" ``1/d``, 2: inverse-square), and nothing beyond ``max_distance``. Root-to-tip weights
(:class:`RootToTip`) scale a field along each strand.

Turbulence (:class:`Turbulence`) is a sum of random Fourier modes (Kraichnan's synthetic
turbulence): ``u(x, t) = Σ_j A_j e_j sin(k_j·x − ω_j t + φ_j)`` with each mode's direction
``e_j`` perpendicular to its wave vector ``k_j``, so the field is smooth (every derivative
bounded), divergence-free like real low-speed air, deterministic for a seed, and its RMS speed
is the given amplitude. A :class:`Wind` carries its turbulence downstream at the mean wind
speed (Taylor's frozen-turbulence hypothesis), so gusts travel with the wind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dynamics
from .errors import InvalidInputError
from .model import Model
from .state import Control, State
from .validation import finite_number, is_real, is_whole, vector3

# Most turbulence modes summed: each costs a sine per link and substep, and the statistics of the
# sum settle long before (a mistyped count would otherwise allocate without bound).
MAX_MODES = 1024


def _non_negative(name: str, value: Any) -> float:
    number = finite_number(name, value)
    if number < 0:
        raise InvalidInputError(f"{name} must not be negative, got {number}")
    return number


def _vector(name: str, value: Any, unit: bool = False) -> tuple[float, float, float]:
    vector = vector3(name, value)
    if unit:
        largest = float(np.abs(vector).max())
        if largest == 0.0:
            raise InvalidInputError(f"{name} must not be the zero vector")
        # Scaled first, so that the length of a huge vector does not overflow.
        vector = vector / largest
        vector = vector / np.linalg.norm(vector)
    return tuple(float(c) for c in vector)


def _parts(owner: str, falloff: Any, weight: Any) -> None:
    """Refuse a field whose falloff or weight is not of its kind (found only when evaluated)."""
    if not isinstance(falloff, Falloff):
        raise InvalidInputError(f"{owner}.falloff must be a Falloff, got {type(falloff).__name__}")
    if not isinstance(weight, RootToTip):
        raise InvalidInputError(f"{owner}.weight must be a RootToTip, got {type(weight).__name__}")


def _check_positions(xp: Any, positions: Any) -> None:
    if getattr(positions, "ndim", None) != 2 or positions.shape[0] != 3:
        raise InvalidInputError(
            f"positions must be a component-major (3, N) array, got shape "
            f"{getattr(positions, 'shape', None)}"
        )


@dataclass(frozen=True)
class Falloff:
    """How a field weakens with distance ``d`` from its origin (Blender's falloff).

    Attributes
    ----------
    power : float >= 0
        0: no falloff; 1: ``radius / d`` (Blender's "linear"); 2: ``(radius / d)²``
        (inverse-square); any other power likewise.
    radius : float >= 0, m
        Full strength within this distance (Blender's "Minimum Distance"); must be positive
        when ``power > 0``, where ``(radius / d)^power`` would be infinite at the origin.
    max_distance : float > 0, m
        No effect beyond this distance (Blender's "Maximum Distance"); default: everywhere.
    """

    power: float = 0.0
    radius: float = 0.0
    max_distance: float = float("inf")

    def __post_init__(self) -> None:
        object.__setattr__(self, "power", _non_negative("Falloff.power", self.power))
        object.__setattr__(self, "radius", _non_negative("Falloff.radius", self.radius))
        if not (is_real(self.max_distance) and self.max_distance > 0):
            raise InvalidInputError(f"Falloff.max_distance must be > 0, got {self.max_distance!r}")
        object.__setattr__(self, "max_distance", float(self.max_distance))
        if self.power > 0 and self.radius <= 0:
            raise InvalidInputError(
                f"Falloff.radius must be positive when power > 0 (got power {self.power}, "
                f"radius {self.radius}): the field would be infinite at its origin"
            )

    def factor(self, xp: Any, distance: Any) -> Any:
        """Strength factor (same shape as ``distance``, m) in [0, 1]."""
        inside = distance <= self.max_distance
        if self.power == 0:
            return inside.astype(distance.dtype)
        ratio = self.radius / xp.maximum(distance, self.radius)
        return xp.where(inside, ratio**self.power, 0.0)


@dataclass(frozen=True)
class RootToTip:
    """A weight along each strand: ``root + (tip − root) s^exponent``.

    ``s`` is the arc length of a link's centre from its strand's root, divided by the strand's
    length (0 at the root, 1 at the tip); a branch measures along its own strand.

    Attributes
    ----------
    root, tip : float >= 0
    exponent : float > 0
        1 for a linear ramp; larger keeps the root's value further along the strand.
    """

    root: float = 1.0
    tip: float = 1.0
    exponent: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", _non_negative("RootToTip.root", self.root))
        object.__setattr__(self, "tip", _non_negative("RootToTip.tip", self.tip))
        if not (finite_number("RootToTip.exponent", self.exponent) > 0):
            raise InvalidInputError(f"RootToTip.exponent must be > 0, got {self.exponent}")
        object.__setattr__(self, "exponent", float(self.exponent))

    @property
    def uniform(self) -> bool:
        """Whether the weight is the same everywhere (no per-link array needed)."""
        return self.root == self.tip

    def values(self, model: Model) -> Any:
        """Per-link weights ``(N,)`` on the model's backend, level-major."""
        s = strand_coordinate(model)
        return model.from_strand_order(self.root + (self.tip - self.root) * s**self.exponent)


def strand_coordinate(model: Model) -> np.ndarray:
    """Normalised arc length (host, ``(n_links,)``, strand order) of each link's centre.

    From the model's rest points, so it does not change as the strands move.
    """
    s = np.empty(model.n_links)
    for strand in range(model.n_strands):
        points = model.rest_points[model.point_offsets[strand] : model.point_offsets[strand + 1]]
        lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
        centres = np.cumsum(lengths) - 0.5 * lengths
        s[model.link_offsets[strand] : model.link_offsets[strand + 1]] = centres / lengths.sum()
    return s


@dataclass(frozen=True)
class Turbulence:
    """Smooth, divergence-free random air motion, reproducible from a seed.

    Attributes
    ----------
    amplitude : float >= 0, m/s
        RMS speed of the turbulent velocity (averaged over space).
    length_scale : float > 0, m
        Typical eddy size: wavelengths are spread over ``[length_scale/2, 2 length_scale]``.
    time_scale : float > 0, s
        Typical time over which the eddies change in place: periods spread over
        ``[time_scale/2, 2 time_scale]``.
    seed : int >= 0
    modes : int in [1, MAX_MODES]
        Fourier modes summed; more is smoother statistically, each costs one ``sin`` per point.
    """

    amplitude: float
    length_scale: float
    time_scale: float
    seed: int = 0
    modes: int = 16
    _table: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _non_negative("Turbulence.amplitude", self.amplitude)
        for name in ("length_scale", "time_scale"):
            if not (finite_number(f"Turbulence.{name}", getattr(self, name)) > 0):
                raise InvalidInputError(f"Turbulence.{name} must be > 0, got {getattr(self, name)}")
        if not is_whole(self.modes) or not 1 <= self.modes <= MAX_MODES:
            raise InvalidInputError(
                f"Turbulence.modes must be a positive integer, at most {MAX_MODES}, got "
                f"{self.modes!r}"
            )
        if not is_whole(self.seed) or self.seed < 0:
            raise InvalidInputError(
                f"Turbulence.seed must be a whole number >= 0, got {self.seed!r}"
            )
        rng = np.random.default_rng(int(self.seed))
        n = int(self.modes)
        direction = rng.normal(size=(n, 3))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        wave_number = 2.0 * np.pi / self.length_scale * 2.0 ** rng.uniform(-1.0, 1.0, n)
        # e_j ⊥ k_j makes each mode, hence the sum, divergence-free.
        helper = rng.normal(size=(n, 3))
        polarisation = np.cross(direction, helper)
        polarisation /= np.linalg.norm(polarisation, axis=1, keepdims=True)
        frequency = 2.0 * np.pi / self.time_scale * 2.0 ** rng.uniform(-1.0, 1.0, n)
        phase = rng.uniform(0.0, 2.0 * np.pi, n)
        # Each mode has mean square (A_j²/2); equal A_j = amplitude sqrt(2/n) sum to amplitude².
        weight = self.amplitude * np.sqrt(2.0 / n)
        table = np.concatenate(
            (
                direction * wave_number[:, None],  # k_j (rad/m)
                polarisation * weight,  # A_j e_j (m/s)
                frequency[:, None],  # ω_j (rad/s)
                phase[:, None],  # φ_j (rad)
            ),
            axis=1,
        )
        if not np.isfinite(table).all():
            raise InvalidInputError(
                f"Turbulence.length_scale {self.length_scale} and time_scale {self.time_scale} "
                "give wave numbers or frequencies too large to represent"
            )
        table.setflags(write=False)
        object.__setattr__(self, "_table", table)

    def evaluate(self, xp: Any, positions: Any, time: float) -> Any:
        """Turbulent air velocity (3, N), m/s, at world ``positions`` (3, N), m, and ``time``, s."""
        _check_positions(xp, positions)
        time = finite_number("time", time)
        table = xp.asarray(self._table, dtype=positions.dtype)  # the one explicit transfer
        phase = table[:, 0:3] @ positions - (table[:, 6:7] * time - table[:, 7:8])
        return table[:, 3:6].T @ xp.sin(phase)


@dataclass(frozen=True)
class Wind:
    """Directional wind: air moving at ``velocity``, with optional turbulence.

    Attributes
    ----------
    velocity : (3,) m/s, world
        Mean wind (direction and speed); as a force field, N/m along this vector.
    origin : (3,) m, world
        Where the falloff distance is measured from (the wind object's location).
    falloff : Falloff
    turbulence : Turbulence or None
        Added to the mean wind and carried downstream with it.
    weight : RootToTip
    """

    velocity: Any
    origin: Any = (0.0, 0.0, 0.0)
    falloff: Falloff = Falloff()
    turbulence: Turbulence | None = None
    weight: RootToTip = RootToTip()

    def __post_init__(self) -> None:
        object.__setattr__(self, "velocity", _vector("Wind.velocity", self.velocity))
        object.__setattr__(self, "origin", _vector("Wind.origin", self.origin))
        _parts("Wind", self.falloff, self.weight)
        if not (self.turbulence is None or isinstance(self.turbulence, Turbulence)):
            raise InvalidInputError(
                f"Wind.turbulence must be a Turbulence or None, got "
                f"{type(self.turbulence).__name__}"
            )

    def evaluate(self, xp: Any, positions: Any, time: float) -> Any:
        """Air velocity (3, N), m/s, at world ``positions`` (3, N), m, and ``time``, s."""
        _check_positions(xp, positions)
        time = finite_number("time", time)
        u = self.velocity
        mean = xp.stack([xp.full(positions.shape[1:], c, dtype=positions.dtype) for c in u])
        if self.turbulence is not None:
            carried = positions - xp.stack(
                [xp.full(positions.shape[1:], c * time, dtype=positions.dtype) for c in u]
            )
            mean = mean + self.turbulence.evaluate(xp, carried, time)
        return mean * self.falloff.factor(xp, _distance(xp, positions, self.origin))


@dataclass(frozen=True)
class PointField:
    """Radial field pushing away from (or, with ``inward``, pulling towards) a point.

    Attributes
    ----------
    centre : (3,) m, world
    strength : float >= 0
        m/s as air velocity, N/m as force; falls off with the distance from ``centre``.
    inward : bool
        Point towards the centre (an attractor) instead of away from it.
    falloff : Falloff
    weight : RootToTip

    At the centre itself the direction is undefined and the field is zero.
    """

    centre: Any
    strength: float
    inward: bool = False
    falloff: Falloff = Falloff()
    weight: RootToTip = RootToTip()

    def __post_init__(self) -> None:
        object.__setattr__(self, "centre", _vector("PointField.centre", self.centre))
        object.__setattr__(self, "strength", _non_negative("PointField.strength", self.strength))
        if not isinstance(self.inward, bool | np.bool_):
            raise InvalidInputError(f"PointField.inward must be True or False, got {self.inward!r}")
        _parts("PointField", self.falloff, self.weight)

    def evaluate(self, xp: Any, positions: Any, time: float) -> Any:
        """Field (3, N) at world ``positions`` (3, N), m; it does not change with ``time``."""
        _check_positions(xp, positions)
        finite_number("time", time)
        offset = _offset(xp, positions, self.centre)
        distance = xp.sqrt((offset * offset).sum(axis=0))
        sign = -1.0 if self.inward else 1.0
        scale = (sign * self.strength) * self.falloff.factor(xp, distance)
        return offset * (scale / xp.where(distance > 0, distance, 1.0))


@dataclass(frozen=True)
class VortexField:
    """Air swirling about an axis, counter-clockwise seen from the tip of ``axis``.

    The speed is ``strength`` outside a solid core (a Rankine vortex: inside ``core_radius``
    of the axis it rises linearly from zero, so the field is continuous on the axis), times the
    falloff with the distance from ``centre``. The field is tangential and divergence-free for
    any strength, core and falloff: it depends only on the distance from the axis and the
    height along it.

    Attributes
    ----------
    centre : (3,) m, world
        A point on the axis; the falloff is measured from it.
    axis : (3,) world, normalised
    strength : float >= 0, m/s as air velocity, N/m as force
    core_radius : float >= 0, m
    falloff : Falloff
    weight : RootToTip
    """

    centre: Any
    axis: Any
    strength: float
    core_radius: float = 0.0
    falloff: Falloff = Falloff()
    weight: RootToTip = RootToTip()

    def __post_init__(self) -> None:
        object.__setattr__(self, "centre", _vector("VortexField.centre", self.centre))
        object.__setattr__(self, "axis", _vector("VortexField.axis", self.axis, unit=True))
        object.__setattr__(self, "strength", _non_negative("VortexField.strength", self.strength))
        object.__setattr__(
            self, "core_radius", _non_negative("VortexField.core_radius", self.core_radius)
        )
        _parts("VortexField", self.falloff, self.weight)

    def evaluate(self, xp: Any, positions: Any, time: float) -> Any:
        """Field (3, N) at world ``positions`` (3, N), m; it does not change with ``time``."""
        _check_positions(xp, positions)
        finite_number("time", time)
        offset = _offset(xp, positions, self.centre)
        ax, ay, az = self.axis
        # axis × offset: tangential, of length = distance from the axis.
        swirl = xp.stack(
            (
                ay * offset[2] - az * offset[1],
                az * offset[0] - ax * offset[2],
                ax * offset[1] - ay * offset[0],
            )
        )
        from_axis = xp.sqrt((swirl * swirl).sum(axis=0))
        if self.core_radius > 0:
            core = xp.minimum(from_axis / self.core_radius, 1.0)
        else:
            core = (from_axis > 0).astype(from_axis.dtype)
        distance = xp.sqrt((offset * offset).sum(axis=0))
        scale = self.strength * core * self.falloff.factor(xp, distance)
        return swirl * (scale / xp.where(from_axis > 0, from_axis, 1.0))


FieldLike = Wind | PointField | VortexField


def _offset(xp: Any, positions: Any, point: tuple[float, float, float]) -> Any:
    return xp.stack([positions[i] - point[i] for i in range(3)])


def _distance(xp: Any, positions: Any, point: tuple[float, float, float]) -> Any:
    offset = _offset(xp, positions, point)
    return xp.sqrt((offset * offset).sum(axis=0))


def link_centres(
    model: Model, data: dynamics.Data, q: Any, base_rotation: Any, base_position: Any
) -> Any:
    """World centres of mass (3, N), m, of every link (level-major) for joint rotations ``q``.

    Runs forward kinematics into ``data`` (``oR``, ``op``); call it between steps.
    """
    dynamics.forward_kinematics(model, data, q, base_rotation, base_position)
    return data.op + data.oR[:, 1] * (0.5 * model.length)


def evaluate_fields(model: Model, fields: Sequence[FieldLike], positions: Any, time: float) -> Any:
    """Sum of ``fields`` (3, N) at the links' ``positions`` (3, N), each times its weights."""
    xp = model.xp
    total = xp.zeros((3, model.n_links), dtype=model.backend.float)
    for item in fields:
        value = item.evaluate(xp, positions, time)
        if item.weight.uniform:
            total = total + item.weight.root * value
        else:
            total = total + item.weight.values(model) * value
    return total


@dataclass(frozen=True)
class ForceFields:
    """Fields acting on the strands: air velocity (``wind``) and force (``force``).

    Attributes
    ----------
    wind : sequence of Wind, PointField or VortexField
        Summed into the air velocity (m/s) that drag acts relative to.
    force : sequence of Wind, PointField or VortexField
        Summed into a force per length (strength in N/m), applied as ``field × link length`` at
        each link's centre of mass.

    ``Simulation.advance(dt, base, fields=ForceFields(...))`` evaluates them at every substep;
    :func:`apply_fields` once.
    """

    wind: Sequence[FieldLike] = ()
    force: Sequence[FieldLike] = ()

    def __post_init__(self) -> None:
        for name in ("wind", "force"):
            given = getattr(self, name)
            try:
                items = tuple(given)
            except TypeError:
                raise InvalidInputError(
                    f"ForceFields.{name} must be a sequence of fields, got {type(given).__name__}"
                ) from None
            for item in items:
                if not isinstance(item, Wind | PointField | VortexField):
                    raise InvalidInputError(
                        f"ForceFields.{name} must hold Wind, PointField or VortexField, got "
                        f"{type(item).__name__}"
                    )
            object.__setattr__(self, name, items)

    def apply(
        self, model: Model, data: dynamics.Data, state: State, control: Control, time: float
    ) -> None:
        """Set ``control.wind_velocity`` and ``control.external_force`` from the fields at the
        links' centres of mass in ``state`` and at ``time`` (s); uses ``data`` as workspace."""
        centres = link_centres(model, data, state.q, state.base_rotation, state.base_position)
        control.wind_velocity = evaluate_fields(model, self.wind, centres, time)
        control.external_force = evaluate_fields(model, self.force, centres, time) * model.length
