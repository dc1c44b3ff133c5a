"""Bake the strand systems of a .blend file without the UI: pipelines and render farms.

With Blender as a Python module (the ``bpy`` package)::

    python -m oriented_strands.bake scene.blend --target hair --frames 1-240 \\
        --alembic //cache/hair.abc --save

Inside Blender, on the file Blender opened (``bl_ext.user_default`` is the repository an
extension installed from disk lives in)::

    blender -b scene.blend --python-exit-code 1 --python-expr "import sys; \\
        from bl_ext.user_default.oriented_strands import bake; \\
        sys.exit(bake.main(['--target', 'hair']))"

Both run the same bake and export as the operators, synchronously. The exit status is 0 on
success, 1 when the bake fails (the message says why: a missing object, a bad frame range, an
engine error), 2 for malformed arguments, and 130 or 143 when stopped by SIGINT (Ctrl-C) or
SIGTERM (a farm manager ending the job): the command then ends cleanly, its engine processes
with it, and leaves the .blend file and the caches as they were, except what it reported as
written before the signal. See ``docs/baking.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable

TARGETS = {
    "shape_keys": "SHAPE_KEYS",
    "mesh_shape_keys": "MESH_SHAPE_KEYS",
    "bones": "BONES",
    "hair": "HAIR",
}


class BakeCommandError(Exception):
    """A request this command cannot carry out; the message says what to change."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command stops as on Ctrl-C (everything it started is undone)."""


# FIRST-LAST, either of them negative (Blender's frames may be).
_FRAME_RANGE = re.compile(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*")


def _frame_range(text: str) -> tuple[int, int]:
    matched = _FRAME_RANGE.fullmatch(text)
    if matched is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a frame range such as 1-240")
    first, last = int(matched[1]), int(matched[2])
    if last < first:
        raise argparse.ArgumentTypeError(f"frame range {text!r} ends before it starts")
    return first, last


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m oriented_strands.bake",
        description="Bake strand systems of a .blend file to shape keys, bones or hair curves "
        "and export Alembic.",
    )
    parser.add_argument(
        "blend", nargs="?", help="the .blend file to open (default: the file Blender has open)"
    )
    parser.add_argument(
        "--target",
        action="append",
        choices=sorted(TARGETS),
        required=True,
        help="what to bake to; repeat for several (one simulation feeds them all)",
    )
    parser.add_argument(
        "--objects",
        help="comma-separated strand-system objects to bake (default: every one in the scene)",
    )
    parser.add_argument(
        "--frames",
        type=_frame_range,
        help="simulation range FIRST-LAST, set on every baked system (default: each system's)",
    )
    parser.add_argument(
        "--alembic",
        help="write the bake to this Alembic file (// is the folder of the .blend, or of the "
        "--save-as file); one --target only",
    )
    saving = parser.add_mutually_exclusive_group()
    saving.add_argument("--save", action="store_true", help="save the .blend file in place")
    saving.add_argument(
        "--save-as",
        metavar="PATH",
        help="save the .blend file here (before baking, so hair caches are written next to it)",
    )
    return parser


def _systems(bpy, scene_module, names: str | None) -> list:
    scene = bpy.context.scene
    systems = [ob for ob in scene.objects if scene_module.is_strand_system(ob)]
    if names is None:
        if not systems:
            raise BakeCommandError(f"scene {scene.name!r} has no strand systems")
        return systems
    chosen = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        ob = scene.objects.get(name)
        if ob is None or not scene_module.is_strand_system(ob):
            available = ", ".join(repr(s.name) for s in systems) or "none"
            what = "no object" if ob is None else "no strand system on the object"
            raise BakeCommandError(
                f"{what} {name!r} in scene {scene.name!r}; its strand systems: {available}"
            )
        chosen.append(ob)
    return chosen


def run(arguments: argparse.Namespace, wrote: Callable[[str], None]) -> None:
    """Open, bake, export and save as ``arguments`` say, telling ``wrote`` each file or object
    as soon as it is written.

    Raises :class:`BakeCommandError`, the extension's ``StrandError`` or ``OSError``.
    """
    import bpy

    from . import scene

    targets = [TARGETS[t] for t in dict.fromkeys(arguments.target)]
    # A ``//`` path is relative to the .blend being baked, as in Blender.
    blend = os.path.abspath(arguments.blend) if arguments.blend else bpy.data.filepath
    save_as = None
    if arguments.save_as:
        save_as = arguments.save_as
        if save_as.startswith("//"):
            save_as = os.path.join(os.path.dirname(blend), save_as[2:])
        save_as = os.path.abspath(save_as)
        if not save_as.endswith(".blend"):
            raise BakeCommandError(f"--save-as: {arguments.save_as!r} is not a .blend file path")
        folder = os.path.dirname(save_as)
        if not os.path.isdir(folder):
            raise BakeCommandError(f"--save-as: no folder {folder!r} to save the file in")
    if arguments.alembic:
        # Checked before anything is written or baked, so a typo leaves nothing behind. A
        # ``//`` path is relative to the file the bake is saved into: with --save-as, the new one.
        saved_into = os.path.dirname(save_as or blend)
        folder = os.path.dirname(bpy.path.abspath(arguments.alembic, start=saved_into)) or "."
        if not os.path.isdir(folder):
            raise BakeCommandError(f"--alembic: no folder {folder!r} to write into")
    if arguments.blend:
        if not os.path.isfile(arguments.blend):
            raise BakeCommandError(f"no .blend file at {arguments.blend!r}")
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(arguments.blend))
    elif not bpy.data.filepath:
        raise BakeCommandError("give the .blend file to bake")
    if save_as:
        _saving(save_as, lambda: bpy.ops.wm.save_as_mainfile(filepath=save_as))
        wrote(f"blend  {save_as} (the scene before the bake)")
    context = bpy.context
    objects = _systems(bpy, scene, arguments.objects)
    if arguments.frames:
        with scene.settings_changed_together(context.scene, context.view_layer):
            for ob in objects:
                ob.oriented_strands.frame_start, ob.oriented_strands.frame_end = arguments.frames
    baked = scene.bake_systems(context.scene, context.view_layer, objects, targets)
    saving = arguments.save or arguments.save_as
    for ob in baked:
        wrote(f"object {ob.name}" + ("" if saving else " (in this run only: no --save)"))
        if ob.oriented_strands_bake.cache_file:
            wrote(f"cache  {bpy.path.abspath(ob.oriented_strands_bake.cache_file)}")
    if arguments.alembic:
        scene.export_alembic(
            context.scene, context.view_layer, objects, targets[0], arguments.alembic
        )
        wrote(f"alembic {bpy.path.abspath(arguments.alembic)}")
    if saving:
        files = bpy.context.preferences.filepaths
        versions = files.save_version
        if save_as:
            # Over the pre-bake file this command wrote itself: Blender's backup of it (.blend1)
            # would only be that file, in place of the user's own backup, if any.
            files.save_version = 0
        try:
            _saving(bpy.data.filepath, bpy.ops.wm.save_mainfile)
        finally:
            files.save_version = versions
        wrote(f"blend  {bpy.data.filepath}")


def _saving(path: str, save: Callable[[], object]) -> None:
    """``save()`` the open file to ``path``; Blender's refusal (no permission, a full disk) as a
    :class:`BakeCommandError` of one line."""
    try:
        save()
    except RuntimeError as error:
        lines = str(error).strip().splitlines() or ["no reason given"]
        raise BakeCommandError(f"cannot save {path!r}: {lines[-1]}") from None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # A range that starts below zero (-5-10) reads as an option to argparse: joined to its
    # option, it is a value.
    for index in range(len(argv) - 1):
        if argv[index] == "--frames" and argv[index + 1].startswith("-"):
            argv[index : index + 2] = [f"--frames={argv[index + 1]}"]
            break
    try:
        arguments = parser.parse_args(argv)
        if arguments.alembic and len(dict.fromkeys(arguments.target)) != 1:
            parser.error(
                "--alembic needs exactly one --target: Blender's exporter writes shape-keyed "
                "curves as meshes and hair as curves, never both in one file"
            )
    except SystemExit as exit_:
        return int(exit_.code or 0)
    # Blender keeps its configuration where this points when it starts (bpy's import): as a
    # module, never touch the user's real one; the folder goes when the run ends. Inside Blender,
    # or where the caller chose one, it is left alone.
    configuration = None
    if "bpy" not in sys.modules and "BLENDER_USER_RESOURCES" not in os.environ:
        configuration = tempfile.TemporaryDirectory(prefix="oriented-strands-")
        os.environ["BLENDER_USER_RESOURCES"] = configuration.name
    # SIGTERM stops the command as Ctrl-C does, for as long as it runs (signals reach the main
    # thread only; elsewhere the caller's handling stands).
    handling = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if handling else None
    try:
        return _run_in_blender(arguments)
    finally:
        if handling:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if configuration is not None:
            del os.environ["BLENDER_USER_RESOURCES"]
            configuration.cleanup()


def _terminate(_signal_number: int, _frame: object) -> None:
    raise Terminated()


def _run_in_blender(arguments: argparse.Namespace) -> int:
    """Bake as ``arguments`` ask, registering the extension if Blender has not; the exit
    status."""
    import bpy

    from . import register, unregister
    from .core import StrandError

    # Inside Blender the installed extension is registered already; as a module it is not.
    registered_here = not hasattr(bpy.types.Object, "oriented_strands_bake")
    if registered_here:
        register()

    def wrote(line: str) -> None:
        print(f"oriented_strands.bake: wrote {line}", flush=True)

    try:
        run(arguments, wrote)
    except (BakeCommandError, StrandError, OSError) as error:
        for line in str(error).splitlines():
            print(f"oriented_strands.bake: error: {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interruption:
        name = "SIGTERM" if isinstance(interruption, Terminated) else "SIGINT"
        print(
            f"oriented_strands.bake: error: stopped by {name}; nothing was written but what is "
            "reported above",
            file=sys.stderr,
        )
        return 128 + (signal.SIGTERM if name == "SIGTERM" else signal.SIGINT)
    finally:
        if registered_here:
            unregister()
    return 0


if __name__ == "__main__":
    sys.exit(main())
