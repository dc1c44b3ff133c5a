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
engine error) and 2 for malformed arguments. See ``docs/baking.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

TARGETS = {
    "shape_keys": "SHAPE_KEYS",
    "mesh_shape_keys": "MESH_SHAPE_KEYS",
    "bones": "BONES",
    "hair": "HAIR",
}


class BakeCommandError(Exception):
    """A request this command cannot carry out; the message says what to change."""


def _frame_range(text: str) -> tuple[int, int]:
    try:
        first, last = (int(part) for part in text.split("-", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a frame range such as 1-240") from None
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
        help="write the bake to this Alembic file (// is the .blend's folder); one --target only",
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


def run(arguments: argparse.Namespace) -> list[str]:
    """Open, bake, export and save as ``arguments`` say; return what was written.

    Raises :class:`BakeCommandError`, the extension's ``StrandError`` or ``OSError``.
    """
    import bpy

    from . import scene

    targets = [TARGETS[t] for t in dict.fromkeys(arguments.target)]
    if arguments.alembic and len(targets) != 1:
        raise BakeCommandError(
            "--alembic needs exactly one --target: Blender's exporter writes shape-keyed curves "
            "as meshes and hair as curves, never both in one file"
        )
    if arguments.blend:
        if not os.path.isfile(arguments.blend):
            raise BakeCommandError(f"no .blend file at {arguments.blend!r}")
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(arguments.blend))
    elif not bpy.data.filepath:
        raise BakeCommandError("give the .blend file to bake")
    written = []
    if arguments.save_as:
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(arguments.save_as))
    if arguments.alembic:
        # Checked before baking, so a typo costs no simulation and leaves no caches behind.
        folder = os.path.dirname(bpy.path.abspath(arguments.alembic)) or "."
        if not os.path.isdir(folder):
            raise BakeCommandError(f"--alembic: no folder {folder!r} to write into")
    context = bpy.context
    objects = _systems(bpy, scene, arguments.objects)
    if arguments.frames:
        for ob in objects:
            ob.oriented_strands.frame_start, ob.oriented_strands.frame_end = arguments.frames
    baked = scene.bake_systems(context.scene, context.view_layer, objects, targets)
    written += [f"object {ob.name}" for ob in baked]
    written += [
        f"cache  {bpy.path.abspath(ob.oriented_strands_bake.cache_file)}"
        for ob in baked
        if ob.oriented_strands_bake.cache_file
    ]
    if arguments.alembic:
        scene.export_alembic(
            context.scene, context.view_layer, objects, targets[0], arguments.alembic
        )
        written.append(f"alembic {bpy.path.abspath(arguments.alembic)}")
    if arguments.save or arguments.save_as:
        bpy.ops.wm.save_mainfile()
        written.append(f"blend  {bpy.data.filepath}")
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    # Blender keeps its configuration where this points when it starts (bpy's import): as a
    # module, never touch the user's real one; the folder goes when the run ends. Inside Blender,
    # or where the caller chose one, it is left alone.
    configuration = None
    if "bpy" not in sys.modules and "BLENDER_USER_RESOURCES" not in os.environ:
        configuration = tempfile.TemporaryDirectory(prefix="oriented-strands-")
        os.environ["BLENDER_USER_RESOURCES"] = configuration.name
    try:
        return _run_in_blender(arguments)
    finally:
        if configuration is not None:
            del os.environ["BLENDER_USER_RESOURCES"]
            configuration.cleanup()


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
    try:
        for line in run(arguments):
            print(f"oriented_strands.bake: wrote {line}")
    except (BakeCommandError, StrandError, OSError) as error:
        for line in str(error).splitlines():
            print(f"oriented_strands.bake: error: {line}", file=sys.stderr)
        return 1
    finally:
        if registered_here:
            unregister()
    return 0


if __name__ == "__main__":
    sys.exit(main())
