"""Collision geometry against closed forms: distances and normals of planes, spheres and capsules,
signed-distance grids of sphere and box meshes against the analytic shapes, swept detection of
points crossing thin obstacles, and the velocity of animated obstacles (``v + ω × r``)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from oriented_strands.core import BaseMotion, InvalidInputError
from oriented_strands.core.obstacles import (
    Capsule,
    Material,
    ObstacleMotion,
    Plane,
    Sphere,
    TriangleMesh,
    build_obstacles,
    find_contacts,
    segment_points,
    signed_distances,
    swept_distances,
)

H = 1.0 / 96.0  # a substep at 24 fps, 4 substeps


def _pose(rng) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    pose[:3, 3] = rng.normal(size=3) * 0.3
    return pose


def _box_mesh(half_extents) -> tuple[np.ndarray, np.ndarray]:
    """A closed box centred at the origin, 12 triangles."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    triangles = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1]]
    triangles += [[2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    return corners * np.asarray(half_extents), np.array(triangles)


def _box_distance(points: np.ndarray, half_extents) -> np.ndarray:
    """Exact signed distance (P,) of points (3, P) to a box centred at the origin."""
    q = np.abs(points) - np.asarray(half_extents)[:, None]
    return np.linalg.norm(np.maximum(q, 0.0), axis=0) + np.minimum(q.max(axis=0), 0.0)


def _icosphere(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """A unit icosphere: the icosahedron with every triangle split in four, projected out."""
    t = (1.0 + 5.0**0.5) / 2.0
    vertices = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t]]
    vertices += [[0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    vertices = [np.array(v, float) / np.linalg.norm(v) for v in vertices]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4)]
    faces += [(11, 10, 2), (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8)]
    faces += [(3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(subdivisions):
        midpoints: dict = {}
        split = []
        for a, b, c in faces:
            ab, bc, ca = (
                _midpoint(vertices, midpoints, *edge) for edge in ((a, b), (b, c), (c, a))
            )
            split += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = split
    return np.array(vertices), np.array(faces)


def _midpoint(vertices: list, midpoints: dict, a: int, b: int) -> int:
    """Index of the edge's midpoint on the unit sphere, added to ``vertices`` once per edge."""
    key = (min(a, b), max(a, b))
    if key not in midpoints:
        middle = vertices[a] + vertices[b]
        vertices.append(middle / np.linalg.norm(middle))
        midpoints[key] = len(vertices) - 1
    return midpoints[key]


def _distances(backend, obstacles, poses, points):
    motion = ObstacleMotion.from_host(obstacles, poses)
    distance, normal = signed_distances(obstacles, motion, backend.from_host(points))
    return backend.to_host(distance), backend.to_host(normal)


def _segment_distance(points, a, b):
    axis = b - a
    along = np.clip((points - a[:, None]).T @ axis / (axis @ axis), 0.0, 1.0)
    closest = a[:, None] + along[None] * axis[:, None]
    return np.linalg.norm(points - closest, axis=0), (points - closest)


def test_plane_sphere_and_capsule_distances_and_normals_match_closed_forms(backend):
    """Random poses; capsule points around its cylinder and beyond both hemispherical ends."""
    rng = np.random.default_rng(0)
    start, end, capsule_radius, sphere_radius = (
        np.array([0.0, 0, 0]),
        np.array([0, 0.3, 0]),
        0.04,
        0.1,
    )
    shapes = [Sphere(sphere_radius), Plane(), Capsule(start, end, capsule_radius)]
    poses = np.stack([_pose(rng) for _ in shapes])
    obstacles = build_obstacles(shapes, backend)
    local = rng.normal(size=(3, 300)) * 0.1 + np.array([[0.0], [0.15], [0.0]])
    local[1, :100] = rng.uniform(-0.2, -0.01, 100)  # below the start cap
    local[1, 100:200] = rng.uniform(0.31, 0.5, 100)  # beyond the end cap
    expected = {}
    for k in range(3):
        rotation, origin = poses[k, :3, :3], poses[k, :3, 3]
        points = rotation @ local + origin[:, None]
        if k == 0:
            offset = local
            expected_distance = np.linalg.norm(local, axis=0) - sphere_radius
        elif k == 1:
            offset = np.array([[0.0], [0.0], [1.0]]) * np.ones(300)
            expected_distance = local[2]
        else:
            length, offset = _segment_distance(local, start, end)
            expected_distance = length - capsule_radius
        unit = offset / np.linalg.norm(offset, axis=0)
        expected[k] = (points, expected_distance, rotation @ unit)
    for k, (points, expected_distance, expected_normal) in expected.items():
        distance, normal = _distances(backend, obstacles, poses, points)
        np.testing.assert_allclose(distance[:, k], expected_distance, atol=1e-12)
        np.testing.assert_allclose(normal[:, :, k], expected_normal, atol=1e-9)


@pytest.mark.parametrize("shape", ["sphere", "box"])
def test_mesh_signed_distance_grid_matches_the_analytic_shape(backend, shape):
    """Distances within a fraction of a cell near the surface and the right sign everywhere
    beyond half a cell, for a posed mesh; normals along the analytic gradient just outside the
    surface, rounded within a cell or two of the box's edges (and not compared inside, where
    the box's gradient jumps across its medial planes)."""
    rng = np.random.default_rng(1)
    cell = 0.01
    if shape == "sphere":
        radius = 0.1
        vertices, triangles = _icosphere(2)
        vertices = vertices * radius
        # The icosphere lies inside the sphere by at most its faceting depth.
        edge = np.linalg.norm(vertices[triangles[:, 0]] - vertices[triangles[:, 1]], axis=1).max()
        faceting = radius - np.sqrt(radius**2 - edge**2 / 3.0)

        def analytic(points):
            return np.linalg.norm(points, axis=0) - radius

        def near_edge(points):
            return np.zeros(points.shape[1], dtype=bool)

        extent = np.array([0.13, 0.13, 0.13])
    else:
        half = np.array([0.1, 0.05, 0.03])
        vertices, triangles = _box_mesh(half)
        faceting = 0.0

        def analytic(points):
            return _box_distance(points, half)

        def near_edge(points):
            """Within 1.5 cells of two faces' planes: where a grid rounds the edge."""
            return np.sort(np.abs(points) - half[:, None], axis=0)[1] > -1.5 * cell

        extent = half + 0.03
    obstacles = build_obstacles([TriangleMesh(vertices, triangles, cell_size=cell)], backend)
    pose = _pose(rng)
    local = rng.uniform(-1.0, 1.0, (3, 3000)) * extent[:, None]
    distance, normal = _distances(
        backend, obstacles, pose[None], pose[:3, :3] @ local + pose[:3, 3:]
    )
    exact = analytic(local)
    near = np.abs(exact) < 2 * cell
    assert np.abs(distance[near, 0] - exact[near]).max() < 0.3 * cell + faceting
    assert np.abs(distance[:, 0] - exact).max() < cell + faceting
    clear = np.abs(exact) > 0.5 * cell + faceting
    np.testing.assert_array_equal(np.sign(distance[clear, 0]), np.sign(exact[clear]))
    step = 1e-6
    gradient = np.stack([(analytic(local + step * e[:, None]) - exact) / step for e in np.eye(3)])
    outside = near & (exact > 0.0)
    cosine = np.einsum("ip,ip->p", normal[:, :, 0], pose[:3, :3] @ gradient)
    assert np.median(cosine[outside]) > 0.995
    assert cosine[outside & ~near_edge(local)].min() > 0.98
    assert cosine[outside].min() > 0.8


def _sweep(backend, obstacles, poses, start, end, radius, velocities=(None, None), margin=0.0):
    motion = ObstacleMotion.from_host(obstacles, poses, *velocities)
    device = backend.from_host
    contacts = find_contacts(
        obstacles, motion, device(start), device(end), device(radius), H, margin
    )
    return {name: backend.to_host(value) for name, value in vars(contacts).items()}


def test_sweep_catches_points_crossing_thin_obstacles_within_one_step(backend):
    """Points at 7.7 m/s cross a 1 cm sphere, a 5 mm capsule and a 1 cm thick box mesh within
    one step, both ends of each path clear of the obstacle; the same paths moved 5 cm aside are
    not reported. The normal is the one of the side the point comes from."""
    vertices, triangles = _box_mesh([0.03, 0.03, 0.005])
    shapes = [
        Sphere(0.01),
        Capsule([-0.03, 0.0, 0.0], [0.03, 0.0, 0.0], 0.005),
        TriangleMesh(vertices, triangles, cell_size=0.0025),
    ]
    obstacles = build_obstacles(shapes, backend)
    poses = np.stack([np.eye(4)] * 3)
    poses[:, 0, 3] = [0.0, 1.0, 2.0]  # side by side, 1 m apart along x
    start = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [0.04, 0.04, 0.04]])
    end = start - [[0.0], [0.0], [0.08]]
    aside = [[0.0], [0.05], [0.0]]
    radius = np.full(6, 0.001)
    contacts = _sweep(
        backend, obstacles, poses, np.hstack([start, start + aside]),
        np.hstack([end, end + aside]), radius,
    )  # fmt: skip
    np.testing.assert_array_equal(contacts["point"], [0, 1, 2])
    np.testing.assert_array_equal(contacts["obstacle"], [0, 1, 2])
    np.testing.assert_allclose(contacts["normal"], [[0, 0, 0], [0, 0, 0], [1, 1, 1]], atol=1e-3)
    surface = np.array([0.01, 0.005, 0.005])
    np.testing.assert_allclose(contacts["distance"], 0.04 - surface - 0.001, atol=1e-3)
    motion = ObstacleMotion.from_host(obstacles, poses)
    for ends in (start, end):
        distance = backend.to_host(signed_distances(obstacles, motion, backend.from_host(ends))[0])
        assert np.all(np.diag(distance) > 0.02)


def test_a_point_that_is_not_finite_gets_no_contact_and_stops_nothing(backend):
    """A diverging step's point (NaN) swept beside finite ones, against a mesh collided on its
    distance grid, a deforming mesh collided on its triangles and a sphere: no contact for it,
    no finite distance (NaN; infinite, far from every triangle, on the deforming mesh), and the
    finite points answered as without it (a grid lookup once cast the
    NaN to an index and stopped the bake with an IndexError)."""
    vertices, triangles = _box_mesh([0.03, 0.03, 0.005])
    shapes = [
        TriangleMesh(vertices, triangles, cell_size=0.0025),
        TriangleMesh(vertices, triangles, cell_size=0.0025, deforming=True),
        Sphere(0.01),
    ]
    obstacles = build_obstacles(shapes, backend)
    poses = np.stack([np.eye(4)] * 3)
    poses[:, 0, 3] = [0.0, 1.0, 2.0]
    start = np.array([[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.04, 0.04, 0.04, 0.04]])
    end = start - [[0.0], [0.0], [0.08]]
    end[:, 3] = np.nan
    contacts = _sweep(backend, obstacles, poses, start, end, np.full(4, 0.001))
    np.testing.assert_array_equal(contacts["point"], [0, 1, 2])
    np.testing.assert_array_equal(contacts["obstacle"], [0, 1, 2])
    motion = ObstacleMotion.from_host(obstacles, poses)
    distance = backend.to_host(signed_distances(obstacles, motion, backend.from_host(end))[0])
    assert not np.isfinite(distance[3]).any()
    alone = signed_distances(obstacles, motion, backend.from_host(end[:, :3]))[0]
    np.testing.assert_array_equal(distance[:3], backend.to_host(alone))


def test_animated_obstacles_report_their_surface_velocity_and_sweep_relative_motion(backend):
    """A spinning, moving sphere: the contact's obstacle velocity is ``v + ω × (x_s − c)`` at the
    surface point ``x_s``. A plane rising at 8 m/s reaches a still point 5 cm above it within
    the step: the relative motion is swept."""
    rng = np.random.default_rng(2)
    radius = 0.1
    obstacles = build_obstacles([Sphere(radius), Plane()], backend)
    poses = np.stack([_pose(rng), np.eye(4)])
    poses[1, 2, 3] = -5.0
    omega = np.array([[0.5, -2.0, 3.0], [0.0, 0.0, 0.0]])
    velocity = np.array([[1.0, 0.2, -0.4], [0.0, 0.0, 8.0]])
    direction = rng.normal(size=(3, 5))
    direction /= np.linalg.norm(direction, axis=0)
    inside = poses[0, :3, 3:] + direction * (radius - 0.002)
    above_plane = np.array([[0.3], [0.2], [-4.95]])
    start = np.hstack([inside, above_plane])
    contacts = _sweep(
        backend, obstacles, poses, start, start.copy(), np.full(6, 0.001), (omega, velocity)
    )
    np.testing.assert_array_equal(contacts["point"], np.arange(6))
    np.testing.assert_array_equal(contacts["obstacle"], [0, 0, 0, 0, 0, 1])
    surface_point = poses[0, :3, 3:] + direction * radius
    expected = velocity[0][:, None] + np.cross(omega[0], (surface_point - poses[0, :3, 3:]).T).T
    np.testing.assert_allclose(contacts["obstacle_velocity"][:, :5], expected, atol=1e-12)
    np.testing.assert_allclose(contacts["distance"][:5], -0.003)
    np.testing.assert_allclose(contacts["obstacle_velocity"][:, 5], [0.0, 0.0, 8.0])
    np.testing.assert_allclose(contacts["distance"][5], 0.05 - 0.001, atol=1e-12)
    still = _sweep(backend, obstacles, poses, start, start.copy(), np.full(6, 0.001))
    assert 5 not in still["point"]  # the same point misses a plane that stands still


def test_a_turning_obstacle_sweeps_the_motion_relative_to_its_body_exactly(backend):
    """Over a step in which obstacles turn by 0.5 rad (48 rad/s at 96 steps a second), a point's
    path relative to an obstacle runs straight from its start in the obstacle's frame at the
    start to its end in the frame at the end. A point carried rigidly with a plane turning about
    an axis 5 cm off it and moving at 1 m/s (3 cm above it, its path the chord of its arc) stays
    3 cm above it; a point standing still 1 mm outside a sphere turning about its centre has
    its ends 1 mm out, and the chord between them comes within ``(r + 1 mm) cos(ω h / 2)`` of
    the centre. Removing the surface's first-order displacement instead swung the carried point
    3.3 mm toward the plane and put the still point's end ``r (ω h)² / 2`` = 12.5 mm further
    out than it is (the chord errs the other way, by a quarter of that)."""
    radius, turn = 0.1, 0.5
    obstacles = build_obstacles([Sphere(radius), Plane()], backend)
    plane = np.eye(4)
    plane[:3, 3] = [0.05, 0.0, 0.0]
    poses = np.stack([np.eye(4), plane])
    omega = np.array([[0.0, 0.0, turn / H], [0.0, turn / H, 0.0]])
    velocity = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    motion = ObstacleMotion.from_host(obstacles, poses, omega, velocity)
    still = np.array([[radius + 0.001], [0.0], [0.0]])
    carried = plane[:3, 3:] + [[0.02], [0.01], [0.03]]
    arc = Rotation.from_rotvec([0.0, turn, 0.0]).as_matrix()
    carried_end = plane[:3, 3:] + velocity[1][:, None] * H + arc @ (carried - plane[:3, 3:])
    start = np.hstack([still, carried])
    end = np.hstack([still, carried_end])
    device = backend.from_host
    smallest = backend.to_host(
        swept_distances(obstacles, motion, device(start), device(end), device(np.zeros(2)), H)
    )
    chord = (radius + 0.001) * np.cos(turn / 2) - radius
    np.testing.assert_allclose([smallest[0, 0], smallest[1, 1]], [chord, 0.03], atol=1e-12)


def test_obstacle_motion_from_a_base_motion_keeps_pose_and_velocity(backend):
    """Obstacles placed from a BaseMotion (e.g. a head's trajectory): same pose and velocities."""
    rng = np.random.default_rng(4)
    obstacles = build_obstacles([Sphere(0.1), Plane()], backend)
    poses = np.stack([_pose(rng), _pose(rng)])
    omega, velocity = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    zero = np.zeros((2, 3))
    base = BaseMotion(poses[:, :3, :3], poses[:, :3, 3], omega, velocity, zero, zero)
    motion = ObstacleMotion.from_base_motion(obstacles, base)
    expected = ObstacleMotion.from_host(obstacles, poses, omega, velocity)
    for name in ("rotation", "position", "angular_velocity", "linear_velocity"):
        np.testing.assert_allclose(
            backend.to_host(getattr(motion, name)), backend.to_host(getattr(expected, name))
        )


def test_contacts_carry_materials_radii_and_margin(backend):
    """All points against all obstacles: a contact exactly where the gap (distance minus radius)
    is within the margin, with the material of its obstacle."""
    rng = np.random.default_rng(3)
    materials = [Material(0.2, 0.6, 0.5), Material(0.7, 0.1, 0.05), Material(0.0, 1.0, 0.8)]
    shapes = [
        Plane(materials[0]),
        Sphere(0.2, materials[1]),
        Capsule([0, 0, 0], [0.2, 0.1, 0], 0.05, materials[2]),
    ]
    obstacles = build_obstacles(shapes, backend)
    poses = np.stack([np.eye(4)] * 3)
    poses[1, :3, 3] = [0.0, 0.0, 0.15]
    poses[2, :3, 3] = [-0.1, 0.1, 0.05]
    points = rng.uniform(-0.3, 0.3, (3, 400))
    radius = rng.uniform(0.0, 0.02, 400)
    margin = 0.01
    distance, _ = _distances(backend, obstacles, poses, points)
    expected = np.argwhere(distance - radius[:, None] <= margin)
    contacts = _sweep(backend, obstacles, poses, points, points.copy(), radius, margin=margin)
    assert len(expected) > 50
    np.testing.assert_array_equal(contacts["point"], expected[:, 0])
    np.testing.assert_array_equal(contacts["obstacle"], expected[:, 1])
    np.testing.assert_allclose(
        contacts["distance"], distance[expected[:, 0], expected[:, 1]] - radius[expected[:, 0]]
    )
    table = np.array([[m.restitution, m.static_friction, m.dynamic_friction] for m in materials])
    for column, name in enumerate(("restitution", "static_friction", "dynamic_friction")):
        np.testing.assert_array_equal(contacts[name], table[contacts["obstacle"], column])


def test_segment_points_samples_links_sample_major(backend):
    start = np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    end = np.array([[1.0, 1.0], [0.0, 2.0], [0.0, 0.0]])
    xp = backend.xp
    points, segment = segment_points(xp, backend.from_host(start), backend.from_host(end), (0.5, 1))
    np.testing.assert_allclose(
        backend.to_host(points), [[0.5, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]]
    )
    np.testing.assert_array_equal(backend.to_host(segment), [0, 1, 0, 1])


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ([Sphere(-1.0)], r"obstacle 0 \('sphere'\): radius must be positive"),
        ([Plane(), Capsule([0, 0], [0, 1, 0], 0.1)], r"obstacle 1 .*start must have shape"),
        ([TriangleMesh(*_box_mesh([1, 1, 1]), cell_size=0.0)], "cell_size must be positive"),
        ([TriangleMesh(_box_mesh([1, 1, 1])[0], _box_mesh([1, 1, 1])[1][:-1], 0.1)], "closed"),
        ([TriangleMesh(_box_mesh([1, 1, 1])[0], [[0, 1, 9]] * 4, 0.1)], "indices must lie in"),
        ([TriangleMesh(*_box_mesh([1, 1, 1]), cell_size=1e-3)], "too large"),
        (["sphere"], "expected Plane, Sphere, Capsule or TriangleMesh"),
    ],
)
def test_invalid_shapes_are_refused(shapes, message):
    with pytest.raises(InvalidInputError, match=message):
        build_obstacles(shapes)


def test_invalid_materials_motions_and_queries_are_refused(backend):
    with pytest.raises(InvalidInputError, match="restitution must be at most 1"):
        Material(restitution=1.5)
    with pytest.raises(InvalidInputError, match="static_friction must be a number >= 0"):
        Material(static_friction=-0.1)
    obstacles = build_obstacles([Plane()], backend)
    scaled = np.diag([2.0, 1.0, 1.0, 1.0])[None]
    with pytest.raises(InvalidInputError, match="not a rotation"):
        ObstacleMotion.from_host(obstacles, scaled)
    with pytest.raises(InvalidInputError, match="must have shape"):
        ObstacleMotion.from_host(obstacles, np.eye(4)[None], angular_velocity=np.zeros(3))
    motion = ObstacleMotion.from_host(obstacles, np.eye(4)[None])
    points = backend.from_host(np.zeros((3, 2)))
    radius = backend.from_host(np.zeros(2))
    with pytest.raises(InvalidInputError, match="radius"):
        find_contacts(obstacles, motion, points, points, backend.from_host(np.zeros(3)), H)
    with pytest.raises(InvalidInputError, match="step size"):
        find_contacts(obstacles, motion, points, points, radius, 0.0)
    with pytest.raises(InvalidInputError, match=r"\(3, P\)"):
        find_contacts(obstacles, motion, points.T, points.T, radius, H)
