"""Blender's force-field objects as the engine's fields (``core.fields``).

Which Blender field becomes what:

- **Wind** → :class:`~..core.fields.Wind`: air moving along the object's local +Z at
  *Strength* m/s, which the strands' drag pulls them towards (Blender's wind is a force; a strand
  is blown by the air, so its strength is read as the air's speed). *Noise* adds turbulence of
  RMS speed *Noise* × |*Strength*| with 1 m eddies changing over about a second, from the
  field's *Seed*.
- **Turbulence** → still air with turbulence of RMS speed |*Strength*|, eddies of *Size* m (1 m
  when *Size* is 0), from the field's *Seed*.
- **Vortex** → :class:`~..core.fields.VortexField`: air swirling about the object's local +Z
  at *Strength* m/s (negative turns the other way).
- **Force** → :class:`~..core.fields.PointField`: a force of |*Strength*| N per metre of strand,
  away from the object (towards it when negative).

Falloff (*Sphere* shape): *Power*, *Minimum Distance* (full strength inside; when it is off,
1 m, where Blender's own law ``(1 + d)^-power`` also starts to fall as ``d^-power``) and
*Maximum Distance*. Other field types (they act on particles, not on air or strands) and the
*Tube* and *Cone* falloff shapes are not read; the strand system's status lists the fields
it ignored.
"""

from __future__ import annotations

import math

import bpy
import numpy as np

from ..core.fields import Falloff, PointField, Turbulence, VortexField, Wind
from ..strands_io.records import SceneFields

# Eddy size and time of the turbulence that a Wind field's Noise adds (m, s).
WIND_NOISE_LENGTH = 1.0
WIND_NOISE_TIME = 1.0
# A Turbulence field's eddies change over this time (s); Blender's own turbulence is frozen.
TURBULENCE_TIME = 1.0
# Full-strength radius of a falloff whose Minimum Distance is off (m).
DEFAULT_FALLOFF_RADIUS = 1.0

SUPPORTED_TYPES = ("WIND", "TURBULENCE", "VORTEX", "FORCE")


def field_objects(
    scene: bpy.types.Scene, collection: bpy.types.Collection | None
) -> list[bpy.types.Object]:
    """Objects with a force field that may act on a strand system: those of ``collection`` (all
    of the scene's when None), sorted by name so the sum is the same in every session."""
    objects = collection.all_objects if collection is not None else scene.objects
    return sorted(
        (ob for ob in objects if ob.field is not None and ob.field.type != "NONE"),
        key=lambda ob: ob.name,
    )


def read_scene_fields(
    scene: bpy.types.Scene,
    collection: bpy.types.Collection | None,
    depsgraph: bpy.types.Depsgraph,
) -> SceneFields:
    """The fields acting at the depsgraph's frame, from their evaluated objects."""
    wind, force, ignored = [], [], []
    for ob in field_objects(scene, collection):
        settings = ob.field
        if settings.type not in SUPPORTED_TYPES:
            ignored.append(f"{ob.name} ({settings.type.title().replace('_', ' ')} field)")
            continue
        if settings.falloff_type != "SPHERE":
            ignored.append(f"{ob.name} ({settings.falloff_type.title()} falloff)")
            continue
        if settings.use_max_distance and settings.distance_max <= 0:
            continue  # Acts nowhere.
        matrix = np.array(ob.evaluated_get(depsgraph).matrix_world, dtype=np.float64)
        origin = matrix[:3, 3]
        z_axis = matrix[:3, 2] / np.linalg.norm(matrix[:3, 2])
        strength = float(settings.strength)
        falloff = _falloff(settings)
        if settings.type == "WIND":
            turbulence = None
            if settings.noise > 0 and strength != 0:
                turbulence = Turbulence(
                    settings.noise * abs(strength),
                    WIND_NOISE_LENGTH,
                    WIND_NOISE_TIME,
                    seed=settings.seed,
                )
            wind.append(Wind(strength * z_axis, origin, falloff, turbulence))
        elif settings.type == "TURBULENCE":
            size = settings.size if settings.size > 0 else WIND_NOISE_LENGTH
            turbulence = Turbulence(abs(strength), size, TURBULENCE_TIME, seed=settings.seed)
            wind.append(Wind((0.0, 0.0, 0.0), origin, falloff, turbulence))
        elif settings.type == "VORTEX":
            axis = z_axis if strength >= 0 else -z_axis
            wind.append(VortexField(origin, axis, abs(strength), falloff=falloff))
        else:
            force.append(PointField(origin, abs(strength), inward=strength < 0, falloff=falloff))
    return SceneFields(tuple(wind), tuple(force), tuple(ignored))


def _falloff(settings: bpy.types.FieldSettings) -> Falloff:
    power = float(settings.falloff_power)
    radius = float(settings.distance_min) if settings.use_min_distance else 0.0
    if power > 0 and radius <= 0:
        radius = DEFAULT_FALLOFF_RADIUS
    max_distance = float(settings.distance_max) if settings.use_max_distance else math.inf
    return Falloff(power, radius, max_distance)
