"""Sampling a strand system's input from the scene, frame by frame, for the live-preview cache.

What the cache (``strands_io.cache``) needs at *several* frames, the rest shape (the curves at
the start frame) and the bases', obstacles', force fields', pose curves' and pin object's state
at every frame of the simulation range, is read here. Reading another frame means
``scene.frame_set``, which must not run inside a frame handler, so this runs up front, outside
handlers (:func:`prepare_inputs`: by the operators, after a file is loaded, and in the UI by a
timer when the handler notices the input changed), and the frame handler stands aside meanwhile
(:func:`sampling`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import bpy
import numpy as np

from ..strands_io.cache import InputSamples, PreparedInput
from ..strands_io.errors import SceneInputError
from ..strands_io.records import DrawnCurves, SurfaceAttachment
from .children import children_off
from .fields import read_scene_fields
from .inputs import (
    attach_to_surface,
    hair_surface,
    input_fingerprint,
    object_base_matrix,
    pin_matrix,
    read_drawn_curves,
    reference_matrix,
    require_in_scene,
    surface_base_matrices,
)
from .obstacles import (
    obstacle_fingerprint,
    obstacle_matrices,
    obstacle_objects,
    obstacle_vertices,
    read_obstacle_shapes,
)
from .strands import frames_per_second

_sampling_depth = 0


@contextlib.contextmanager
def sampling() -> Iterator[None]:
    """While the input is sampled with ``frame_set`` (or baked objects are exported), the live
    preview's frame handler stands aside, and child hair is not grown
    (:func:`.children.children_off`)."""
    global _sampling_depth
    _sampling_depth += 1
    try:
        with children_off():
            yield
    finally:
        _sampling_depth -= 1


def is_sampling() -> bool:
    """Whether :func:`prepare_inputs` is stepping the scene through frames right now."""
    return _sampling_depth > 0


@dataclass
class _Sampler:
    """Reads one object's input into its :class:`InputSamples` while :func:`prepare_inputs`
    steps through frames."""

    ob: bpy.types.Object
    scene: bpy.types.Scene
    samples: InputSamples
    obstacle_objects: list[bpy.types.Object]

    def sample(self, frame: int, depsgraph: bpy.types.Depsgraph) -> None:
        samples = self.samples
        if frame == samples.frame_start:
            self.obstacle_objects = system_obstacles(self.scene, self.ob)
            samples.obstacles = read_obstacle_shapes(self.obstacle_objects, depsgraph)
            samples.obstacle_fingerprint = obstacle_fingerprint(self.obstacle_objects)
            samples.drawn = read_drawn_curves(self.ob, depsgraph)
            surface = hair_surface(self.ob)
            if surface is not None:
                roots = np.array([points[0] for points in samples.drawn.polylines])
                samples.attachment = attach_to_surface(self.ob, surface, roots, depsgraph)
        samples.base_matrices.append(read_base_matrices(self.ob, samples.attachment, depsgraph))
        reference = reference_matrix(self.ob, depsgraph)
        if reference is not None:
            samples.reference_matrices.append(reference)
        pin = pin_matrix(self.ob, depsgraph)
        if pin is not None:
            samples.pin_matrices.append(pin)
        collection = self.ob.oriented_strands.field_collection
        samples.fields.append(read_scene_fields(self.scene, collection, depsgraph))
        samples.obstacle_matrices.append(obstacle_matrices(self.obstacle_objects, depsgraph))
        samples.obstacle_vertices.append(
            obstacle_vertices(self.obstacle_objects, samples.obstacles, depsgraph, frame)
        )
        pose_curves = read_pose_curves(self.ob, depsgraph)
        if pose_curves is not None:
            samples.pose_curves.append(pose_curves)


def system_obstacles(scene: bpy.types.Scene, ob: bpy.types.Object) -> list[bpy.types.Object]:
    """The obstacle objects ``ob``'s strand system collides with (none when collisions are off)."""
    props = ob.oriented_strands
    return obstacle_objects(scene, props.obstacle_collection) if props.use_collisions else []


def read_pose_curves(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> DrawnCurves | None:
    """The curves of ``ob``'s pose object at the depsgraph's frame (None if it has none)."""
    pose_object = ob.oriented_strands.pose_object
    if pose_object is None:
        return None
    require_in_scene(ob, pose_object, "Pose", depsgraph)
    try:
        return read_drawn_curves(pose_object, depsgraph)
    except SceneInputError as error:
        raise SceneInputError(f"object {ob.name!r}: its Pose cannot be read: {error}") from None


def read_base_matrices(
    ob: bpy.types.Object, attachment: SurfaceAttachment | None, depsgraph: bpy.types.Depsgraph
) -> np.ndarray:
    """The object's base transforms (n_bases, 4, 4) at the depsgraph's frame."""
    if attachment is not None:
        return surface_base_matrices(ob, attachment, depsgraph)
    return object_base_matrix(ob, depsgraph)


def prepare_inputs(
    scene: bpy.types.Scene,
    view_layer: bpy.types.ViewLayer,
    requests: list[tuple[bpy.types.Object, int, int]],
) -> tuple[dict[str, PreparedInput], dict[str, str]]:
    """Sample ``(object, frame_start, frame_end)`` requests in one pass over the frames.

    Must not run inside a frame handler: it calls ``scene.frame_set`` for every frame of the
    requested ranges and restores the current frame (and subframe) afterwards, even on error.
    Returns the prepared inputs and, separately, a message per object that could not be read.
    """
    fps = frames_per_second(scene)
    samplers, errors = {}, {}
    for ob, frame_start, frame_end in requests:
        if frame_end < frame_start:
            errors[ob.name] = (
                f"object {ob.name!r}: the simulation ends (frame {frame_end}) before it starts "
                f"(frame {frame_start})"
            )
        else:
            samplers[ob.name] = _Sampler(ob, scene, InputSamples(frame_start, frame_end), [])
    frames = sorted(
        {
            frame
            for sampler in samplers.values()
            for frame in range(sampler.samples.frame_start, sampler.samples.frame_end + 1)
        }
    )
    original = (scene.frame_current, scene.frame_subframe)
    with sampling():
        try:
            for frame in frames:
                scene.frame_set(frame)
                depsgraph = view_layer.depsgraph
                for name, sampler in samplers.items():
                    samples = sampler.samples
                    if name in errors or not samples.frame_start <= frame <= samples.frame_end:
                        continue
                    try:
                        sampler.sample(frame, depsgraph)
                    except SceneInputError as error:
                        errors[name] = str(error)
        finally:
            scene.frame_set(original[0], subframe=original[1])

    prepared = {}
    for name, sampler in samplers.items():
        if name in errors:
            continue
        try:
            prepared[name] = sampler.samples.prepared(fps, input_fingerprint(sampler.ob))
        except SceneInputError as error:
            errors[name] = str(error)
    return prepared, errors
