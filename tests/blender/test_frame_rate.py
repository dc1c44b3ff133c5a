"""A new strand system steps per second of animation, or by error: its motion does not change
with the scene's frame rate."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    play_without_errors,
    poly_curve,
    system_status,
)

pytestmark = pytest.mark.usefixtures("extension")


def _swung(scene, fps, name, unit=None):
    """A 50 cm strand of 25 links hanging from an object swung ±10 cm sideways at 1 Hz
    (keyframes a quarter second apart), at ``fps`` frames per second, its steps set by ``unit``
    (a new system's default when None); returns the object and its tip every sixth of a second
    for a second."""
    scene.render.fps, scene.render.fps_base = fps, 1.0
    scene.frame_start, scene.frame_end = 1, 1 + fps
    ob = poly_curve(name, [[(0.0, 0.0, 0.0), (0.0, 0.0, -0.5)]])
    for quarter, x in enumerate((0.0, 0.1, 0.0, -0.1, 0.0)):
        ob.location = (x, 0.0, 0.0)
        ob.keyframe_insert("location", frame=1 + quarter * fps / 4)
    assert add_strand_system(ob) == {"FINISHED"}
    ob.oriented_strands.segment_count = 25
    if unit is not None:
        ob.oriented_strands.substep_unit = unit
    played = play_without_errors(scene, ob, range(1, fps + 2))
    return ob, np.array([played[1 + sixth * fps // 6][-1] for sixth in range(1, 7)])


def test_a_new_system_moves_the_same_at_24_30_and_60_fps(factory_scene):
    """Stepped per second (96 steps a second: 4 substeps a frame at 24 and 30 fps, 2 at 60),
    the strand's tip is at the same place at the same times, within 1 cm (2 % of its length),
    at 24, 30 and 60 frames per second. A system whose step is set per frame (as in files made
    before the setting) keeps its substeps per frame."""
    from oriented_strands.scene.strands import substeps_per_frame

    tips, substeps = {}, {}
    for fps in (24, 30, 60):
        ob, tips[fps] = _swung(factory_scene, fps, f"tail{fps}")
        assert ob.oriented_strands.substep_unit == "SECOND"
        substeps[fps] = substeps_per_frame(ob.oriented_strands, factory_scene)
    assert substeps == {24: 4, 30: 4, 60: 2}
    assert np.abs(tips[24] - tips[60]).max() > 0.0
    for fps in (24, 30):
        assert np.linalg.norm(tips[fps] - tips[60], axis=1).max() < 0.01
    # The tip swings: this is not a strand hanging still at every frame rate.
    assert np.abs(tips[60][:, 0]).max() > 0.05
    ob.oriented_strands.property_unset("substep_unit")
    assert substeps_per_frame(ob.oriented_strands, factory_scene) == ob.oriented_strands.substeps


def test_steps_by_error_move_the_same_at_24_30_and_60_fps(factory_scene):
    """Stepped By Error (the default tolerance, 0.1 mm), the steps follow the motion, not the
    frame: the tips at 24 and 30 fps are within 3 mm of those at 60 fps (0.8 and 1.0 mm in the
    engine alone). The explicit method takes fixed steps: By Error is refused with it, the
    system's status naming the settings."""
    tips = {}
    for fps in (24, 30, 60):
        ob, tips[fps] = _swung(factory_scene, fps, f"error{fps}", unit="ERROR")
    for fps in (24, 30):
        assert np.linalg.norm(tips[fps] - tips[60], axis=1).max() < 0.003
    assert np.abs(tips[60][:, 0]).max() > 0.05
    ob.oriented_strands.solver_method = "EXPLICIT"
    factory_scene.frame_set(2)
    text, icon = system_status(ob)
    assert icon == "ERROR"
    assert "Steps By Error" in text
    assert "Implicit" in text
