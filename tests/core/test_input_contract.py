"""The engine's input contract: whatever a script or a pipeline passes to the constructors of
the public API, the answer is a working object or one of the documented ``StrandError``
subclasses, never another exception (property-based, with a fixed seed)."""

import dataclasses
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from oriented_strands.core import (
    BaseMotion,
    Capsule,
    ConstraintSettings,
    Falloff,
    ForceFields,
    InvalidInputError,
    InvalidStrandError,
    JointLimits,
    JointRotation,
    Material,
    ObstacleMotion,
    Plane,
    PointField,
    PointPath,
    Pose,
    PoseTrajectory,
    RootToTip,
    Simulation,
    SolverSettings,
    Sphere,
    StrandError,
    StrandParameters,
    StrandSpec,
    TriangleMesh,
    Turbulence,
    VertexTrajectory,
    VortexField,
    Wind,
    apply_fields,
    build_model,
    build_obstacles,
    pose_rotations,
)
from oriented_strands.core.obstacles import signed_distances
from strands import STILL, box_mesh

# Values a caller may pass by mistake: non-finite, huge, negative, of the wrong kind.
MISTAKES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e300, max_value=1e300),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.complex_numbers(),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
# ORIENTED_STRANDS_FUZZ_SCALE multiplies the examples drawn (a release runs more,
# docs/development.md).
SCALE = int(os.environ.get("ORIENTED_STRANDS_FUZZ_SCALE", "1"))
CONTRACT = settings(
    max_examples=150 * SCALE,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Every field of each record: a field added later is checked too.
PARAMETERS = [field.name for field in dataclasses.fields(StrandParameters)]
STRAND_FIELDS = [field.name for field in dataclasses.fields(StrandSpec)]
SOLVER_FIELDS = [field.name for field in dataclasses.fields(SolverSettings)]


def _points(links=3):
    return np.stack(
        [np.zeros(links + 1), np.zeros(links + 1), -np.linspace(0.0, 0.2, links + 1)], 1
    )


def _answers_by_the_contract(make):
    """Call ``make``; a model it returns is usable (finite mass), an error is a StrandError."""
    try:
        result = make()
    except StrandError:
        return None
    return result


@CONTRACT
@given(name=st.sampled_from(PARAMETERS), value=MISTAKES)
def test_any_parameter_value_builds_a_model_or_is_refused(name, value):
    model = _answers_by_the_contract(
        lambda: build_model([StrandSpec(_points())], StrandParameters(**{name: value}))
    )
    if model is not None:
        assert np.isfinite(model.backend.to_host(model.mass)).all()
        assert np.isfinite(model.backend.to_host(model.inertia)).all()


@CONTRACT
@given(field=st.sampled_from(STRAND_FIELDS), value=MISTAKES)
def test_any_strand_field_builds_a_model_or_is_refused(field, value):
    specs = [StrandSpec(_points())]
    branch = {"points": _points() + [0.1, 0.0, 0.0], "parent": None}
    branch[field] = value
    specs.append(StrandSpec(**branch))
    model = _answers_by_the_contract(lambda: build_model(specs))
    if model is not None:
        assert model.n_strands == 2
        assert model.n_bases <= 2


@CONTRACT
@given(field=st.sampled_from(SOLVER_FIELDS), value=MISTAKES)
def test_any_solver_setting_is_taken_or_refused(field, value):
    solver = _answers_by_the_contract(lambda: SolverSettings(**{field: value}))
    if solver is not None:
        # Taken as given: a whole number where one is counted, a finite one where measured.
        value = getattr(solver, field)
        if field in (
            "substeps",
            "max_substeps",
            "newton_max_iterations",
            "max_subdivision_depth",
            "workers",
        ):
            assert value is None or isinstance(value, int | np.integer)
        elif field in ("tolerance", "newton_tolerance", "subdivision_threshold"):
            assert value is None or math.isfinite(value)
            assert value is None or value > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"strands": StrandSpec(_points())}, "strands must be a sequence of StrandSpec"),
        ({"strands": [_points()]}, "strands[0] must be a StrandSpec"),
        ({"parameters": {"radius": 0.001}}, "parameters must be a StrandParameters"),
        (
            {"base_rest_poses": np.diag([1.0, 1.0, -1.0, 1.0])[None]},
            "base_rest_poses[0] is not a rotation",
        ),
        ({"parameters": StrandParameters(radius=1e200)}, "too large to represent"),
    ],
)
def test_malformed_arguments_name_what_is_wrong(arguments, message):
    call = {"strands": [StrandSpec(_points())], **arguments}
    with pytest.raises(StrandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_model(**call)


def test_whole_numbers_are_not_rounded():
    """A base of 0.5, a parent link of 0.5 or 2.7 substeps are refused, not truncated."""
    with pytest.raises(StrandError, match="base must be a whole number"):
        build_model([StrandSpec(_points(), base=0.5)])
    with pytest.raises(StrandError, match="two whole numbers"):
        build_model([StrandSpec(_points()), StrandSpec(_points()[1:], parent=(0, 0.5))])
    with pytest.raises(StrandError, match="substeps must be a whole number"):
        SolverSettings(substeps=2.7)
    assert not math.isnan(SolverSettings(substeps=np.int64(3)).substeps)


def test_a_simulation_runs_with_settings_taken_as_whole_numbers():
    sim = Simulation(build_model([StrandSpec(_points())]), SolverSettings(substeps=np.int64(2)))
    sim.advance(1 / 24, STILL)
    assert np.isfinite(sim.points()).all()


# --- obstacles --------------------------------------------------------------------------------

# Arrays of any shape (scalars to (2, 4, 4, 1)) holding any floats: a wrong shape, a NaN.
ARRAYS = arrays(
    np.float64,
    array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
)
ARRAY_MISTAKES = st.one_of(MISTAKES, ARRAYS)
# A few examples where a test builds or steps something (meshes, simulations).
CONTRACT_FEW = settings(CONTRACT, max_examples=60 * SCALE)


VERTICES, TRIANGLES = box_mesh((-0.1, -0.1, -0.1), (0.1, 0.1, 0.1))
SHAPES = {
    Plane: {"material": Material(), "name": "floor"},
    Sphere: {"radius": 0.1, "material": Material(), "name": "ball"},
    Capsule: {"start": (0.0, 0.0, 0.0), "end": (0.0, 0.2, 0.0), "radius": 0.05, "name": "bone"},
    TriangleMesh: {
        "vertices": VERTICES,
        "triangles": TRIANGLES,
        "cell_size": 0.05,
        "padding": None,
        "material": Material(),
        "name": "box",
        "deforming": False,
        "thickness": 0.0,
    },
}
SHAPE_FIELDS = [(kind, name) for kind, values in SHAPES.items() for name in values]
# One of each kind, the mesh deforming (it takes vertices from its motion).
OBSTACLES = build_obstacles(
    [
        Plane(),
        Sphere(0.1),
        Capsule((0, 0, 0), (0, 0.2, 0), 0.05),
        TriangleMesh(VERTICES, TRIANGLES, 0.05, deforming=True),
    ]
)
K = OBSTACLES.n_obstacles
MOTION_ARGUMENTS = {
    "poses": np.tile(np.eye(4), (K, 1, 1)),
    "angular_velocity": np.zeros((K, 3)),
    "linear_velocity": np.zeros((K, 3)),
    "mesh_vertices": {3: VERTICES},
    "mesh_velocities": {3: np.zeros_like(VERTICES)},
}
# Matrices that are not rigid transforms: mirrored, scaled, sheared, projective.
NOT_RIGID = [
    np.diag([1.0, 1.0, -1.0, 1.0]),
    np.diag([2.0, 2.0, 2.0, 1.0]),
    np.array([[1.0, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]),
    np.array([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0.1, 0, 0, 1]]),
]


@CONTRACT
@given(
    field=st.sampled_from([field.name for field in dataclasses.fields(Material)]), value=MISTAKES
)
def test_any_material_value_is_taken_or_refused(field, value):
    material = _answers_by_the_contract(lambda: Material(**{field: value}))
    if material is not None:
        assert 0.0 <= getattr(material, field) < math.inf
        assert material.restitution <= 1.0


@CONTRACT_FEW
@given(shape=st.sampled_from(SHAPE_FIELDS), value=ARRAY_MISTAKES)
def test_any_shape_value_builds_obstacles_or_is_refused(shape, value):
    kind, field = shape
    arguments = {**SHAPES[kind], field: value}
    obstacles = _answers_by_the_contract(lambda: build_obstacles([kind(**arguments)]))
    if obstacles is not None:
        motion = ObstacleMotion.from_host(obstacles, np.eye(4)[None])
        distance, normal = signed_distances(obstacles, motion, np.zeros((3, 1)) + 0.3)
        assert not np.isnan(distance).any()
        assert np.isfinite(normal).all()


@CONTRACT
@given(
    arguments=st.sampled_from(["shapes", "backend", "dtype"]),
    value=st.one_of(MISTAKES, st.lists(ARRAY_MISTAKES, max_size=2)),
)
def test_any_obstacle_list_builds_or_is_refused(arguments, value):
    call = {"shapes": [Sphere(0.1)], "backend": "numpy", "dtype": "float64", arguments: value}
    obstacles = _answers_by_the_contract(lambda: build_obstacles(**call))
    if obstacles is not None:
        assert obstacles.n_obstacles == len(call["shapes"])


@CONTRACT
@given(
    field=st.sampled_from(list(MOTION_ARGUMENTS)),
    value=st.one_of(
        ARRAY_MISTAKES,
        st.sampled_from(NOT_RIGID).map(lambda m: np.tile(m, (K, 1, 1))),
        st.dictionaries(
            st.one_of(st.integers(-2, 5), st.floats(), st.text(max_size=2), st.booleans()),
            ARRAY_MISTAKES,
            max_size=2,
        ),
        st.tuples(st.integers(0, K - 1), st.integers(0, 3), st.integers(0, 3), MISTAKES),
    ),
)
def test_any_obstacle_motion_is_taken_or_refused(field, value):
    arguments = dict(MOTION_ARGUMENTS)
    if isinstance(value, tuple):  # one entry of the valid array spoilt
        (i, j, k), value = value[:3], value[3]
        if field.startswith("mesh"):
            array = np.array(arguments[field][3], dtype=object)
            array[i, j % 3] = value
            value = {3: array}
        else:
            array = np.array(arguments[field], dtype=object)
            array[(i, j, k) if field == "poses" else (i, j % 3)] = value
            value = array
    arguments[field] = value
    motion = _answers_by_the_contract(lambda: ObstacleMotion.from_host(OBSTACLES, **arguments))
    if motion is not None:
        rotation = motion.rotation.transpose(2, 0, 1)
        gram = rotation @ rotation.transpose(0, 2, 1)
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(3), gram.shape), atol=1e-9)
        np.testing.assert_allclose(np.linalg.det(rotation), 1.0, atol=1e-9)
        for array in (motion.position, motion.angular_velocity, motion.linear_velocity):
            assert np.isfinite(array).all()
        for array in (*motion.surface_vertices, *motion.surface_velocities):
            assert array is None or (array.shape == (3, len(VERTICES)) and np.isfinite(array).all())


@pytest.mark.parametrize("matrix", NOT_RIGID)
def test_obstacle_poses_that_are_not_rigid_are_refused(matrix):
    poses = np.tile(np.eye(4), (K, 1, 1))
    poses[2] = matrix
    with pytest.raises(InvalidInputError, match=r"obstacle poses\[2\]"):
        ObstacleMotion.from_host(OBSTACLES, poses)


def test_a_deforming_mesh_keeps_its_vertex_count():
    with pytest.raises(InvalidInputError, match="the mesh has 8 vertices"):
        ObstacleMotion.from_host(
            OBSTACLES, MOTION_ARGUMENTS["poses"], mesh_vertices={3: VERTICES[:7]}
        )


@CONTRACT
@given(
    field=st.sampled_from(["rate", "vertices", "time"]),
    value=ARRAY_MISTAKES,
)
def test_any_vertex_trajectory_is_taken_or_refused(field, value):
    arguments = {"rate": 24.0, "vertices": np.stack([VERTICES, 2 * VERTICES]), "time": 0.02}
    arguments[field] = value

    def sample():
        return VertexTrajectory(arguments["rate"], arguments["vertices"])(arguments["time"])

    sampled = _answers_by_the_contract(sample)
    if sampled is not None:
        positions, velocities = sampled
        assert np.isfinite(positions).all()
        assert np.isfinite(velocities).all()


# --- force fields -----------------------------------------------------------------------------

FIELD_ARGUMENTS = {
    Falloff: {"power": 2.0, "radius": 0.1, "max_distance": 5.0},
    RootToTip: {"root": 1.0, "tip": 0.5, "exponent": 2.0},
    Turbulence: {"amplitude": 1.0, "length_scale": 0.3, "time_scale": 0.5, "seed": 3, "modes": 8},
    Wind: {
        "velocity": (1.0, 0.0, 0.0),
        "origin": (0.0, 0.0, 0.0),
        "falloff": Falloff(),
        "turbulence": None,
        "weight": RootToTip(),
    },
    PointField: {
        "centre": (0.0, 0.0, 0.0),
        "strength": 1.0,
        "inward": False,
        "falloff": Falloff(),
        "weight": RootToTip(),
    },
    VortexField: {
        "centre": (0.0, 0.0, 0.0),
        "axis": (0.0, 0.0, 1.0),
        "strength": 1.0,
        "core_radius": 0.1,
        "falloff": Falloff(),
        "weight": RootToTip(),
    },
    ForceFields: {"wind": (), "force": ()},
}
FIELD_FIELDS = [(kind, name) for kind, values in FIELD_ARGUMENTS.items() for name in values]
# Where each part of a field goes in a field that acts.
AS_WIND = {
    Falloff: lambda falloff: Wind((1.0, 0.0, 0.0), falloff=falloff),
    RootToTip: lambda weight: Wind((1.0, 0.0, 0.0), weight=weight),
    Turbulence: lambda turbulence: Wind((1.0, 0.0, 0.0), turbulence=turbulence),
}


def _simulation(**arguments):
    return Simulation(
        build_model([StrandSpec(_points()), StrandSpec(_points() + 0.1)]), **arguments
    )


@CONTRACT_FEW
@given(
    part=st.sampled_from(FIELD_FIELDS),
    value=st.one_of(ARRAY_MISTAKES, st.lists(MISTAKES, max_size=2)),
)
def test_any_field_value_is_taken_or_refused(part, value):
    kind, name = part
    made = _answers_by_the_contract(lambda: kind(**{**FIELD_ARGUMENTS[kind], name: value}))
    if made is None:
        return
    if kind in AS_WIND:
        made = AS_WIND[kind](made)
    fields = made if kind is ForceFields else ForceFields(wind=[made], force=[made])
    simulation = _simulation()
    apply_fields(simulation, fields.wind, fields.force, time=0.5)
    assert np.isfinite(simulation.control.wind_velocity).all()
    assert np.isfinite(simulation.control.external_force).all()


@CONTRACT
@given(argument=st.sampled_from(["simulation", "wind", "force", "time"]), value=ARRAY_MISTAKES)
def test_any_apply_fields_argument_is_taken_or_refused(argument, value):
    simulation = _simulation()
    call = {"simulation": simulation, "wind": [Wind((1.0, 0.0, 0.0))], "force": (), "time": None}
    call[argument] = value
    if _answers_by_the_contract(lambda: apply_fields(**call) or True):
        assert np.isfinite(simulation.control.wind_velocity).all()


# --- poses -------------------------------------------------------------------------------------

MODEL = build_model(
    [StrandSpec(_points()), StrandSpec(_points()[1:] + [0.05, 0, 0], parent=(0, 0))]
)
REST = MODEL.to_strand_order(MODEL.rest_rotation)
POSE_CALLS = {
    "Pose.rotation": lambda v: Pose(v),
    "Pose.angular_velocity": lambda v: Pose(REST, v),
    "PoseTrajectory.times": lambda v: PoseTrajectory(v, np.stack([REST, REST])),
    "PoseTrajectory.rotations": lambda v: PoseTrajectory([0.0, 1.0], v),
    "PoseTrajectory time": lambda v: PoseTrajectory([0.0, 1.0], np.stack([REST, REST]))(v),
    "pose_rotations model": lambda v: pose_rotations(v, MODEL.rest_points),
    "pose_rotations points": lambda v: pose_rotations(MODEL, v),
    "pose_rotations base_poses": lambda v: pose_rotations(MODEL, MODEL.rest_points, v),
}


@CONTRACT
@given(call=st.sampled_from(list(POSE_CALLS)), value=ARRAY_MISTAKES)
def test_any_pose_is_taken_or_refused(call, value):
    pose = _answers_by_the_contract(lambda: POSE_CALLS[call](value))
    if isinstance(pose, PoseTrajectory):
        pose = pose(0.5)
    if pose is not None:
        rotation = pose.rotation if isinstance(pose, Pose) else pose
        assert np.isfinite(rotation).all()
        np.testing.assert_allclose(np.linalg.norm(rotation, axis=-1), 1.0)


def test_a_pose_of_points_keeps_a_branch_where_its_target_root_lies_anywhere():
    """Target points give directions only: a branch's root point off its parent link is fine."""
    points = MODEL.rest_points.copy()
    points[MODEL.point_offsets[1] :] += [0.3, 0.2, 0.0]
    np.testing.assert_allclose(pose_rotations(MODEL, points), REST, atol=1e-12)


# --- the simulation ----------------------------------------------------------------------------

SIMULATION_ARGUMENTS = [
    "model",
    "settings",
    "gravity",
    "obstacles",
    "joint_limits",
    "constraint_settings",
    "interaction",
]


@CONTRACT_FEW
@given(argument=st.sampled_from(SIMULATION_ARGUMENTS), value=ARRAY_MISTAKES)
def test_any_simulation_argument_is_taken_or_refused(argument, value):
    call = {"model": build_model([StrandSpec(_points())]), argument: value}
    simulation = _answers_by_the_contract(lambda: Simulation(**call))
    if simulation is not None:
        simulation.advance(1 / 24, STILL)
        assert np.isfinite(simulation.points()).all()


def _state(simulation):
    """Everything of a simulation that an advance may change, as host copies."""
    state = simulation.state
    arrays = [state.q, state.w, state.base_rotation, state.base_position]
    control = simulation.control
    arrays += [getattr(control, item.name) for item in dataclasses.fields(control)]
    if simulation.constraints is not None:
        arrays.append(simulation.constraints.obstacle_motion.rotation)
    return [None if a is None else np.array(a) for a in arrays] + [state.time, simulation.stats]


def _assert_unchanged(before, simulation):
    """``simulation`` is as :func:`_state` found it (``before``), bit for bit."""
    for old, new in zip(before, _state(simulation), strict=True):
        if isinstance(old, np.ndarray):
            np.testing.assert_array_equal(old, new, strict=True)
        else:
            assert old == new


def _source(argument, value):
    """A callable of time returning ``value``, made into what ``argument`` takes where it has
    the shape of one: what a script's callable may build from bad numbers."""

    def source(t):
        if argument == "base" and np.shape(value)[-2:] == (4, 4):
            return BaseMotion.still(np.reshape(value, (-1, 4, 4)))
        if argument == "pose" and np.ndim(value) == 2:
            return Pose(value)
        if argument == "obstacle_motion" and np.ndim(value) == 3:
            return ObstacleMotion.from_host(OBSTACLES, value)
        return value

    return source


@CONTRACT_FEW
@given(
    argument=st.sampled_from(
        [
            "dt",
            "base",
            "base(t)",
            "pose",
            "pose(t)",
            "fields",
            "obstacle_motion",
            "obstacle_motion(t)",
        ]
    ),
    value=st.one_of(
        ARRAY_MISTAKES,
        st.sampled_from(NOT_RIGID).map(lambda m: m[None]),
        st.just(STILL),
        st.just(np.full((1, 4, 4), np.nan)),
    ),
)
def test_a_refused_advance_leaves_the_simulation_as_it_was(argument, value):
    simulation = Simulation(
        build_model([StrandSpec(_points())]), obstacles=build_obstacles([Sphere(0.05)])
    )
    simulation.advance(1 / 24, STILL)
    before = _state(simulation)
    call = {"dt": 1 / 24, "base": STILL}
    name = argument.removesuffix("(t)")
    call[name] = _source(name, value) if argument.endswith("(t)") else value
    dt = call.pop("dt")
    base = call.pop("base")
    stats = _answers_by_the_contract(lambda: simulation.advance(dt, base, **call))
    if stats is None:
        _assert_unchanged(before, simulation)
    else:
        assert np.isfinite(simulation.points()).all()


CONSTRAINT_FIELDS = [field.name for field in dataclasses.fields(ConstraintSettings)]


@CONTRACT
@given(field=st.sampled_from(CONSTRAINT_FIELDS), value=ARRAY_MISTAKES)
def test_any_constraint_setting_is_taken_or_refused(field, value):
    settings = _answers_by_the_contract(lambda: ConstraintSettings(**{field: value}))
    if settings is not None:
        # Taken as given: a whole number where one is counted, a number where one is measured.
        taken = getattr(settings, field)
        if field in ("iterations", "contact_iterations", "passes"):
            assert taken is None or (isinstance(taken, int | np.integer) and taken >= 1)
        elif field == "fractions":
            assert all(0.0 < f <= 1.0 for f in taken)
        else:
            assert float(taken) > 0 or float(taken) == 0


@CONTRACT_FEW
@given(field=st.sampled_from(["swing", "twist_min", "twist_max"]), value=ARRAY_MISTAKES)
def test_any_joint_limit_is_taken_or_refused(field, value):
    model = build_model([StrandSpec(_points())])
    simulation = _answers_by_the_contract(
        lambda: Simulation(model, joint_limits=JointLimits(**{field: value}))
    )
    if simulation is not None:
        simulation.advance(1 / 24, STILL)
        assert np.isfinite(simulation.points()).all()


@CONTRACT_FEW
@given(kind=st.sampled_from([PointPath, JointRotation]), value=ARRAY_MISTAKES)
def test_any_animated_constraint_target_is_taken_or_refused(kind, value):
    """A path or rotation callable returning anything: the constraint is followed (finite
    points) or the advance is refused, naming the constraint."""
    simulation = Simulation(build_model([StrandSpec(_points())]), SolverSettings(workers=1))
    simulation.add_constraint(kind(0, 1, lambda t: value))
    if _answers_by_the_contract(lambda: simulation.advance(1 / 24, STILL)) is not None:
        assert np.isfinite(simulation.points()).all()


PARAMETER_NAMES = [
    *(name for name in PARAMETERS if name not in ("mass_per_length", "radius")),
    "gravity",
    "wind_velocity",
    "external_force",
]


@CONTRACT_FEW
@given(
    name=st.one_of(st.sampled_from(PARAMETER_NAMES), MISTAKES),
    value=st.one_of(ARRAY_MISTAKES, st.text(max_size=3).map(lambda text: lambda t: text)),
)
def test_any_animated_parameter_is_taken_or_refused(name, value):
    """``set_parameter`` with any name and any value (or a callable returning one): taken and
    stepped to finite points, or refused with the simulation as it was."""
    simulation = Simulation(build_model([StrandSpec(_points())]))
    simulation.advance(1 / 24, STILL)
    before = _state(simulation)
    if not _answers_by_the_contract(lambda: simulation.set_parameter(name, value) or True):
        _assert_unchanged(before, simulation)
        return
    _answers_by_the_contract(lambda: simulation.advance(1 / 24, STILL))
    assert np.isfinite(simulation.points()).all()


@CONTRACT_FEW
@given(argument=st.sampled_from(["base_poses", "time"]), value=ARRAY_MISTAKES)
def test_any_reset_argument_is_taken_or_refused(argument, value):
    """``reset`` with any base poses or time: the simulation restarts there and steps, or the
    call is refused and it steps on as before."""
    simulation = Simulation(build_model([StrandSpec(_points())]))
    simulation.advance(1 / 24, STILL)
    before = _state(simulation)
    if not _answers_by_the_contract(lambda: simulation.reset(**{argument: value}) or True):
        _assert_unchanged(before, simulation)
    else:
        assert math.isfinite(simulation.time)
    simulation.advance(1 / 24, STILL)
    assert np.isfinite(simulation.points()).all()


def test_a_source_that_goes_wrong_mid_advance_leaves_the_simulation_as_it_was():
    """A base callable that answers well for two substeps, then with garbage: the refused call
    undoes the substeps it took."""
    simulation = Simulation(build_model([StrandSpec(_points())]), SolverSettings(substeps=4))
    simulation.advance(1 / 24, STILL)
    before = _state(simulation)
    calls = []

    def base(t):
        calls.append(t)
        return STILL if len(calls) <= 2 else np.eye(4)

    with pytest.raises(
        InvalidInputError, match=r"base\(.*\) must return a BaseMotion, got ndarray"
    ):
        simulation.advance(1 / 24, base)
    assert len(calls) == 3
    _assert_unchanged(before, simulation)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"dt": "0.04"}, "dt must be a positive number, got '0.04'"),
        ({"dt": -1.0}, "dt must be a positive number, got -1.0"),
        ({"base": np.eye(4)[None]}, "base must be a BaseMotion or a callable base(t)"),
        ({"fields": Wind((1.0, 0.0, 0.0))}, "fields must be a ForceFields or None, got Wind"),
        (
            {"obstacle_motion": ObstacleMotion.from_host(OBSTACLES, MOTION_ARGUMENTS["poses"])},
            "obstacle motion is for 4 obstacle(s), the set has 1",
        ),
    ],
)
def test_a_refused_advance_names_the_argument(arguments, message):
    simulation = _simulation(obstacles=build_obstacles([Sphere(0.05)]))
    call = {"dt": 1 / 24, "base": STILL, **arguments}
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        simulation.advance(call.pop("dt"), call.pop("base"), **call)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Sphere(math.nan), "radius must be positive and finite, got nan"),
        (lambda: Capsule((0, 0, 0), (0, "a", 0), 0.1), "start|end must be real numbers"),
        (lambda: Plane(material=0.5), "material must be a Material, got float"),
        (lambda: TriangleMesh(VERTICES, TRIANGLES + 0.5, 0.05), "triangles must be integer"),
        (lambda: TriangleMesh(VERTICES * 1e300, TRIANGLES, 1e-300), "a grid of .* is too large"),
    ],
)
def test_a_refused_obstacle_names_it_and_the_argument(make, message):
    with pytest.raises(InvalidInputError, match=r"obstacle 0 \('\w+'\): (" + message + ")"):
        build_obstacles([make()])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Falloff(max_distance="far"), "Falloff.max_distance must be > 0, got 'far'"),
        (
            lambda: Turbulence(1.0, 0.3, 0.5, modes=10**9),
            "modes must be a positive integer, at most 1024",
        ),
        (lambda: Turbulence(1.0, 0.3, 0.5, seed=-1), "seed must be a whole number >= 0"),
        (lambda: Turbulence(1.0, 5e-324, 0.5), "too large to represent"),
        (lambda: Wind("east"), "Wind.velocity must be 3 finite numbers"),
        (lambda: Wind((1, 0, 0), falloff=None), "Wind.falloff must be a Falloff, got NoneType"),
        (lambda: PointField((0, 0, 0), 1.0, inward="yes"), "inward must be True or False"),
        (lambda: ForceFields(wind=Wind((1, 0, 0))), "ForceFields.wind must be a sequence"),
    ],
)
def test_a_refused_field_names_the_argument(make, message):
    with pytest.raises(InvalidInputError, match=message):
        make()


def test_a_branch_starts_on_the_link_it_grows_from():
    """A branch's root may lie up to the link's length off the link (10 cm here), not further:
    further it belongs to another link or strand."""
    trunk = _points(links=2)  # links of 10 cm down from the origin
    near = trunk[1:] + [0.099, 0.0, 0.0]
    build_model([StrandSpec(trunk), StrandSpec(near, parent=(0, 1))])
    with pytest.raises(InvalidStrandError, match=r"strand 1 \('far'\): its root lies 0.101 m"):
        build_model(
            [StrandSpec(trunk), StrandSpec(trunk[1:] + [0.101, 0, 0], parent=(0, 1), name="far")]
        )
    below = [[0.0, 0.0, -0.25], [0.0, 0.0, -0.35]]  # 15 cm below link 0's tip
    with pytest.raises(InvalidStrandError, match="lies 0.15 m from link 0 of its parent strand 0"):
        build_model([StrandSpec(trunk), StrandSpec(below, parent=(0, 0))])


def test_an_obstacle_motion_of_other_obstacles_is_refused():
    """As many obstacles, but no deforming mesh where the motion moves one."""
    others = build_obstacles([Plane(), Sphere(0.1), Capsule((0, 0, 0), (0, 0.2, 0), 0.05), Plane()])
    motion = ObstacleMotion.from_host(OBSTACLES, **MOTION_ARGUMENTS)
    with pytest.raises(InvalidInputError, match=r"moves surfaces of shapes \[\(3, 8\)\], the set"):
        signed_distances(others, motion, np.zeros((3, 1)))
