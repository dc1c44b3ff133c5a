"""Keyframes read at any frame without changing the scene's frame, and written in bulk.

The frame handler must step a simulation through frames other than the current one (a jump from
frame 10 to 40 steps 11..40), so animated strand parameters are read from their F-curves
directly. Bakes write whole F-curves at once (``keyframe_points.add`` + ``foreach_set``), never
one ``keyframe_insert`` per key. Blender 4.4 introduced layered actions (F-curves live in a
channelbag per slot); earlier versions keep them on ``Action.fcurves``, which 5.0 removed. Both
are handled by asking which API is present, not by version number.
"""

from __future__ import annotations

from collections.abc import Iterable

import bpy
import numpy as np


def _has_layered_actions() -> bool:
    return hasattr(bpy.types, "ActionChannelbag") or hasattr(bpy.types, "ActionChannelBag")


def _fcurves_of(id_data: bpy.types.ID) -> Iterable[bpy.types.FCurve]:
    animation = getattr(id_data, "animation_data", None)
    action = animation.action if animation is not None else None
    if action is None:
        return ()
    slot = getattr(animation, "action_slot", None)
    if _has_layered_actions():
        from bpy_extras import anim_utils

        if slot is None:
            return ()
        channelbag = anim_utils.action_get_channelbag_for_slot(action, slot)
        return channelbag.fcurves if channelbag is not None else ()
    return action.fcurves


def fcurves_under(id_data: bpy.types.ID, prefix: str) -> dict[tuple[str, int], bpy.types.FCurve]:
    """Enabled F-curves of ``id_data``'s active action whose data path starts with ``prefix``,
    keyed by ``(property name after the prefix, array index)``.

    NLA strips and drivers are not evaluated here; see ``docs/user-guide.md``.
    """
    curves = {}
    for fcurve in _fcurves_of(id_data):
        if fcurve.data_path.startswith(prefix) and not fcurve.mute:
            curves[(fcurve.data_path[len(prefix) :], fcurve.array_index)] = fcurve
    return curves


def keyframes_fingerprint(curves: dict[tuple[str, int], bpy.types.FCurve]) -> tuple:
    """Everything about the F-curves that changes their values, to notice edited keys."""
    prints = []
    for key in sorted(curves):
        fcurve = curves[key]
        points = tuple(
            (*point.co, *point.handle_left, *point.handle_right, point.interpolation)
            for point in fcurve.keyframe_points
        )
        prints.append((key, fcurve.extrapolation, len(fcurve.modifiers), points))
    return tuple(prints)


def new_action(id_data: bpy.types.ID, name: str) -> tuple[bpy.types.Action, object]:
    """A new action assigned to ``id_data``, and the F-curve collection to fill.

    Layered actions (4.4+): a slot for ``id_data`` and its channelbag's ``fcurves``; earlier
    versions: ``action.fcurves``. The caller owns the action (removes it on failure).
    """
    action = bpy.data.actions.new(name)
    animation = id_data.animation_data or id_data.animation_data_create()
    animation.action = action
    if not _has_layered_actions():
        return action, action.fcurves
    from bpy_extras import anim_utils

    slot = action.slots.new(id_type=id_data.id_type, name=id_data.name)
    animation.action_slot = slot
    return action, anim_utils.action_ensure_channelbag_for_slot(action, slot).fcurves


_LINEAR = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value


def add_fcurve(fcurves: object, data_path: str, index: int, frames: np.ndarray, values) -> None:
    """One F-curve with a linearly interpolated key at each of ``frames``, written in bulk."""
    fcurve = fcurves.new(data_path, index=index)
    points = fcurve.keyframe_points
    points.add(len(frames))
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0], co[:, 1] = frames, values
    points.foreach_set("co", co.ravel())
    points.foreach_set("interpolation", np.full(len(frames), _LINEAR, dtype=np.int32))
    fcurve.update()
