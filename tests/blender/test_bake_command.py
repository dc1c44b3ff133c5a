"""The headless entry point (`python -m oriented_strands.bake`) does what the operators do."""

import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("alembic3d")

from alembic_samples import read_positions  # noqa: E402
from scene_builders import (  # noqa: E402
    add_strand_system,
    poly_curve,
    saved_swinging_tree,
    select_only,
)

FRAMES = 8


@pytest.fixture
def tree(factory_scene, tmp_path, extension):
    return saved_swinging_tree(factory_scene, tmp_path, FRAMES)


def test_the_command_writes_the_same_files_as_the_operators(tree, tmp_path):
    farm = tmp_path / "farm"
    farm.mkdir()
    shutil.copy(tmp_path / "tree.blend", farm / "tree.blend")

    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    assert bpy.ops.oriented_strands.export_alembic_hair(filepath=str(tmp_path / "hair.abc")) == {
        "FINISHED"
    }

    # Blender's configuration goes to a temporary folder of the run's own, removed at its end.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    environment["TMPDIR"] = str(scratch)
    command = [sys.executable, "-m", "oriented_strands.bake", str(farm / "tree.blend")]
    command += ["--target", "hair", "--alembic", "//hair.abc", "--save"]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    assert list(scratch.iterdir()) == []
    assert "frame 8 (8/8)" in done.stdout
    assert f"wrote alembic {farm / 'hair.abc'}" in done.stdout
    assert "wrote object tree_baked_hair\n" in done.stdout

    np.testing.assert_array_equal(
        np.load(farm / "strands_cache" / "tree.npy"),
        np.load(tmp_path / "strands_cache" / "tree.npy"),
    )
    ours = read_positions(str(tmp_path / "hair.abc"))["tree_baked_hair"]
    theirs = read_positions(str(farm / "hair.abc"))["tree_baked_hair"]
    np.testing.assert_array_equal(theirs[0], ours[0])
    np.testing.assert_array_equal(theirs[1], ours[1])

    # The saved file holds the baked object, playing its cache.
    bpy.ops.wm.open_mainfile(filepath=str(farm / "tree.blend"))
    assert bpy.data.objects["tree_baked_hair"].oriented_strands_bake.frame_end == FRAMES


def test_a_frame_range_and_several_targets_in_one_run(tree, tmp_path, capsys):
    from oriented_strands import bake

    status = bake.main(
        [str(tmp_path / "tree.blend"), "--frames", "3-6", "--target", "bones"]
        + ["--target", "shape_keys", "--objects", "tree", "--save-as", str(tmp_path / "out.blend")]
    )
    assert status == 0, capsys.readouterr().err
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    keys = bpy.data.objects["tree_shape_keys"].data.shape_keys.key_blocks
    assert [k.name for k in keys] == [
        "Basis",
        "frame_0003",
        "frame_0004",
        "frame_0005",
        "frame_0006",
    ]
    assert len(bpy.data.objects["tree_rig"].data.bones) == 9


def test_a_frame_range_may_start_below_zero(tree, tmp_path, capsys):
    """``--frames -2-1`` is a range (Blender's frames may be negative), not an unknown option."""
    from oriented_strands import bake

    arguments = ["--target", "shape_keys", "--save-as", str(tmp_path / "out.blend")]
    status = bake.main([str(tmp_path / "tree.blend"), "--frames", "-2-1", *arguments])
    assert status == 0, capsys.readouterr().err
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    keys = bpy.data.objects["tree_shape_keys"].data.shape_keys.key_blocks
    assert [k.name for k in keys][1:] == ["frame_-002", "frame_-001", "frame_0000", "frame_0001"]


def test_without_save_the_baked_objects_are_said_to_live_in_this_run_only(tree, tmp_path, capsys):
    from oriented_strands import bake

    blend = tmp_path / "tree.blend"
    before = blend.read_bytes()
    assert bake.main([str(blend), "--target", "shape_keys"]) == 0
    out = capsys.readouterr().out
    assert "wrote object tree_shape_keys (in this run only: no --save)" in out
    assert blend.read_bytes() == before


def test_a_save_as_path_starting_with_slashes_is_relative_to_the_blend(tree, tmp_path, capsys):
    """``--save-as //jobs/tree.blend`` (the farm recipe of docs/baking.md) goes next to the
    baked .blend, in its ``jobs`` folder, and nowhere else."""
    from oriented_strands import bake

    (tmp_path / "jobs").mkdir()
    status = bake.main(
        [str(tmp_path / "tree.blend"), "--target", "hair", "--save-as", "//jobs/tree.blend"]
    )
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / "jobs" / "tree.blend").is_file()
    assert (tmp_path / "jobs" / "strands_cache" / "tree.npy").is_file()
    # The file is saved twice (before the bake and after it); no backup of the first is left.
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["strands_cache", "tree.blend"]


def test_saving_as_over_an_existing_file_keeps_blenders_backup_of_it(tree, tmp_path, capsys):
    """``--save-as`` over a file that exists: Blender's backup (``.blend1``) is that file, as
    when an artist saves over it, not the scene the command saved before baking."""
    from oriented_strands import bake

    target = tmp_path / "out.blend"
    earlier = bpy.data.objects.new("earlier_version", None)
    bpy.context.scene.collection.objects.link(earlier)
    bpy.ops.wm.save_as_mainfile(filepath=str(target), copy=True)
    status = bake.main([str(tmp_path / "tree.blend"), "--target", "hair", "--save-as", str(target)])
    assert status == 0, capsys.readouterr().err
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend1"))
    assert "earlier_version" in bpy.data.objects
    bpy.ops.wm.open_mainfile(filepath=str(target))
    assert "tree_baked_hair" in bpy.data.objects
    assert "earlier_version" not in bpy.data.objects


@pytest.mark.parametrize(
    ("arguments", "message", "status"),
    [
        (
            ["--objects", "trunk"],
            "no object 'trunk' in scene 'Scene'; its strand systems: 'tree'",
            1,
        ),
        (["--objects", "tree_strands"], "no strand system on the object 'tree_strands'", 1),
        (["--frames", "9-2"], "frame range '9-2' ends before it starts", 2),
        (["--frames", "start-9"], "'start-9' is not a frame range", 2),
        (["--frames", "-2--9"], "frame range '-2--9' ends before it starts", 2),
        (["--target", "bones", "--alembic", "x.abc"], "--alembic needs exactly one --target", 2),
        (["--alembic", "//missing/hair.abc"], "--alembic: no folder", 1),
        (["--save-as", "no_such_folder/tree.blend"], "--save-as: no folder", 1),
        (["--save-as", "tree.txt"], "--save-as: 'tree.txt' is not a .blend file path", 1),
    ],
)
def test_bad_requests_fail_with_a_clear_message(tree, tmp_path, capsys, arguments, message, status):
    """Malformed arguments exit 2, requests that cannot be met 1 (docs/baking.md)."""
    from oriented_strands import bake

    blend = tmp_path / "tree.blend"
    before = blend.read_bytes()
    assert bake.main([str(blend), "--target", "hair", *arguments]) == status
    assert message in capsys.readouterr().err
    assert blend.read_bytes() == before
    assert not (tmp_path / "strands_cache").exists()


def test_an_alembic_path_is_checked_against_the_save_as_file_before_it_is_written(
    tree, tmp_path, capsys
):
    """With --save-as, ``//`` in --alembic is the new file's folder; a missing one fails before
    the new file is written, leaving nothing behind."""
    from oriented_strands import bake

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    arguments = ["--target", "hair", "--save-as", "//jobs/tree.blend", "--alembic", "//abc/x.abc"]
    assert bake.main([str(tmp_path / "tree.blend"), *arguments]) == 1
    assert f"--alembic: no folder {str(jobs / 'abc')!r}" in capsys.readouterr().err
    assert not list(jobs.iterdir())


def test_a_missing_file_fails_with_a_clear_message(extension, tmp_path, capsys):
    from oriented_strands import bake

    assert bake.main([str(tmp_path / "none.blend"), "--target", "hair"]) == 1
    assert "no .blend file at" in capsys.readouterr().err


def test_an_engine_failure_exits_non_zero(tree, tmp_path, capsys, monkeypatch):
    from oriented_strands import bake
    from oriented_strands.core import Simulation, SimulationDivergedError

    def diverging(self, dt, base, **inputs):
        raise SimulationDivergedError("Newton did not converge")

    monkeypatch.setattr(Simulation, "advance", diverging)
    assert bake.main([str(tmp_path / "tree.blend"), "--target", "bones"]) == 1
    assert "frame 2: Newton did not converge" in capsys.readouterr().err


def test_ctrl_c_stops_the_bake_and_leaves_the_file_as_it_was(tree, tmp_path, capsys, monkeypatch):
    """Ctrl-C during the simulation: exit status 130, one line saying so, the .blend file and
    its folder untouched."""
    from oriented_strands import bake
    from oriented_strands.core import Simulation

    blend = tmp_path / "tree.blend"
    before, listing = blend.read_bytes(), sorted(os.listdir(tmp_path))
    advance, calls = Simulation.advance, []

    def interrupted(self, dt, base, **inputs):
        calls.append(dt)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return advance(self, dt, base, **inputs)

    monkeypatch.setattr(Simulation, "advance", interrupted)
    status = bake.main([str(blend), "--target", "hair", "--alembic", "//hair.abc", "--save"])
    assert status == 130
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [
        "oriented_strands.bake: error: stopped by SIGINT; nothing was written but what is "
        "reported above"
    ]
    assert blend.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == listing


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_command_cleanly(factory_scene, tmp_path, extension, stop, status):
    """A farm manager's SIGTERM, or Ctrl-C in a terminal (SIGINT to the whole process group),
    in the middle of a long bake stepped in two worker processes: the exit status says which,
    standard error has one line and no traceback (the workers' included), the workers end, and
    the .blend file and its folder are as they were."""
    factory_scene.frame_start, factory_scene.frame_end = 1, 20000
    hair = poly_curve("hair", [[(0.01 * i, 0.0, -0.02 * k) for k in range(5)] for i in range(40)])
    assert add_strand_system(hair) == {"FINISHED"}
    hair.oriented_strands.worker_processes = 2
    blend = tmp_path / "hair.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    before, listing = blend.read_bytes(), sorted(os.listdir(tmp_path))
    environment = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    command = [sys.executable, "-m", "oriented_strands.bake", str(blend)]
    command += ["--target", "hair", "--alembic", "//hair.abc", "--save"]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        start_new_session=True,
        # Ctrl-C's default action, whatever this process inherited: a shell that starts the
        # test run in the background (`make test &`) has its children ignore SIGINT.
        preexec_fn=_default_sigint,
    )
    try:
        for line in process.stdout:
            if " ETA " in line:  # the workers are stepping
                break
        workers = _children(process.pid)
        os.killpg(process.pid, stop)
        _, errors = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == status, errors
    name = "SIGTERM" if stop == signal.SIGTERM else "SIGINT"
    assert errors.strip().splitlines() == [
        f"oriented_strands.bake: error: stopped by {name}; nothing was written but what is "
        "reported above"
    ]
    assert len(workers) == 2
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]
    assert blend.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == listing


def _children(pid):
    """The process ids whose parent is ``pid`` (Linux's /proc)."""
    children = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(entry)
    return children


def test_a_frame_range_past_the_systems_reads_the_scene_once(tree, tmp_path, monkeypatch, caplog):
    """``--frames 14-20`` on a system of frames 1–8: its start is past its old end until its end
    is set too, so the two are set together and the scene is read again once, at the end (set
    one by one, each would read it, the first a range that ends before it starts), and nothing
    is logged."""
    from oriented_strands import bake
    from oriented_strands.scene import systems

    reads = []
    prepare = systems._prepare_and_build
    monkeypatch.setattr(
        systems, "_prepare_and_build", lambda *args: reads.append(args) or prepare(*args)
    )
    with caplog.at_level("WARNING"):
        status = bake.main(
            [str(tmp_path / "tree.blend"), "--frames", "14-20", "--target", "shape_keys"]
        )
    assert status == 0
    # Opening the file reads it, then the range set together once, then the bake.
    ranges = [tuple(request[1:]) for _, _, [request] in reads]
    assert ranges == [(1, FRAMES), (14, 20), (14, 20)]
    assert not [record for record in caplog.records if "Oriented Strands" in record.getMessage()]
    keys = bpy.data.objects["tree_shape_keys"].data.shape_keys.key_blocks
    assert keys[-1].name == "frame_0020"
