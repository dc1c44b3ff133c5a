"""Bakes to shape keys, bones and hair curves match live playback and the engine, frame by frame."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    preview_points,
    saved_swinging_tree,
    scene_snapshot,
    select_only,
)

pytestmark = pytest.mark.usefixtures("extension")

FRAMES = 12


@pytest.fixture
def tree(factory_scene, tmp_path):
    return saved_swinging_tree(factory_scene, tmp_path, FRAMES)


def _live(scene, ob, frames):
    """The preview's points at each frame, visited in the given order."""
    played = {}
    for frame in frames:
        scene.frame_set(frame)
        played[frame] = preview_points(ob)
    return played


def _evaluated_points(ob):
    depsgraph = bpy.context.evaluated_depsgraph_get()
    mesh = ob.evaluated_get(depsgraph).to_mesh()
    points = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", points)
    ob.evaluated_get(depsgraph).to_mesh_clear()
    matrix = np.array(ob.matrix_world)
    return points.reshape(-1, 3) @ matrix[:3, :3].T + matrix[:3, 3]


def _hair_points(ob):
    positions = np.empty(len(ob.data.points) * 3, dtype=np.float32)
    ob.data.attributes["position"].data.foreach_get("vector", positions)
    return positions.reshape(-1, 3).astype(np.float64)


@pytest.mark.parametrize(
    ("target", "geometry"), [("shape_keys", "CURVE"), ("mesh_shape_keys", "MESH")]
)
def test_shape_keys_replay_live_playback_whatever_order_it_was_previewed(
    factory_scene, tree, target, geometry
):
    rng = np.random.default_rng(7)
    order = [int(f) for f in rng.permutation(np.arange(1, FRAMES + 1))]
    live = _live(factory_scene, tree, order)

    select_only(tree)
    assert getattr(bpy.ops.oriented_strands, f"bake_{target}")() == {"FINISHED"}
    (baked,) = [ob for ob in bpy.data.objects if ob.type == geometry and ob.name != "tree"]
    blocks = baked.data.shape_keys.key_blocks
    assert [b.name for b in blocks] == ["Basis"] + [f"frame_{f:04d}" for f in range(1, 13)]
    assert baked.name in factory_scene.collection.objects
    for frame in range(1, FRAMES + 1):
        factory_scene.frame_set(frame)
        np.testing.assert_allclose(_evaluated_points(baked), live[frame], atol=2e-6)
    # After the bake's range the last frame holds, as in live playback.
    factory_scene.frame_set(FRAMES + 5)
    np.testing.assert_allclose(_evaluated_points(baked), live[FRAMES], atol=2e-6)


def test_a_bake_at_another_time_gives_the_same_frames(factory_scene, tree):
    select_only(tree)
    bpy.ops.oriented_strands.bake_hair()
    first = np.load(bpy.path.abspath("//strands_cache/tree.npy"))
    _live(factory_scene, tree, [9, 3, 12, 1])
    tree.oriented_strands.youngs_modulus *= 2
    tree.oriented_strands.youngs_modulus /= 2
    # As a UI button calls it; background Blender runs it to completion at once.
    assert bpy.ops.oriented_strands.bake_hair("INVOKE_DEFAULT") == {"FINISHED"}
    np.testing.assert_array_equal(np.load(bpy.path.abspath("//strands_cache/tree.npy")), first)
    # Baking again replaced the first bake rather than adding a second object.
    assert [ob.name for ob in bpy.data.objects if ob.name.startswith("tree_baked")] == [
        "tree_baked_hair"
    ]


def test_hair_curves_play_their_cache_and_survive_reopening(factory_scene, tree, tmp_path):
    live = _live(factory_scene, tree, range(1, FRAMES + 1))
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    cache = tmp_path / "strands_cache" / "tree.npy"
    assert np.load(cache).shape == (FRAMES, len(live[1]), 3)
    hair = bpy.data.objects["tree_baked_hair"]
    assert hair.oriented_strands_bake.cache_file == "//strands_cache/tree.npy"
    for frame in (4, 1, 12, 7):
        factory_scene.frame_set(frame)
        np.testing.assert_array_equal(_hair_points(hair), live[frame])

    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "tree.blend"))
    scene = bpy.context.scene
    scene.frame_set(5)
    np.testing.assert_array_equal(_hair_points(scene.objects["tree_baked_hair"]), live[5])


def test_bones_follow_every_link_frame_of_the_engine(factory_scene, tree):
    from oriented_strands import scene

    live = _live(factory_scene, tree, range(1, FRAMES + 1))
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_bones() == {"FINISHED"}
    rig = bpy.data.objects["tree_rig"]
    bones = rig.data.bones
    assert len(bones) == 9  # three strands of three segments
    # The branch starts halfway up the trunk, on its second segment.
    assert bones["tree.001.000"].parent.name == "tree.000.001"
    assert not bones["tree.001.000"].use_connect
    assert bones["tree.000.001"].use_connect
    assert bones["tree.002.000"].parent is None

    # The engine's link frames, simulated here independently of the bake.
    runtime = scene.systems.read_for_bake(factory_scene, bpy.context.view_layer, [tree])["tree"]
    from oriented_strands.scene.strands import AnimatedValues, read_settings

    settings, animated = read_settings(tree, factory_scene), AnimatedValues(tree)
    names = [b.name for b in bones]
    for frame in range(1, FRAMES + 1):
        runtime.points_at(frame, settings, animated)
        rotations, joints = runtime.simulation.link_frames()
        factory_scene.frame_set(frame)
        for index, name in enumerate(names):
            pose = np.array(rig.pose.bones[name].matrix)
            np.testing.assert_allclose(pose[:3, 3], joints[index], atol=1e-5)
            # Bone x and z are the link's cross-section axes: the twist is in the roll.
            np.testing.assert_allclose(pose[:3, :3], rotations[index], atol=1e-5)
        tails = np.array([rig.pose.bones[n].tail for n in names])
        tips = live[frame][[1, 2, 3, 5, 6, 7, 9, 10, 11]]
        np.testing.assert_allclose(tails, tips, atol=1e-5)


def test_the_bone_bake_refuses_dense_hair_and_points_elsewhere(factory_scene, tree, monkeypatch):
    from oriented_strands.scene import bake

    monkeypatch.setattr(bake, "BONE_LIMIT", 8)
    before = scene_snapshot()
    select_only(tree)
    with pytest.raises(RuntimeError, match="Hair Curves or export Alembic"):
        bpy.ops.oriented_strands.bake_bones()
    assert scene_snapshot() == before


def test_bones_are_baked_from_object_mode_only(factory_scene, tree):
    select_only(tree)
    bpy.ops.object.mode_set(mode="EDIT")
    before = _everything()
    with pytest.raises(RuntimeError, match="bake bones from Object Mode"):
        bpy.ops.oriented_strands.bake_bones()
    assert _everything() == before
    bpy.ops.object.mode_set(mode="OBJECT")


def test_free_bake_removes_the_objects_their_data_and_the_cache(factory_scene, tree, tmp_path):
    select_only(tree)
    targets = ("shape_keys", "mesh_shape_keys", "bones", "hair")
    for target in targets:
        assert getattr(bpy.ops.oriented_strands, f"bake_{target}")() == {"FINISHED"}
    assert bpy.data.armatures
    assert bpy.data.shape_keys
    for target in targets:
        assert getattr(bpy.ops.oriented_strands, f"free_bake_{target}")() == {"FINISHED"}
    assert sorted(ob.name for ob in bpy.data.objects) == ["tree", "tree_strands"]
    assert not bpy.data.armatures
    assert not bpy.data.meshes
    assert not bpy.data.shape_keys
    assert [a.name for a in bpy.data.actions] == ["treeAction"]
    assert not (tmp_path / "strands_cache" / "tree.npy").exists()


def test_baking_again_keeps_the_names_of_the_objects_their_data_and_actions(factory_scene, tree):
    """An exporter names a take after its action (FBX): baking again must not rename it
    ``tree_rig.001``, nor back to ``tree_rig`` the time after."""
    select_only(tree)
    targets = ("shape_keys", "mesh_shape_keys", "bones")
    names = {}
    for attempt in range(3):
        for target in targets:
            assert getattr(bpy.ops.oriented_strands, f"bake_{target}")() == {"FINISHED"}
            select_only(tree)
        names[attempt] = {
            collection: sorted(i.name for i in getattr(bpy.data, collection))
            for collection in ("objects", "actions", "shape_keys", "armatures", "meshes", "curves")
        }
    assert names[0] == names[1] == names[2]
    assert names[0]["actions"] == ["treeAction", "tree_mesh_keys", "tree_rig", "tree_shape_keys"]
    assert names[0]["shape_keys"] == ["tree_mesh_keys", "tree_shape_keys"]
    if hasattr(bpy.types, "ActionSlot"):
        rig = bpy.data.objects["tree_rig"]
        assert rig.animation_data.action_slot.name_display == "tree_rig"


def test_a_hair_bake_after_renaming_its_system_removes_the_old_cache(factory_scene, tree, tmp_path):
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    old_cache = tmp_path / "strands_cache" / "tree.npy"
    assert old_cache.exists()
    tree.name = "bangs"
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    assert not old_cache.exists()
    assert (tmp_path / "strands_cache" / "bangs.npy").exists()
    assert [ob.name for ob in bpy.data.objects if ob.name.endswith("_baked_hair")] == [
        "bangs_baked_hair"
    ]


def test_a_renamed_systems_old_cache_stays_while_another_bake_plays_it(
    factory_scene, tree, tmp_path
):
    """A full copy of the scene holds a copy of the bake, playing the same cache: baking the
    renamed system again in the first scene leaves that cache to the copy."""
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    old_cache = tmp_path / "strands_cache" / "tree.npy"
    tree.name = "bangs"
    bpy.ops.scene.new(type="FULL_COPY")
    bpy.context.window.scene = factory_scene
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    assert old_cache.exists()


def test_a_hair_cache_that_another_bake_rewrote_is_not_played(
    factory_scene, tree, tmp_path, caplog
):
    """A bake of frames 1-12 whose cache a bake of one frame overwrote (a headless bake of
    another range without --save) stays as it is, with a warning, rather than showing that one
    frame at every frame."""
    from oriented_strands import scene
    from oriented_strands.scene import bake_outputs

    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    hair = bpy.data.objects["tree_baked_hair"]
    factory_scene.frame_set(3)
    shown = _hair_points(hair)
    path = bake_outputs._cache_path(hair)
    np.save(path, np.load(path)[9:10])
    with caplog.at_level("WARNING"):
        for frame in (1, 7, 12):
            factory_scene.frame_set(frame)
            np.testing.assert_array_equal(_hair_points(hair), shown)
    warnings = [r.getMessage() for r in caplog.records if "tree_baked_hair" in r.getMessage()]
    assert len(warnings) == 1
    points = len(hair.data.points)
    expected = (
        f"cache //strands_cache/tree.npy holds 1 × {points} × 3 positions, not 12 frames × "
        f"{points} points × 3 (another bake rewrote it): bake it again"
    )
    assert warnings[0].endswith(expected)
    assert scene.cache_problem(hair) == expected


def _everything():
    """Every data-block name and every file under the blend's folder."""
    import os

    state = scene_snapshot()
    for collection in (
        "actions",
        "armatures",
        "shape_keys",
        "curves",
        "hair_curves",
        "meshes",
        "objects",
    ):
        state[collection] = sorted(i.name for i in getattr(bpy.data, collection))
    folder = os.path.dirname(bpy.data.filepath)
    state["files"] = sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, folders, names in os.walk(folder)
        for name in names + folders
    )
    return state


ALL_TARGETS = ["SHAPE_KEYS", "MESH_SHAPE_KEYS", "BONES", "HAIR"]


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_a_failing_step_leaves_the_scene_as_it_was(factory_scene, tree, monkeypatch, target):
    from oriented_strands.core import Simulation, SimulationDivergedError

    select_only(tree)
    bpy.ops.oriented_strands.bake_hair()  # an earlier bake that must survive
    before = _everything()
    calls = []
    advance = Simulation.advance

    def diverging(self, dt, base, **inputs):
        calls.append(dt)
        if len(calls) == 6:
            raise SimulationDivergedError("forced failure")
        return advance(self, dt, base, **inputs)

    monkeypatch.setattr(Simulation, "advance", diverging)
    with pytest.raises(RuntimeError, match="frame 7: forced failure"):
        getattr(bpy.ops.oriented_strands, f"bake_{target.lower()}")()
    assert _everything() == before


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_a_failing_write_removes_everything_it_made(factory_scene, tree, monkeypatch, target):
    from oriented_strands.scene import animation, bake_outputs

    select_only(tree)
    bpy.ops.oriented_strands.bake_shape_keys()
    bpy.ops.oriented_strands.bake_bones()
    before = _everything()
    original = bake_outputs.WRITERS[target]

    def failing(system, transaction):
        original(system, transaction)
        raise OSError("disk full")

    monkeypatch.setitem(bake_outputs.WRITERS, target, failing)
    assert animation  # the writers' helpers are the real ones
    with pytest.raises(RuntimeError, match="disk full"):
        getattr(bpy.ops.oriented_strands, f"bake_{target.lower()}")()
    assert _everything() == before


def test_a_cancelled_bake_changes_nothing(factory_scene, tree):
    """Esc in the UI abandons the job between frames; simulate that without a window."""
    from oriented_strands import scene

    before = _everything()
    job = scene.BakeJob(factory_scene, bpy.context.view_layer, [tree], ["BONES", "HAIR"])
    for _ in range(5):
        job.step()
    assert 0 < job.fraction < 1
    del job
    assert _everything() == before


def test_progress_is_printed_with_frames_and_timing(factory_scene, tree, capsys):
    select_only(tree)
    bpy.ops.oriented_strands.bake_hair()
    printed = capsys.readouterr().out
    assert "baking 'tree' to hair curves: 3 strands, 9 segments, frames 1-12" in printed
    assert "frame 12 (12/12)" in printed
    assert "s/frame, ETA" in printed


def test_unusable_requests_are_refused_with_a_reason(factory_scene, tree):
    from oriented_strands import scene
    from oriented_strands.strands_io.errors import SceneInputError

    camera = bpy.data.objects.new("camera", None)
    before = _everything()
    select_only(tree)
    tree.oriented_strands.enabled = False
    with pytest.raises(RuntimeError, match="simulation is off"):
        bpy.ops.oriented_strands.bake_shape_keys()
    tree.oriented_strands.enabled = True
    with pytest.raises(SceneInputError, match="bake targets must be among"):
        scene.BakeJob(factory_scene, bpy.context.view_layer, [tree], ["MESH"])
    with pytest.raises(SceneInputError, match="not a strand system"):
        scene.BakeJob(factory_scene, bpy.context.view_layer, [camera], ["HAIR"])
    assert _everything() == before


class _FakeWindowManager:
    """The window manager calls of the modal bake, recorded (background Blender has no UI)."""

    def __init__(self):
        self.progress = []
        self.timers = []

    def progress_begin(self, low, high):
        self.progress.append(("begin", low, high))

    def progress_update(self, value):
        self.progress.append(("update", value))

    def progress_end(self):
        self.progress.append(("end",))

    def event_timer_add(self, interval, window=None):
        self.timers.append("timer")
        return "timer"

    def event_timer_remove(self, timer):
        self.timers.remove(timer)

    def modal_handler_add(self, operator):
        pass


def _modal_bake(target):
    """A UI-like context, and the registered modal operator's methods bound to a stand-in."""
    from types import SimpleNamespace

    cls = getattr(bpy.types, f"ORIENTED_STRANDS_OT_bake_{target.lower()}")
    status = []
    context = SimpleNamespace(
        scene=bpy.context.scene,
        view_layer=bpy.context.view_layer,
        selected_objects=bpy.context.selected_objects,
        object=bpy.context.object,
        window="window",
        window_manager=_FakeWindowManager(),
        workspace=SimpleNamespace(status_text_set=status.append),
    )
    reports = []
    operator = SimpleNamespace(target=target, report=lambda kind, text: reports.append(text))
    for name in ("_start", "_finished", "_stop", "execute", "modal", "invoke", "cancel"):
        setattr(operator, name, getattr(cls, name).__get__(operator))
    return operator, context, reports


def test_the_modal_bake_steps_on_timer_ticks_and_reports_progress(factory_scene, tree, monkeypatch):
    from types import SimpleNamespace

    from oriented_strands.operators import bake as bake_operators

    monkeypatch.setattr(bake_operators, "TICK_SECONDS", 0.0)  # one frame per tick
    monkeypatch.setattr(bake_operators, "_has_ui", lambda context: True)
    select_only(tree)
    operator, context, reports = _modal_bake("HAIR")
    assert operator.invoke(context, None) == {"RUNNING_MODAL"}
    ticks = 0
    result = {"RUNNING_MODAL"}
    while result == {"RUNNING_MODAL"}:
        ticks += 1
        result = operator.modal(context, SimpleNamespace(type="TIMER"))
    assert result == {"FINISHED"}
    assert ticks == FRAMES
    updates = [entry[1] for entry in context.window_manager.progress if entry[0] == "update"]
    assert updates == pytest.approx(np.arange(1, FRAMES + 1) / FRAMES)
    assert context.window_manager.progress[-1] == ("end",)
    assert not context.window_manager.timers
    assert reports == [f"Baked {FRAMES} frames to 'tree_baked_hair'"]


def test_esc_cancels_the_modal_bake_and_changes_nothing(factory_scene, tree, monkeypatch):
    from types import SimpleNamespace

    from oriented_strands.operators import bake as bake_operators

    monkeypatch.setattr(bake_operators, "TICK_SECONDS", 0.0)
    monkeypatch.setattr(bake_operators, "_has_ui", lambda context: True)
    select_only(tree)
    before = _everything()
    operator, context, reports = _modal_bake("BONES")
    operator.invoke(context, None)
    for _ in range(4):
        assert operator.modal(context, SimpleNamespace(type="TIMER")) == {"RUNNING_MODAL"}
    assert operator.modal(context, SimpleNamespace(type="MOUSEMOVE")) == {"RUNNING_MODAL"}
    assert operator.modal(context, SimpleNamespace(type="ESC")) == {"CANCELLED"}
    assert reports == ["Bake cancelled: nothing was changed"]
    assert not context.window_manager.timers
    assert _everything() == before


def test_objects_whose_names_clean_alike_get_their_own_cache_files(factory_scene, tree, tmp_path):
    from scene_builders import add_strand_system, poly_curve

    twigs = [poly_curve(name, [[(1, 0, 0), (1, 0, -0.2)]]) for name in ("twig?", "twig!")]
    add_strand_system(*twigs)
    select_only(*twigs)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    caches = {
        ob.oriented_strands_bake.source.name: ob.oriented_strands_bake.cache_file
        for ob in bpy.data.objects
        if ob.oriented_strands_bake.target == "HAIR"
    }
    assert caches == {"twig?": "//strands_cache/twig_.npy", "twig!": "//strands_cache/twig__2.npy"}
    assert np.load(tmp_path / "strands_cache" / "twig__2.npy").shape == (FRAMES, 17, 3)


def test_baked_hair_plays_after_save_as_into_another_folder(factory_scene, tree, tmp_path):
    """Baked in one folder, saved as into another (the cache stays where it was written) and
    reopened from there: the hair plays its bake; a Save Copy elsewhere, and a save that fails,
    leave the open file's cache path as it was."""
    live = _live(factory_scene, tree, range(1, FRAMES + 1))
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    elsewhere = tmp_path / "shots" / "final"
    elsewhere.mkdir(parents=True)
    hair = bpy.data.objects["tree_baked_hair"]
    with pytest.raises(RuntimeError, match="Cannot open file"):
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "missing" / "copy.blend"))
    assert hair.oriented_strands_bake.cache_file == "//strands_cache/tree.npy"
    bpy.ops.wm.save_as_mainfile(filepath=str(elsewhere / "copy.blend"), copy=True)
    assert hair.oriented_strands_bake.cache_file == "//strands_cache/tree.npy"
    bpy.ops.wm.save_as_mainfile(filepath=str(elsewhere / "moved.blend"))
    assert hair.oriented_strands_bake.cache_file == "//../../strands_cache/tree.npy"
    bpy.ops.wm.open_mainfile(filepath=str(elsewhere / "moved.blend"))
    scene = bpy.context.scene
    for frame in (6, 2):
        scene.frame_set(frame)
        np.testing.assert_array_equal(_hair_points(scene.objects["tree_baked_hair"]), live[frame])


def test_gathered_hair_caches_travel_with_the_file(factory_scene, tree, tmp_path):
    """Saved as into a shot folder, the bake's cache gathered beside it: the folder holds the
    whole bake (it plays from a copy moved anywhere), and Free Bake there leaves the cache the
    first file plays."""
    import shutil

    live = _live(factory_scene, tree, range(1, FRAMES + 1))
    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    shot = tmp_path / "farm" / "shot010"
    shot.mkdir(parents=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(shot / "tree.blend"))
    assert bpy.ops.oriented_strands.gather_hair_caches() == {"FINISHED"}
    hair = bpy.data.objects["tree_baked_hair"]
    assert hair.oriented_strands_bake.cache_file == "//strands_cache/tree.npy"
    np.testing.assert_array_equal(
        np.load(shot / "strands_cache" / "tree.npy"),
        np.load(tmp_path / "strands_cache" / "tree.npy"),
    )
    bpy.ops.wm.save_mainfile()
    # Gathered again, nothing is copied.
    assert bpy.ops.oriented_strands.gather_hair_caches() == {"FINISHED"}
    assert sorted(p.name for p in (shot / "strands_cache").iterdir()) == ["tree.npy"]

    moved = tmp_path / "render_node"
    shutil.copytree(shot, moved)
    bpy.ops.wm.open_mainfile(filepath=str(moved / "tree.blend"))
    scene = bpy.context.scene
    for frame in (7, 3):
        scene.frame_set(frame)
        np.testing.assert_array_equal(_hair_points(scene.objects["tree_baked_hair"]), live[frame])
    select_only(scene.objects["tree"])
    assert bpy.ops.oriented_strands.free_bake_hair() == {"FINISHED"}
    assert (tmp_path / "strands_cache" / "tree.npy").exists()
    assert (shot / "strands_cache" / "tree.npy").exists()


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (lambda cache: cache.unlink(), "is missing"),
        (lambda cache: np.save(cache, np.load(cache)[:1]), "another bake rewrote it"),
    ],
    ids=["missing", "rewritten"],
)
def test_a_hair_bake_whose_cache_cannot_play_is_not_exported(
    factory_scene, tree, tmp_path, spoil, problem
):
    from oriented_strands import scene
    from oriented_strands.strands_io.errors import SceneInputError

    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    spoil(tmp_path / "strands_cache" / "tree.npy")
    with pytest.raises(SceneInputError, match=f"'tree_baked_hair': its cache .*{problem}"):
        scene.export_alembic(
            factory_scene, bpy.context.view_layer, [tree], "HAIR", str(tmp_path / "hair.abc")
        )
    assert not (tmp_path / "hair.abc").exists()
    with pytest.raises(SceneInputError, match=f"'tree_baked_hair': cache .*{problem}"):
        scene.gather_hair_caches()


@pytest.fixture
def engine_steps(monkeypatch):
    """How many times any simulation has advanced since the fixture started."""
    from oriented_strands.core import Simulation

    count = [0]
    advance = Simulation.advance

    def counted(self, *args, **kwargs):
        count[0] += 1
        return advance(self, *args, **kwargs)

    monkeypatch.setattr(Simulation, "advance", counted)
    return count


def _shape_key_points(ob):
    keys = ob.data.shape_keys.key_blocks
    return np.stack([np.array([p.co for p in key.data]) for key in keys[1:]])


def test_a_bake_after_full_playback_writes_the_played_frames(factory_scene, tree, engine_steps):
    _live(factory_scene, tree, range(1, FRAMES + 1))
    select_only(tree)
    engine_steps[0] = 0
    assert bpy.ops.oriented_strands.bake_mesh_shape_keys() == {"FINISHED"}
    assert engine_steps[0] == 0
    from_playback = _shape_key_points(bpy.data.objects["tree_mesh_keys"])

    # The same bake from scratch: nothing played.
    assert bpy.ops.oriented_strands.free_bake_mesh_shape_keys() == {"FINISHED"}
    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    assert bpy.ops.oriented_strands.bake_mesh_shape_keys() == {"FINISHED"}
    assert engine_steps[0] == FRAMES - 1
    np.testing.assert_array_equal(
        _shape_key_points(bpy.data.objects["tree_mesh_keys"]), from_playback
    )


def test_a_bake_simulates_what_changed_since_playback(factory_scene, tree, engine_steps):
    played = _live(factory_scene, tree, range(1, FRAMES + 1))
    # A keyframe moved after playback, no frame changed since: the played frames are outdated.
    tree.location = (0.4, 0.0, 0.0)
    tree.keyframe_insert("location", frame=FRAMES)
    select_only(tree)
    engine_steps[0] = 0
    assert bpy.ops.oriented_strands.bake_mesh_shape_keys() == {"FINISHED"}
    assert engine_steps[0] == FRAMES - 1
    baked = _shape_key_points(bpy.data.objects["tree_mesh_keys"])
    assert np.abs(baked[-1] - played[FRAMES]).max() > 0.05


def test_a_baked_system_hides_its_preview_and_stops_simulating(
    factory_scene, tree, tmp_path, engine_steps
):
    from oriented_strands import scene

    select_only(tree)
    assert bpy.ops.oriented_strands.bake_hair() == {"FINISHED"}
    shown = tree.oriented_strands.preview_object
    assert shown.hide_get()
    assert shown.hide_render
    assert scene.status(tree)[0].startswith("Baked")
    engine_steps[0] = 0
    for frame in (6, 12, 3):
        factory_scene.frame_set(frame)
    assert engine_steps[0] == 0

    # Saved and opened again, it plays without simulating.
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "tree.blend"))
    for frame in (8, 12):
        bpy.context.scene.frame_set(frame)
    assert engine_steps[0] == 0
    tree = bpy.context.scene.objects["tree"]

    select_only(tree)
    assert bpy.ops.oriented_strands.free_bake_hair() == {"FINISHED"}
    shown = tree.oriented_strands.preview_object
    assert not shown.hide_get()
    assert not shown.hide_render
    bpy.context.scene.frame_set(4)
    assert engine_steps[0] == 3
