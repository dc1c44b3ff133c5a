"""Curves that cannot be strands are refused with a message naming them; nothing changes."""

import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import (  # noqa: E402
    add_strand_system,
    hair_curves,
    poly_curve,
    scene_snapshot,
    select_only,
)
from scene_builders import system_status as scene_status  # noqa: E402

pytestmark = pytest.mark.usefixtures("extension")

GOOD = [(0, 0, 0), (0, 0, -0.2)]


def _refused(*objects) -> str:
    """Press Add Strand System expecting a refusal; return the message, checking the scene is
    exactly as before."""
    before = scene_snapshot()
    with pytest.raises(RuntimeError) as refusal:
        add_strand_system(*objects)
    assert scene_snapshot() == before
    return str(refusal.value)


@pytest.mark.parametrize(
    ("splines", "fault"),
    [
        ([GOOD, [(1, 0, 0)]], "spline 1 has a single point"),
        ([GOOD, [(1, 0, 0), (1, 0, 0), (1, 0, 0)]], "spline 1 has zero length"),
        ([[(2, 0, 0)], GOOD, [(0, 1, 0), (0, 1, 0)]], "spline 0 has a single point"),
    ],
)
def test_degenerate_splines_are_refused_by_name(splines, fault):
    ob = poly_curve("broken", splines)
    message = _refused(ob)
    assert "'broken'" in message
    assert fault in message


def test_every_fault_of_an_object_is_named_at_once():
    ob = poly_curve("broken", [[(1, 0, 0)], GOOD, [(0, 1, 0), (0, 1, 0)]])
    message = _refused(ob)
    assert "spline 0 has a single point" in message
    assert "spline 2 has zero length" in message


def test_a_closed_spline_is_refused():
    ob = poly_curve("ring", [GOOD, [(0, 0, 0), (1, 0, 0), (1, 1, 0)]])
    ob.data.splines[1].use_cyclic_u = True
    assert "spline 1 is closed (cyclic)" in _refused(ob)


def test_a_single_point_hair_curve_is_refused():
    ob = hair_curves("fuzz", [[(0, 0, 0), (0, 0, 0.1)], [(0.1, 0, 0)]])
    message = _refused(ob)
    assert "'fuzz'" in message
    assert "curve 1 has a single point" in message


def test_bevelled_curves_are_refused_with_what_to_do():
    ob = poly_curve("rope", [GOOD])
    ob.data.bevel_depth = 0.01
    assert "Bevel Depth" in _refused(ob)


def test_branches_that_start_on_each_other_are_refused():
    ob = poly_curve("knot", [[(0, 0, 0), (1, 0, 0)], [(0.5, 0, 0), (0.25, 0.1, 0), (0, 0, 0)]])
    message = _refused(ob)
    assert "spline 0, spline 1 start on each other" in message


def test_one_bad_object_in_the_selection_stops_them_all():
    good = poly_curve("good", [GOOD])
    bad = poly_curve("bad", [[(0, 0, 0)]])
    message = _refused(good, bad)
    assert "'bad'" in message
    assert "'good'" not in message
    assert not good.oriented_strands.is_system


def test_an_unavailable_backend_is_refused_with_the_reason():
    from oriented_strands.core import available_backends

    reason = available_backends()["cupy"]
    if not reason:
        pytest.skip("CuPy runs on this machine")
    ob = poly_curve("gpu", [GOOD])
    ob.oriented_strands.backend = "cupy"
    message = _refused(ob)
    assert "cupy" in message.lower()
    assert "unavailable" in message


def test_a_selection_without_curves_is_refused():
    mesh = bpy.data.objects.new("cube", bpy.data.meshes.new("cube"))
    bpy.context.scene.collection.objects.link(mesh)
    before = scene_snapshot()
    with pytest.raises(RuntimeError):
        add_strand_system(mesh)
    assert scene_snapshot() == before


def _explicit_pair(scene, tmp_path):
    """Two horizontal strands (curves 0 and 1) with the Explicit method at 4 substeps, one of
    them far too stiff for it (a 5 mm thick rod instead of a hair), saved for hair bakes."""
    scene.frame_start, scene.frame_end = 1, 6
    ob = poly_curve("pair", [[(0, 0, 0), (0.3, 0, 0)], [(0, 0.2, 0), (0.3, 0.2, 0)]])
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    props.solver_method = "EXPLICIT"
    props.radius = 0.005
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "pair.blend"))
    return bpy.context.scene.objects["pair"]


def test_strands_that_fall_back_are_named_in_the_status_and_the_bake_summary(
    factory_scene, tmp_path, capsys
):
    """A step that fails even halved five times holds the failing strands rigid and goes on:
    playback keeps every frame, the status names the curves and the frame (with the error icon),
    and the bake finishes, printing which curves fell back at which frames."""
    ob = _explicit_pair(factory_scene, tmp_path)
    for frame in range(1, 7):
        factory_scene.frame_set(frame)
    text, icon = scene_status(ob)
    assert icon == "ERROR"
    assert "6 frames cached" in text
    assert "2 strand(s) held rigid" in text
    assert "raise Substeps" in text
    select_only(ob)
    assert bpy.ops.oriented_strands.bake_shape_keys() == {"FINISHED"}
    printed = capsys.readouterr().out
    assert "'pair: spline 0'" in printed
    assert "held rigid for a step" in printed
    assert "Oriented Strands: warning: object 'pair':" in printed


def test_stop_on_failure_stops_where_a_strand_fails_and_keeps_the_frames_before(
    factory_scene, tmp_path
):
    ob = _explicit_pair(factory_scene, tmp_path)
    ob.oriented_strands.stop_on_failure = True
    for frame in range(1, 7):
        factory_scene.frame_set(frame)
    text, icon = scene_status(ob)
    assert icon == "ERROR"
    assert text.startswith("Stopped at frame")
    assert "diverged" in text
    select_only(ob)
    with pytest.raises(RuntimeError, match="'pair', frame .*diverged"):
        bpy.ops.oriented_strands.bake_shape_keys()


def test_a_parameter_a_script_makes_nan_is_named_by_its_panel_label(factory_scene):
    """A script (or driver) can set a float property to NaN: the status names the property by
    the label the panel shows, not by the engine's parameter, and nothing is simulated."""
    ob = poly_curve("hair", [GOOD])
    assert add_strand_system(ob) == {"FINISHED"}
    ob.oriented_strands.youngs_modulus = float("nan")
    factory_scene.frame_set(2)
    text, icon = scene_status(ob)
    assert icon == "ERROR"
    assert text.startswith("Bending (GPa) is not a number")


def test_a_bake_refused_for_a_parameter_names_the_object_and_the_label(factory_scene):
    """Baking two systems, one of which a script gave a NaN bending modulus: the refusal names
    that object and the panel's label, and nothing is baked."""
    good, bad = poly_curve("fringe", [GOOD]), poly_curve("ponytail", [GOOD])
    assert add_strand_system(good, bad) == {"FINISHED"}
    bad.oriented_strands.youngs_modulus = float("nan")
    select_only(good, bad)
    with pytest.raises(RuntimeError, match=r"object 'ponytail': Bending \(GPa\) is not a number"):
        bpy.ops.oriented_strands.bake_shape_keys()
    assert not [ob for ob in bpy.data.objects if ob.name.endswith("_shape_keys")]


def test_a_keyframed_parameter_outside_its_range_is_refused_at_its_frame(factory_scene):
    """Keyframes evaluate to values the panel would not accept (here a linear F-curve
    extrapolated below zero): the status names the label, the value and the frame."""
    ob = poly_curve("hair", [GOOD])
    assert add_strand_system(ob) == {"FINISHED"}
    props = ob.oriented_strands
    for frame, value in ((1, 2.0), (3, 1.0)):
        props.air_drag = value
        props.keyframe_insert("air_drag", frame=frame)
    for curve in _fcurves(ob):
        curve.extrapolation = "LINEAR"
    for frame in range(1, 7):
        factory_scene.frame_set(frame)
    text, icon = scene_status(ob)
    assert icon == "ERROR"
    assert "below its least value 0 at frame" in text


def test_a_bake_after_a_failed_free_cache_clears_the_failure_from_the_status(factory_scene):
    """Free Cache refuses a curve a script broke (a point set to NaN), naming the spline; once
    the script mends it, a bake reads it and the status no longer shows the old refusal
    (background Blender re-reads nothing by itself)."""
    ob = poly_curve("hair", [GOOD])
    assert add_strand_system(ob) == {"FINISHED"}
    point = ob.data.splines[0].points[1]
    good = tuple(point.co)
    point.co = (float("nan"), 0.0, 0.0, 1.0)
    select_only(ob)
    with pytest.raises(RuntimeError, match="object 'hair': spline 0 has a point whose position"):
        bpy.ops.oriented_strands.free_cache()
    refused, icon = scene_status(ob)
    assert icon == "ERROR"
    point.co = good
    assert bpy.ops.oriented_strands.bake_shape_keys() == {"FINISHED"}
    assert scene_status(ob)[0] != refused


def test_bending_and_twisting_moduli_cannot_be_set_to_zero_in_the_panel():
    properties = bpy.types.Object.bl_rna.properties["oriented_strands"].fixed_type.properties
    for name in ("youngs_modulus", "shear_modulus"):
        assert properties[name].hard_min > 0.0


def _fcurves(ob):
    from oriented_strands.scene.animation import fcurves_under

    return [curve for curve in fcurves_under(ob, "oriented_strands.").values()]
