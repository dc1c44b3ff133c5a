"""Contacts, friction, impacts, joint limits and animated constraints in the step, against closed
forms (Coulomb friction on an incline, Newton's impact law and the rebound height it implies,
rigid-body statics), geometry (penetration depths from the obstacles' exact distances) and the
animated targets themselves."""

import math

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    ConstraintSettings,
    InvalidInputError,
    JointLimits,
    JointRotation,
    Material,
    ObstacleMotion,
    Plane,
    PointPath,
    Simulation,
    SimulationDivergedError,
    SolverSettings,
    Sphere,
    StrandParameters,
    StrandSpec,
    TriangleMesh,
    build_model,
    build_obstacles,
    dynamics,
    get_backend,
    integrators,
    spatial,
)
from oriented_strands.core.model import select_trees
from oriented_strands.core.obstacles import signed_distances
from oriented_strands.strands_io.geometry import resample_by_arc_length
from strands import (
    FREE,
    HEAD_TURN_PEAK,
    STILL,
    batch_rounding,
    box_mesh,
    hair_combed_over_scalp,
    hair_on_head,
    hanging_curtain,
    polyline,
    scene_frames,
    skip_where_rounding_depends_on_batch,
    turning_head,
)

G = 9.81


def _pose(rotation=None, position=(0.0, 0.0, 0.0)) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3] = np.eye(3) if rotation is None else rotation
    pose[:3, 3] = position
    return pose


def _placed(obstacles, *poses) -> ObstacleMotion:
    return ObstacleMotion.from_host(obstacles, np.array(poses))


def _interior_points(model, points: np.ndarray) -> np.ndarray:
    """Every strand's link tips and link midpoints except those of its root link, (P, 3)."""
    chosen = []
    for s in range(model.n_strands):
        tips = points[model.point_offsets[s] + 2 : model.point_offsets[s + 1]]
        joints = points[model.point_offsets[s] + 1 : model.point_offsets[s + 1] - 1]
        chosen += [tips, 0.5 * (tips + joints)]
    return np.concatenate(chosen)


def _tip_velocity(sim) -> np.ndarray:
    """World velocity of the tip of a one-link strand on a still base."""
    rotations, positions = sim.link_frames()
    w = sim.model.to_strand_order(sim.state.w)[0]
    return np.cross(rotations[0] @ w, sim.points()[-1] - positions[0])


def test_a_strand_dropped_on_a_plane_comes_to_rest_on_it_without_sinking_in(backend):
    """A horizontal strand droops onto a plane 3 cm below its root: it lands (impacts at about
    0.7 m/s), comes to rest lying on the plane, and no point ever sinks deeper than 1% of the
    strand's radius (distances from the plane's closed form)."""
    radius, drop = 1e-3, 0.03
    model = build_model(
        [StrandSpec(polyline(8, 0.24, direction=(1.0, 0.0, 0.0)))],
        StrandParameters(mass_per_length=0.01, radius=radius, bend_stiffness=5e-6),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, 0.5, 0.4))], backend)
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    deepest, lying = 0.0, 0
    for _ in range(scene_frames(backend, 24)):
        sim.advance(
            1 / 24, STILL, obstacle_motion=_placed(obstacles, _pose(position=(0.0, 0.0, -drop)))
        )
        heights = _interior_points(model, sim.points())[:, 2] + drop - radius
        deepest = max(deepest, -heights.min())
        lying = int((heights < 1e-4).sum())
    assert deepest < 0.01 * radius
    # Most of the strand lies on the plane, at rest.
    assert lying >= 8
    assert sim.energy()[0] < 1e-6
    assert sim.constraint_stats.contacts >= 8


def test_a_strand_resting_on_a_grid_mesh_is_not_halved_step_after_step(backend):
    """The same strand droops onto the top of a 60 cm box collided on its distance grid (cells
    of 12.5 mm, the size Blender picks for it) with a collision radius of 2 mm: it comes to
    rest on it, no point deeper than 10 % of the radius, and no step is halved. Judged with the
    margin contact finding keeps (a tenth of a cell), every step of the resting strand counted
    1.25 mm deeper than it went, and was halved as often as it may be."""
    radius, drop = 2e-3, 0.03
    model = build_model(
        [StrandSpec(polyline(8, 0.24, direction=(1.0, 0.0, 0.0)))],
        StrandParameters(mass_per_length=0.01, radius=radius, bend_stiffness=5e-6),
        backend=backend,
    )
    vertices, triangles = box_mesh((-0.3, -0.3, -0.3), (0.3, 0.3, 0.0))
    box = TriangleMesh(vertices, triangles, cell_size=0.6 / 48, material=Material(0.0, 0.5, 0.4))
    obstacles = build_obstacles([box], backend)
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    placed = _placed(obstacles, _pose(position=(0.0, 0.0, -drop)))
    deepest, halved = 0.0, 0
    for _ in range(scene_frames(backend, 24)):
        halved += sim.advance(1 / 24, STILL, obstacle_motion=placed).subdivisions
        heights = _interior_points(model, sim.points())[:, 2] + drop - radius
        deepest = max(deepest, -heights.min())
    assert sim.constraint_stats.contacts >= 6
    assert deepest < 0.1 * radius
    assert halved == 0


def test_a_stiff_curl_whose_root_link_stays_within_its_collision_radius_is_not_halved(backend):
    """A stiff curl of curly bangs grown on a head sphere it collides with (a helix of 2.5 turns
    widening to 11 mm round an axis that leaves the scalp along its normal, then falls), drawn
    through 33 points and resampled into 32 links: its root link, 5.5 mm long and 10° off the
    normal, keeps its middle within the 3 mm collision radius of the scalp however it turns
    (2.7 mm). Held still for half a second, no step is halved and no other point comes into the
    head. When such a point collided, its contact asked at every step for what no joint could
    give, and every substep was halved five times (1,486 halvings in these 12 frames; 80 such
    curls took 2.2 s a frame in Blender instead of 0.09)."""
    radius, head = 3e-3, 0.1
    normal = np.array([-0.55, -0.564, 0.616])
    normal /= np.linalg.norm(normal)
    outward = np.array([normal[0], normal[1], 0.0]) / math.hypot(normal[0], normal[1])
    fall = np.array([0.0, 0.0, -1.0]) + 0.5 * outward
    fall /= np.linalg.norm(fall)
    s = np.linspace(0.0, 1.0, 33)[:, None]
    axis = head * normal + 0.025 * np.minimum(s / 0.1, 1.0) * normal
    axis = axis + 0.0735 * np.maximum(s - 0.1, 0.0) / 0.9 * fall
    first = np.cross(fall, outward)
    angle = 2.0 * math.pi * 2.538 * s + 5.505
    across = np.cos(angle) * first + np.sin(angle) * np.cross(fall, first)
    model = build_model(
        [StrandSpec(resample_by_arc_length(axis + 0.011 * np.minimum(s / 0.2, 1.0) * across, 32))],
        StrandParameters(
            mass_per_length=0.008,
            radius=1.5e-3,
            bend_stiffness=8e-3,
            twist_stiffness=6e-3,
            bend_damping=8e-6,
            twist_damping=6e-6,
            collision_radius=radius,
        ),
        backend=backend,
    )
    obstacles = build_obstacles([Sphere(head, Material(0.0, 0.4, 0.3))], backend)
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    halved = sum(sim.advance(1 / 24, STILL).subdivisions for _ in range(scene_frames(backend, 12)))
    assert halved == 0
    assert (np.linalg.norm(sim.points()[2:], axis=1) - head).min() > 0.9 * radius


def _rod_on_incline(backend, static_friction, dynamic_friction, angle):
    """A 20 cm rod pinned at its root, lying on an incline along its level line, touching it with
    its tip only: the normal force at the tip is m g cos(angle) / 2 (moments about the root),
    gravity's pull along the slope m g sin(angle) at the centre."""
    length, radius = 0.2, 2e-3
    cosine, sine = math.cos(angle), math.sin(angle)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, cosine, -sine], [0.0, sine, cosine]])
    normal = tilt[:, 2]
    root = radius * normal
    model = build_model(
        [StrandSpec(np.array([root, root + (length, 0.0, 0.0)]))],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, static_friction, dynamic_friction))], backend)
    sim = Simulation(
        model,
        SolverSettings(substeps=1),
        obstacles=obstacles,
        constraint_settings=ConstraintSettings(fractions=(1.0,)),
    )
    return sim, _placed(obstacles, _pose(tilt)), -tilt[:, 1], model


@pytest.mark.parametrize("static_friction", [0.65, 0.3])
def test_a_rod_on_an_incline_sticks_or_slides_by_coulombs_law(backend, static_friction):
    """On a 30° incline (tan = 0.577) the rod's tip holds when μ_s = 0.65 and otherwise turns
    down-slope about the root with the closed-form angular acceleration
    α = m g (L/2) (sin θ − μ_d cos θ) / I_root (friction μ_d m g cos θ / 2 at the tip, lever L),
    fitted to the tip's path within 5%."""
    angle, dynamic_friction, h = math.radians(30.0), 0.3, 1 / 480
    sim, placed, down_slope, model = _rod_on_incline(
        backend, static_friction, dynamic_friction, angle
    )
    times, along = [], []
    for _ in range(40):
        sim.advance(h, STILL, obstacle_motion=placed)
        times.append(sim.time)
        along.append(sim.points()[-1] @ down_slope)
    along = np.array(along) - along[0]
    if static_friction > math.tan(angle):
        assert np.abs(along).max() < 1e-6
        return
    length, radius, mass = 0.2, 2e-3, 0.05 * 0.2
    inertia = mass * (length**2 / 3 + radius**2 / 4)
    alpha = mass * G * (length / 2) * (math.sin(angle) - dynamic_friction * math.cos(angle))
    expected = alpha / inertia * length
    # Backward Euler under a constant force moves on an exact parabola in the step count.
    measured = 2.0 * np.polyfit(np.array(times[5:]), along[5:], 2)[0]
    assert measured == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("floor_speed", [0.0, 0.01])
def test_sticking_friction_holds_both_axes_of_the_contact_plane(backend, floor_speed):
    """Friction is isotropic in the contact plane: a pinned rod pointing along (1, 1, −1), its
    tip 0.5 mm into a floor, no gravity, friction high enough to stick: pushed out at
    ``recovery_speed`` v, the tip can only move across the rod (``u_x + u_y = u_z``), and
    sticking friction leaves it the least slip over the floor that allows: with the floor
    sliding along x at s, ``(u_x, u_y) = ((v + s)/2, (v − s)/2)`` (least squares of the slip
    under the rod's constraint), within 2% of v (the contacts' regularisation)."""
    length, radius, h = 0.2, 2e-3, 1 / 240
    tip = length * np.array([1.0, 1.0, -1.0]) / math.sqrt(3.0)
    model = build_model(
        [StrandSpec(np.array([np.zeros(3), tip]))],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, 5.0, 5.0))], backend)
    floor = _pose(position=(0.0, 0.0, tip[2] - radius + 5e-4))
    settings = ConstraintSettings(fractions=(1.0,))
    speed = settings.recovery_speed
    sim = Simulation(
        model,
        SolverSettings(substeps=1),
        gravity=(0.0, 0.0, 0.0),
        obstacles=obstacles,
        constraint_settings=settings,
    )
    sliding = ObstacleMotion.from_host(
        obstacles, floor[None], np.zeros((1, 3)), np.array([[floor_speed, 0.0, 0.0]])
    )
    sim.advance(h, STILL, obstacle_motion=sliding)
    expected = [(speed + floor_speed) / 2, (speed - floor_speed) / 2, speed]
    np.testing.assert_allclose(_tip_velocity(sim), expected, rtol=0, atol=0.02 * speed)


@pytest.mark.parametrize("restitution", [0.5, 0.8])
def test_a_falling_rod_bounces_with_the_obstacles_restitution(backend, restitution):
    """A pinned rod falls from 15° above horizontal onto a frictionless plane it meets at 5°
    below: the tip's normal speed after the impact is ν times the speed before (Newton's impact
    law, within 5%), and the rod rises again to the height that ν² of its kinetic energy buys
    (energy of a free pinned rod), within 5%."""
    length, radius, h = 0.2, 2e-3, 1 / 500
    start, contact = math.radians(15.0), math.radians(5.0)
    model = build_model(
        [
            StrandSpec(
                np.array(
                    [[0.0, 0.0, 0.0], [length * math.cos(start), 0.0, length * math.sin(start)]]
                )
            )
        ],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(restitution, 0.0, 0.0))], backend)
    floor = -length * math.sin(contact) - radius
    sim = Simulation(model, SolverSettings(substeps=1), obstacles=obstacles)
    placed = _placed(obstacles, _pose(position=(0.0, 0.0, floor)))
    speeds, heights = [0.0], [sim.points()[-1][2]]
    while len(speeds) < 400:
        sim.advance(h, STILL, obstacle_motion=placed)
        speeds.append(_tip_velocity(sim)[2])
        heights.append(sim.points()[-1][2])
        if speeds[-2] > 0.0 > speeds[-1] and heights[-1] > floor + 0.01:
            break  # top of the rebound
    speeds, heights = np.array(speeds), np.array(heights)
    impact = int(np.argmax((speeds[:-1] < 0.0) & (speeds[1:] > 0.0)))
    assert impact > 0
    assert speeds[impact + 1] / -speeds[impact] == pytest.approx(restitution, rel=0.05)
    fallen = heights[0] - heights[impact]
    risen = heights[impact + 1 :].max() - heights[impact]
    assert risen / fallen == pytest.approx(restitution**2, rel=0.05)
    assert heights.min() > floor + radius - 0.01 * radius


def test_an_impact_restarts_second_order_stepping_after_one_first_order_step(backend):
    """The rod above falls in second order; the step whose contact turns it back is of first
    order (the contact's law is backward Euler's), the next one too (the velocity jumped, so the
    history is no base for BDF2), and from then on it steps in second order again."""
    length, radius = 0.2, 2e-3
    model = build_model(
        [StrandSpec(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]))],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.5, 0.0, 0.0))], backend)
    sim = Simulation(model, SolverSettings(substeps=1), obstacles=obstacles)
    placed = _placed(obstacles, _pose(position=(0.0, 0.0, -0.02 - radius)))
    speeds, orders = [], []
    for _ in range(60):
        stats = sim.advance(1 / 500, STILL, obstacle_motion=placed)
        speeds.append(_tip_velocity(sim)[2])
        orders.append(stats.second_order_trees)
    impact = int(np.argmax(np.array(speeds) > 0.0))
    assert impact > 2
    assert sim.constraint_stats.contacts == 0
    assert orders[:impact] == [0] + [1] * (impact - 1)
    assert orders[impact : impact + 3] == [0, 0, 1]


def test_a_point_arriving_from_beyond_the_margin_closes_its_gap_to_the_margin(backend):
    """Without restitution, a point that the sweep finds arriving from farther than the margin
    closes its gap to the margin within the step instead of stopping where it was: a pinned
    rod's tip, 3 mm above a plane (three margins) and falling at 1 m/s (4.2 mm a step), ends
    the step 1 mm above it, then settles on it under gravity without going in, at rest."""
    length, radius, speed, gap, h = 0.2, 2e-3, 1.0, 3e-3, 1 / 240
    model = build_model(
        [StrandSpec(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]))],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, 0.0, 0.0))], backend)
    settings = ConstraintSettings(fractions=(1.0,))
    sim = Simulation(
        model,
        SolverSettings(substeps=1),
        obstacles=obstacles,
        constraint_settings=settings,
    )
    rotations, _ = sim.link_frames()
    falling = rotations[0].T @ np.array([0.0, speed / length, 0.0])
    sim.state.w[...] = backend.from_host(falling[:, None])
    assert _tip_velocity(sim)[2] == pytest.approx(-speed)
    floor = -radius - gap
    placed = _placed(obstacles, _pose(position=(0.0, 0.0, floor)))
    gaps = []
    for _ in range(48):
        sim.advance(h, STILL, obstacle_motion=placed)
        gaps.append(sim.points()[-1][2] - radius - floor)
    assert gaps[0] == pytest.approx(settings.margin, abs=0.05 * settings.margin)
    assert min(gaps) > -0.01 * radius
    assert gaps[-1] == pytest.approx(0.0, abs=0.01 * radius)
    assert _tip_velocity(sim)[2] == pytest.approx(0.0, abs=0.01 * speed)


def test_a_rising_plane_lifts_a_resting_tip_at_its_own_speed(backend):
    """The obstacle's velocity enters the response: a plane rising at 0.2 m/s under the tip of a
    pinned rod lifts the tip at 0.2 m/s (normal row's desired velocity relative to the plane),
    without letting it sink in."""
    length, radius, speed, h = 0.2, 2e-3, 0.2, 1 / 240
    model = build_model(
        [StrandSpec(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]))],
        StrandParameters(mass_per_length=0.05, radius=radius, **FREE),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, 0.0, 0.0))], backend)
    sim = Simulation(
        model,
        SolverSettings(substeps=1),
        obstacles=obstacles,
        constraint_settings=ConstraintSettings(fractions=(1.0,)),
    )
    for k in range(24):
        height = -radius + speed * k * h
        motion = ObstacleMotion.from_host(
            obstacles, _pose(position=(0.0, 0.0, height))[None], None, [[0.0, 0.0, speed]]
        )
        sim.advance(h, STILL, obstacle_motion=motion)
        gap = sim.points()[-1][2] - (height + speed * h) - radius
        assert gap > -0.01 * radius
    assert _tip_velocity(sim)[2] == pytest.approx(speed, rel=1e-3)


@pytest.mark.parametrize(("speed", "frames"), [(5.0, 6), (10.0, 3), (20.0, 2)])
def test_a_ball_swept_through_hanging_strands_pushes_them_aside(backend, speed, frames):
    """A 10 cm ball swept at 5, 10 and 20 m/s through a row of 20 hanging strands at mid-height,
    at the default 4 substeps per frame (it moves 0.5 to 2 diameters per substep): the strands
    it meets go with it, none of their points ever ends inside it, none passes through it (the
    straight path of a point relative to the ball over a substep never comes within half its
    radius of its centre), and the bake does not stop. Steps whose correction swings a point
    through the ball are halved (``penetration_tolerance``); strands left whipping round the
    ball at hundreds of rad/s that even the deepest halving cannot step fall back for that
    step, reported. (The slower stand-in backend runs half of the slowest ball's scene: the
    faster balls' strands whip round them, and their steps are halved many times.)"""
    if backend.name != "numpy" and speed > 5.0:
        pytest.skip("the stand-in backend runs the slowest ball only")
    model = hanging_curtain(backend, np.linspace(-0.1, 0.1, 20))
    radius, start = 0.05, -0.2
    obstacles = build_obstacles([Sphere(radius, Material(0.0, 0.3, 0.2), name="ball")], backend)
    substeps = SolverSettings().substeps
    sim = Simulation(model, SolverSettings(substeps=1), obstacles=obstacles)

    def centre(t):
        return np.array([0.0, start + speed * t, -0.2])

    def ball(t):
        return ObstacleMotion.from_host(
            obstacles, _pose(position=centre(t))[None], None, [[0.0, speed, 0.0]]
        )

    before = sim.points() - centre(0.0)
    furthest = 0.0
    for _ in range(scene_frames(backend, frames) * substeps):
        stats = sim.advance(1 / 24 / substeps, STILL, obstacle_motion=ball)
        furthest = max(furthest, sim.points()[:, 1].max())
        after = sim.points() - centre(sim.time)
        assert np.isfinite(after).all()
        assert np.linalg.norm(after, axis=1).min() > radius
        path = after - before
        along = np.clip(-np.sum(before * path, axis=1) / np.sum(path * path, axis=1), 0.0, 1.0)
        closest = np.linalg.norm(before + along[:, None] * path, axis=1)
        assert closest.min() > 0.5 * radius
        assert all(fallback.strand in range(20) for fallback in stats.fallbacks)
        before = after
    assert furthest > 0.1


def test_a_step_that_leaves_a_point_inside_its_obstacle_is_held_rigid_at_the_deepest_halving(
    backend,
):
    """A hanging strand set swinging at 20 rad/s about its root into a still 10 cm ball, with no
    halving allowed (4 substeps per frame: 0.2 rad per step, its tip at 8 m/s): the correction
    is linear in the joint velocities, so unchecked (``penetration_tolerance = inf``) a step
    leaves a point's centre 1 cm inside the ball; checked, that step is not kept but held rigid
    (a :class:`.Fallback` naming the strand and why), and no point's centre ever ends inside;
    ``strict`` stops the simulation there instead, naming the strand."""
    radius, centre = 0.05, np.array([0.0, 0.3, -0.2])
    obstacles = build_obstacles([Sphere(radius, Material(0.0, 0.3, 0.2), name="ball")], backend)
    ball = ObstacleMotion.from_host(obstacles, _pose(position=centre)[None], None, None)

    def swing(tolerance, strict=False):
        sim = Simulation(
            hanging_curtain(backend, [0.0]),
            SolverSettings(substeps=1, max_subdivision_depth=0, strict=strict),
            obstacles=obstacles,
            constraint_settings=ConstraintSettings(penetration_tolerance=tolerance),
        )
        sim.state.w[0, 0] = 20.0
        closest, fallbacks = math.inf, []
        for _ in range(12):
            fallbacks += sim.advance(1 / 96, STILL, obstacle_motion=ball).fallbacks
            closest = min(closest, np.linalg.norm(sim.points() - centre, axis=1).min())
        return closest, fallbacks

    unchecked, none = swing(math.inf)
    assert unchecked < radius - 0.005
    assert none == []
    checked, fallbacks = swing(0.1)
    assert checked > radius
    assert [(f.strand, f.reason) for f in fallbacks] == [
        (0, "the contact correction left it inside an obstacle")
    ]
    with pytest.raises(SimulationDivergedError, match="strand 0.*inside an obstacle"):
        swing(0.1, strict=True)


def test_a_strand_a_fast_ball_strikes_is_halved_without_the_strand_beside_it(backend):
    """A ball at 10 m/s strikes one of two hanging strands (the other hangs 30 cm aside, out of
    its reach): the struck strand's steps are halved on a model of its own, the other keeps its
    whole steps, and each ends exactly as it does stepped alone."""
    model = hanging_curtain(backend, [0.0, 0.3])
    radius, speed = 0.05, 10.0
    obstacles = build_obstacles([Sphere(radius, Material(0.0, 0.3, 0.2), name="ball")], backend)

    def ball(t):
        centre = np.array([0.0, -0.2 + speed * t, -0.2])
        return ObstacleMotion.from_host(
            obstacles, _pose(position=centre)[None], None, [[0.0, speed, 0.0]]
        )

    def run(part):
        sim = Simulation(part, SolverSettings(substeps=4), obstacles=obstacles)
        subdivisions = sum(
            sim.advance(1 / 24, STILL, obstacle_motion=ball).subdivisions for _ in range(2)
        )
        return backend.to_host(sim.state.w), subdivisions

    together, subdivisions = run(model)
    assert subdivisions > 0
    for tree, halved in ((0, True), (1, False)):
        part, links = select_trees(model, [tree])
        alone, part_subdivisions = run(part)
        assert (part_subdivisions > 0) == halved
        np.testing.assert_allclose(together[:, links], alone, rtol=0, atol=batch_rounding(backend))


def test_a_rising_floor_buckles_a_straight_strand_standing_on_it(backend):
    """A straight hanging strand (8 links) meets a plane rising at 0.17 m/s exactly along its
    axis: the push has no first-order effect on the chain (a near-zero operator diagonal), so
    the contact is compliant (weak row) and pushes with bounded force, slightly off the axis,
    and the strand buckles. It stays finite for 2 s while the floor rises to 4 cm under the
    root and then stops, bends aside, lets the floor in by less than 3 cm while it buckles and
    by less than its collision radius once it has (from 0.7 s on), and its kinetic energy stays
    below that of the whole strand at 0.5 m/s."""
    radius, speed, length, mass = 1e-3, 0.17, 0.24, 0.01 * 0.24
    model = build_model(
        [StrandSpec(polyline(8, length))],
        StrandParameters(mass_per_length=0.01, radius=radius, bend_stiffness=5e-6),
        backend=backend,
    )
    obstacles = build_obstacles([Plane(Material(0.0, 0.3, 0.2))], backend)
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    start, stop = -length - radius - 0.002, -0.04

    def floor(t):
        return min(start + speed * t, stop)

    def motion(t):
        rising = speed if start + speed * t < stop else 0.0
        return ObstacleMotion.from_host(
            obstacles, _pose(position=(0.0, 0.0, floor(t)))[None], None, [[0.0, 0.0, rising]]
        )

    deepest, settled, aside = 0.0, 0.0, 0.0
    for _ in range(scene_frames(backend, 48)):
        sim.advance(1 / 24, STILL, obstacle_motion=motion)
        points = sim.points()
        assert np.isfinite(points).all()
        depth = floor(sim.time) + radius - points[:, 2].min()
        deepest = max(deepest, depth)
        if sim.time > 0.7:
            settled = max(settled, depth)
        aside = max(aside, np.hypot(points[:, 0], points[:, 1]).max())
        assert sim.energy()[0] < 0.5 * mass * 0.5**2
    assert aside > 0.05
    assert deepest < 0.03
    assert settled < radius


@pytest.mark.parametrize("moving", [False, True])
def test_a_path_target_out_of_reach_stretches_the_strand_toward_it(backend, moving):
    """The tip of the L-shaped strand (20 cm) is led to a point 27 cm from the root: either
    there at once (15 cm from the tip), or along a path leaving the tip at 0.2 m/s. The row
    along the stretched strand is weak (compliant) and the approach speed is capped, so the
    strand stays finite, ends stretched straight (its tip within 1 mm of its full length from
    the root) pointing at the target within 1°, and comes to rest."""
    model = _l_shaped_strand(backend)
    goal = np.array([0.25, 0.0, -0.1])

    def path(t):
        if not moving:
            return goal
        return np.array([min(0.1 + 0.2 * t, goal[0]), 0.0, -0.1])

    sim = Simulation(model, SolverSettings(substeps=4))
    sim.add_constraint(PointPath(0, 3, path))
    for _ in range(scene_frames(backend, 48)):
        sim.advance(1 / 24, STILL)
        assert np.isfinite(sim.points()).all()
    tip = sim.points()[-1]
    assert np.linalg.norm(tip) > 0.2 - 1e-3
    cosine = tip @ goal / (np.linalg.norm(tip) * np.linalg.norm(goal))
    assert cosine > math.cos(math.radians(1.0))
    assert sim.energy()[0] < 1e-8


@pytest.mark.parametrize("seconds", [10.0, 1.0])
def test_hair_on_a_turning_head_stays_outside_head_and_neck(backend, seconds):
    """Hair over a head sphere and a neck capsule while the head turns ±90° at up to 360°/s (the
    head's angular velocity enters the contacts through the sphere's motion): no point sinks
    deeper than 10% of the collision radius into either (their exact distances), nothing
    becomes non-finite, and the kinetic energy stays below that of the whole strands flung at
    twice the head's top surface speed. The 10 s run is left to the NumPy backend."""
    if seconds > 2.0 and backend.name != "numpy":
        pytest.skip("the long run is for the NumPy backend; the others run 1 s")
    model, obstacles = hair_on_head(backend, n_strands=3, n_links=6)
    peak = HEAD_TURN_PEAK
    head, obstacle_motion = turning_head(obstacles)

    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    mass = 0.01 * 0.25 * model.n_strands
    energy_bound = 0.5 * mass * (2 * peak * 0.35) ** 2
    deepest, contacts = 0.0, 0
    for _ in range(int(round(24 * seconds))):
        sim.advance(1 / 24, head, obstacle_motion=obstacle_motion)
        points = _interior_points(model, sim.points())
        assert np.isfinite(points).all()
        distance, _ = signed_distances(
            obstacles, obstacle_motion(sim.time), backend.from_host(points.T)
        )
        deepest = max(deepest, 2e-3 - float(backend.to_host(distance).min()))
        contacts = max(contacts, sim.constraint_stats.contacts)
        assert sim.energy()[0] < energy_bound
    assert contacts > 0
    assert deepest < 0.1 * 2e-3


def test_a_few_trees_correct_their_contacts_through_dense_blocks_as_through_the_sweeps(
    backend, blas_threads, monkeypatch
):
    """Three strands on the turning head: a model of a few small trees takes its Newton and
    contact solves through dense per-tree blocks (``dynamics.DenseTrees``; LAPACK's solve where
    the process's BLAS runs one thread, as in the engine's workers, the block factorisation
    elsewhere) instead of the articulated-body sweeps; the hair moves the same over half a second
    of contacts, to the iterations' tolerances (solves equal to rounding end an iteration a few
    nanometres apart: 7 nm)."""
    model, obstacles = hair_on_head(backend, n_strands=3, n_links=6)
    assert dynamics.dense_pays(model) == (backend.name == "numpy")
    head, obstacle_motion = turning_head(obstacles)
    runs = []
    for dense, threads in ((False, None), (True, None), (True, "1")):
        blas_threads(threads)
        monkeypatch.setattr(dynamics, "dense_pays", lambda model, dense=dense: dense)
        sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
        contacts = 0
        for _ in range(12):
            sim.advance(1 / 24, head, obstacle_motion=obstacle_motion)
            contacts = max(contacts, sim.constraint_stats.contacts)
        assert contacts > 0
        runs.append(sim.points())
    for dense_run in runs[1:]:
        np.testing.assert_allclose(dense_run, runs[0], rtol=0.0, atol=1e-7)


@pytest.mark.slow
def test_soft_hair_combed_over_a_turning_head_lies_on_it_without_diverging(backend):
    """Forty soft strands combed over the scalp lie on the head with up to 17 contacts each while
    it turns ±90° at up to 360°/s (the contacts' linear complementarity problem of the paper's
    §5 diverged on this scene in its first frames): 2 s run, finite, no point ever deeper than
    10% of its collision radius into the head or the neck (measured: 0.4%), many contacts per
    strand. NumPy only (18 s)."""
    if backend.name != "numpy":
        pytest.skip("the long run is for the NumPy backend")
    model, obstacles = hair_combed_over_scalp(backend, n_strands=40, n_links=16)
    deepest, contacts = _on_the_turning_head(model, obstacles, frames=48)
    assert contacts > 10 * model.n_strands
    assert deepest < 0.1 * 2e-3


@pytest.mark.slow
def test_three_hundred_very_soft_strands_on_a_turning_head_stay_out_of_it(backend):
    """Three hundred strands of 2·10⁻⁷ N·m² (a hundredth of the strands above: issue 19's soft
    drape) combed over the head while it turns: no point ends a frame deeper than 10 % of its
    collision radius (measured 0.17 mm of 2 mm over 20 frames). Stopped at one link by contacts
    that the sweep of its corrected path added, a strand whips its next links round within a
    substep; with that path swept only once, a point ended frame 15 3.2 mm deep. NumPy only
    (20 s)."""
    if backend.name != "numpy":
        pytest.skip("the long run is for the NumPy backend")
    model, obstacles = hair_combed_over_scalp(
        backend,
        n_strands=300,
        n_links=16,
        bend_stiffness=2e-7,
        twist_stiffness=2e-7,
        bend_damping=2e-9,
        twist_damping=2e-9,
    )
    deepest, _ = _on_the_turning_head(model, obstacles, frames=20)
    assert deepest < 0.1 * 2e-3


def _on_the_turning_head(model, obstacles, frames: int) -> tuple[float, int]:
    """Simulate ``model``'s strands on :func:`turning_head` for ``frames`` frames at 4 substeps,
    checking every frame's points are finite; the deepest any of :func:`_interior_points` was
    inside its 2 mm collision radius at a frame's end, and the most contacts of a substep."""
    head, obstacle_motion = turning_head(obstacles)
    sim = Simulation(model, SolverSettings(substeps=4), obstacles=obstacles)
    deepest, contacts = 0.0, 0
    for _ in range(frames):
        sim.advance(1 / 24, head, obstacle_motion=obstacle_motion)
        points = _interior_points(model, sim.points())
        assert np.isfinite(points).all()
        distance, _ = signed_distances(obstacles, obstacle_motion(sim.time), points.T)
        deepest = max(deepest, 2e-3 - float(distance.min()))
        contacts = max(contacts, sim.constraint_stats.contacts)
    return deepest, contacts


def _l_shaped_strand(backend):
    """Down 10 cm, then 10 cm sideways along x, in four links (bent, so its tip can move every
    way: a straight chain cannot move its tip along itself)."""
    points = [[0.0, 0.0, 0.0], [0.0, 0.0, -0.05], [0.0, 0.0, -0.1], [0.05, 0.0, -0.1]]
    return build_model(
        [StrandSpec(np.array([*points, [0.1, 0.0, -0.1]]))],
        StrandParameters(bend_stiffness=1e-5, twist_stiffness=1e-5),
        backend=backend,
    )


def test_a_tip_follows_an_animated_path(backend):
    """The tip of an L-shaped 4-link strand is led round a 3 cm circle once a second (eq. 15 gains
    of the settings) while gravity pulls it down: it stays within 1 mm of the path."""
    model = _l_shaped_strand(backend)
    centre = np.array([0.07, 0.0, -0.1])

    def circle(t):
        return centre + 0.03 * np.array([math.cos(2 * math.pi * t), math.sin(2 * math.pi * t), 0.0])

    sim = Simulation(model, SolverSettings(substeps=4))
    sim.add_constraint(PointPath(0, 3, circle))
    worst = 0.0
    for _ in range(scene_frames(backend, 36)):
        sim.advance(1 / 24, STILL)
        worst = max(worst, np.linalg.norm(sim.points()[-1] - circle(sim.time)))
    assert worst < 1e-3
    assert sim.constraint_stats.bilateral_rows == 3


def _strung_line(backend, slack, sway, **options):
    """A 4 mm cord strung 2.2 m between its root and an end pinned to a point swaying by
    ``sway`` across the line and 0.4 of it along, 24 links, the parabola of its sag drawn
    ``slack`` longer than the span; ``options`` go to the :class:`Simulation`. Returns it and
    the pin's position as a function of time."""
    span, links = 2.2, 24
    sag = math.sqrt(3.0 / 8.0 * slack) * span
    u = np.linspace(0.0, 1.0, 97)[:, None]
    drawn = np.hstack((span * u, 0.0 * u, -4.0 * sag * u * (1.0 - u)))
    radius, rigidity = 2e-3, 2e6 * math.pi * 2e-3**4 / 4.0
    model = build_model(
        [StrandSpec(resample_by_arc_length(drawn, links))],
        StrandParameters(
            mass_per_length=1100.0 * math.pi * radius**2,
            radius=radius,
            bend_stiffness=rigidity,
            twist_stiffness=rigidity / 1.3,
            bend_damping=rigidity / 100.0,
            twist_damping=rigidity / 100.0,
        ),
        backend=backend,
    )
    sim = Simulation(model, SolverSettings(substeps=4), **options)

    def pin(t):
        return np.array([span + 0.4 * sway * math.sin(3.0 * t), sway * math.sin(2.0 * t), 0.0])

    sim.add_constraint(PointPath(0, links - 1, pin))
    return sim, pin


@pytest.mark.parametrize(
    ("slack", "sway", "passes"), [(0.03, 0.05, None), (0.10, 0.15, None), (0.10, 0.15, 2)]
)
def test_a_line_strung_nearly_taut_holds_its_swaying_pinned_end(backend, slack, sway, passes):
    """The strung cord (``_strung_line``: 3 % (10 %) slack) hangs under gravity for 2 s (1 s on
    the stand-in) at the default 4 substeps while its pin sways by 2 cm and 5 cm along and
    across the line (6 and 15 cm): its end stays on the pin within 1 mm (0.17 and 0.42 mm
    measured). The line's tension pulls along the nearly straight chain; each step starts from
    the pin's force of the step before (held through the free step), so its rows are
    linearised near where the step ends. Without that the free step let the end go, the
    tension flung it a few centimetres along the chain, and the correction, linearised there,
    left it 12 cm out of its pin. With two passes a step (as for trees with joint-limit rows) it
    holds as well: the pin's first step takes one, as its correction is its whole force (after
    a correction that large the Newton iteration between the passes did not converge, and the
    line fell 3.3 m)."""
    sim, pin = _strung_line(
        backend, slack, sway, constraint_settings=ConstraintSettings(passes=passes)
    )
    worst = 0.0
    for _ in range(scene_frames(backend, 48)):
        sim.advance(1 / 24, STILL)
        worst = max(worst, np.linalg.norm(sim.points()[-1] - pin(sim.time)))
    assert worst < 1e-3


def test_a_strung_line_with_tight_swing_limits_keeps_to_its_swaying_pin(backend):
    """The strung cord with 10 % slack, its pin swaying by 6 and 15 cm, and swing limits of 0.05
    rad at every joint, which the sway engages at up to nine joints a step: no step of it
    falls back, and its end keeps to the pin within 1 cm (4.2 mm measured). The limits'
    forces start each step from none, so the pin's does too on a tree with limit rows:
    holding it through the free step without the limits' reaction, the pull grew to 35 kN
    within a second and the line fell back, its end 2 m from the pin."""
    sim, pin = _strung_line(backend, 0.10, 0.15, joint_limits=JointLimits(swing=0.05))
    worst, fallen = 0.0, 0
    for _ in range(scene_frames(backend, 48)):
        fallen += len(sim.advance(1 / 24, STILL).fallbacks)
        worst = max(worst, np.linalg.norm(sim.points()[-1] - pin(sim.time)))
    assert fallen == 0
    assert worst < 1e-2


def test_a_path_constraint_switches_off_and_the_tip_falls_free(backend):
    """A tip held where it is against gravity is let go at t = 0.25 s: while held it stays on its
    target, once released it falls."""
    model = _l_shaped_strand(backend)
    target = np.array([0.1, 0.0, -0.1])
    sim = Simulation(model, SolverSettings(substeps=4))
    sim.add_constraint(PointPath(0, 3, lambda t: target, active=lambda t: t <= 0.25))
    for _ in range(6):
        sim.advance(1 / 24, STILL)
        assert np.linalg.norm(sim.points()[-1] - target) < 1e-3
    for _ in range(4):
        sim.advance(1 / 24, STILL)
    assert sim.points()[-1][2] < target[2] - 0.01
    assert sim.constraint_stats.bilateral_rows == 0


def test_a_joint_follows_an_animated_rotation(backend):
    """The root joint of a stiff 3-link strand is turned ±0.5 rad about x at 1 Hz: its rotation
    stays within 0.01 rad of the target after 0.25 s."""
    model = build_model(
        [StrandSpec(polyline(3, 0.15))],
        StrandParameters(bend_stiffness=1e-4, twist_stiffness=1e-4),
        backend=backend,
    )
    rest = model.to_strand_order(model.rest_rotation)[0]

    def turned(t):
        angle = 0.5 * math.sin(2 * math.pi * t)
        turn = np.array([math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0])
        w1, v1, w2, v2 = rest[0], rest[1:], turn[0], turn[1:]
        return np.concatenate(([w1 * w2 - v1 @ v2], w1 * v2 + w2 * v1 + np.cross(v1, v2)))

    sim = Simulation(model, SolverSettings(substeps=4))
    sim.add_constraint(JointRotation(0, 0, turned))
    worst = 0.0
    for frame in range(scene_frames(backend, 24)):
        sim.advance(1 / 24, STILL)
        q = model.to_strand_order(sim.state.q)[0]
        error = 2 * math.acos(min(1.0, abs(float(q @ turned(sim.time)))))
        if frame >= 6:
            worst = max(worst, error)
    assert worst < 0.01


def _swing_angles(model, q_level_major) -> np.ndarray:
    """Swing angle of every joint away from its rest rotation (twist ⊗ swing split), strand
    order; computed here from the quaternions with NumPy."""
    q = model.to_strand_order(q_level_major)
    rest = model.to_strand_order(model.rest_rotation)
    w0, v0 = rest[:, 0], -rest[:, 1:]
    w1, v1 = q[:, 0], q[:, 1:]
    w = w0 * w1 - np.sum(v0 * v1, axis=1)
    v = w0[:, None] * v1 + w1[:, None] * v0 + np.cross(v0, v1)
    # |swing| = sqrt(x² + z²) of the deviation, cos(swing/2) = sqrt(w² + y²).
    return 2 * np.arctan2(np.hypot(v[:, 0], v[:, 2]), np.hypot(w, v[:, 1]))


def _shaken_strand_in_cones(
    backend,
    cone: float,
    settings: SolverSettings,
    frames: int,
    *,
    links: int = 5,
    length: float = 0.25,
    stiffness: float = 2e-6,
    **constraint_settings,
) -> tuple[float, int, Simulation]:
    """A horizontal strand (soft 5-link by default; ``length`` in m, bend and twist
    ``stiffness`` in N·m²) with a swing cone of ``cone`` (rad) on every joint falls while its
    base shakes, for ``frames`` frames at 24 fps: the largest swing angle reached, the
    subdivided steps, and the simulation."""
    model = build_model(
        [StrandSpec(polyline(links, length, direction=(1.0, 0.0, 0.0)))],
        StrandParameters(bend_stiffness=stiffness, twist_stiffness=stiffness),
        backend=backend,
    )
    sim = Simulation(
        model,
        settings,
        joint_limits=JointLimits(swing=cone),
        constraint_settings=ConstraintSettings(**constraint_settings),
    )

    def shaking(t):
        zero = np.zeros((1, 3))
        position = np.array([[0.0, 0.03 * math.sin(6 * t), 0.0]])
        velocity = np.array([[0.0, 0.18 * math.cos(6 * t), 0.0]])
        acceleration = np.array([[0.0, -1.08 * math.sin(6 * t), 0.0]])
        return BaseMotion(np.eye(3)[None], position, zero, velocity, zero, acceleration)

    worst, subdivisions = 0.0, 0
    for _ in range(frames):
        subdivisions += sim.advance(1 / 24, shaking).subdivisions
        worst = max(worst, _swing_angles(model, sim.state.q).max())
    return worst, subdivisions, sim


def test_a_swing_limited_strand_never_leaves_its_cone(backend):
    """A soft horizontal strand would droop far beyond 15° per joint under gravity while its
    base shakes; with a 15° swing cone on every joint no joint exceeds it by more than 1°."""
    limit = math.radians(15.0)
    worst, _, sim = _shaken_strand_in_cones(
        backend, limit, SolverSettings(substeps=4), scene_frames(backend, 24)
    )
    assert worst > limit - math.radians(1.0)  # the limit is reached
    assert worst < limit + math.radians(1.0)
    assert sim.constraint_stats.limit_rows > 0


def test_a_tight_cone_holds_by_halving_the_steps_that_leave_it(backend):
    """With 6° cones the same strand whips: its joints slide round their cones at up to
    30 rad/s, and the limit rows, linear in the joint velocity, let them out by about
    ``(h w)² / 2θ`` per step (it diverged within half a second at 8 substeps when such steps were
    kept). The steps that take a joint more than ``limit_tolerance`` past its cone are halved,
    and no joint leaves its cone by more than 1°."""
    limit = math.radians(6.0)
    worst, subdivisions, _ = _shaken_strand_in_cones(
        backend, limit, SolverSettings(substeps=8), scene_frames(backend, 24)
    )
    assert limit - math.radians(1.0) < worst < limit + math.radians(1.0)
    assert subdivisions > 0


def test_a_whipping_strand_holds_3_degree_cones_at_16_substeps(backend):
    """With 3° cones the whipping strand's steps leave the cones even at 16 substeps and are
    halved. A joint that starts a halved step outside its cone turns back no faster than
    ``limit_recovery_speed``: unbounded, that speed doubled with each halving, and the strand
    diverged in its third frame. No joint ends a frame more than ``limit_tolerance`` (0.5°) past
    its cone: the tolerance is measured from the limit, so the excesses of successive steps do
    not add up (measured from each step's start, they reached 0.6° here)."""
    limit = math.radians(3.0)
    worst, _, _ = _shaken_strand_in_cones(
        backend, limit, SolverSettings(substeps=16), scene_frames(backend, 12)
    )
    assert limit - math.radians(1.0) < worst < limit + ConstraintSettings().limit_tolerance


def test_a_long_whipping_strand_holds_10_degree_cones_at_4_substeps(backend):
    """A 20-link, 40 cm strand of the default stiffness whipping in 10° cones: a dozen joints
    turn back to their cones at once and leave the links between them counter-rotating at tens
    of rad/s. There the articulated-body iteration, whose matrix leaves out the Coriolis
    coupling between links, converges by only 0.3-0.6 per iteration; it did not finish within
    16 iterations even with the step halved five times, and the strand stopped in its ninth
    frame. Newton's method with the exact Jacobian finishes what it leaves."""
    limit = math.radians(10.0)
    worst, _, _ = _shaken_strand_in_cones(
        backend,
        limit,
        SolverSettings(substeps=4),
        scene_frames(backend, 20),
        links=20,
        length=0.4,
        stiffness=1e-4,
    )
    assert worst < limit + ConstraintSettings().limit_tolerance


def test_a_joint_past_its_cone_returns_at_the_limit_recovery_speed(backend):
    """A free link (no gravity, springs or damping) starts 20° outside its 10° cone, at rest: the
    limit turns it back at ``limit_recovery_speed`` and no faster, so its swing falls as
    ``30° − ρ t`` (a link turning about a principal axis, no gyroscopic torque) until it is in."""
    model = build_model(
        [StrandSpec(polyline(1, 0.1, direction=(1.0, 0.0, 0.0)))],
        StrandParameters(
            bend_stiffness=0.0, twist_stiffness=0.0, bend_damping=0.0, twist_damping=0.0
        ),
        backend=backend,
    )
    speed, start = 1.0, math.radians(30.0)
    sim = Simulation(
        model,
        SolverSettings(substeps=4),
        gravity=(0.0, 0.0, 0.0),
        joint_limits=JointLimits(swing=math.radians(10.0)),
        constraint_settings=ConstraintSettings(limit_recovery_speed=speed),
    )
    turn = backend.from_host(np.array([[math.cos(start / 2)], [0.0], [0.0], [math.sin(start / 2)]]))
    sim.state.q = spatial.quat_multiply(model.xp, model.rest_rotation, turn)
    for _ in range(5):
        sim.advance(1 / 24, STILL)
        swing = _swing_angles(model, sim.state.q)[0]
        assert swing == pytest.approx(start - speed * sim.time, abs=1e-6)
        speed_now = np.linalg.norm(backend.to_host(sim.state.w))
        assert speed_now == pytest.approx(speed, rel=1e-6)


def test_a_step_that_leaves_its_cone_is_kept_at_the_deepest_halving(backend):
    """With no halving allowed, the steps that leave their cones are kept: the strand steps
    exactly as it does when they are never halved (``limit_tolerance = inf``)."""
    settings = SolverSettings(substeps=4, max_subdivision_depth=0)
    cone = math.radians(6.0)
    worst, _, kept = _shaken_strand_in_cones(backend, cone, settings, 2, limit_tolerance=1e-9)
    _, _, unchecked = _shaken_strand_in_cones(backend, cone, settings, 2, limit_tolerance=math.inf)
    assert worst > cone + 1e-9
    np.testing.assert_array_equal(backend.to_host(kept.state.q), backend.to_host(unchecked.state.q))


def test_trees_with_joint_limits_take_two_passes_and_the_others_one(backend):
    """By default the trees with joint-limit rows in a substep solve their LCP in two passes and
    the others in one: of a strand falling onto a plane and a strand falling into its swing
    cones, stepped together, each ends as it does stepped alone with ``passes=1`` and
    ``passes=2`` respectively. The other count would have given the limited strand another
    state; the strand on the plane is corrected by its contacts, which are not rows, and ends
    the same at either count. (Steps that leave a cone are not subdivided here: a subdivision
    halves the steps of every tree.)"""
    skip_where_rounding_depends_on_batch(backend)
    falling = polyline(4, 0.2, direction=(1.0, 0.0, 0.0), start=(0.0, 0.0, 0.01))
    limited = polyline(4, 0.2, direction=(1.0, 0.0, 0.0), start=(0.0, 0.5, 1.0))
    plane = build_obstacles([Plane(Material(0.0, 0.4, 0.3))], backend)
    cone = math.radians(15.0)

    def final_velocities(points, swing, passes):
        model = build_model(
            [StrandSpec(p) for p in points], StrandParameters(bend_stiffness=2e-6), backend=backend
        )
        sim = Simulation(
            model,
            SolverSettings(substeps=4),
            obstacles=plane,
            joint_limits=JointLimits(swing=swing),
            constraint_settings=ConstraintSettings(passes=passes, limit_tolerance=math.inf),
        )
        for _ in range(6):
            sim.advance(1 / 24, STILL, obstacle_motion=_placed(plane, _pose()))
        return model.to_strand_order(sim.state.w)

    together = final_velocities([falling, limited], [math.inf] * 4 + [cone] * 4, None)
    for strand, (points, swing, passes) in enumerate(((falling, math.inf, 1), (limited, cone, 2))):
        alone = final_velocities([points], swing, passes)
        links = slice(4 * strand, 4 * strand + 4)
        np.testing.assert_allclose(together[links], alone, rtol=0, atol=1e-10)
        other = final_velocities([points], swing, 3 - passes)
        if strand:
            assert np.abs(other - alone).max() > 1e-6
        else:
            np.testing.assert_allclose(other, alone, rtol=0, atol=1e-10)


def test_hair_resting_on_a_nodding_head_extrapolates_its_free_steps_into_its_first_guess(backend):
    """The velocity changes a step remembers are its free step's, which leave the contact forces
    out, so a tree lying on a head extrapolates its last two into its next first guess as a
    free tree does. On stiff hair resting on a nodding head (the collision benchmark's hair) the
    guess lands, step after step, closer to where the next free step's Newton iteration
    converges than repeating the last change would: a third as far, median over the steps."""
    rigidity = 2e-4
    model, obstacles = hair_on_head(
        backend,
        8,
        32,
        bend_stiffness=rigidity,
        twist_stiffness=rigidity,
        bend_damping=rigidity / 100,
        twist_damping=rigidity / 100,
    )
    amplitude, rate = 0.3, 2 * math.pi

    def head(t: float) -> BaseMotion:
        angle = amplitude * math.sin(rate * t)
        c, s = math.cos(angle), math.sin(angle)
        zero = np.zeros((1, 3))
        return BaseMotion(
            np.array([[[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]]),
            zero,
            np.array([[0.0, amplitude * rate * math.cos(rate * t), 0.0]]),
            zero,
            np.array([[0.0, -amplitude * rate**2 * math.sin(rate * t), 0.0]]),
            zero,
        )

    def obstacle_motion(t: float) -> ObstacleMotion:
        motion = head(t)
        pose = _pose(motion.rotation[0])
        spin = np.concatenate((motion.angular_velocity, np.zeros((1, 3))))
        return ObstacleMotion.from_host(obstacles, np.stack((pose, _pose())), spin)

    h = 1 / 96
    sim = Simulation(model, SolverSettings(substeps=1, workers=1), obstacles=obstacles)
    ratios = []
    for step in range(scene_frames(backend, 48)):
        memory, w = sim.memory, sim.state.w.copy()
        touching = backend.to_host(memory.constrained)
        extrapolated = backend.to_host(integrators.first_guess(memory, w))
        repeated = backend.to_host(w + memory.dw)
        sim.advance(h, head, obstacle_motion=obstacle_motion(step * h))
        if step < 12 or not touching.any():
            continue
        converged = backend.to_host(w + sim.memory.dw)
        links = touching[backend.to_host(model.link_tree)]
        miss = [
            np.abs(guess - converged)[:, links].max(axis=0) for guess in (extrapolated, repeated)
        ]
        ratios.append(np.median(miss[0]) / np.median(miss[1]))
    assert len(ratios) >= 6
    assert np.median(ratios) < 0.5


def test_a_trees_constraint_pass_does_not_depend_on_the_trees_coming_into_contact(backend):
    """A tree that took constraint forces reuses its free step's factorisation (without the
    velocity derivative) for the constraint pass; a tree coming into contact gets that
    factorisation at the free step's end, on a model of its own. A strand resting on a plane
    and a strand that lands beside it half-way, stepped together, each end as they do stepped
    alone; the landing strand's free steps before it lands had the velocity derivative."""
    skip_where_rounding_depends_on_batch(backend)
    resting = polyline(4, 0.2, direction=(1.0, 0.0, 0.0), start=(0.0, 0.0, 0.01))
    landing = polyline(4, 0.2, direction=(1.0, 0.0, 0.0), start=(0.0, 0.5, 0.04))
    plane = build_obstacles([Plane(Material(0.0, 0.4, 0.3))], backend)

    def run(points):
        model = build_model([StrandSpec(p) for p in points], backend=backend)
        sim = Simulation(model, SolverSettings(substeps=4, workers=1), obstacles=plane)
        contacts = []
        for _ in range(8):
            sim.advance(1 / 24, STILL, obstacle_motion=_placed(plane, _pose()))
            contacts.append(sim.constraint_stats.contacts)
        return model.to_strand_order(sim.state.w), contacts

    together, contacts = run([resting, landing])
    resting_alone, resting_contacts = run([resting])
    landing_alone, landing_contacts = run([landing])
    # The resting strand is in contact from the first frame, the other joins it later.
    assert resting_contacts[0] > 0
    assert landing_contacts[0] == 0
    assert landing_contacts[-1] > 0
    assert contacts == [a + b for a, b in zip(resting_contacts, landing_contacts, strict=True)]
    np.testing.assert_allclose(together[:4], resting_alone, rtol=0, atol=1e-10)
    np.testing.assert_allclose(together[4:], landing_alone, rtol=0, atol=1e-10)


def _twist_angles(model, q_level_major) -> np.ndarray:
    """Signed twist angle of every joint away from its rest rotation (twist ⊗ swing split),
    strand order; computed here from the quaternions with NumPy."""
    q = model.to_strand_order(q_level_major)
    rest = model.to_strand_order(model.rest_rotation)
    w0, v0 = rest[:, 0], -rest[:, 1:]
    w1, v1 = q[:, 0], q[:, 1:]
    w = w0 * w1 - np.sum(v0 * v1, axis=1)
    y = w0 * v1[:, 1] + w1 * v0[:, 1] + np.cross(v0, v1)[:, 1]
    return 2 * np.arctan2(np.where(w < 0, -y, y), np.abs(w))


def test_a_twist_limited_trunk_stays_within_its_range(backend):
    """A stiff horizontal trunk carrying a sideways branch is twisted by the branch's weight
    (up to 47° with a soft twist and no limit); with a ±10° twist range no trunk joint leaves it by
    more than 1°, and the limit is reached."""
    trunk = polyline(3, 0.15, direction=(1.0, 0.0, 0.0))
    branch = polyline(2, 0.1, direction=(0.0, 1.0, 0.0), start=trunk[3])
    model = build_model(
        [StrandSpec(trunk), StrandSpec(branch, parent=(0, 2))],
        StrandParameters(bend_stiffness=2e-3, twist_stiffness=1e-5),
        backend=backend,
    )
    limit = math.radians(10.0)
    sim = Simulation(
        model,
        SolverSettings(substeps=4),
        joint_limits=JointLimits(twist_min=-limit, twist_max=limit),
    )
    worst = 0.0
    for _ in range(scene_frames(backend, 24)):
        sim.advance(1 / 24, STILL)
        worst = max(worst, np.abs(_twist_angles(model, sim.state.q)[:3]).max())
    assert limit - math.radians(1.0) < worst < limit + math.radians(1.0)


def test_bad_constraint_input_is_refused(backend):
    model = build_model([StrandSpec(polyline(3, 0.15))], backend=backend)
    sim = Simulation(model)
    with pytest.raises(InvalidInputError, match="no link 5"):
        sim.add_constraint(PointPath(0, 5, lambda t: (0.0, 0.0, 0.0)))
    with pytest.raises(InvalidInputError, match="strand 3 does not exist"):
        sim.add_constraint(JointRotation(3, 0, lambda t: (1.0, 0.0, 0.0, 0.0)))
    with pytest.raises(InvalidInputError, match="no obstacles"):
        sim.advance(
            0.01,
            STILL,
            obstacle_motion=ObstacleMotion.from_host(
                build_obstacles([Plane()], backend), np.eye(4)[None]
            ),
        )
    with pytest.raises(InvalidInputError, match="relaxation"):
        ConstraintSettings(relaxation=2.0)
    with pytest.raises(InvalidInputError, match="passes"):
        ConstraintSettings(passes=0)
    with pytest.raises(InvalidInputError, match="limit_tolerance"):
        ConstraintSettings(limit_tolerance=0.0)
    with pytest.raises(InvalidInputError, match="fractions"):
        ConstraintSettings(fractions=(0.0,))
    with pytest.raises(InvalidInputError, match="twist_min"):
        Simulation(model, joint_limits=JointLimits(twist_min=0.2, twist_max=0.1))
    with pytest.raises(InvalidInputError, match="swing"):
        Simulation(model, joint_limits=JointLimits(swing=[0.1, 0.2]))
    sim.add_constraint(PointPath(0, 2, lambda t: (0.0, 0.0)))
    with pytest.raises(InvalidInputError, match="3 finite numbers"):
        sim.advance(0.01, STILL)
    other = get_backend("numpy", "float32")
    with pytest.raises(InvalidInputError, match="same backend"):
        Simulation(model, obstacles=build_obstacles([Plane()], other))
