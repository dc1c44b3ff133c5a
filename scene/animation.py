"""Reading keyframed values at any frame without changing the scene's frame.

The frame handler must step a simulation through frames other than the current one (a jump from
frame 10 to 40 steps 11..40), so animated strand parameters are read from their F-curves
directly. Blender 4.4 introduced layered actions (F-curves live in a channelbag per slot);
earlier versions keep them on ``Action.fcurves``, which 5.0 removed.
"""

from __future__ import annotations

from collections.abc import Iterable

import bpy


def _fcurves_of(id_data: bpy.types.ID) -> Iterable[bpy.types.FCurve]:
    animation = getattr(id_data, "animation_data", None)
    action = animation.action if animation is not None else None
    if action is None:
        return ()
    slot = getattr(animation, "action_slot", None)
    if hasattr(bpy.types, "ActionChannelbag") or hasattr(bpy.types, "ActionChannelBag"):
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
