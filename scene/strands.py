"""From an object's settings and sampled input to an engine model: conversion and parameters.

Data flows one way: the strand system's properties are flattened into plain settings objects
(:func:`read_settings`), drawn polylines are resampled and linked into a forest of
``StrandSpec`` (:func:`convert`), and per-link engine parameters are computed from the artist's
material values (:func:`engine_parameters`). Nothing here steps a simulation or writes to Blender.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import bpy
import numpy as np

from ..core import SolverSettings, StrandInteraction, StrandParameters, StrandSpec
from ..core.presets import PRESETS, bending_rigidity, mass_per_length, torsional_rigidity
from .animation import fcurves_under, keyframes_fingerprint
from .errors import SceneInputError
from .geometry import (
    arc_coordinate,
    branch_cycle,
    find_branch_attachments,
    polyline_length,
    resample_by_arc_length,
    root_to_tip,
    segments_for_length,
)
from .inputs import DrawnCurves

PROPERTY_GROUP = "oriented_strands"
DATA_PATH_PREFIX = PROPERTY_GROUP + "."

GIGAPASCAL = 1e9
MILLI = 1e-3


@dataclass(frozen=True)
class ConversionSettings:
    """How drawn curves become strands."""

    resample_mode: str  # "COUNT" or "LENGTH"
    segment_count: int
    segment_length: float  # m
    branch_tolerance: float  # m


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


def read_settings(ob: bpy.types.Object, scene: bpy.types.Scene) -> StrandSettings:
    """Flatten ``ob.oriented_strands`` (and the scene gravity it may use) into plain values."""
    props = getattr(ob, PROPERTY_GROUP)
    for rna in props.bl_rna.properties:
        if rna.type == "FLOAT" and not rna.is_readonly:
            check_value(props.bl_rna, rna, _plain(getattr(props, rna.identifier)))
    if props.substep_unit == "ERROR" and props.solver_method == "EXPLICIT":
        raise SceneInputError(
            "Steps By Error needs the Implicit Method (Solver panel): the explicit method "
            "takes fixed steps"
        )
    gravity = tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
    return StrandSettings(
        conversion=ConversionSettings(
            resample_mode=props.resample_mode,
            segment_count=props.segment_count,
            segment_length=props.segment_length,
            branch_tolerance=props.branch_tolerance,
        ),
        model=ModelSettings(
            radius=props.radius,
            thickness_tip=props.thickness_tip,
            thickness_shape=props.thickness_shape,
            density=props.density,
            mass_tip=props.mass_tip,
            mass_shape=props.mass_shape,
            solver=SolverSettings(
                method=props.solver_method.lower(),
                order=2 if props.solver_order == "BDF2" else 1,
                substeps=substeps_per_frame(props, scene),
                tolerance=props.error_tolerance if props.substep_unit == "ERROR" else None,
                newton_tolerance=props.newton_tolerance,
                newton_max_iterations=props.newton_max_iterations,
                strict=props.stop_on_failure,
                # Worker processes step NumPy models only; the panel greys the count out.
                workers=(props.worker_processes or None) if props.backend == "numpy" else None,
            ),
            backend=props.backend,
            precision=props.precision,
            collision_radius=props.collision_radius,
            collision_tip=props.collision_tip,
            collision_shape=props.collision_shape,
            swing_limit=props.swing_limit,
            twist_limit=props.twist_limit,
            contact_iterations=props.contact_iterations,
            interaction=InteractionSettings(
                target_density=(
                    props.interaction_density if props.interaction_target == "VALUE" else None
                ),
                cell_size=props.interaction_cell_size or None,
                tip=props.interaction_tip,
                shape=props.interaction_shape,
            )
            if props.use_interaction
            else None,
        ),
        frame_start=props.frame_start,
        frame_end=props.frame_end,
        gravity_source=props.gravity_source,
        scene_gravity=gravity,
        rest_shape=props.rest_shape,
    )


def animatable_names(ob: bpy.types.Object) -> tuple[str, ...]:
    """Names of the strand system's animatable properties, from its RNA definition."""
    props = getattr(ob, PROPERTY_GROUP)
    return tuple(
        p.identifier
        for p in props.bl_rna.properties
        if p.is_animatable and not p.is_readonly and p.identifier != "rna_type"
    )


class AnimatedValues:
    """Reads the animatable strand parameters at any frame from their F-curves.

    A property without keyframes keeps its current value. Built once per frame change; F-curves
    are evaluated directly, so frames other than the current one need no ``frame_set``.
    """

    def __init__(self, ob: bpy.types.Object) -> None:
        self._props = getattr(ob, PROPERTY_GROUP)
        self._names = animatable_names(ob)
        self._curves = fcurves_under(ob, DATA_PATH_PREFIX)

    @property
    def is_animated(self) -> bool:
        """Whether any strand parameter has keyframes."""
        return bool(self._curves)

    def fingerprint(self) -> tuple:
        """Values and keyframes that decide the parameters at every frame."""
        static = tuple(
            (name, _plain(getattr(self._props, name)))
            for name in self._names
            if not any(key[0] == name for key in self._curves)
        )
        return static, keyframes_fingerprint(self._curves)

    def at(self, frame: float) -> dict[str, float | tuple[float, ...]]:
        """Every animatable parameter's value at ``frame``."""
        values: dict[str, float | tuple[float, ...]] = {}
        for name in self._names:
            current = _plain(getattr(self._props, name))
            if isinstance(current, tuple):
                values[name] = tuple(
                    self._curves[(name, i)].evaluate(frame) if (name, i) in self._curves else c
                    for i, c in enumerate(current)
                )
            elif (name, 0) in self._curves:
                values[name] = float(self._curves[(name, 0)].evaluate(frame))
            else:
                values[name] = current
            self._check(name, values[name], frame)
        return values

    def _check(self, name: str, value: object, frame: float) -> None:
        rna = self._props.bl_rna.properties[name]
        if rna.type == "FLOAT":
            check_value(self._props.bl_rna, rna, value, frame)


def check_value(
    group: bpy.types.Struct, rna: bpy.types.Property, value: object, frame: float | None = None
) -> None:
    """Refuse a float property's value (or any of a vector's) that is not finite or lies
    outside the property's range (a script or driver can set NaN; a Bézier curve can overshoot
    its keys), naming it by the panel's label (with its identifier where labels repeat, as the
    root-to-tip *Tip* and *Shape* do); callers name the object."""
    label = rna.name
    if sum(other.name == label for other in group.properties) > 1:
        label = f"{label} ({rna.identifier})"
    for number in value if isinstance(value, tuple) else (value,):
        if not math.isfinite(number):
            problem = "is not a number" if math.isnan(number) else "is infinite"
        elif number < rna.hard_min:
            problem = f"is {number:g}, below its least value {rna.hard_min:g}"
        elif number > rna.hard_max:
            problem = f"is {number:g}, above its largest value {rna.hard_max:g}"
        else:
            continue
        where = "" if frame is None else f" at frame {frame:g}"
        raise SceneInputError(f"{label} {problem}{where}")


def _plain(value: object) -> float | tuple[float, ...]:
    if isinstance(value, (int, float, bool, str)):
        return value
    return tuple(float(v) for v in value)


@dataclass(frozen=True)
class StrandLayout:
    """The strands of one object, ready for ``build_model``.

    Attributes
    ----------
    specs : list of StrandSpec
        In the order of the object's splines (strand ``i`` is spline ``i``).
    base_rest_poses : (n_bases, 4, 4) float64
        Rigid world transforms of the bases at the start frame.
    link_coordinate : (n_links,) float64
        Normalised arc length (0 root, 1 tip) of each link's centre along its strand, strand
        order; drives the root-to-tip profiles.
    point_counts : (n_strands,) int
        Points per strand (segments + 1), for writing the preview.
    """

    specs: list[StrandSpec]
    base_rest_poses: np.ndarray
    link_coordinate: np.ndarray
    point_counts: np.ndarray

    @property
    def rest_points(self) -> np.ndarray:
        """(n_points, 3) rest points in strand order, m, world."""
        return np.concatenate([np.asarray(spec.points) for spec in self.specs])


def convert(
    drawn: DrawnCurves,
    base_of_curve: np.ndarray,
    base_rest_poses: np.ndarray,
    settings: ConversionSettings,
    allow_branches: bool,
) -> StrandLayout:
    """Resample drawn polylines into strands and attach branches to their parents.

    ``base_of_curve`` gives the base that drives each curve if it is a root strand. A branch is
    attached to the link of its parent that holds the nearest point of the parent's drawn curve.
    Raises :class:`SceneInputError` if branches form a cycle.
    """
    lengths = [polyline_length(points) for points in drawn.polylines]
    if settings.resample_mode == "LENGTH":
        counts = [segments_for_length(length, settings.segment_length) for length in lengths]
    else:
        counts = [settings.segment_count] * len(lengths)
    resampled = [
        resample_by_arc_length(points, count)
        for points, count in zip(drawn.polylines, counts, strict=True)
    ]

    attachments = (
        find_branch_attachments(drawn.polylines, settings.branch_tolerance)
        if allow_branches
        else [None] * len(resampled)
    )
    parents = [None if a is None else a.parent for a in attachments]
    cycle = branch_cycle(parents)
    if cycle is not None:
        names = ", ".join(drawn.labels[i] for i in cycle)
        raise SceneInputError(
            f"object {drawn.object_name!r}: {names} start on each other, so none of them can be "
            "the trunk; move one root off the other curve or lower Branch Tolerance"
        )

    specs = []
    for index, points in enumerate(resampled):
        name = f"{drawn.object_name}: {drawn.labels[index]}"
        attachment = attachments[index]
        if attachment is None:
            specs.append(StrandSpec(points, base=int(base_of_curve[index]), name=name))
            continue
        parent = attachment.parent
        fraction = attachment.arc_length / lengths[parent]
        link = min(int(fraction * counts[parent]), counts[parent] - 1)
        specs.append(StrandSpec(points, parent=(parent, link), name=name))
    return StrandLayout(
        specs=specs,
        base_rest_poses=base_rest_poses,
        link_coordinate=np.concatenate([arc_coordinate(points) for points in resampled]),
        point_counts=np.array([len(points) for points in resampled]),
    )


def link_radius(layout: StrandLayout, model: ModelSettings) -> np.ndarray:
    """Cross-section radius (n_links,) of every link, m, strand order (root-to-tip taper)."""
    taper = root_to_tip(layout.link_coordinate, model.thickness_tip, model.thickness_shape)
    return model.radius * taper


def point_radius(layout: StrandLayout, model: ModelSettings) -> np.ndarray:
    """Radius (n_points,) at every strand point, for drawing and rendering the preview."""
    radii = []
    for spec in layout.specs:
        points = np.asarray(spec.points)
        pieces = np.linalg.norm(np.diff(points, axis=0), axis=1)
        s = np.concatenate(([0.0], np.cumsum(pieces))) / pieces.sum()
        radii.append(model.radius * root_to_tip(s, model.thickness_tip, model.thickness_shape))
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


def substeps_per_frame(props: bpy.types.PropertyGroup, scene: bpy.types.Scene) -> int:
    """The steps a frame takes: *Substeps* per frame, or per second the whole number of steps
    nearest above the frame's share of *Steps per Second*, a share up to 1 % above a whole
    number taking that number (23.976 fps takes 4 steps a frame of 96 a second, not 5). By
    error, the first frame's steps are those per second (the error estimates choose the
    others)."""
    if props.substep_unit == "FRAME":
        return props.substeps
    share = props.steps_per_second / frames_per_second(scene)
    return max(1, math.ceil(share * 0.99))


def frames_per_second(scene: bpy.types.Scene) -> float:
    """The scene's frame rate (frames per second of simulated time)."""
    fps = scene.render.fps / scene.render.fps_base
    if not math.isfinite(fps) or fps <= 0:
        raise SceneInputError(f"scene {scene.name!r} has no valid frame rate ({fps})")
    return fps


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
