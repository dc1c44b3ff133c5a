"""The live preview behaves like Blender's point caches: cached per frame, replayed, invalidated."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    poly_curve,
    preview_points,
    preview_strands,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")

REST = [[(0, 0, 0), (0.25, 0, 0)], [(0, 0.1, 0), (0.2, 0.1, -0.05)]]


@pytest.fixture
def ponytail(factory_scene):
    """Two horizontal strands that fall under gravity, simulated over frames 1-30."""
    factory_scene.frame_end = 30
    ob = poly_curve("ponytail", REST)
    assert add_strand_system(ob) == {"FINISHED"}
    return ob


def _play(scene, frames, name="ponytail"):
    """Set each frame as playback does; the preview's points at every frame."""
    positions = {}
    for frame in frames:
        scene.frame_set(frame)
        positions[frame] = preview_points(scene.objects[name])
    return positions


def test_playing_simulates_and_scrubbing_back_replays_identical_frames(factory_scene, ponytail):
    played = _play(factory_scene, range(1, 13))
    # The tip of the first strand starts falling under gravity.
    assert played[1][16, 2] == pytest.approx(0.0, abs=1e-6)
    assert played[2][16, 2] < played[1][16, 2]
    assert played[12][16, 2] < -0.02
    assert system_status(ponytail)[0].startswith("12 frames cached (1–12)")

    for frame in (5, 12, 1, 8):
        factory_scene.frame_set(frame)
        np.testing.assert_array_equal(preview_points(ponytail), played[frame])


def test_worker_processes_simulate_the_same_frames(factory_scene, ponytail):
    """Two processes, one strand each, give the frames one process gives."""
    one = _play(factory_scene, range(1, 7))
    ponytail.oriented_strands.worker_processes = 2
    two = _play(factory_scene, range(1, 7))
    for frame in range(2, 7):
        np.testing.assert_allclose(two[frame], one[frame], rtol=0, atol=1e-6)
    assert not np.allclose(two[6], two[1])


def test_jumping_ahead_simulates_the_frames_in_between(factory_scene, ponytail):
    played = _play(factory_scene, range(1, 11))
    bpy.ops.oriented_strands.reset_to_rest()
    factory_scene.frame_set(10)
    np.testing.assert_array_equal(preview_points(ponytail), played[10])
    assert system_status(ponytail)[0].startswith("10 frames cached")


def test_changing_a_parameter_invalidates_the_cache(factory_scene, ponytail):
    soft = _play(factory_scene, range(1, 11))[10]

    ponytail.oriented_strands.youngs_modulus *= 20.0
    assert system_status(ponytail)[0].startswith("Nothing cached")
    factory_scene.frame_set(10)
    stiff = preview_points(ponytail)
    # A stiffer strand droops less.
    assert stiff[16, 2] > soft[16, 2] + 1e-3

    ponytail.oriented_strands.youngs_modulus /= 20.0
    _play(factory_scene, range(1, 11))
    np.testing.assert_allclose(preview_points(ponytail), soft, atol=1e-6)


def test_keyframed_parameters_are_read_at_every_frame_and_key_edits_invalidate(
    factory_scene, ponytail
):
    constant = _play(factory_scene, range(1, 11))[10]
    props = ponytail.oriented_strands
    props.keyframe_insert("gravity_factor", frame=1)
    props.gravity_factor = 0.0
    props.keyframe_insert("gravity_factor", frame=5)

    factory_scene.frame_set(10)
    keyed = preview_points(ponytail)
    # Gravity switched off from frame 5 on: the strands fall less far.
    assert keyed[16, 2] > constant[16, 2] + 1e-3

    action = ponytail.animation_data.action
    from oriented_strands.scene.animation import fcurves_under

    curve = fcurves_under(ponytail, "oriented_strands.")[("gravity_factor", 0)]
    curve.keyframe_points[1].co.x = 9.0
    curve.update()
    assert action is not None
    factory_scene.frame_set(10)
    assert not np.array_equal(preview_points(ponytail), keyed)


def test_before_the_start_frame_strands_rest_and_after_the_end_they_hold(factory_scene, ponytail):
    ponytail.oriented_strands.frame_start = 3
    ponytail.oriented_strands.frame_end = 8
    bpy.ops.oriented_strands.free_cache()
    rest = preview_points(ponytail)

    played = _play(factory_scene, range(1, 12))
    np.testing.assert_array_equal(played[1], played[3])
    np.testing.assert_allclose(played[2], rest, atol=1e-6)
    assert not np.allclose(played[8], rest, atol=1e-4)
    np.testing.assert_array_equal(played[11], played[8])


def test_editing_the_input_curves_outdates_the_cache_until_it_is_freed(factory_scene, ponytail):
    _play(factory_scene, range(1, 6))
    ponytail.data.splines[0].points[1].co = (0.3, 0.0, 0.0, 1.0)

    before = preview_points(ponytail)
    factory_scene.frame_set(6)
    text, icon = system_status(ponytail)
    assert icon == "ERROR"
    assert "edited" in text
    # An outdated system leaves the preview alone rather than show a wrong simulation.
    np.testing.assert_array_equal(preview_points(ponytail), before)

    assert bpy.ops.oriented_strands.free_cache() == {"FINISHED"}
    first, _ = preview_strands(ponytail)
    np.testing.assert_allclose(first[-1], (0.3, 0.0, 0.0), atol=1e-6)
    factory_scene.frame_set(7)
    assert system_status(ponytail)[0].startswith("7 frames cached")


def test_editing_the_animation_of_the_base_outdates_the_cache(factory_scene, ponytail):
    _play(factory_scene, range(1, 4))
    ponytail.location = (0.0, 0.0, 1.0)
    factory_scene.frame_set(4)
    text, icon = system_status(ponytail)
    assert icon == "ERROR"
    assert "animation" in text

    bpy.ops.oriented_strands.free_cache()
    factory_scene.frame_set(5)
    first, _ = preview_strands(ponytail)
    np.testing.assert_allclose(first[0], (0.0, 0.0, 1.0), atol=1e-6)


def test_a_disabled_system_shows_its_rest_shape(factory_scene, ponytail):
    rest = preview_points(ponytail)
    _play(factory_scene, range(1, 6))
    ponytail.oriented_strands.enabled = False
    factory_scene.frame_set(6)
    np.testing.assert_allclose(preview_points(ponytail), rest, atol=1e-6)


def test_removing_the_system_deletes_its_preview_and_keeps_the_curves(factory_scene, ponytail):
    """While a system, the curves do not render (its preview renders the simulation with their
    materials); removed, the preview goes and the curves render again."""
    preview_name = ponytail.oriented_strands.preview_object.name
    assert ponytail.hide_render
    assert not ponytail.oriented_strands.preview_object.hide_render
    _play(factory_scene, range(1, 4))
    assert bpy.ops.oriented_strands.remove_strand_system() == {"FINISHED"}
    assert not ponytail.hide_render
    assert preview_name not in bpy.data.objects
    assert not bpy.data.hair_curves
    assert not ponytail.oriented_strands.is_system
    assert len(ponytail.data.splines) == 2
    factory_scene.frame_set(5)  # the handler must cope with a removed system


def test_a_saved_file_simulates_again_after_it_is_opened(factory_scene, ponytail, tmp_path):
    played = _play(factory_scene, range(1, 9))
    path = str(tmp_path / "ponytail.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)

    bpy.ops.wm.open_mainfile(filepath=path)
    scene = bpy.context.scene
    reopened = scene.objects["ponytail"]
    assert system_status(reopened)[0].startswith("Nothing cached")
    scene.frame_set(8)
    np.testing.assert_array_equal(preview_points(reopened), played[8])


def test_in_the_ui_an_outdated_input_is_read_again_by_a_timer(factory_scene, ponytail):
    """Background Blender runs no timers; call the one the UI would run."""
    from oriented_strands.scene import systems

    _play(factory_scene, range(1, 4))
    ponytail.data.splines[0].points[1].co = (0.3, 0.0, 0.0, 1.0)
    factory_scene.frame_set(4)
    assert system_status(ponytail)[1] == "ERROR"

    systems._refresh_from_timer()

    assert system_status(ponytail)[0].startswith("4 frames cached")
    first, _ = preview_strands(ponytail)
    lengths = np.linalg.norm(np.diff(first, axis=0), axis=1)
    assert lengths.sum() == pytest.approx(0.3, rel=1e-5)  # the new, longer strand
