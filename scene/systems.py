"""Strand systems in a Blender scene: what the operators, panels and frame handler call.

A strand system lives on its input object (``ob.oriented_strands``) and shows its result on a
generated preview object. Its runtime state (``strands_io.cache.StrandSystemRuntime``) is kept in
memory, keyed by the object's ``session_uid``, and is never saved in the .blend file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import replace

import bpy
import numpy as np

from ..core import StrandError, available_backends
from ..strands_io.cache import PreparedInput, StrandSystemRuntime
from ..strands_io.errors import SceneInputError
from . import children
from .bake_outputs import HAIR, apply_hair_caches, baked_objects, cache_problem, is_baked
from .fields import read_scene_fields
from .inputs import STRAND_OBJECT_TYPES, input_fingerprint, pin_matrix, reference_matrix
from .obstacles import obstacle_fingerprint, obstacle_matrices
from .preview import (
    bind,
    check_preview_support,
    create_preview,
    remove_preview,
    surface_binding,
    write_points,
)
from .sampling import prepare_inputs, read_base_matrices, read_pose_curves, system_obstacles
from .strands import PROPERTY_GROUP, AnimatedValues, frames_per_second, read_settings

log = logging.getLogger(__name__)

_runtimes: dict[int, StrandSystemRuntime] = {}
# Objects whose input could not be read, by session_uid: (input fingerprint then, message). The
# frame handler asks for another read only once the curves change, not on every frame.
_read_failures: dict[int, tuple[str, str]] = {}
_refresh_scheduled = False
# While set (settings_changed_together), background Blender leaves outdated systems to be read
# once at the end rather than at every setting.
_reads_deferred = False

BACKEND_LABELS = {"numpy": "NumPy (CPU)", "cupy": "CuPy (NVIDIA GPU)"}


@functools.cache
def _backends() -> tuple[tuple[str, str], ...]:
    # Asking for CuPy imports it and queries the driver: once per session is enough.
    return tuple(available_backends().items())


def backend_items() -> list[tuple[str, str, str, int]]:
    """Enum items of the backend selector; each says whether this machine can run it."""
    items = []
    for index, (name, reason) in enumerate(_backends()):
        label = BACKEND_LABELS.get(name, name)
        description = "Available on this machine" if not reason else f"Unavailable: {reason}"
        items.append((name, label if not reason else f"{label} (unavailable)", description, index))
    return items


def backend_unavailable_reason(name: str) -> str:
    """Why a backend cannot run here ("" if it can)."""
    return dict(_backends()).get(name, f"unknown backend {name!r}")


def is_strand_system(ob: bpy.types.Object | None) -> bool:
    """Whether ``ob`` carries a strand system."""
    return (
        ob is not None and ob.type in STRAND_OBJECT_TYPES and getattr(ob, PROPERTY_GROUP).is_system
    )


def runtime(ob: bpy.types.Object) -> StrandSystemRuntime | None:
    """The in-memory state of ``ob``'s strand system, if it has been read."""
    return _runtimes.get(ob.session_uid)


def _requested_range(ob: bpy.types.Object, scene: bpy.types.Scene) -> tuple[int, int]:
    # A new system simulates the scene's frame range unless a script chose one beforehand.
    props = getattr(ob, PROPERTY_GROUP)
    start = props.frame_start if props.is_property_set("frame_start") else scene.frame_start
    end = props.frame_end if props.is_property_set("frame_end") else scene.frame_end
    return start, end


def _built_runtime(
    ob: bpy.types.Object, scene: bpy.types.Scene, prepared: PreparedInput
) -> StrandSystemRuntime:
    settings = replace(
        read_settings(ob, scene), frame_start=prepared.frame_start, frame_end=prepared.frame_end
    )
    state = StrandSystemRuntime(prepared)
    state.build(settings, AnimatedValues(ob))
    return state


def _prepare_and_build(
    scene: bpy.types.Scene,
    view_layer: bpy.types.ViewLayer,
    requests: list[tuple[bpy.types.Object, int, int]],
) -> dict[str, StrandSystemRuntime]:
    """Read and validate every requested object; raise one error listing all problems."""
    prepared, errors = prepare_inputs(scene, view_layer, requests)
    built = {}
    for ob, _start, _end in requests:
        if ob.name in errors:
            continue
        try:
            built[ob.name] = _built_runtime(ob, scene, prepared[ob.name])
        except StrandError as error:
            # One line per object at fault, each naming its object.
            named = str(error).startswith(f"object {ob.name!r}")
            errors[ob.name] = str(error) if named else f"object {ob.name!r}: {error}"
    if errors:
        raise SceneInputError(
            "\n".join(errors[ob.name] for ob, _, _ in requests if ob.name in errors)
        )
    return built


def read_for_bake(
    scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, objects: list[bpy.types.Object]
) -> dict[str, StrandSystemRuntime]:
    """Fresh runtimes of ``objects``' strand systems, read and built now, off to the side.

    The live preview's runtimes are left alone. A fresh simulation from the start frame gives
    exactly the frames live playback gives, whatever frames were previewed before and in
    whatever order. Raises :class:`StrandError` (one line per object at fault).
    """
    requests = []
    for ob in objects:
        props = getattr(ob, PROPERTY_GROUP)
        requests.append((ob, props.frame_start, props.frame_end))
    built = _prepare_and_build(scene, view_layer, requests)
    # The input reads now: a failure recorded when it last did not is past (in background
    # Blender nothing else would clear it from the status).
    for ob in objects:
        _read_failures.pop(ob.session_uid, None)
    return built


def add_strand_systems(
    scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, objects: list[bpy.types.Object]
) -> list[bpy.types.Object]:
    """Turn Curve/Curves objects into strand systems, each with its preview object.

    Every object is read and its strand model built before anything is written, so on error
    (:class:`StrandError`, one line per object at fault) the scene is left as it was.
    Objects that already are strand systems are left alone. Returns the objects added.
    """
    new = [ob for ob in objects if not is_strand_system(ob)]
    for ob in new:
        if ob.type not in STRAND_OBJECT_TYPES:
            raise SceneInputError(
                f"object {ob.name!r} is a {ob.type.title()} object; strands are made from Curve "
                "and Curves (hair) objects"
            )
    check_preview_support()
    requests = [(ob, *_requested_range(ob, scene)) for ob in new]
    # A new system steps per second of animation, so that its motion does not change with the
    # frame rate (the property's default, per frame, is what files made before it had).
    for ob in new:
        getattr(ob, PROPERTY_GROUP).substep_unit = "SECOND"
    try:
        built = _prepare_and_build(scene, view_layer, requests)
    except Exception:
        for ob in new:
            getattr(ob, PROPERTY_GROUP).property_unset("substep_unit")
        raise
    for ob, start, end in requests:
        state = built[ob.name]
        props = getattr(ob, PROPERTY_GROUP)
        props.frame_start, props.frame_end = start, end
        props.is_system = True
        props.enabled = True
        props.preview_object = create_preview(
            ob,
            state.layout.point_counts,
            state.point_radius,
            state.rest_points(),
            surface_binding(ob, state.prepared.attachment),
            bpy.context.evaluated_depsgraph_get(),
        )
        # The preview renders the simulation with the curves' materials: the curves themselves,
        # still in their drawn shape, would render beside it.
        ob.hide_render = True
        _runtimes[ob.session_uid] = state
    depsgraph = bpy.context.evaluated_depsgraph_get()
    for ob in new:
        update_object(scene, depsgraph, ob)
    return new


def remove_strand_system(ob: bpy.types.Object) -> None:
    """Delete the system's preview object and runtime, reset its settings and render the curves
    again."""
    props = getattr(ob, PROPERTY_GROUP)
    if props.preview_object is not None:
        remove_preview(props.preview_object)
    ob.hide_render = False
    _runtimes.pop(ob.session_uid, None)
    _read_failures.pop(ob.session_uid, None)
    ob.property_unset(PROPERTY_GROUP)


def free_cache(
    scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer, ob: bpy.types.Object
) -> None:
    """Forget simulated frames and re-read the input (curves, base animation) now.

    Recreates the preview object if it was deleted. The preview shows the rest shape until the
    next frame change simulates again. On error nothing changes.
    """
    props = getattr(ob, PROPERTY_GROUP)
    requests = [(ob, props.frame_start, props.frame_end)]
    try:
        state = _prepare_and_build(scene, view_layer, requests)[ob.name]
    except StrandError as error:
        _read_failures[ob.session_uid] = (input_fingerprint(ob), str(error))
        raise
    _read_failures.pop(ob.session_uid, None)
    _runtimes[ob.session_uid] = state
    _show(ob, state, state.rest_points())


def reset_to_rest(ob: bpy.types.Object) -> None:
    """Forget simulated frames and show the rest shape (the input is not re-read)."""
    state = runtime(ob)
    if state is None or state.layout is None:
        raise SceneInputError(
            f"object {ob.name!r}: its strand system has not been read yet; use Free Cache"
        )
    state.free_frames()
    _show(ob, state, state.rest_points())


def _show(ob: bpy.types.Object, state: StrandSystemRuntime, points) -> None:
    """Show ``points`` on the preview, recreating it if it was deleted."""
    props = getattr(ob, PROPERTY_GROUP)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    if props.preview_object is None:
        props.preview_object = create_preview(
            ob,
            state.layout.point_counts,
            state.point_radius,
            points,
            surface_binding(ob, state.prepared.attachment),
            depsgraph,
        )
    else:
        _write_preview(ob, state, points, depsgraph)


def _write_preview(
    ob: bpy.types.Object, state: StrandSystemRuntime, points, depsgraph: bpy.types.Depsgraph
) -> None:
    """Show ``points`` (world) on the existing preview, bound to the surface as the system's
    attachment says."""
    write_points(
        getattr(ob, PROPERTY_GROUP).preview_object,
        state.layout.point_counts,
        state.point_radius,
        points,
        surface_binding(ob, state.prepared.attachment),
        depsgraph,
    )


def add_child_hair(
    scene: bpy.types.Scene, ob: bpy.types.Object, children_per_guide: float
) -> bpy.types.Object:
    """A child-hair object growing about ``children_per_guide`` render hairs per simulated
    guide of ``ob``'s strand system (:mod:`.children`): from its hair bake if it has one, else
    from its live preview. Raises :class:`SceneInputError` (nothing created) where the system is
    not hair on a surface with a UV map."""
    state = runtime(ob)
    if state is None:
        raise SceneInputError(f"object {ob.name!r}: its strand system has not been read yet")
    binding = surface_binding(ob, state.prepared.attachment)
    if binding is None:
        raise SceneInputError(
            f"object {ob.name!r}: child hair grows on a surface, and these strands have none "
            "(a Curves object whose Surface is a mesh)"
        )
    if binding.uv is None:
        named = f" {ob.data.surface_uv_map!r}" if ob.data.surface_uv_map else ""
        raise SceneInputError(
            f"object {ob.name!r}: its surface {binding.surface.name!r} has no UV map{named}, "
            "which child hair needs to place its roots"
        )
    if not children_per_guide > 0.0:
        raise SceneInputError(f"object {ob.name!r}: Children per Guide must be above 0")
    baked = baked_objects(ob, HAIR)
    guides = baked[0] if baked else getattr(ob, PROPERTY_GROUP).preview_object
    if guides is None:
        raise SceneInputError(
            f"object {ob.name!r}: its preview object was deleted: Free Cache recreates it"
        )
    roots = np.array([points[0] for points in state.prepared.drawn.polylines])
    # As thick as the first guide, root and tip.
    first = state.layout.point_counts[0]
    radius = (float(state.point_radius[0]), float(state.point_radius[first - 1]))
    result = children.add_child_hair(
        ob, guides, binding.surface, binding.uv_map, roots, radius, children_per_guide
    )
    # Guides made before they were bound to the surface (an older file) are bound, and shown
    # in their new space, now.
    bind(guides, binding)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    if baked:
        apply_hair_caches(scene, depsgraph)
    else:
        update_object(scene, depsgraph, ob)
    return result


def status(ob: bpy.types.Object) -> tuple[str, str]:
    """A one-line cache status and an icon name for the panel."""
    state = runtime(ob)
    props = getattr(ob, PROPERTY_GROUP)
    failure = _read_failures.get(ob.session_uid)
    if failure is not None:
        return failure[1], "ERROR"
    if state is None:
        return "Input not read yet: Free Cache reads it", "ERROR"
    if state.error:
        return state.error, "ERROR"
    if state.stale:
        return f"Outdated: {state.stale}", "ERROR"
    if props.preview_object is None:
        return "The preview object was deleted: Free Cache recreates it", "ERROR"
    if is_baked(ob):
        for baked in baked_objects(ob, HAIR):
            problem = cache_problem(baked)
            if problem:
                return f"Baked, but {baked.name} cannot play: its {problem}", "ERROR"
        return "Baked: the bake plays, the live preview is hidden (Free Bake shows it)", "INFO"
    if not props.enabled:
        return "Simulation off: the preview shows the rest shape", "INFO"
    if not state.frames:
        return f"Nothing cached: simulates from frame {state.prepared.frame_start}", "INFO"
    frames = sorted(state.frames)
    size = state.cached_bytes()
    memory = f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 2**10:.0f} kB"
    cached = f"{len(frames)} frames cached ({frames[0]}–{frames[-1]}), {memory} in memory"
    problems = [line for line in (state.fallback_summary(), state.trailing_summary()) if line]
    if problems:
        return "; ".join([cached, *problems]), "ERROR"
    return cached, "INFO"


def obstacle_names(ob: bpy.types.Object) -> list[str]:
    """Names of the obstacle objects the strand system collides with, as last read."""
    state = runtime(ob)
    return [] if state is None else list(state.prepared.obstacles.names)


def ignored_fields(ob: bpy.types.Object) -> list[str]:
    """Force-field objects in reach of the strand system that it does not read, with why."""
    state = runtime(ob)
    if state is None:
        return []
    return sorted({name for fields in state.prepared.fields for name in fields.ignored})


def parameters_changed(ob: bpy.types.Object) -> None:
    """A strand parameter changed: simulated frames no longer hold."""
    state = runtime(ob)
    if state is not None:
        state.free_frames()


def input_changed(ob: bpy.types.Object, reason: str) -> None:
    """A setting that decides what is sampled from the scene changed (``reason`` says what):
    sample it again. Called from the settings' updates, never from a frame handler."""
    state = runtime(ob)
    if state is None:
        return
    state.stale = reason
    state.free_frames()
    if not bpy.app.background:
        request_refresh()
        return
    # Background Blender runs no timer: read it again now, so that a script's next frame
    # change simulates with the new setting rather than nothing. A setting that fails to read
    # (a frame range half set) leaves the system outdated, which the frame change reports.
    context = bpy.context
    if _reads_deferred or context.scene is None or context.view_layer is None:
        return
    with contextlib.suppress(StrandError):
        free_cache(context.scene, context.view_layer, ob)


@contextlib.contextmanager
def settings_changed_together(
    scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer
) -> Iterator[None]:
    """Set several settings of strand systems at once: in background Blender the systems they
    outdate are read again once, at the end, not at every setting (nor between two settings
    that are only valid together, such as a frame range's start and end)."""
    global _reads_deferred
    deferred, _reads_deferred = _reads_deferred, True
    try:
        yield
    finally:
        _reads_deferred = deferred
    if bpy.app.background and not deferred:
        for problem in refresh(scene, view_layer):
            log.warning("Oriented Strands: %s", problem)


def obstacles_setting_changed(ob: bpy.types.Object) -> None:
    """The system's *Collisions* or *Obstacles* setting was set: sample again, unless it still
    collides with the obstacles it was read with (a script setting it to its value)."""
    state = runtime(ob)
    if state is not None and not state.stale:
        obstacles = system_obstacles(bpy.context.scene, ob)
        if obstacle_fingerprint(obstacles) == state.prepared.obstacle_fingerprint:
            return
    input_changed(ob, "the obstacles changed")


def enabled_changed(ob: bpy.types.Object) -> None:
    """Simulation switched on or off: drop frames and show the rest shape until the next frame."""
    state = runtime(ob)
    if state is not None and state.layout is not None:
        state.free_frames()
        _show(ob, state, state.rest_points())


def _stale_reason(
    ob: bpy.types.Object,
    scene: bpy.types.Scene,
    depsgraph: bpy.types.Depsgraph,
    state: StrandSystemRuntime,
) -> str:
    """Why the sampled input no longer matches the scene, or "" if it does."""
    prepared, props = state.prepared, getattr(ob, PROPERTY_GROUP)
    if input_fingerprint(ob) != prepared.fingerprint:
        return "the curves or their modifiers were edited"
    if (props.frame_start, props.frame_end) != (prepared.frame_start, prepared.frame_end):
        return "the frame range changed"
    if frames_per_second(scene) != prepared.fps:
        return "the scene's frame rate changed"
    obstacles = system_obstacles(scene, ob)
    if obstacle_fingerprint(obstacles) != prepared.obstacle_fingerprint:
        return "the obstacles changed"
    frame = scene.frame_current
    if scene.frame_subframe == 0 and prepared.frame_start <= frame <= prepared.frame_end:
        if prepared.bases_changed(frame, read_base_matrices(ob, prepared.attachment, depsgraph)):
            return "the animation that carries the roots changed"
        if prepared.reference_changed(frame, reference_matrix(ob, depsgraph)):
            return "the animation of the local-dynamics reference changed"
        if prepared.obstacles_moved(frame, obstacle_matrices(obstacles, depsgraph)):
            return "the animation of an obstacle changed"
        if prepared.pose_changed(frame, read_pose_curves(ob, depsgraph)):
            return "the pose object or its animation changed"
        if prepared.pin_changed(frame, pin_matrix(ob, depsgraph)):
            return "the pin object or its animation changed"
        fields = read_scene_fields(scene, props.field_collection, depsgraph)
        if fields != prepared.fields[frame - prepared.frame_start]:
            return "a force field changed"
    return ""


def update_object(
    scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph, ob: bpy.types.Object
) -> None:
    """Show ``ob``'s strands at the scene's current frame, simulating up to it if needed.

    Called by the frame handler. Problems are recorded on the runtime and shown by the panel
    (and logged); the handler never raises into Blender's frame change.
    """
    props = getattr(ob, PROPERTY_GROUP)
    if is_baked(ob):
        # The bake plays; the hidden preview does not simulate.
        return
    state = runtime(ob)
    if state is None:
        _request_read(ob)
        return
    try:
        if not state.stale:
            state.stale = _stale_reason(ob, scene, depsgraph, state)
        if state.stale:
            if state.frames:
                state.free_frames()
            _request_read(ob)
            if bpy.app.background:
                # No timer re-reads it there: say so once, where a script's log shows it.
                message = (
                    f"outdated ({state.stale}): no frame is simulated until "
                    "bpy.ops.oriented_strands.free_cache() reads the scene again"
                )
                if message != state.error:
                    log.warning("Oriented Strands, object %r: %s", ob.name, message)
                    state.error = message
            return
        settings = read_settings(ob, scene)
        animated = AnimatedValues(ob)
        state.build(settings, animated)
        if not props.enabled:
            points = state.rest_points()
        else:
            points = state.points_at(scene.frame_current, settings, animated)
    except StrandError as error:
        message = str(error)
        if state.failed_frame is not None:
            message = f"Stopped at frame {state.failed_frame}: {message}"
        if message != state.error:
            log.warning("Oriented Strands, object %r: %s", ob.name, message)
            state.error = message
        return
    if props.preview_object is not None:
        _write_preview(ob, state, points, depsgraph)


def update_scene(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Update every strand system of the scene (the frame handler's body)."""
    for ob in scene.objects:
        if is_strand_system(ob):
            update_object(scene, depsgraph, ob)
    alive = {ob.session_uid for ob in bpy.data.objects}
    for uid in [uid for uid in _runtimes if uid not in alive]:
        del _runtimes[uid]


def refresh(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer) -> list[str]:
    """Re-read every strand system of the scene that was never read or is outdated.

    Runs outside frame handlers (it samples with ``frame_set``): after a file is loaded, and in
    the UI from a timer the frame handler schedules. Systems whose last read failed are skipped
    until their curves change (or Free Cache is pressed). Returns the problems met, one per
    object; they are also shown in each system's status.
    """
    problems = []
    for ob in [ob for ob in scene.objects if _needs_read(ob)]:
        try:
            free_cache(scene, view_layer, ob)
        except StrandError as error:
            problems.append(str(error))
    return problems


def _needs_read(ob: bpy.types.Object) -> bool:
    if not is_strand_system(ob):
        return False
    state = runtime(ob)
    if state is not None and not state.stale:
        return False
    failure = _read_failures.get(ob.session_uid)
    return failure is None or failure[0] != input_fingerprint(ob)


def _request_read(ob: bpy.types.Object) -> None:
    if _needs_read(ob):
        request_refresh()


def request_refresh() -> None:
    """In the UI, re-read outdated systems soon, outside the frame handler.

    Background Blender runs no timers: there a system's settings re-read it when they are set
    (:func:`input_changed`), and scripts call ``bpy.ops.oriented_strands.free_cache`` after
    editing curves or the animation that carries them (the status says so).
    """
    global _refresh_scheduled
    if bpy.app.background or _refresh_scheduled:
        return
    _refresh_scheduled = True
    bpy.app.timers.register(_refresh_from_timer, first_interval=0.0)


def _refresh_from_timer() -> None:
    global _refresh_scheduled
    context = bpy.context
    try:
        if context.scene is None or context.view_layer is None:
            return None
        scene = context.scene
        targets = [ob for ob in scene.objects if _needs_read(ob)]
        for problem in refresh(scene, context.view_layer):
            log.warning("Oriented Strands: %s", problem)
        # Show the re-read systems at the current frame through the ordinary frame handler.
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
        for ob in targets:
            state = runtime(ob)
            if state is not None and state.stale:
                # Sampled and live evaluation disagree (e.g. a base driven by another
                # simulation): reading again would only loop.
                _read_failures[ob.session_uid] = (
                    input_fingerprint(ob),
                    f"Outdated right after reading it ({state.stale}): what carries the roots "
                    "does not evaluate the same way twice",
                )
    finally:
        # Requests made by the frame change above are answered by this very run.
        _refresh_scheduled = False
    return None


def forget_all() -> None:
    """Drop every runtime (a new file was loaded, or the extension is being disabled)."""
    global _refresh_scheduled
    _runtimes.clear()
    _read_failures.clear()
    if _refresh_scheduled and bpy.app.timers.is_registered(_refresh_from_timer):
        bpy.app.timers.unregister(_refresh_from_timer)
    _refresh_scheduled = False
