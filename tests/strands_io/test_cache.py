"""The live-preview cache without Blender: sampled input made a motion, change detection, and
the runtime's frames simulated once, replayed, dropped and stopped as an artist relies on."""

import math
from dataclasses import replace

import numpy as np
import pytest

from oriented_strands.core import (
    ConstraintSettings,
    JointLimits,
    Simulation,
    SimulationDivergedError,
    Sphere,
    TriangleMesh,
    pose_rotations,
)
from oriented_strands.strands_io.cache import (
    StrandSystemRuntime,
    constraint_inputs,
    pose_trajectory,
    with_deformation,
)
from oriented_strands.strands_io.errors import SceneInputError
from oriented_strands.strands_io.records import ObstacleShapes, SceneFields, SurfaceAttachment
from strand_systems import FPS, MODEL, Values, drawn, prepared, samples, settings

# A 20 cm strand held horizontally at its root: gravity swings it down.
STRAND = [(0.0, 0.0, 1.0), (0.2, 0.0, 1.0)]
# A second one, hanging 10 cm beside it.
HANGING = [(0.0, 0.1, 1.0), (0.0, 0.1, 0.8)]
FRAMES = 6


def _translations(offsets) -> np.ndarray:
    """(F, 1, 4, 4) transforms moved by ``offsets`` (F, 3)."""
    matrices = np.tile(np.eye(4), (len(offsets), 1, 1, 1))
    matrices[:, 0, :3, 3] = offsets
    return matrices


def _runtime(values: Values | None = None, **settings_changes) -> StrandSystemRuntime:
    runtime = StrandSystemRuntime(prepared([STRAND], frame_end=FRAMES))
    runtime.build(settings(frame_end=FRAMES, **settings_changes), values or Values())
    return runtime


@pytest.fixture
def advances(monkeypatch) -> list[float]:
    """Every ``Simulation.advance`` call's ``dt``: the steps the runtime takes."""
    calls, advance = [], Simulation.advance

    def counted(self, dt, base, **inputs):
        calls.append(dt)
        return advance(self, dt, base, **inputs)

    monkeypatch.setattr(Simulation, "advance", counted)
    return calls


# --- sampled input --------------------------------------------------------------------------


def test_the_sampled_transforms_become_a_motion_through_every_frame():
    offsets = np.stack([0.1 * np.arange(FRAMES) ** 2, np.zeros(FRAMES), np.zeros(FRAMES)], 1)
    sampled = prepared([STRAND], frame_end=FRAMES, base_matrices=_translations(offsets))

    assert sampled.base_of_curve.tolist() == [0]
    for frame in range(1, FRAMES + 1):
        np.testing.assert_array_equal(sampled.matrices_at(frame)[0, :3, 3], offsets[frame - 1])
        # Time 0 at the start frame, one frame every 1/fps seconds.
        motion = sampled.trajectory((frame - 1) / FPS)
        np.testing.assert_allclose(motion.position[0], offsets[frame - 1], atol=1e-12)
    assert sampled.reference is None
    assert sampled.obstacle_trajectory is None
    assert sampled.pose_curves is None


def test_hair_on_a_surface_has_a_base_per_curve():
    collected = samples([STRAND, STRAND], frame_end=2)
    collected.base_matrices[:] = [np.tile(np.eye(4), (2, 1, 1))] * 2
    collected.attachment = SurfaceAttachment("scalp", np.zeros(2, int), np.ones((2, 3)) / 3, 1)

    assert collected.prepared(FPS, "").base_of_curve.tolist() == [0, 1]


def test_a_motion_the_engine_refuses_names_the_object():
    collected = samples([STRAND], frame_end=3)
    collected.base_matrices[1] = np.full((1, 4, 4), np.nan)

    with pytest.raises(SceneInputError, match="'strands': its motion cannot drive strands"):
        collected.prepared(FPS, "")


def _tetrahedron(offset: float = 0.0) -> np.ndarray:
    return np.array([(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1 + offset)], dtype=np.float64)


TETRAHEDRON = TriangleMesh(
    _tetrahedron(), np.array([(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]), 0.1
)


@pytest.mark.parametrize(("moved", "deforms"), [(2e-6, True), (5e-7, False)])
def test_a_mesh_deforms_where_a_vertex_moves_more_than_a_micrometre(moved, deforms):
    shapes = ObstacleShapes((Sphere(0.1), TETRAHEDRON), ("ball", "head"))
    per_frame = [(None, _tetrahedron()), (None, _tetrahedron(moved)), (None, _tetrahedron())]

    marked, vertices = with_deformation(shapes, per_frame)

    assert [getattr(shape, "deforming", False) for shape in marked.shapes] == [False, deforms]
    assert marked.names == ("ball", "head")
    assert list(vertices) == ([1] if deforms else [])
    if deforms:
        np.testing.assert_array_equal(vertices[1], np.stack([frame[1] for frame in per_frame]))


def test_deforming_meshes_are_sampled_at_the_frame_rate_and_their_samples_handed_over():
    collected = samples([STRAND], frame_end=3)
    collected.obstacles = ObstacleShapes((TETRAHEDRON,), ("head",))
    collected.obstacle_matrices[:] = [np.eye(4)[None]] * 3
    collected.obstacle_vertices[:] = [(_tetrahedron(0.1 * k),) for k in range(3)]

    sampled = collected.prepared(FPS, "")

    assert sampled.obstacles.shapes[0].deforming
    assert collected.obstacle_vertices == []
    positions, velocities = sampled.deforming[0](1.5 / FPS)
    np.testing.assert_allclose(positions[3], (0, 0, 1.15))
    np.testing.assert_allclose(velocities[3], (0, 0, 0.1 * FPS))


# --- change detection -----------------------------------------------------------------------


def test_bases_count_as_changed_beyond_float32_round_off():
    sampled = prepared([STRAND], frame_end=3)
    observed = np.eye(4)[None].copy()

    assert not sampled.bases_changed(2, observed)
    observed[0, 0, 3] = 1e-6
    assert not sampled.bases_changed(2, observed)
    observed[0, 0, 3] = 1e-4
    assert sampled.bases_changed(2, observed)
    assert sampled.bases_changed(2, np.tile(np.eye(4), (2, 1, 1)))


def test_a_reference_or_pose_object_that_appears_or_moves_is_a_change():
    sampled = prepared([STRAND], frame_end=3)

    assert not sampled.reference_changed(2, None)
    assert sampled.reference_changed(2, np.eye(4)[None])
    assert not sampled.pose_changed(2, None)
    assert sampled.pose_changed(2, drawn([STRAND]))

    collected = samples([STRAND], frame_end=3)
    collected.pose_curves[:] = [drawn([STRAND, STRAND], name="pose")] * 3
    posed = collected.prepared(FPS, "")
    assert not posed.pose_changed(2, drawn([STRAND, STRAND], name="pose"))
    assert posed.pose_changed(2, drawn([STRAND], name="pose"))
    assert posed.pose_changed(2, drawn([STRAND, [(0, 0, 1), (0.2, 0, 0.99)]], name="pose"))


def test_a_pin_object_that_appears_or_moves_is_a_change():
    collected = samples([STRAND], frame_end=3)
    collected.pin_matrices[:] = [np.eye(4)[None]] * 3
    pinned = collected.prepared(FPS, "")

    assert not pinned.pin_changed(2, np.eye(4)[None] + 1e-6)
    assert pinned.pin_changed(2, np.eye(4)[None] + 1e-3)
    assert pinned.pin_changed(2, None)
    assert prepared([STRAND], frame_end=3).pin_changed(2, np.eye(4)[None])


PIN_FRAMES = 10
# Two 30 cm strands sagging in a U from their roots to their tips 20 cm away at the same height.
_ARC = np.linspace(0.0, 1.0, 9)
SAGGING = [
    np.stack((0.2 * _ARC, 0 * _ARC + y, 1 - 0.1 * np.sin(math.pi * _ARC)), 1) for y in (0, 0.1)
]


def _sliding() -> np.ndarray:
    """(PIN_FRAMES, 1, 4, 4) transforms from the point (0.2, 0.05, 1) easing into and out of a
    slide of 5 cm along y and a turn of 0.1 rad about z: the tips stay in reach."""
    matrices = np.tile(np.eye(4), (PIN_FRAMES, 1, 1, 1))
    for index in range(PIN_FRAMES):
        u = index / (PIN_FRAMES - 1)
        eased = 3 * u**2 - 2 * u**3
        cos, sin = math.cos(0.1 * eased), math.sin(0.1 * eased)
        matrices[index, 0, :2, :2] = ((cos, -sin), (sin, cos))
        matrices[index, 0, :3, 3] = (0.2, 0.05 + 0.05 * eased, 1.0)
    return matrices


PINNED = settings(frame_end=PIN_FRAMES, segment_count=4)
PINNED_TIPS = [4, 9]


def _pinned_runtime(matrices: np.ndarray) -> StrandSystemRuntime:
    """The runtime of :data:`SAGGING` with their tips pinned to a pin whose world transforms
    are ``matrices`` (PIN_FRAMES, 1, 4, 4), built with :data:`PINNED`."""
    collected = samples(SAGGING, frame_end=PIN_FRAMES)
    collected.pin_matrices[:] = list(matrices)
    runtime = StrandSystemRuntime(collected.prepared(FPS, ""))
    runtime.build(PINNED, Values())
    return runtime


def _tip_targets(matrices: np.ndarray) -> np.ndarray:
    """Where the pin of ``matrices`` takes the drawn tips of :data:`SAGGING` at every frame,
    (PIN_FRAMES, 2, 3): their offsets in its frame at the first, carried by it."""
    drawn_tips = np.array([np.append(strand[-1], 1.0) for strand in SAGGING]).T
    offsets = np.linalg.inv(matrices[0, 0]) @ drawn_tips
    return (matrices[:, 0] @ offsets)[:, :3].transpose(0, 2, 1)


def test_pinned_tips_keep_their_start_offset_in_the_pins_frame():
    runtime = _pinned_runtime(_sliding())
    targets = _tip_targets(_sliding())
    for frame in range(1, PIN_FRAMES + 1):
        tips = runtime.points_at(frame, PINNED, Values())[PINNED_TIPS]
        np.testing.assert_allclose(tips, targets[frame - 1], atol=2e-3)


def test_tips_left_behind_by_their_pin_are_reported_and_tips_that_follow_are_not():
    """The pin slides 5 cm (in reach: nothing reported), or 50 cm away along x (30 cm strands
    whose roots stay: the tips trail it, and the status line says by how much and from which
    frame, and how to help it)."""
    following = _pinned_runtime(_sliding())
    following.points_at(PIN_FRAMES, PINNED, Values())
    assert following.trailing == {}
    assert following.trailing_summary() == ""

    fleeing = _sliding()
    fleeing[:, 0, 0, 3] += np.linspace(0.0, 0.5, PIN_FRAMES)
    trailing = _pinned_runtime(fleeing)
    tips = trailing.points_at(PIN_FRAMES, PINNED, Values())[PINNED_TIPS]

    first = min(trailing.trailing)
    assert 1 < first < PIN_FRAMES
    off = np.linalg.norm(tips - _tip_targets(fleeing)[-1], axis=1).max()
    assert trailing.trailing[PIN_FRAMES] == pytest.approx(off, rel=1e-5)
    summary = trailing.trailing_summary()
    assert (
        f"off their Pin Object in {len(trailing.trailing)} frame(s) from frame {first}" in summary
    )
    assert "raise Steps per Second" in summary
    trailing.free_frames()
    assert trailing.trailing == {}


def test_obstacles_count_as_moved_beyond_float32_round_off():
    collected = samples([STRAND], frame_end=2)
    collected.obstacles = ObstacleShapes((Sphere(0.1),), ("ball",))
    collected.obstacle_matrices[:] = [np.eye(4)[None]] * 2
    collected.obstacle_vertices[:] = [(None,)] * 2
    sampled = collected.prepared(FPS, "")

    assert not sampled.obstacles_moved(1, np.eye(4)[None] + 1e-6)
    assert sampled.obstacles_moved(1, np.eye(4)[None] + 1e-3)
    assert not prepared([STRAND], frame_end=2).obstacles_moved(1, np.zeros((0, 4, 4)))


def test_the_same_input_is_every_value_read_equal():
    sampled = prepared([STRAND])

    assert sampled.same_input(prepared([STRAND]))
    assert not sampled.same_input(prepared([[(0.0, 0.0, 1.0), (0.2, 0.0, 1.001)]]))
    changed_field = prepared([STRAND])
    changed_field.fields[3] = SceneFields(ignored=("Vortex (Tube falloff)",))
    assert not sampled.same_input(changed_field)
    # NaN never equals, not even itself: such an input is never the same as another.
    broken = prepared([[(0.0, 0.0, 1.0), (np.nan, 0.0, 1.0)]])
    assert not broken.same_input(broken)


# --- the runtime's frames -------------------------------------------------------------------


def test_frames_are_simulated_once_in_order_and_replayed_from_the_cache(advances):
    runtime = _runtime()

    fourth = runtime.points_at(4, settings(frame_end=FRAMES), Values())
    assert len(advances) == 3  # frames 2, 3 and 4; frame 1 is the start
    assert sorted(runtime.frames) == [1, 2, 3, 4]
    assert fourth.dtype == np.float32
    assert runtime.points_at(4, settings(frame_end=FRAMES), Values()) is fourth
    assert runtime.points_at(2, settings(frame_end=FRAMES), Values()) is runtime.frames[2]
    assert len(advances) == 3
    # Before the start the strands rest; past the end they hold the end frame's shape.
    before = runtime.points_at(-5, settings(frame_end=FRAMES), Values())
    assert before is runtime.frames[1]
    np.testing.assert_allclose(before, runtime.rest_points(), atol=1e-7)
    assert runtime.points_at(100, settings(frame_end=FRAMES), Values()) is runtime.frames[FRAMES]
    assert len(advances) == FRAMES - 1
    assert runtime.last_frame == FRAMES
    assert runtime.cached_bytes() == FRAMES * 9 * 3 * 4  # 8 segments: 9 float32 points


def test_gravity_and_only_gravity_moves_a_still_strand():
    falling, weightless = _runtime(), _runtime(Values(gravity_factor=0.0))

    end = falling.points_at(FRAMES, settings(frame_end=FRAMES), Values())
    rest = weightless.points_at(FRAMES, settings(frame_end=FRAMES), Values(gravity_factor=0.0))

    np.testing.assert_allclose(rest, falling.rest_points(), atol=1e-7)
    assert end[-1, 2] < 1.0 - 0.01, "the tip did not fall"
    np.testing.assert_array_equal(end[0], STRAND[0])  # the root stays on its base


def test_keyed_values_drive_the_step_that_ends_on_their_frame():
    def gravity_from_frame_4(frame: float) -> float:
        return 0.0 if frame < 4 else 1.0

    values = Values(keyed={"gravity_factor": gravity_from_frame_4})
    runtime = _runtime(values)

    runtime.points_at(FRAMES, settings(frame_end=FRAMES), values)

    for frame in (1, 2, 3):
        np.testing.assert_allclose(runtime.frames[frame], runtime.rest_points(), atol=1e-7)
    assert runtime.frames[4][-1, 2] < 1.0 - 1e-4


def test_a_rebuild_keeps_the_frames_unless_settings_or_keyframes_changed():
    runtime = _runtime()
    runtime.points_at(3, settings(frame_end=FRAMES), Values())
    model = runtime.model

    runtime.build(settings(frame_end=FRAMES), Values())
    assert runtime.model is model
    assert sorted(runtime.frames) == [1, 2, 3]

    runtime.build(settings(frame_end=FRAMES), Values(youngs_modulus=0.1))
    assert runtime.frames == {}
    runtime.points_at(2, settings(frame_end=FRAMES), Values(youngs_modulus=0.1))

    runtime.build(settings(frame_end=FRAMES, segment_count=4), Values(youngs_modulus=0.1))
    assert runtime.frames == {}
    assert runtime.model is not model
    assert runtime.model.n_links == 4


def test_frames_simulated_again_equal_the_first_bit_for_bit():
    runtime = _runtime()
    first = {
        frame: runtime.points_at(frame, settings(frame_end=FRAMES), Values())
        for frame in range(1, FRAMES + 1)
    }

    runtime.free_frames()
    assert runtime.frames == {}
    again = runtime.points_at(FRAMES, settings(frame_end=FRAMES), Values())

    np.testing.assert_array_equal(again, first[FRAMES])
    for frame in range(1, FRAMES):
        np.testing.assert_array_equal(runtime.frames[frame], first[frame])


def test_a_failed_step_keeps_earlier_frames_and_stops_later_ones_until_freed(monkeypatch):
    runtime = _runtime()
    advance, calls = Simulation.advance, []

    def failing_at_frame_4(self, dt, base, **inputs):
        calls.append(dt)
        if len(calls) == 3:
            raise SimulationDivergedError("forced failure")
        return advance(self, dt, base, **inputs)

    monkeypatch.setattr(Simulation, "advance", failing_at_frame_4)
    with pytest.raises(SimulationDivergedError, match="forced failure") as failure:
        runtime.points_at(FRAMES, settings(frame_end=FRAMES), Values())

    assert runtime.failed_frame == 4
    assert sorted(runtime.frames) == [1, 2, 3]
    runtime.points_at(3, settings(frame_end=FRAMES), Values())
    with pytest.raises(SimulationDivergedError) as again:
        runtime.points_at(5, settings(frame_end=FRAMES), Values())
    assert again.value is failure.value
    assert len(calls) == 3, "a stopped runtime stepped again"

    monkeypatch.setattr(Simulation, "advance", advance)
    runtime.free_frames()
    assert runtime.failed_frame is None
    runtime.points_at(FRAMES, settings(frame_end=FRAMES), Values())
    assert sorted(runtime.frames) == list(range(1, FRAMES + 1))


def test_a_live_preview_has_played_a_bake_only_with_every_frame_of_the_same_input():
    live = _runtime()
    for frame in range(1, FRAMES):
        live.points_at(frame, settings(frame_end=FRAMES), Values())
    fresh = _runtime()

    assert not live.has_played(fresh)  # the last frame is missing
    live.points_at(FRAMES, settings(frame_end=FRAMES), Values())
    assert live.has_played(fresh)
    assert not live.has_played(_runtime(Values(air_drag=0.1)))
    other_input = StrandSystemRuntime(prepared([[(0.0, 0.0, 1.0), (0.21, 0.0, 1.0)]]))
    other_input.build(settings(frame_end=FRAMES), Values())
    assert not live.has_played(other_input)
    live.stale = "the curves or their modifiers were edited"
    assert not live.has_played(fresh)


def test_local_dynamics_without_a_reference_is_refused_naming_the_object():
    with pytest.raises(SceneInputError, match="'strands': Local Dynamics is 0.5 but no Reference"):
        _runtime(Values(local_dynamics=0.5))


# --- constraints and pose -------------------------------------------------------------------


def test_limits_of_half_a_turn_and_no_obstacles_leave_out_the_constraint_solver():
    inputs = constraint_inputs(prepared([STRAND]), MODEL)
    assert (inputs.obstacles, inputs.joint_limits, inputs.settings) == (None, None, None)


def test_a_swing_limit_alone_limits_swing_and_leaves_twist_free():
    inputs = constraint_inputs(
        prepared([STRAND]), replace(MODEL, swing_limit=0.5, contact_iterations=3)
    )

    assert inputs.obstacles is None
    assert inputs.joint_limits == JointLimits(swing=0.5, twist_min=-math.inf, twist_max=math.inf)
    assert inputs.settings == ConstraintSettings(contact_iterations=3)


def test_sampled_obstacles_are_built_for_the_engine_with_the_limits_off():
    collected = samples([STRAND], frame_end=2)
    collected.obstacles = ObstacleShapes((Sphere(0.1, name="ball"),), ("ball",))
    collected.obstacle_matrices[:] = [np.eye(4)[None]] * 2
    collected.obstacle_vertices[:] = [(None,)] * 2

    inputs = constraint_inputs(collected.prepared(FPS, ""), MODEL)

    assert inputs.obstacles.names == ("ball",)
    assert inputs.joint_limits is None


def _posed(pose_curves: list) -> tuple:
    collected = samples([STRAND, HANGING], frame_end=len(pose_curves))
    collected.pose_curves[:] = pose_curves
    sampled = collected.prepared(FPS, "")
    runtime = StrandSystemRuntime(sampled)
    runtime.build(settings(frame_end=len(pose_curves)), Values())
    return sampled, runtime


def test_a_pose_drawn_along_the_rest_shape_targets_the_rest_rotations():
    # The same two strands drawn with many more points: resampled as the strands are.
    dense = [np.linspace(*strand, 41) for strand in (STRAND, HANGING)]
    sampled, runtime = _posed([drawn(dense, name="pose")] * 3)

    pose = pose_trajectory(sampled, runtime.layout, runtime.model)

    expected = pose_rotations(runtime.model, runtime.model.rest_points)
    for frame in range(3):
        target = pose(frame / FPS).rotation
        np.testing.assert_allclose(np.abs(np.sum(target * expected, axis=1)), 1.0, atol=1e-9)
    assert pose_trajectory(prepared([STRAND]), runtime.layout, runtime.model) is None


def test_a_pose_needs_one_curve_per_strand():
    with pytest.raises(SceneInputError, match="its Pose 'pose' has 1 curves, one per strand"):
        _posed([drawn([STRAND], name="pose")] * 2)


def test_the_conversion_settings_decide_the_strands_the_runtime_builds():
    runtime = _runtime(segment_count=5)

    assert runtime.layout.point_counts.tolist() == [6]
    assert runtime.model.n_links == 5
