"""Recursive dynamics against Pinocchio (an independent multi-body library) and closed forms."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from oriented_strands.core import (
    Pose,
    StrandParameters,
    StrandSpec,
    build_model,
    dynamics,
    spatial,
)
from oriented_strands.core.dynamics import (
    Data,
    factorize,
    forward_kinematics,
    inverse_dynamics,
    joint_load,
    joint_torques,
    solve,
    spring_tangent_stiffness,
)
from oriented_strands.core.state import Control
from strands import polyline, random_tree, random_walk

pin = pytest.importorskip("pinocchio")
import pinocchio_reference as reference  # noqa: E402  (needs pinocchio, skipped above)

RELATIVE = 1e-9


def _random_model(backend, seed: int, branched: bool):
    rng = np.random.default_rng(seed)
    specs = random_tree(rng) if branched else [StrandSpec(random_walk(rng, 7, np.zeros(3)))]
    n_links = sum(len(s.points) - 1 for s in specs)
    pose = np.eye(4)
    pose[:3, :3] = pin.rpy.rpyToMatrix(*rng.uniform(-1, 1, 3))
    pose[:3, 3] = rng.normal(size=3)
    parameters = StrandParameters(mass_per_length=rng.uniform(0.5, 2.0, n_links), radius=0.01)
    return build_model(specs, parameters, base_rest_poses=pose[None], backend=backend), pose, rng


def _control(model, pose, motion=None, gravity=(0.0, 0.0, -9.81)):
    control = Control.from_model(model, gravity)
    device = model.backend.from_host
    control.base_rotation = device(pose[:3, :3, None])
    control.base_position = device(pose[:3, 3, None])
    if motion is not None:
        control.base_angular_velocity, control.base_linear_velocity = (
            device(motion[0][:, None]),
            device(motion[1][:, None]),
        )
        control.base_angular_acceleration, control.base_linear_acceleration = (
            device(motion[2][:, None]),
            device(motion[3][:, None]),
        )
    return control


def _random_rotations(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.mark.parametrize("branched", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inverse_dynamics_matches_pinocchio_rnea(backend, seed, branched):
    model, pose, rng = _random_model(backend, seed, branched)
    n = model.n_links
    q, w, wdot = _random_rotations(rng, n), rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    omega, velocity, alpha, acceleration = rng.normal(size=(4, 3))
    control = _control(model, pose, (omega, velocity, alpha, acceleration))
    device = backend.from_host
    tau = backend.to_host(
        inverse_dynamics(
            model, Data.for_model(model), device(q.T), device(w.T), device(wdot.T), control
        )
    ).T

    pin_model, order = reference.build(model, free_flyer=True)
    pin_model.gravity.linear[:] = (0.0, 0.0, -9.81)
    rotation = pose[:3, :3]
    # Pinocchio's free-flyer velocity and acceleration are in the base frame, [linear; angular].
    local_velocity, local_omega = rotation.T @ velocity, rotation.T @ omega
    v = np.concatenate((local_velocity, local_omega, reference.joint_vector(order, w)))
    a = np.concatenate(
        (
            rotation.T @ acceleration - np.cross(local_omega, local_velocity),
            rotation.T @ alpha,
            reference.joint_vector(order, wdot),
        )
    )
    expected = reference.engine_vector(
        order,
        pin.rnea(pin_model, pin_model.createData(), reference.configuration(order, q, pose), v, a)[
            6:
        ],
        3,
    )
    assert np.abs(tau - expected).max() <= RELATIVE * np.abs(expected).max()


def _pinocchio_mass_matrix(model, q):
    pin_model, order = reference.build(model, free_flyer=False)
    mass = pin.crba(pin_model, pin_model.createData(), reference.configuration(order, q))
    mass = np.triu(mass) + np.triu(mass, 1).T
    permutation = reference.joint_permutation(order)
    engine = np.empty_like(mass)
    engine[np.ix_(permutation, permutation)] = mass
    return engine


@pytest.mark.parametrize("branched", [False, True])
def test_mass_matrix_from_inverse_dynamics_matches_pinocchio_crba(backend, branched):
    model, _, rng = _random_model(backend, 3, branched)
    n = model.n_links
    q = _random_rotations(rng, n)
    control = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    data, device = Data.for_model(model), backend.from_host
    zero = device(np.zeros((3, n)))
    columns = []
    for k in range(3 * n):
        unit = np.zeros(3 * n)
        unit[k] = 1.0
        # Link-major flattening (link, axis), matching joint_permutation.
        columns.append(
            backend.to_host(
                inverse_dynamics(
                    model, data, device(q.T), zero, device(unit.reshape(n, 3).T), control
                )
            ).T.reshape(-1)
        )
    expected = _pinocchio_mass_matrix(model, q)
    assert np.abs(np.array(columns).T - expected).max() <= RELATIVE * np.abs(expected).max()


@pytest.mark.parametrize("branched", [False, True])
def test_articulated_body_solve_matches_dense_solve(backend, branched):
    """(M + A) x = b with joint-local 3x3 blocks A (as the implicit step folds them in)."""
    model, _, rng = _random_model(backend, 4, branched)
    n = model.n_links
    q = _random_rotations(rng, n)
    control = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    data, device = Data.for_model(model), backend.from_host
    blocks = rng.normal(size=(n, 3, 3)) * 0.01
    b = rng.normal(size=(n, 3))
    mass = _pinocchio_mass_matrix(model, q)
    for joint_block in (np.zeros_like(blocks), blocks):
        inverse_dynamics(
            model, data, device(q.T), device(np.zeros((3, n))), device(np.zeros((3, n))), control
        )
        factorize(model, data, device(joint_block.transpose(1, 2, 0)))
        x = backend.to_host(solve(model, data, device(b.T))).T.reshape(-1)
        dense = mass.copy()
        for link in range(n):
            dense[3 * link : 3 * link + 3, 3 * link : 3 * link + 3] += joint_block[link]
        expected = np.linalg.solve(dense, b.reshape(-1))
        assert np.abs(x - expected).max() <= RELATIVE * np.abs(expected).max()


def test_articulated_body_solve_with_unsymmetric_link_blocks(backend):
    """Link-local 6x6 blocks B enter as M + Σ Jᵀ B J, J_k stacking the S of k's ancestors."""
    model, q, data, rng = _at_random_configuration(backend, 5, branched=True)
    n, device = model.n_links, backend.from_host
    link_blocks = rng.normal(size=(n, 6, 6)) * 0.01
    factorize(model, data, device(np.zeros((3, 3, n))), device(link_blocks.transpose(1, 2, 0)))
    b = rng.normal(size=(n, 3))
    x = backend.to_host(solve(model, data, device(b.T))).T.reshape(-1)
    dense = _newton_matrix(model, data, q, np.zeros((n, 3, 3)), link_blocks)
    expected = np.linalg.solve(dense, b.reshape(-1))
    assert np.abs(x - expected).max() <= RELATIVE * np.abs(expected).max()


@pytest.mark.parametrize("branched", [False, True])
def test_dense_tree_blocks_are_the_mass_matrix_with_joint_and_link_blocks(backend, branched):
    """The dense form of a few trees' Newton matrix (``DenseTrees``) is Pinocchio's mass matrix
    with the joint-local blocks on its diagonal and ``Σ Jᵀ B J`` of link-local blocks."""
    model, q, data, rng = _at_random_configuration(backend, 6, branched)
    n, device = model.n_links, backend.from_host
    joint_blocks = rng.normal(size=(n, 3, 3)) * 0.01
    link_blocks = rng.normal(size=(n, 6, 6)) * 0.01
    dense = dynamics.DenseTrees.of(
        model, data, dynamics.DenseLayout.of(model), device(joint_blocks.transpose(1, 2, 0))
    )
    dense.set_link_block(model, device(link_blocks.transpose(1, 2, 0)))
    expected = _newton_matrix(model, data, q, joint_blocks, link_blocks)
    # The dense block lists each tree's links in level-major order, as the model does.
    matrix = backend.to_host(dense.matrix)[0]
    assert np.abs(matrix - expected).max() <= RELATIVE * np.abs(expected).max()


def _at_random_configuration(backend, seed: int, branched: bool):
    """A random model at random joint rotations, at rest: the model, its rotations (N, 4), its
    workspace after inverse dynamics there, and the random generator."""
    model, _, rng = _random_model(backend, seed, branched)
    n = model.n_links
    q = _random_rotations(rng, n)
    control = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    data, device = Data.for_model(model), backend.from_host
    zero = device(np.zeros((3, n)))
    inverse_dynamics(model, data, device(q.T), zero, zero, control)
    return model, q, data, rng


def _newton_matrix(model, data, q, joint_blocks, link_blocks):
    """Pinocchio's mass matrix at ``q`` with ``joint_blocks`` (N, 3, 3) on its diagonal and
    ``Σ Jᵀ B J`` of ``link_blocks`` (N, 6, 6), ``J_k`` stacking the S of ``k``'s ancestors."""
    n = model.n_links
    dynamics.motion_subspaces(model, data)
    subspaces = model.backend.to_host(data.S).transpose(2, 0, 1)
    parents = reference.level_major_parents(model)
    matrix = _pinocchio_mass_matrix(model, q)
    for link in range(n):
        matrix[3 * link : 3 * link + 3, 3 * link : 3 * link + 3] += joint_blocks[link]
        jacobian = np.zeros((6, 3 * n))
        ancestor = link
        while ancestor >= 0:
            jacobian[:, 3 * ancestor : 3 * ancestor + 3] = subspaces[ancestor]
            ancestor = parents[ancestor]
        matrix += jacobian.T @ link_blocks[link] @ jacobian
    return matrix


@pytest.mark.parametrize("threads", ["1", None])
def test_dense_tree_blocks_solve_move_and_load_as_the_sweeps_do(backend, threads, blas_threads):
    """On a forest of trees of different sizes (padded blocks), moving, with the velocity
    forces' derivative and the tension's geometric stiffness, ``DenseTrees`` solves (by LAPACK
    and by its block factorisation), moves the links and loads the joints as the
    articulated-body factorisation and the passes over the levels do."""
    blas_threads(threads)
    rng = np.random.default_rng(7)
    specs = [*random_tree(rng), StrandSpec(random_walk(rng, 4, np.ones(3)))]
    model = build_model(specs, StrandParameters(radius=0.01, drag=0.5), backend=backend)
    n = model.n_links
    data, device, host = Data.for_model(model), backend.from_host, backend.to_host
    control = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    turning = device(rng.normal(size=(3, n)))
    rotations = device(_random_rotations(rng, n).T)
    inverse_dynamics(model, data, rotations, turning, device(np.zeros((3, n))), control)
    data.tension[...] = device(rng.uniform(0.0, 2.0, n))
    joint_block = device(rng.normal(size=(3, 3, n)) * 0.01)
    link_block = device(rng.normal(size=(6, 6, n)) * 0.01)
    options = {"velocity_step": 0.01, "control": control, "tension_step": 0.01}
    layout = dynamics.DenseLayout.of(model)
    dense = dynamics.DenseTrees.of(model, data, layout, joint_block, **options)
    dense.set_link_block(model, link_block)
    factorize(model, data, joint_block, link_block, **options)
    b, w, force = (device(rng.normal(size=(k, n))) for k in (3, 3, 6))
    expected = host(solve(model, data, b))
    answer = host(dense.solve(model, b))
    assert np.abs(answer - expected).max() <= RELATIVE * np.abs(expected).max()
    still = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    motion = host(dynamics.subspace_velocities(model, data.S, w, still))
    assert np.abs(host(dense.motion(model, w)) - motion).max() <= 1e-12 * np.abs(motion).max()
    load = host(dynamics.subspace_load(model, data.S, force))
    assert np.abs(host(dense.load(model, force)) - load).max() <= 1e-12 * np.abs(load).max()


@pytest.mark.parametrize("threads", ["1", None])
def test_dense_blocks_are_taken_for_a_few_small_trees_on_numpy(backend, threads, blas_threads):
    """``dense_pays``: trees of at most 48 links, up to 35 strands of 25 links where LAPACK
    solves on one thread and 10 where the block factorisation does; never on another backend
    (not measured on a GPU)."""
    blas_threads(threads)

    def pays(strands: int, links: int) -> bool:
        starts = [(0.01 * k, 0.0, 0.0) for k in range(strands)]
        specs = [StrandSpec(polyline(links, 0.2, start=start)) for start in starts]
        return dynamics.dense_pays(build_model(specs, backend=backend))

    on_numpy = backend.name == "numpy"
    assert pays(10, 25) == on_numpy
    assert pays(35, 25) == (on_numpy and threads == "1")
    assert not pays(36, 25)
    assert not pays(1, 49)


@pytest.mark.parametrize("threads", ["1", None])
def test_a_singular_dense_tree_block_answers_not_a_number_for_that_tree_alone(
    backend, threads, blas_threads
):
    """A tree whose step blew up (a singular block) gets a non-finite answer, as the sweeps'
    division by its joint's articulated inertia gives it, and is halved; the others' stand
    (LAPACK's solve and the block factorisation alike)."""
    blas_threads(threads)
    rng = np.random.default_rng(8)
    specs = [StrandSpec(random_walk(rng, 3, np.full(3, float(k)))) for k in range(2)]
    model = build_model(specs, StrandParameters(radius=0.01), backend=backend)
    n = model.n_links
    data, device, host = Data.for_model(model), backend.from_host, backend.to_host
    control = _control(model, np.eye(4), gravity=(0.0, 0.0, 0.0))
    zero = device(np.zeros((3, n)))
    inverse_dynamics(model, data, device(_random_rotations(rng, n).T), zero, zero, control)
    dense = dynamics.DenseTrees.of(
        model, data, dynamics.DenseLayout.of(model), device(np.zeros((3, 3, n)))
    )
    b = device(rng.normal(size=(3, n)))
    healthy = host(dense.solve(model, b))
    first = host(model.link_tree) == 0
    # Link blocks that cancel the first tree's inertias leave its matrix zero.
    inertia = dense.layout.per_link(dense.inertia.reshape(2, -1, 36)).reshape(6, 6, n)
    dense.set_link_block(model, -inertia * device(first))
    assert np.all(host(dense.matrix)[0] == 0.0)
    x = host(dense.solve(model, b))
    assert not np.isfinite(x[:, first]).any()
    # To rounding: CuPy's batched solve rounds a tree by the batch around it.
    assert np.allclose(x[:, ~first], healthy[:, ~first], rtol=1e-12, atol=0.0)


def _joint_model(backend, bend=(2e-3, 5e-3), twist=7e-3):
    points = polyline(3, 0.3)
    parameters = StrandParameters(
        bend_stiffness=[bend] * 3, twist_stiffness=twist, bend_damping=0.0, twist_damping=0.0
    )
    return build_model([StrandSpec(points)], parameters, backend=backend)


def _torque_after_rotation(backend, model, rotation_vector):
    """Spring torque on the middle link after rotating its joint by ``rotation_vector``."""
    q = backend.to_host(model.rest_rotation).T
    q[1] = spatial.quat_multiply(np, q[1], spatial.quat_exp(np, np.asarray(rotation_vector, float)))
    control = Control.from_model(model)
    torque = joint_torques(
        model, control, backend.from_host(q.T), backend.from_host(np.zeros((3, model.n_links)))
    )
    return backend.to_host(torque).T[1]


@pytest.mark.parametrize(("axis", "rigidity"), [(0, 2e-3), (1, 7e-3), (2, 5e-3)])
def test_small_angle_spring_stiffness_is_rigidity_over_joint_length(backend, axis, rigidity):
    model = _joint_model(backend)
    angle = 1e-6
    torque = _torque_after_rotation(backend, model, angle * np.eye(3)[axis])
    joint_length = 0.1  # interior joint of three 10 cm segments
    assert torque[axis] == pytest.approx(-rigidity / joint_length * angle, rel=1e-6)
    assert np.abs(np.delete(torque, axis)).max() < 1e-9 * abs(torque[axis])


@pytest.mark.parametrize("angle", [0.5, 1.5, 2.5])
def test_spring_torque_follows_tan_of_half_angle(backend, angle):
    """Paper eq. 18: Q = -2 K tan(theta/2) for a pure bend and a pure twist."""
    model = _joint_model(backend, bend=(2e-3, 2e-3))
    bend = _torque_after_rotation(backend, model, [angle, 0.0, 0.0])
    twist = _torque_after_rotation(backend, model, [0.0, angle, 0.0])
    assert bend[0] == pytest.approx(-2 * (2e-3 / 0.1) * np.tan(angle / 2), rel=1e-12)
    assert twist[1] == pytest.approx(-2 * (7e-3 / 0.1) * np.tan(angle / 2), rel=1e-12)


def test_spring_tangent_stiffness_matches_derivative_of_tan_law(backend):
    model = _joint_model(backend, bend=(2e-3, 2e-3))
    angle = 1.0
    q = backend.to_host(model.rest_rotation).T
    q[1] = spatial.quat_multiply(np, q[1], spatial.quat_exp(np, np.array([angle, 0.0, 0.0])))
    stiffness = backend.to_host(
        spring_tangent_stiffness(model, Control.from_model(model), backend.from_host(q.T))
    )
    # d/dtheta of 2 K tan(theta/2) is K / cos²(theta/2).
    assert stiffness[0, 0, 1] == pytest.approx((2e-3 / 0.1) / np.cos(angle / 2) ** 2, rel=1e-5)


@pytest.mark.parametrize("chunk", [dynamics.SPRING_CHUNK, 7])
@pytest.mark.parametrize("posed", [False, True])
def test_spring_tangent_stiffness_is_the_derivative_of_the_spring_torques(
    backend, posed, chunk, monkeypatch
):
    """The closed-form tangent equals central differences of the joint torques under rotations
    ``q ⊗ exp(theta)`` of the child, for bends and twists up to near a half turn, anisotropic
    bending, and a pose spring on top; both computed at once or in pieces of 7 links."""
    monkeypatch.setattr(dynamics, "SPRING_CHUNK", chunk)
    rng = np.random.default_rng(11)
    n = 40
    parameters = StrandParameters(
        bend_stiffness=[(2e-3, 9e-3)] * n,
        twist_stiffness=5e-3,
        bend_damping=0.0,
        twist_damping=0.0,
        pose_strength=4e-3 if posed else 0.0,
    )
    model = build_model([StrandSpec(polyline(n, 1.0))], parameters, backend=backend)
    rest = backend.to_host(model.rest_rotation).T
    angles = np.linspace(0.0, 2.9, n)[:, None] * rng.normal(size=(n, 3)) / np.sqrt(3)
    q = spatial.quat_multiply(np, rest.T, spatial.quat_exp(np, angles.T))
    control = Control.from_model(model)
    if posed:
        target = spatial.quat_multiply(np, rest.T, spatial.quat_exp(np, -angles.T)).T
        control.set_pose(model, Pose(target, np.zeros((n, 3))))
    still = backend.from_host(np.zeros((3, n)))

    def torques(turn):
        turned = spatial.quat_multiply(np, q, spatial.quat_exp(np, turn[:, None] * np.ones(n)))
        return backend.to_host(joint_torques(model, control, backend.from_host(turned), still))

    step = 1e-6
    expected = np.stack(
        [-(torques(step * axis) - torques(-step * axis)) / (2 * step) for axis in np.eye(3)],
        axis=1,
    )
    stiffness = backend.to_host(spring_tangent_stiffness(model, control, backend.from_host(q)))
    np.testing.assert_allclose(stiffness, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def _spring_energy(rotation, bend_stiffness, twist_stiffness):
    """``-4 K ln cos(theta/2)`` (the integral of eq. 18) of a joint rotation's swing and twist.

    Measured geometrically, with SciPy: the swing is the angle between the parent's and the
    child's y axes, the twist is what remains after the minimal rotation between them.
    """
    y_axis = np.array([0.0, 1.0, 0.0])
    child_axis = rotation.apply(y_axis)
    swing_angle = np.arccos(np.clip(child_axis @ y_axis, -1.0, 1.0))
    normal = np.cross(y_axis, child_axis)
    swing = Rotation.from_rotvec(normal / np.linalg.norm(normal) * swing_angle)
    twist_angle = (swing.inv() * rotation).magnitude()
    return -4 * bend_stiffness * np.log(np.cos(swing_angle / 2)) - 4 * twist_stiffness * np.log(
        np.cos(twist_angle / 2)
    )


@pytest.mark.parametrize(("bend", "twist"), [(0.5, 0.4), (1.7, 0.9), (2.6, -1.2)])
def test_spring_torque_is_minus_the_gradient_of_the_spring_energy(backend, bend, twist):
    """With isotropic bending the springs are conservative at any combination of bend and twist,
    so a bent and twisted strand cannot gain energy from them."""
    model = _joint_model(backend, bend=(2e-3, 2e-3))
    k_bend, k_twist = 2e-3 / 0.1, 7e-3 / 0.1  # rigidity / joint length
    rotation = Rotation.from_rotvec([0.0, twist, 0.0]) * Rotation.from_rotvec(
        bend * np.array([0.6, 0.0, 0.8])
    )
    rotation_vector = rotation.as_rotvec()
    torque = _torque_after_rotation(backend, model, rotation_vector)
    step = 1e-6
    gradient = [
        (
            _spring_energy(rotation * Rotation.from_rotvec(step * axis), k_bend, k_twist)
            - _spring_energy(rotation * Rotation.from_rotvec(-step * axis), k_bend, k_twist)
        )
        / (2 * step)
        for axis in np.eye(3)
    ]
    np.testing.assert_allclose(torque, -np.array(gradient), rtol=1e-6, atol=1e-9 * k_bend)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_pose_spring_follows_the_tan_law_towards_the_target_and_damps_relative_motion(
    backend, axis
):
    """Posable dynamics adds eq. 18 on the deviation from the target rotation, with the same
    stiffness ``K = pose_strength / joint_length`` about every axis, and the damping
    ``-(pose_damping / joint_length) (w - w_pose)``."""
    strength, damping, angle = 3e-3, 2e-4, 1.2
    parameters = StrandParameters(
        bend_stiffness=0.0,
        twist_stiffness=0.0,
        bend_damping=0.0,
        twist_damping=0.0,
        pose_strength=strength,
        pose_damping=damping,
    )
    model = build_model([StrandSpec(polyline(3, 0.3))], parameters, backend=backend)
    rest = backend.to_host(model.rest_rotation).T  # one strand: level-major is strand order
    target = rest.copy()
    target[1] = spatial.quat_multiply(np, rest[1], spatial.quat_exp(np, -angle * np.eye(3)[axis]))
    rng = np.random.default_rng(axis)
    w, w_pose = rng.normal(size=(2, 3, 3))
    control = Control.from_model(model)
    control.set_pose(model, Pose(target, w_pose))
    torque = backend.to_host(
        joint_torques(model, control, model.rest_rotation, backend.from_host(w.T))
    ).T
    joint_length = np.array([0.05, 0.1, 0.1])[:, None]
    expected = -(damping / joint_length) * (w - w_pose)
    expected[1, axis] -= 2 * (strength / 0.1) * np.tan(angle / 2)
    np.testing.assert_allclose(torque, expected, rtol=1e-12, atol=1e-15)
    stiffness = backend.to_host(spring_tangent_stiffness(model, control, model.rest_rotation))
    # d/dtheta of 2 K tan(theta/2) is K / cos²(theta/2).
    assert stiffness[axis, axis, 1] == pytest.approx(
        (strength / 0.1) / np.cos(angle / 2) ** 2, rel=1e-5
    )


@pytest.mark.parametrize("branched", [False, True])
def test_joint_load_does_the_virtual_work_of_point_forces(backend, branched):
    """Forces at points of links, as joint torques: for any small joint rotation ``δθ``
    (``q ⊗ exp(ε δθ)``), ``τ · δθ`` equals the work ``Σ F · δp`` of the forces on their points'
    displacements, measured by forward kinematics (central differences)."""
    model, pose, rng = _random_model(backend, 5, branched)
    data = Data.for_model(model)
    xp, device, host = model.xp, backend.from_host, backend.to_host
    q = device(_random_rotations(rng, model.n_links).T)
    rotation, origin = device(pose[:3, :3, None]), device(pose[:3, 3, None])
    fractions = device(rng.uniform(0.0, 1.0, model.n_links))
    forces = device(rng.normal(size=(3, model.n_links)))

    def points(rotations):
        forward_kinematics(model, data, rotations, rotation, origin)
        return data.op + (fractions * model.length) * data.oR[:, 1]

    at_rest = points(q)
    arm = at_rest - origin[:, model.link_base]
    link_force = xp.concatenate((spatial.cross(xp, arm, forces), forces))
    forward_kinematics(model, data, q, rotation, origin)
    torque = host(joint_load(model, data, link_force))
    turn = rng.normal(size=(3, model.n_links))
    epsilon = 1e-6

    def turned(sign):
        step = spatial.quat_exp(xp, device(sign * epsilon * turn))
        return points(spatial.quat_multiply(xp, q, step))

    displacement = host(turned(1.0) - turned(-1.0)) / (2 * epsilon)
    work = float(np.sum(host(forces) * displacement))
    assert float(np.sum(torque * turn)) == pytest.approx(work, rel=1e-7)


@pytest.mark.parametrize("branched", [False, True])
def test_held_constraint_forces_do_the_virtual_work_of_forces_at_their_points(backend, branched):
    """Forces held at points of links (``Control.constraint_force`` at the centre of mass with
    ``constraint_lever`` for their moment) change the inverse dynamics' joint torques by ``−τ``
    with ``τ · δθ`` the work ``Σ F · δp`` of the forces on their points' displacements under any
    small joint rotation, measured by forward kinematics (central differences)."""
    model, pose, rng = _random_model(backend, 5, branched)
    data = Data.for_model(model)
    xp, device, host = model.xp, backend.from_host, backend.to_host
    q = device(_random_rotations(rng, model.n_links).T)
    w = device(rng.normal(size=(3, model.n_links)))
    rotation, origin = device(pose[:3, :3, None]), device(pose[:3, 3, None])
    fractions = rng.uniform(0.0, 1.0, model.n_links)
    forces = rng.normal(size=(3, model.n_links))
    control = _control(model, pose)
    free = host(inverse_dynamics(model, data, q, w, w, control)).copy()
    control.constraint_force = device(forces)
    offsets = (fractions - 0.5) * host(model.length)
    control.constraint_lever = device(offsets * forces)
    held = host(inverse_dynamics(model, data, q, w, w, control)).copy()

    def points(rotations):
        forward_kinematics(model, data, rotations, rotation, origin)
        return host(data.op + (device(fractions) * model.length) * data.oR[:, 1])

    turn = rng.normal(size=(3, model.n_links))
    epsilon = 1e-6

    def turned(sign):
        return points(
            spatial.quat_multiply(xp, q, spatial.quat_exp(xp, device(sign * epsilon * turn)))
        )

    displacement = (turned(1.0) - turned(-1.0)) / (2 * epsilon)
    work = float(np.sum(forces * displacement))
    assert float(np.sum((free - held) * turn)) == pytest.approx(work, rel=1e-7)


@pytest.mark.parametrize("branched", [False, True])
def test_end_displacements_are_the_derivative_of_forward_kinematics(backend, branched):
    """The first-order motion of every link's end under small joint turns ``q ⊗ exp(ε δθ)``
    (:func:`end_displacements`, which the error control's estimate uses) equals the derivative
    of forward kinematics by central differences."""
    model, pose, rng = _random_model(backend, 7, branched)
    data = Data.for_model(model)
    xp, device, host = model.xp, backend.from_host, backend.to_host
    q = device(_random_rotations(rng, model.n_links).T)
    rotation, origin = device(pose[:3, :3, None]), device(pose[:3, 3, None])
    turn = rng.normal(size=(3, model.n_links))
    epsilon = 1e-6

    def ends(sign):
        step = spatial.quat_exp(xp, device(sign * epsilon * turn))
        forward_kinematics(model, data, spatial.quat_multiply(xp, q, step), rotation, origin)
        return host(data.op + model.length * data.oR[:, 1])

    expected = (ends(1.0) - ends(-1.0)) / (2 * epsilon)
    forward_kinematics(model, data, q, rotation, origin)
    moved = host(dynamics.end_displacements(model, data, device(turn)))
    np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-7 * np.abs(expected).max())


@pytest.mark.parametrize("branched", [False, True])
def test_a_load_on_the_first_levels_solves_as_the_whole_load_there(backend, branched):
    """Forces on the links of the first levels only, as joint torques on those levels, and the
    solve stopped at a level: the torques and the solution there are the whole solve's, whose
    load is zero below (the constraint operator's test solves)."""
    model, pose, rng = _random_model(backend, 6, branched)
    n, xp, device, host = model.n_links, model.xp, backend.from_host, backend.to_host
    data = Data.for_model(model)
    q = device(_random_rotations(rng, n).T)
    control = _control(model, pose)
    zero = xp.zeros((3, n), dtype=model.backend.float)
    inverse_dynamics(model, data, q, zero, zero, control)
    factorize(model, data, device(rng.normal(size=(3, 3, n)) * 0.01))
    loaded_depth, answered_depth = 1, model.n_levels - 2
    loaded = model.level_bounds[loaded_depth][1]
    answered = model.level_bounds[answered_depth][1]
    link_force = np.zeros((6, n))
    link_force[:, :loaded] = rng.normal(size=(6, loaded))
    whole_torque = host(joint_load(model, data, device(link_force)))
    assert np.abs(whole_torque[:, loaded:]).max() == 0.0
    x_whole = host(solve(model, data, device(whole_torque))).copy()
    a_whole = host(data.solve_a).copy()

    torque = joint_load(model, data, device(link_force[:, :loaded]))
    assert torque.shape == (3, loaded)
    np.testing.assert_allclose(host(torque), whole_torque[:, :loaded], rtol=0, atol=1e-15)
    x = host(solve(model, data, torque, answered_depth))
    scale = np.abs(x_whole).max()
    np.testing.assert_allclose(x[:, :answered], x_whole[:, :answered], rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(
        host(data.solve_a)[:, :answered], a_whole[:, :answered], rtol=0, atol=1e-13 * scale
    )
