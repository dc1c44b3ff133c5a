"""A strand system's settings as plain records, and the engine parameters they map to.

``scene.strands.read_settings`` flattens the system's properties into a :class:`StrandSettings`;
the animatable values (stiffness, damping, gravity, wind, ...) arrive per frame as a dict keyed
by property name (:class:`AnimatedParameters`). Everything here maps them to the engine:
per-link radii, masses, rigidities and damping along root-to-tip profiles
(:func:`strand_parameters`, :func:`engine_parameters`), gravity, interaction, substeps, and the
engine's material presets as property values. Nothing here steps a simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..core import SolverSettings, StrandInteraction, StrandParameters
from ..core.presets import PRESETS, bending_rigidity, mass_per_length, torsional_rigidity
from .errors import SceneInputError
from .geometry import root_to_tip
from .layout import ConversionSettings, StrandLayout

GIGAPASCAL = 1e9
MILLI = 1e-3


@dataclass(frozen=True)
class ModelSettings:
    """What the engine fixes when it builds the model (not animatable)."""

    radius: float  # m, at the root
    thickness_tip: float  # tip radius / root radius
    thickness_shape: float
    density: float  # kg/m³
    mass_tip: float  # tip mass per length / root mass per length, on top of the taper
    mass_shape: float
    solver: SolverSettings
    backend: str
    precision: str  # "float64" or "float32"
    collision_radius: float  # m, at the root
    collision_tip: float  # tip collision radius / root collision radius
    collision_shape: float
    swing_limit: float  # rad, π: none
    twist_limit: float  # rad, π: none
    contact_iterations: int
    interaction: InteractionSettings | None  # None: the strands pass through each other


@dataclass(frozen=True)
class InteractionSettings:
    """The system's Interaction panel, flattened (the per-link weight is a root-to-tip profile;
    friction and volume are animatable, read per frame)."""

    target_density: float | None  # kg/m³, None: each strand's own density as drawn
    cell_size: float | None  # m, None: automatic
    tip: float
    shape: float


@dataclass(frozen=True)
class StrandSettings:
    """Everything a strand system's properties say, flattened for the adapter and the engine."""

    conversion: ConversionSettings
    model: ModelSettings
    frame_start: int
    frame_end: int
    gravity_source: str  # "SCENE" or "CUSTOM"
    scene_gravity: tuple[float, float, float]  # m/s², 0 when the scene's gravity is off
    rest_shape: str  # "DRAWN" or "HOLD_UNDER_GRAVITY"


class AnimatedParameters(Protocol):
    """The animatable strand parameters at any frame (``scene.strands.AnimatedValues`` reads
    them from the system's properties and F-curves)."""

    @property
    def is_animated(self) -> bool:
        """Whether any parameter changes over time."""

    def fingerprint(self) -> tuple:
        """A hashable value that changes whenever the parameters at some frame change."""

    def at(self, frame: float) -> dict[str, float | tuple[float, ...]]:
        """Every animatable parameter's value at ``frame``, by property name."""


def root_radius(layout: StrandLayout, model: ModelSettings) -> np.ndarray:
    """Radius (n_strands,) at the root of every strand, m: *Radius* for a strand of its own, and
    for a branch the radius its parent has where the branch starts, so that a tree tapers from
    its trunk's root to its twigs' tips rather than every branch starting as thick as the
    trunk."""
    link_counts = np.asarray(layout.point_counts) - 1
    offsets = np.concatenate(([0], np.cumsum(link_counts)))
    radii: dict[int, float] = {}

    def radius_of(strand: int) -> float:
        if strand not in radii:
            parent = layout.specs[strand].parent
            if parent is None:
                radii[strand] = model.radius
            else:
                at = layout.link_coordinate[offsets[parent[0]] + parent[1]]
                taper = root_to_tip(np.array([at]), model.thickness_tip, model.thickness_shape)
                radii[strand] = radius_of(parent[0]) * float(taper[0])
        return radii[strand]

    return np.array([radius_of(strand) for strand in range(len(layout.specs))])


def link_radius(layout: StrandLayout, model: ModelSettings) -> np.ndarray:
    """Cross-section radius (n_links,) of every link, m, strand order: its strand's root radius
    (:func:`root_radius`) with the root-to-tip taper."""
    taper = root_to_tip(layout.link_coordinate, model.thickness_tip, model.thickness_shape)
    roots = np.repeat(root_radius(layout, model), np.asarray(layout.point_counts) - 1)
    return roots * taper


def point_radius(layout: StrandLayout, model: ModelSettings) -> np.ndarray:
    """Radius (n_points,) at every strand point, for drawing and rendering the preview."""
    radii = []
    for spec, root in zip(layout.specs, root_radius(layout, model), strict=True):
        points = np.asarray(spec.points)
        pieces = np.linalg.norm(np.diff(points, axis=0), axis=1)
        s = np.concatenate(([0.0], np.cumsum(pieces))) / pieces.sum()
        radii.append(root * root_to_tip(s, model.thickness_tip, model.thickness_shape))
    return np.concatenate(radii)


def gravity_vector(settings: StrandSettings, values: dict) -> np.ndarray:
    """Gravity (3,) m/s² acting on the strands for the given animated values."""
    source = (
        settings.scene_gravity if settings.gravity_source == "SCENE" else values["custom_gravity"]
    )
    return np.asarray(source, dtype=np.float64) * float(values["gravity_factor"])


def engine_parameters(
    layout: StrandLayout, model: ModelSettings, values: dict
) -> dict[str, np.ndarray]:
    """Per-link engine parameters (strand order) from the artist's material values.

    - bending rigidity ``EI = E I`` (x and z axes of an elliptic section), twisting rigidity
      ``GJ = G J`` (``core.presets``), times the stiffness profile;
    - damping per unit length = relaxation time x rigidity (soft axis for bending), times the
      damping profile, so damping scales with stiffness as internal friction does;
    - drag per unit length scales with the local width (a tapered tip catches less air);
    - pose strength is a multiple of the (soft-axis) bending rigidity, times its profile, and
      pose damping a relaxation time times it.
    """
    radius = link_radius(layout, model)
    s = layout.link_coordinate
    stiffness = root_to_tip(s, values["stiffness_tip"], values["stiffness_shape"])
    damping = root_to_tip(s, values["damping_tip"], values["damping_shape"])
    ellipticity = values["ellipticity"]
    bend = bending_rigidity(values["youngs_modulus"] * GIGAPASCAL, radius, ellipticity)
    bend = bend * stiffness[:, None]
    twist = torsional_rigidity(values["shear_modulus"] * GIGAPASCAL, radius, ellipticity)
    twist = twist * stiffness
    pose = values["pose_strength"] * bend.min(axis=1)
    pose = pose * root_to_tip(s, values["pose_tip"], values["pose_shape"])
    return {
        "bend_stiffness": bend,
        "twist_stiffness": twist,
        "bend_damping": values["bend_damping_time"] * bend.min(axis=1) * damping,
        "twist_damping": values["twist_damping_time"] * twist * damping,
        "drag": values["air_drag"] * MILLI * radius / model.radius,
        "pose_strength": pose,
        "pose_damping": values["pose_damping_time"] * pose,
    }


def strand_parameters(layout: StrandLayout, model: ModelSettings, values: dict) -> StrandParameters:
    """The engine's :class:`StrandParameters` at the given animated values."""
    radius = link_radius(layout, model)
    mass_profile = root_to_tip(layout.link_coordinate, model.mass_tip, model.mass_shape)
    return StrandParameters(
        mass_per_length=mass_per_length(model.density, radius) * mass_profile,
        radius=radius,
        collision_radius=model.collision_radius,
        collision_weight=root_to_tip(
            layout.link_coordinate, model.collision_tip, model.collision_shape
        ),
        **engine_parameters(layout, model, values),
    )


def strand_interaction(
    layout: StrandLayout, model: ModelSettings, values: dict
) -> StrandInteraction | None:
    """The engine's interaction settings of a system at a frame's animated ``values`` (None
    without interaction)."""
    settings = model.interaction
    if settings is None:
        return None
    return StrandInteraction(
        friction=values["interaction_friction"],
        volume=values["interaction_volume"],
        target_density=settings.target_density,
        cell_size=settings.cell_size,
        weight=root_to_tip(layout.link_coordinate, settings.tip, settings.shape),
    )


def steps_per_frame(steps_per_second: float, fps: float) -> int:
    """The whole number of steps nearest above a frame's share of ``steps_per_second`` at
    ``fps`` frames per second, a share up to 1 % above a whole number taking that number
    (23.976 fps takes 4 steps a frame of 96 a second, not 5); at least one."""
    share = steps_per_second / fps
    return max(1, math.ceil(share * 0.99))


def preset_names() -> list[str]:
    """Names of the engine's material presets (hair types, twigs, stems, grass)."""
    return list(PRESETS)


def preset_property_values(name: str) -> dict[str, float]:
    """Strand-system property values for an engine material preset (see ``core.presets``)."""
    preset = PRESETS.get(name)
    if preset is None:
        raise SceneInputError(f"unknown material preset {name!r}; known: {', '.join(PRESETS)}")
    return {
        "radius": preset.radius,
        "density": preset.density,
        "ellipticity": preset.ellipticity,
        "youngs_modulus": preset.youngs_modulus / GIGAPASCAL,
        "shear_modulus": preset.shear_modulus / GIGAPASCAL,
        "bend_damping_time": preset.damping_time,
        # The preset damps twist with the same coefficient as bending (soft axis); as a
        # relaxation time of the twisting stiffness that is this ratio.
        "twist_damping_time": preset.damping_time
        * float(preset.bending_rigidity().min() / preset.torsional_rigidity()),
        "air_drag": preset.drag / MILLI,
    }
