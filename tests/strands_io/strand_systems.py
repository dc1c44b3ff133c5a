"""Strand systems as the adapter holds them once a scene is read, built without Blender.

The values are the strand system's property defaults (``panels/properties.py``), so a test
changes only what it is about.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from oriented_strands.core import SolverSettings
from oriented_strands.strands_io.cache import InputSamples, PreparedInput
from oriented_strands.strands_io.layout import ConversionSettings
from oriented_strands.strands_io.parameters import (
    InteractionSettings,
    ModelSettings,
    StrandSettings,
)
from oriented_strands.strands_io.records import DrawnCurves, ObstacleShapes, SceneFields

FPS = 24.0

# Every animatable property at its default, as AnimatedValues.at returns it.
VALUES: dict[str, float | tuple[float, ...]] = {
    "ellipticity": 1.0,
    "youngs_modulus": 0.05,
    "shear_modulus": 0.02,
    "stiffness_tip": 1.0,
    "stiffness_shape": 1.0,
    "bend_damping_time": 0.02,
    "twist_damping_time": 0.02,
    "damping_tip": 1.0,
    "damping_shape": 1.0,
    "custom_gravity": (0.0, 0.0, -9.81),
    "gravity_factor": 1.0,
    "air_drag": 0.05,
    "wind_velocity": (0.0, 0.0, 0.0),
    "time_scale": 1.0,
    "local_dynamics": 0.0,
    "field_weight": 1.0,
    "field_weight_tip": 1.0,
    "field_weight_shape": 1.0,
    "pose_strength": 0.0,
    "pose_damping_time": 0.01,
    "pose_tip": 1.0,
    "pose_shape": 1.0,
    "interaction_friction": 0.2,
    "interaction_volume": 0.5,
}

MODEL = ModelSettings(
    radius=0.001,
    thickness_tip=1.0,
    thickness_shape=1.0,
    density=1100.0,
    mass_tip=1.0,
    mass_shape=1.0,
    solver=SolverSettings(),
    backend="numpy",
    precision="float64",
    collision_radius=0.001,
    collision_tip=1.0,
    collision_shape=1.0,
    swing_limit=math.pi,
    twist_limit=math.pi,
    contact_iterations=8,
    interaction=None,
)

INTERACTION = InteractionSettings(target_density=None, cell_size=None, tip=1.0, shape=1.0)


def conversion(**changes) -> ConversionSettings:
    """The Conversion panel's defaults, with ``changes``."""
    defaults = ConversionSettings(
        resample_mode="COUNT", segment_count=16, segment_length=0.02, branch_tolerance=0.001
    )
    return replace(defaults, **changes)


def settings(frame_end: int = 6, segment_count: int = 8, **model_changes) -> StrandSettings:
    """A system's settings: frames 1..``frame_end``, the scene's gravity, the drawn rest shape."""
    return StrandSettings(
        conversion=conversion(segment_count=segment_count),
        model=replace(MODEL, **model_changes),
        frame_start=1,
        frame_end=frame_end,
        gravity_source="SCENE",
        scene_gravity=(0.0, 0.0, -9.81),
        rest_shape="DRAWN",
    )


class Values:
    """Animatable parameters: the defaults with ``changes``, and the ``keyed`` ones a function
    of the frame (the :class:`~oriented_strands.strands_io.parameters.AnimatedParameters` that
    Blender's F-curves give)."""

    def __init__(
        self,
        keyed: dict[str, Callable[[float], float]] | None = None,
        **changes: float | tuple[float, ...],
    ) -> None:
        self.static = {**VALUES, **changes}
        self.keyed = keyed or {}

    @property
    def is_animated(self) -> bool:
        return bool(self.keyed)

    def fingerprint(self) -> tuple:
        return tuple(sorted(self.static.items())), tuple(sorted(self.keyed.items()))

    def at(self, frame: float) -> dict[str, float | tuple[float, ...]]:
        return {**self.static, **{name: f(frame) for name, f in self.keyed.items()}}


def drawn(polylines: Sequence, name: str = "strands") -> DrawnCurves:
    """``polylines`` as the curves of an object called ``name``."""
    points = [np.asarray(p, dtype=np.float64) for p in polylines]
    return DrawnCurves(name, points, [f"spline {i}" for i in range(len(points))])


def samples(
    polylines: Sequence,
    frame_start: int = 1,
    frame_end: int = 6,
    base_matrices: np.ndarray | None = None,
) -> InputSamples:
    """What sampling frames ``frame_start .. frame_end`` of a curve object reads: its curves, its
    transform at every frame (``base_matrices`` (F, 1, 4, 4), identity when None), no force
    fields, obstacles, reference or pose object."""
    frames = frame_end - frame_start + 1
    if base_matrices is None:
        base_matrices = np.broadcast_to(np.eye(4), (frames, 1, 4, 4))
    result = InputSamples(frame_start, frame_end, drawn=drawn(polylines))
    result.obstacles = ObstacleShapes((), ())
    for index in range(frames):
        result.base_matrices.append(np.array(base_matrices[index]))
        result.fields.append(SceneFields())
        result.obstacle_matrices.append(np.zeros((0, 4, 4)))
        result.obstacle_vertices.append(())
    return result


def prepared(polylines: Sequence, frame_end: int = 6, **kwargs) -> PreparedInput:
    """:func:`samples` made a :class:`PreparedInput` at :data:`FPS`."""
    return samples(polylines, frame_end=frame_end, **kwargs).prepared(FPS, "fingerprint")
