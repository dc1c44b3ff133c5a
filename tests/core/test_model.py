"""Model building: validation, level-major layout, masses and inertias, rest shape."""

import numpy as np
import pytest

from oriented_strands.core import (
    InvalidInputError,
    InvalidStrandError,
    Simulation,
    StrandParameters,
    StrandSpec,
    build_model,
)
from oriented_strands.core.model import select_trees
from strands import polyline, random_tree, random_walk


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([StrandSpec([[0, 0, 0]], name="lonely")], "'lonely'.*at least 2 points"),
        (
            [StrandSpec([[0, 0, 0], [0, 0, 0], [0, 0, 1]], name="stuck")],
            "'stuck'.*segment 0.*zero length",
        ),
        ([StrandSpec([[0, 0, 0], [0, np.nan, 1]], name="bad")], "'bad'.*point 1 is not finite"),
        ([StrandSpec([[0, 0, 0], [0, 0, np.inf]])], "strand 0.*point 1 is not finite"),
        ([StrandSpec(np.zeros((3, 2)))], r"shape \(P, 3\)"),
        (
            [
                StrandSpec(polyline(3, 1.0)),
                StrandSpec([[1, 0, 0], [1, 0, 1], [1, 0, 1], [1, 0, 2]], name="third"),
                StrandSpec([[2, 0, 0], [2, 0, 1], [2, 0, 1]]),
            ],
            r"strand 1 \('third'\): segment 1 \(points 1 to 2\) has zero length",
        ),
        (
            [StrandSpec(polyline(3, 1.0)), StrandSpec(polyline(2, 1.0) + [0, np.nan, 0])],
            r"strand 1: point 0 is not finite",
        ),
        (
            [
                StrandSpec(polyline(2, 1.0)),
                StrandSpec(polyline(2, 1.0), parent=(5, 0), name="orphan"),
            ],
            "'orphan'.*parent strand 5 does not exist",
        ),
        (
            [StrandSpec(polyline(2, 1.0)), StrandSpec(polyline(2, 1.0), parent=(0, 2), name="far")],
            "'far'.*has no link 2",
        ),
        (
            [StrandSpec(polyline(2, 1.0), parent=(0, 0), name="self")],
            "'self'.*parent strand 0 does not exist",
        ),
        (
            [StrandSpec(polyline(2, 1.0), base=3, name="floating")],
            "'floating'.*base 3 does not exist",
        ),
        (
            [
                StrandSpec(polyline(2, 1.0)),
                StrandSpec(polyline(2, 1.0), parent=(2, 0), name="a"),
                StrandSpec(polyline(2, 1.0), parent=(1, 0), name="b"),
            ],
            "cycle",
        ),
    ],
)
def test_degenerate_strands_are_rejected_naming_the_strand(specs, message):
    with pytest.raises(InvalidStrandError, match=message):
        build_model(specs, base_rest_poses=np.eye(4)[None])


def test_bad_parameters_are_rejected():
    specs = [StrandSpec(polyline(3, 1.0))]
    with pytest.raises(InvalidInputError, match="'radius'.*got shape"):
        build_model(specs, StrandParameters(radius=[1.0, 2.0]))
    with pytest.raises(InvalidInputError, match="'drag' has non-finite"):
        build_model(specs, StrandParameters(drag=np.nan))
    with pytest.raises(InvalidStrandError, match="mass_per_length must be positive, link 1"):
        build_model(specs, StrandParameters(mass_per_length=[1.0, 0.0, 1.0]))
    with pytest.raises(InvalidInputError, match=r"base_rest_poses\[0\] is not a rotation"):
        build_model(specs, base_rest_poses=np.diag([2.0, 1.0, 1.0, 1.0])[None])
    with pytest.raises(InvalidInputError, match="must not be negative"):
        build_model(specs, StrandParameters(collision_weight=[1.0, -1.0, 1.0]))


def test_collision_radius_is_scaled_by_the_collision_weight(backend):
    """The strand radius by default, scaled link by link; weight 0 takes a link out."""
    specs = [StrandSpec(polyline(3, 0.3)), StrandSpec(polyline(2, 0.2, start=(0.1, 0.0, 0.0)))]
    plain = build_model(specs, StrandParameters(radius=1e-3), backend=backend)
    np.testing.assert_allclose(plain.to_strand_order(plain.collision_radius), 1e-3)
    weight = [0.0, 1.0, 0.5, 0.0, 1.0]
    model = build_model(
        specs, StrandParameters(collision_radius=4e-3, collision_weight=weight), backend=backend
    )
    np.testing.assert_allclose(
        model.to_strand_order(model.collision_radius), 4e-3 * np.array(weight)
    )
    assert list(model.collides[model.link_order]) == [False, True, True, False, True]


def test_links_are_stored_level_major_with_parents_one_level_up(backend):
    model = build_model(random_tree(np.random.default_rng(0)), backend=backend)
    assert model.level_bounds[0][0] == 0
    assert model.level_bounds[-1][1] == model.n_links
    for depth in range(1, model.n_levels):
        start, stop = model.level_bounds[depth]
        parents = backend.to_host(model.level_parent[depth])
        previous_start, previous_stop = model.level_bounds[depth - 1]
        assert np.all((previous_start <= parents) & (parents < previous_stop))
    assert sorted(model.link_order) == list(range(model.n_links))
    # The trunk has 5 links, the branch on its link 2 starts at depth 3, the twig on the branch's
    # link 1 at depth 5, the branch on the trunk's link 3 at depth 4.
    assert model.n_levels == 7
    depth_of = np.searchsorted(
        [stop for _, stop in model.level_bounds], model.link_order, side="right"
    )
    assert list(depth_of[model.link_offsets[1] : model.link_offsets[2]]) == [3, 4, 5]
    assert list(depth_of[model.link_offsets[2] : model.link_offsets[3]]) == [5, 6]


def test_the_hosts_parents_and_trees_are_the_devices_for_a_forest_and_a_part_of_it(backend):
    rng = np.random.default_rng(3)
    specs = random_tree(rng) + [
        StrandSpec(random_walk(rng, 4, np.ones(3))),
        StrandSpec(random_walk(rng, 6, 2.0 * np.ones(3))),
    ]
    model = build_model(specs, backend=backend)
    part, _ = select_trees(model, [0, 2])
    for forest in (model, part):
        assert forest.host_link_parent[: forest.n_trees].tolist() == [-1] * forest.n_trees
        for depth in range(1, forest.n_levels):
            start, stop = forest.level_bounds[depth]
            np.testing.assert_array_equal(
                forest.host_link_parent[start:stop], backend.to_host(forest.level_parent[depth])
            )
        np.testing.assert_array_equal(forest.host_link_tree, backend.to_host(forest.link_tree))
    assert part.n_trees == 2


def test_masses_and_inertias_are_those_of_thin_rods(backend):
    lengths = np.array([0.1, 0.2, 0.3])
    points = np.vstack([[0, 0, 0], np.cumsum(lengths)[:, None] * [[0.0, 0.0, -1.0]]])
    radius, mass_per_length = np.array([3e-3, 2e-3, 1e-3]), 0.5
    model = build_model(
        [StrandSpec(points)],
        StrandParameters(mass_per_length=mass_per_length, radius=radius),
        backend=backend,
    )
    mass = mass_per_length * lengths
    np.testing.assert_allclose(backend.to_host(model.mass), mass)
    expected = np.stack(
        (
            mass * (lengths**2 / 12 + radius**2 / 4),
            mass * radius**2 / 2,
            mass * (lengths**2 / 12 + radius**2 / 4),
        )
    )
    np.testing.assert_allclose(backend.to_host(model.inertia), expected)
    # Joint lengths: half a segment at the root, then the mean of neighbouring segments.
    np.testing.assert_allclose(backend.to_host(model.joint_length), [0.05, 0.15, 0.25])


def test_rest_shape_is_reproduced_for_trees_on_a_moved_base(backend):
    pose = np.eye(4)
    pose[:3, :3] = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    pose[:3, 3] = (0.3, -0.2, 1.0)
    specs = random_tree(np.random.default_rng(2))
    model = build_model(specs, base_rest_poses=pose[None], backend=backend)
    np.testing.assert_allclose(
        Simulation(model).points(), np.concatenate([s.points for s in specs]), atol=1e-12
    )
    rotations, positions = Simulation(model).link_frames()
    np.testing.assert_allclose(
        rotations @ rotations.transpose(0, 2, 1),
        np.broadcast_to(np.eye(3), rotations.shape),
        atol=1e-12,
    )
    segments = np.concatenate([np.diff(s.points, axis=0) for s in specs])
    np.testing.assert_allclose(
        rotations[:, :, 1], segments / np.linalg.norm(segments, axis=1, keepdims=True), atol=1e-12
    )
    np.testing.assert_allclose(
        positions, np.concatenate([s.points[:-1] for s in specs]), atol=1e-12
    )


def test_rest_frames_are_parallel_transported_without_twist(backend):
    """Along a planar curve, transport keeps each frame axis' component normal to the plane."""
    angles = np.linspace(0, np.pi, 9)
    arc = np.stack((np.sin(angles), np.zeros_like(angles), -np.cos(angles)), axis=1)
    rotations, _ = Simulation(build_model([StrandSpec(arc)], backend=backend)).link_frames()
    normal_components = rotations[:, 1, :]  # world y (the plane's normal) of each frame axis
    np.testing.assert_allclose(
        normal_components,
        np.broadcast_to(normal_components[0], normal_components.shape),
        atol=1e-12,
    )
    assert abs(normal_components[0, 1]) < 1e-12  # the y axis runs along the curve, in the plane


def test_strand_order_round_trip(backend):
    model = build_model(random_tree(np.random.default_rng(3)), backend=backend)
    values = np.arange(model.n_links * 2, dtype=float).reshape(-1, 2)
    np.testing.assert_array_equal(model.to_strand_order(model.from_strand_order(values)), values)
    with pytest.raises(InvalidInputError, match="per-link values"):
        model.from_strand_order(values[:-1])
