"""A strand system's properties read from Blender: settings, animated values, frame rate.

The system's properties are flattened into the plain settings records of
``strands_io.parameters`` (:func:`read_settings`), and its animatable ones are read at any frame
from their F-curves (:class:`AnimatedValues`); every value is checked against its property's
range on the way. What the values then become (the strands' layout, the engine's parameters) is
decided in ``strands_io``, without Blender.
"""

from __future__ import annotations

import math

import bpy

from ..core import SolverSettings
from ..strands_io.errors import SceneInputError
from ..strands_io.layout import ConversionSettings
from ..strands_io.parameters import (
    InteractionSettings,
    ModelSettings,
    StrandSettings,
    steps_per_frame,
)
from .animation import fcurves_under, keyframes_fingerprint

PROPERTY_GROUP = "oriented_strands"
DATA_PATH_PREFIX = PROPERTY_GROUP + "."


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
    """Reads the animatable strand parameters at any frame from their F-curves (the
    :class:`~..strands_io.parameters.AnimatedParameters` of a strand system in Blender).

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


def substeps_per_frame(props: bpy.types.PropertyGroup, scene: bpy.types.Scene) -> int:
    """The steps a frame takes: *Substeps* per frame, or per second the frame's share of *Steps
    per Second* (:func:`~..strands_io.parameters.steps_per_frame`). By error, the first frame's
    steps are those per second (the error estimates choose the others)."""
    if props.substep_unit == "FRAME":
        return props.substeps
    return steps_per_frame(props.steps_per_second, frames_per_second(scene))


def frames_per_second(scene: bpy.types.Scene) -> float:
    """The scene's frame rate (frames per second of simulated time)."""
    fps = scene.render.fps / scene.render.fps_base
    if not math.isfinite(fps) or fps <= 0:
        raise SceneInputError(f"scene {scene.name!r} has no valid frame rate ({fps})")
    return fps
