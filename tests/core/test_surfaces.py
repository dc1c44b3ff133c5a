"""Deforming and open mesh obstacles, queried against their triangles (core.triangles), and
strands colliding with them."""

import math

import mujoco
import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    Material,
    ObstacleMotion,
    Simulation,
    SolverSettings,
    StrandParameters,
    StrandSpec,
    TriangleMesh,
    VertexTrajectory,
    build_model,
    build_obstacles,
)
from oriented_strands.core.errors import InvalidInputError
from oriented_strands.core.obstacles import find_contacts, place, signed_distances, swept_distances
from oriented_strands.core.triangles import OCCUPANCY_CELLS
from strands import STILL, box_mesh, hanging_curtain, polyline, scene_frames

BOX_LOW, BOX_HIGH = np.array([-0.1, -0.05, -0.2]), np.array([0.1, 0.05, 0.0])


def sheet(n, size, z=0.0):
    """An open square sheet of ``2 n²`` triangles in the plane ``z``, normals up."""
    ticks = np.linspace(-size, size, n + 1)
    x, y = np.meshgrid(ticks, ticks, indexing="ij")
    vertices = np.stack((x.ravel(), y.ravel(), np.full(x.size, z)), axis=1)
    corner = (np.arange(n)[:, None] * (n + 1) + np.arange(n)[None]).ravel()
    triangles = np.concatenate(
        (
            np.stack((corner, corner + n + 1, corner + 1), axis=1),
            np.stack((corner + 1, corner + n + 1, corner + n + 2), axis=1),
        )
    )
    return vertices, triangles


def slab(n, size, depth):
    """A closed slab: the sheet on top, a copy ``depth`` below, walls between; outward."""
    top, top_triangles = sheet(n, size)
    count = len(top)
    bottom = top - [0.0, 0.0, depth]
    ring = (
        [i * (n + 1) for i in range(n + 1)]
        + [n * (n + 1) + j for j in range(1, n + 1)]
        + [i * (n + 1) + n for i in range(n - 1, -1, -1)]
        + list(range(n - 1, 0, -1))
    )
    walls = []
    for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
        walls += [[b, a, a + count], [b, a + count, b + count]]
    triangles = np.concatenate((top_triangles, top_triangles[:, ::-1] + count, walls))
    return np.vstack((top, bottom)), triangles


def box_distance(points):
    """The closed form signed distance of points (n, 3) to the box ``BOX_LOW``–``BOX_HIGH``."""
    centre, half = 0.5 * (BOX_LOW + BOX_HIGH), 0.5 * (BOX_HIGH - BOX_LOW)
    q = np.abs(points - centre) - half
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


def still(obstacles, **motion):
    return ObstacleMotion.from_host(
        obstacles, np.tile(np.eye(4), (obstacles.n_obstacles, 1, 1)), **motion
    )


def test_a_deforming_box_gives_the_closed_form_signed_distance(backend):
    """Points within a cell of a box, inside and out, near faces, edges and corners: the
    triangle query's signed distance is the box's closed form to rounding (the sign comes from
    the angle-weighted pseudonormal of the closest feature), its normal the closed form's
    gradient."""
    vertices, triangles = box_mesh(BOX_LOW, BOX_HIGH)
    obstacles = build_obstacles(
        [TriangleMesh(vertices, triangles, 0.05, deforming=True, name="box")], backend
    )
    rng = np.random.default_rng(3)
    corners = vertices[rng.integers(0, 8, 600)]
    points = np.concatenate(
        (corners + rng.uniform(-0.03, 0.03, (600, 3)), rng.uniform(BOX_LOW, BOX_HIGH, (400, 3)))
    )
    expected = box_distance(points)
    near = np.abs(expected) < 0.04
    distance, normal = signed_distances(obstacles, still(obstacles), backend.from_host(points.T))
    distance, normal = backend.to_host(distance)[:, 0], backend.to_host(normal)[:, :, 0].T
    assert near.sum() > 500
    np.testing.assert_allclose(distance[near], expected[near], atol=1e-12)
    step = 1e-6
    gradient = np.stack(
        [
            (box_distance(points + step * e) - box_distance(points - step * e)) / (2 * step)
            for e in np.eye(3)
        ],
        axis=1,
    )
    clear = near & (np.abs(expected) > 1e-4)
    np.testing.assert_allclose(normal[clear], gradient[clear], atol=1e-4)


def test_outside_a_convex_mesh_the_distance_is_mujocos(backend):
    """A closed convex mesh (an ellipsoid of 480 triangles): outside it, the distance of points
    is MuJoCo's distance between the mesh and a tiny sphere at the point."""
    rings, segments = 12, 20
    theta = np.pi * np.arange(1, rings) / rings
    phi = 2 * np.pi * np.arange(segments) / segments
    body = np.stack(
        (
            0.06 * np.outer(np.sin(theta), np.cos(phi)).ravel(),
            0.04 * np.outer(np.sin(theta), np.sin(phi)).ravel(),
            0.1 * np.repeat(np.cos(theta), segments),
        ),
        axis=1,
    )
    vertices = np.vstack(([0.0, 0.0, 0.1], body, [0.0, 0.0, -0.1]))
    last = len(vertices) - 1
    triangles = [[0, 1 + j, 1 + (j + 1) % segments] for j in range(segments)]
    for i in range(rings - 2):
        for j in range(segments):
            a, b = 1 + i * segments + j, 1 + i * segments + (j + 1) % segments
            triangles += [[a, a + segments, b], [b, a + segments, b + segments]]
    base = 1 + (rings - 2) * segments
    triangles += [[base + j, last, base + (j + 1) % segments] for j in range(segments)]
    obstacles = build_obstacles(
        [TriangleMesh(vertices, np.array(triangles), 0.02, deforming=True)], backend
    )
    rng = np.random.default_rng(5)
    directions = rng.normal(size=(60, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    points = directions * [0.06, 0.04, 0.1] * rng.uniform(1.02, 1.15, (60, 1))
    distance, _ = signed_distances(obstacles, still(obstacles), backend.from_host(points.T))
    distance = backend.to_host(distance)[:, 0]

    tiny = 1e-4
    xml = f"""<mujoco><asset><mesh name="m" vertex="{" ".join(map(str, vertices.ravel()))}"
    face="{" ".join(map(str, np.array(triangles).ravel()))}"/></asset><worldbody>
    <geom name="mesh" type="mesh" mesh="m"/><body name="probe" mocap="true">
    <geom name="probe" type="sphere" size="{tiny}" contype="0" conaffinity="0"/></body>
    </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    reference = []
    for point in points:
        data.mocap_pos[0] = point
        mujoco.mj_forward(model, data)
        reference.append(mujoco.mj_geomDistance(model, data, 0, 1, 1.0, None) + tiny)
    finite = np.isfinite(distance)
    assert finite.sum() > 40
    np.testing.assert_allclose(distance[finite], np.array(reference)[finite], atol=1e-6)


def test_an_open_sheet_is_as_thick_as_it_is_told_on_both_sides(backend):
    """An open sheet with a thickness: above and below its interior the distance is the height
    less the thickness, beyond its edge the distance to the edge less it; without a thickness
    it is refused, naming it."""
    vertices, triangles = sheet(4, 0.1)
    obstacles = build_obstacles(
        [TriangleMesh(vertices, triangles, 0.05, thickness=0.002, name="brim")], backend
    )
    points = np.array([[0.01, 0.02, 0.01], [0.03, -0.04, -0.015], [0.12, 0.0, 0.01]])
    distance, normal = signed_distances(obstacles, still(obstacles), backend.from_host(points.T))
    distance, normal = backend.to_host(distance)[:, 0], backend.to_host(normal)[:, :, 0].T
    np.testing.assert_allclose(distance, [0.008, 0.013, math.hypot(0.02, 0.01) - 0.002])
    np.testing.assert_allclose(normal[:2], [[0, 0, 1], [0, 0, -1]], atol=1e-12)
    with pytest.raises(InvalidInputError, match=r"obstacle 0 \('brim'\).*closed.*thickness"):
        build_obstacles([TriangleMesh(vertices, triangles, 0.05, name="brim")], backend)


def test_a_point_and_a_sheet_crossing_within_a_step_touch(backend):
    """A point that passes through a thin sheet within one step, both ends of its path clear of
    it, is a contact on the side it comes from; so is a still point that a deforming sheet
    sweeps through, with the sheet's velocity; a point whose path misses the sheet is none."""
    vertices, triangles = sheet(2, 0.1)
    obstacles = build_obstacles(
        [
            TriangleMesh(vertices, triangles, 0.1, thickness=0.001, name="panel"),
            TriangleMesh(vertices, triangles, 0.1, thickness=0.001, deforming=True, name="cloth"),
        ],
        backend,
    )
    h = 0.01
    lowered = vertices + [0.0, 0.0, -0.5]
    motion = still(
        obstacles,
        mesh_vertices={1: lowered},
        mesh_velocities={1: np.tile([0.0, 0.0, 20.0], (len(vertices), 1))},
    )
    start = np.array([[0.02, 0.0, 0.05], [0.02, 0.0, -0.45], [0.3, 0.0, 0.05]]).T
    end = start + [[0.0], [0.0], [-0.1]]
    end[:, 1] = start[:, 1]  # the second point stands still
    found = find_contacts(
        obstacles,
        motion,
        backend.from_host(start),
        backend.from_host(end),
        backend.from_host(np.full(3, 1e-3)),
        h,
    )
    pairs = sorted(zip(backend.to_host(found.point), backend.to_host(found.obstacle), strict=True))
    assert pairs == [(0, 0), (1, 1)]
    order = np.argsort(backend.to_host(found.point))
    normal = backend.to_host(found.normal)[:, order].T
    np.testing.assert_allclose(normal, [[0, 0, 1], [0, 0, 1]], atol=1e-12)
    velocity = backend.to_host(found.obstacle_velocity)[:, order].T
    np.testing.assert_allclose(velocity, [[0, 0, 0], [0, 0, 20.0]], atol=1e-12)


def test_the_broad_phase_finds_what_a_scan_of_every_triangle_finds(backend):
    """Points near a slab and far from it, still and sweeping: the triangle query on a fine
    grid (its occupied cells counted in blocks, points whose cells hold no triangle passed
    over) answers as the same query on a grid of one cell, where every triangle is every
    point's candidate; and a placement made once answers as the motion it places."""
    vertices, triangles = slab(6, 0.1, 0.02)
    fine = 0.0005
    assert (0.2 / fine) ** 2 * (0.02 / fine) > OCCUPANCY_CELLS  # counted in blocks
    obstacles = {
        cell: build_obstacles(
            [TriangleMesh(vertices, triangles, cell, deforming=True, name="slab")], backend
        )
        for cell in (fine, 1.0)
    }
    rng = np.random.default_rng(11)
    near = rng.uniform([-0.11, -0.11, -0.025], [0.11, 0.11, 0.005], (400, 3))
    on_top = rng.uniform([-0.1, -0.1, -4e-4], [0.1, 0.1, 4e-4], (200, 3))
    far = rng.uniform(-0.4, 0.4, (400, 3))
    start = np.concatenate((near, on_top, far)).T
    end = start + rng.normal(scale=0.004, size=start.shape)
    reach = np.full(start.shape[1], 0.003)
    swept, distances = {}, {}
    for cell, shapes in obstacles.items():
        motion = still(shapes)
        swept[cell] = backend.to_host(
            swept_distances(
                shapes,
                place(shapes, motion),
                backend.from_host(start),
                backend.from_host(end),
                backend.from_host(reach),
                0.01,
            )
        )
        distances[cell] = backend.to_host(
            signed_distances(shapes, motion, backend.from_host(start))[0]
        )
    reached = np.isfinite(swept[1.0])
    assert 200 < reached.sum() < 900
    np.testing.assert_array_equal(np.isfinite(swept[fine]), reached)
    np.testing.assert_allclose(swept[fine][reached], swept[1.0][reached], rtol=0, atol=1e-15)
    # Within a fine cell of the surface both grids answer alike; farther, only the coarse one.
    close = np.isfinite(distances[fine])
    assert close.sum() > 150
    np.testing.assert_allclose(distances[fine][close], distances[1.0][close], rtol=0, atol=1e-15)


def test_deforming_vertices_are_checked_by_the_obstacle_s_name(backend):
    vertices, triangles = box_mesh(BOX_LOW, BOX_HIGH)
    obstacles = build_obstacles(
        [
            TriangleMesh(vertices, triangles, 0.05, name="rigid"),
            TriangleMesh(vertices, triangles, 0.05, deforming=True, name="body"),
        ],
        backend,
    )
    with pytest.raises(InvalidInputError, match=r"obstacle 1 \('body'\).*8 vertices.*\(9, 3\)"):
        still(obstacles, mesh_vertices={1: np.zeros((9, 3))})
    with pytest.raises(InvalidInputError, match=r"obstacle 0 \('rigid'\) is not a deforming"):
        still(obstacles, mesh_vertices={0: vertices})


def test_a_sliding_surface_carries_a_strand_lying_on_it(backend):
    """A strand lies on a sheet whose vertices slide sideways at 0.1 m/s (the obstacle's frame
    stands still), its root carried along at the same speed: friction holds the lying links to
    the surface's own velocity, so every point moves with it within 5 % (friction against a
    still surface would hold them back and bend the strand)."""
    vertices, triangles = sheet(8, 0.4)
    obstacles = build_obstacles(
        [
            TriangleMesh(
                vertices,
                triangles,
                0.1,
                thickness=0.002,
                deforming=True,
                material=Material(0.0, 1.0, 0.9),
                name="belt",
            )
        ],
        backend,
    )
    lying = polyline(8, 0.2, direction=(1.0, 0.0, 0.0), start=(0.0, 0.0, 0.003))
    model = build_model(
        [StrandSpec(lying)],
        StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=1e-6,
            twist_stiffness=1e-6,
            collision_radius=1e-3,
        ),
        backend=backend,
    )
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    speed = 0.1
    moving = np.array([[0.0, speed, 0.0]])

    def root(t):
        zero = np.zeros((1, 3))
        return BaseMotion(np.eye(3)[None], moving * t, zero, moving, zero, zero)

    def belt(t):
        return still(
            obstacles,
            mesh_vertices={0: vertices + moving * t},
            mesh_velocities={0: np.repeat(moving, len(vertices), axis=0)},
        )

    for _ in range(6):
        sim.advance(1 / 24, root, obstacle_motion=belt)
    before = sim.points()
    sim.advance(1 / 24, root, obstacle_motion=belt)
    velocity = (sim.points() - before) * 24
    np.testing.assert_allclose(velocity[:, 1], speed, rtol=0.05)
    assert np.abs(velocity[:, [0, 2]]).max() < 0.05 * speed


def test_a_bump_rising_under_lying_strands_lifts_them_clear_of_it(backend):
    """Ten strands lie across a slab whose top rises into a 15 cm bump within half a second
    (ease in and out, the vertices sampled per frame and interpolated through the substeps):
    the bump lifts them, and no strand point's centre comes closer to the rising surface than
    half its collision radius (the strict stand-in: the first half second, the bump rising). At
    the default 4 substeps per frame: the contact correction's friction modes cycle on the
    strands dragged over the bump's flank, and a tip ended 2.5 mm inside before the steps that
    take a point deeper than a tenth of its radius were halved (``penetration_tolerance``)."""
    vertices, triangles = slab(48, 0.3, 0.1)
    obstacles = build_obstacles(
        [TriangleMesh(vertices, triangles, 0.0125, deforming=True, name="bump")], backend
    )
    radius = 2e-3
    specs = [
        StrandSpec(polyline(12, 0.3, direction=(1.0, 0.0, 0.0), start=(-0.2, y, radius)))
        for y in np.linspace(-0.05, 0.05, 10)
    ]
    model = build_model(
        specs,
        StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=1e-5,
            twist_stiffness=1e-5,
            collision_radius=radius,
        ),
        backend=backend,
    )
    sim = Simulation(model, SolverSettings(), obstacles=obstacles)
    top = vertices[:, 2] > -0.05
    bump = np.where(top, np.exp(-(vertices[:, 0] ** 2 + vertices[:, 1] ** 2) / 0.08**2), 0.0)

    def shaped(t):
        u = min(t / 0.5, 1.0)
        return vertices + np.outer(0.15 * u * u * (3 - 2 * u), [0.0, 0.0, 1.0]) * bump[:, None]

    fps = 24

    def motion(t):
        frame = math.floor(t * fps + 1e-9)
        start, end = shaped(frame / fps), shaped((frame + 1) / fps)
        s = t * fps - frame
        return still(
            obstacles,
            mesh_vertices={0: (1 - s) * start + s * end},
            mesh_velocities={0: (end - start) * fps},
        )

    closest, highest = np.inf, 0.0
    for _ in range(scene_frames(backend, 24)):
        sim.advance(1 / fps, STILL, obstacle_motion=motion)
        points = sim.points()
        distance, _ = signed_distances(obstacles, motion(sim.time), backend.from_host(points.T))
        closest = min(closest, float(np.min(backend.to_host(distance))))
        highest = max(highest, float(points[:, 2].max()))
    assert highest > 0.05
    assert closest > 0.5 * radius


def test_a_thin_panel_sweeping_through_hanging_strands_lets_none_through(backend):
    """A sheet of two triangles, a millimetre thick, swept at 2 m/s through 40 hanging strands:
    no point crosses the sheet's face from one substep to the next (the default 4 per frame),
    and the simulation does not diverge; strands that slip past its edges do not count."""
    vertices, triangles = sheet(1, 0.3)
    vertices = vertices[:, [0, 2, 1]] - [0.0, 0.0, 0.35]
    obstacles = build_obstacles(
        [TriangleMesh(vertices, triangles, 0.3, thickness=1e-3, name="panel")], backend
    )
    model = hanging_curtain(backend, np.linspace(-0.25, 0.25, 40))
    substeps = SolverSettings().substeps
    sim = Simulation(model, SolverSettings(substeps=1), obstacles=obstacles)
    start, speed = -0.05, 2.0

    def panel(t):
        pose = np.eye(4)
        pose[1, 3] = start + speed * t
        return ObstacleMotion.from_host(obstacles, pose[None], None, [[0.0, speed, 0.0]])

    pushed = 0.0
    for _ in range(scene_frames(backend, 8) * substeps):
        before, wall_before = sim.points(), start + speed * sim.time
        sim.advance(1 / 24 / substeps, STILL, obstacle_motion=panel)
        after, wall = sim.points(), start + speed * sim.time
        side_before, side = before[:, 1] - wall_before, after[:, 1] - wall
        crossed = (side_before > 0.0) & (side <= 0.0)
        share = side_before / np.where(crossed, side_before - side, 1.0)
        where = before + share[:, None] * (after - before)
        on_face = (np.abs(where[:, 0]) < 0.3) & (where[:, 2] < -0.05) & (where[:, 2] > -0.65)
        assert not np.any(crossed & on_face)
        pushed = max(pushed, float(after[:, 1].max()))
    # The strands in its way went with it (until they slipped over its top edge).
    assert pushed > 0.1


def test_a_vertex_trajectory_moves_in_straight_lines_between_samples():
    """Between two samples the vertices move at the constant velocity that joins them (their
    positions its integral); before the first and after the last they stand; bad shapes are
    refused."""
    rng = np.random.default_rng(7)
    samples = rng.normal(size=(4, 5, 3))
    trajectory = VertexTrajectory(24.0, samples)
    for time in (0.0, 0.3 / 24, 1.0 / 24, 2.75 / 24):
        frame = int(time * 24)
        share = time * 24 - frame
        position, velocity = trajectory(time)
        np.testing.assert_allclose(
            position, samples[frame] + share * (samples[frame + 1] - samples[frame])
        )
        np.testing.assert_allclose(velocity, (samples[frame + 1] - samples[frame]) * 24)
        later, _ = trajectory(time + 1e-4)
        np.testing.assert_allclose((later - position) / 1e-4, velocity, rtol=1e-9)
    for time, frame in ((-1.0, 0), (3.0 / 24, 3), (9.0, 3)):
        position, velocity = trajectory(time)
        np.testing.assert_array_equal(position, samples[frame])
        np.testing.assert_array_equal(velocity, 0.0)
    with pytest.raises(InvalidInputError, match="VertexTrajectory.vertices"):
        VertexTrajectory(24.0, samples[0])
    with pytest.raises(InvalidInputError, match="VertexTrajectory.rate"):
        VertexTrajectory(0.0, samples)
