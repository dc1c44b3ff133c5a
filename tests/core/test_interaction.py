"""Strand–strand interaction through a grid (core/interaction.py): conservation of the transfer,
coherence, volume, and the boundary of the API."""

import math

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    InvalidInputError,
    Material,
    Simulation,
    SolverSettings,
    Sphere,
    StrandInteraction,
    StrandParameters,
    StrandSpec,
    build_model,
    build_obstacles,
)
from oriented_strands.core.interaction import Grid, Interaction, centres


def _cloud(backend, count=400, seed=0):
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0.0, 0.1, (3, count))
    velocities = rng.normal(size=(3, count))
    mass = rng.uniform(1.0, 2.0, count)
    return (backend.from_host(a) for a in (positions, velocities, mass))


def test_the_grid_transfer_conserves_momentum_and_never_adds_kinetic_energy(backend):
    """Splat and gather with the same trilinear weights: moving every point toward the grid's
    velocity conserves the points' total momentum to rounding, and lowers their kinetic energy
    for every friction in (0, 1] (the grid velocity is a mass-weighted average)."""
    positions, velocities, mass = _cloud(backend)
    grid_velocity = Grid(backend, positions, mass, 0.02).velocity(velocities)
    xp, to_host = backend.xp, backend.to_host
    momentum = to_host(xp.sum(mass * velocities, axis=1))
    energy = float(to_host(0.5 * xp.sum(mass * xp.sum(velocities**2, axis=0))))
    for friction in (0.1, 0.5, 1.0):
        moved = velocities + friction * (grid_velocity - velocities)
        np.testing.assert_allclose(
            to_host(xp.sum(mass * moved, axis=1)), momentum, rtol=0, atol=1e-12
        )
        assert float(to_host(0.5 * xp.sum(mass * xp.sum(moved**2, axis=0)))) < energy


def test_the_grid_density_holds_the_mass_and_its_excess_points_down_the_density(backend):
    """The splatted density integrates to the total mass (the gathered density, weighted by each
    point's volume share, is not what is checked: the nodes' mass is), and the excess gradient
    of a cluster inside a sparse cloud points out of the cluster."""
    rng = np.random.default_rng(1)
    cluster = 0.05 + 0.004 * rng.normal(size=(3, 200))
    cloud = rng.uniform(0.0, 0.1, (3, 200))
    positions = backend.from_host(np.concatenate((cluster, cloud), axis=1))
    mass = backend.from_host(np.ones(400))
    target = backend.from_host(np.full(400, 400.0 / 0.1**3))
    grid = Grid(backend, positions, mass, 0.01)
    total = float(backend.to_host(backend.xp.sum(grid.node_density()))) * grid.cell**3
    assert total == pytest.approx(400.0, rel=1e-12)
    gradient = backend.to_host(grid.excess_gradient(grid.density_ratio(mass * target)))[:, :200]
    outward = backend.to_host(positions)[:, :200] - 0.05
    # Density rises toward the cluster's centre: the gradient points inward, the push outward.
    assert np.mean(np.sum(gradient * outward, axis=0) < 0.0) > 0.9


def _wisp(backend, count_side=5, links=10):
    roots = np.stack(
        np.meshgrid(np.linspace(-0.01, 0.01, count_side), np.linspace(-0.01, 0.01, count_side)),
        -1,
    ).reshape(-1, 2)
    specs = [
        StrandSpec(np.array([[x, y, -z] for z in np.linspace(0.0, 0.2, links + 1)]))
        for x, y in roots
    ]
    return build_model(
        specs, StrandParameters(bend_stiffness=1e-5, twist_stiffness=1e-5), backend=backend
    )


def _tip_spread(sim, model, strands):
    tips = sim.points().reshape(strands, -1, 3)[:, -1, :2]
    return float(np.std(tips, axis=0).mean())


@pytest.mark.parametrize("friction", [0.0, 0.5, 1.0])
def test_friction_makes_a_wisp_with_random_velocities_move_as_one(backend, friction):
    """25 hanging strands start with random joint velocities: without friction their tips fly
    apart as they would alone; with friction 0.5 the spread between neighbours falls to a
    fraction within half a second; with friction 1 the wisp keeps its rest spread (2 cm square)
    to within a few millimetres."""
    model = _wisp(backend)
    still = BaseMotion.still(model.base_rest_poses)
    rng = np.random.default_rng(2)
    spreads = {}
    for setting in (0.0, friction):
        sim = Simulation(
            model,
            SolverSettings(workers=1),
            interaction=StrandInteraction(friction=setting, volume=0.0),
        )
        sim.state.w[...] = backend.from_host(rng.normal(size=(3, model.n_links)) * 3.0)
        rng = np.random.default_rng(2)
        history = []
        for _ in range(12):
            sim.advance(1 / 24, still)
            history.append(_tip_spread(sim, model, 25))
        spreads[setting] = np.array(history)
    rest = 0.01 * math.sqrt(0.5)  # std of 5 evenly spaced values over 2 cm, per axis
    free = spreads[0.0]
    assert free.max() > 4 * rest
    if friction == 0.5:
        assert spreads[0.5][-4:].max() < 0.3 * free.max()
    if friction == 1.0:
        assert np.abs(spreads[1.0] - rest).max() < 3e-3


def test_volume_spreads_a_bundle_packed_beyond_its_target_density(backend):
    """100 strands hanging from a 2 cm patch, far denser than a target of 5 kg/m³: with volume
    the bundle spreads out (its tips' spread grows more than threefold), without it the bundle
    hangs as it is; both stay finite, and no faster than the volume's speed (kinetic energy below
    that of the whole bundle moving at it)."""
    rng = np.random.default_rng(0)
    roots = rng.uniform(-0.01, 0.01, (100, 2))
    specs = [
        StrandSpec(np.array([[x, y, -z] for z in np.linspace(0.0, 0.2, 11)])) for x, y in roots
    ]
    model = build_model(
        specs, StrandParameters(bend_stiffness=2e-5, twist_stiffness=2e-5), backend=backend
    )
    still = BaseMotion.still(model.base_rest_poses)
    frames = 24 if backend.name == "numpy" else 6
    spread = {}
    for volume in (0.0, 2.0):
        sim = Simulation(
            model,
            SolverSettings(workers=1),
            interaction=StrandInteraction(friction=0.5, volume=volume, target_density=5.0),
        )
        for _ in range(frames):
            sim.advance(1 / 24, still)
        assert np.isfinite(sim.points()).all()
        assert sim.energy()[0] <= 0.5 * (100 * 0.2 * 0.01) * max(volume, 0.1) ** 2
        spread[volume] = _tip_spread(sim, model, 100)
    assert spread[2.0] > 3 * spread[0.0]
    assert sim.interaction_stats.peak_density_ratio > 1.0


def _combed_out(backend, strands, links):
    """``strands`` strands of 20 cm combed straight out of the upper half of a 10 cm head."""
    index = np.arange(strands) + 0.5
    z = 1.0 - index / strands
    ring = np.sqrt(1.0 - z * z)
    azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
    outward = np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)
    along = np.linspace(0.0, 0.2, links + 1)
    weight = np.tile([0.0] + [1.0] * (links - 1), strands)
    model = build_model(
        [StrandSpec(0.1 * o + along[:, None] * o) for o in outward],
        StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=2e-5,
            twist_stiffness=2e-5,
            bend_damping=2e-7,
            twist_damping=2e-7,
            drag=1e-3,
            collision_radius=1e-3,
            collision_weight=weight,
        ),
        backend=backend,
    )
    head = build_obstacles([Sphere(0.1, Material(0.0, 0.4, 0.3), name="head")], backend)
    return model, head


@pytest.mark.slow
def test_hair_falling_onto_a_head_keeps_a_thicker_layer_with_volume():
    """150 strands combed out of the upper half of a head fall onto it for a second: with the
    interaction (friction 0.2, volume 0.5 m/s, rest density as target) the hair layer over the
    upper half is more than 1.6 times as thick (90th percentile of the points' height over the
    scalp: 43 mm against 24 mm; with backward Euler, which damps the fall, 69 against 26) as
    without, and its links' 95th-percentile density over their rest density is less than half
    of what it is without (5.5 against 11.4)."""
    from oriented_strands.core import get_backend

    backend = get_backend("numpy")
    model, head = _combed_out(backend, 150, 10)
    still = BaseMotion.still(model.base_rest_poses)
    result = {}
    for interaction in (None, StrandInteraction(friction=0.2, volume=0.5)):
        sim = Simulation(model, SolverSettings(workers=1), obstacles=head, interaction=interaction)
        for _ in range(24):
            sim.advance(1 / 24, still)
        points = sim.points()
        height = np.linalg.norm(points, axis=1) - 0.1
        upper = points[:, 2] > 0.0
        grid = Interaction(model, StrandInteraction())
        positions, _ = centres(model, sim.data, sim.state, None)
        density = Grid(backend, positions, model.mass, grid.cell).density()
        result[interaction is not None] = (
            np.percentile(height[upper], 90),
            np.percentile(density / grid.target, 95),
        )
    (thin, packed), (thick, spread) = result[False], result[True]
    assert thick > 1.6 * thin
    assert spread < 0.5 * packed


def test_a_simulation_with_interaction_steps_in_one_process():
    """The grid couples every tree with its neighbours at every substep: asked for two worker
    processes, a simulation with interaction steps in this one (and one set later ends its
    workers)."""
    from oriented_strands.core import get_backend

    model = _wisp(get_backend("numpy"), count_side=4)
    sim = Simulation(model, SolverSettings(workers=2), interaction=StrandInteraction())
    assert sim.processes == 1
    other = Simulation(model, SolverSettings(workers=2))
    try:
        assert other.processes == 2
        other.set_interaction(StrandInteraction(friction=0.5))
        assert other.processes == 1
        other.advance(1 / 24, BaseMotion.still(model.base_rest_poses))
        other.set_interaction(None)
        assert other.interaction_stats.cells == 0
    finally:
        other.close()


@pytest.mark.parametrize(
    "arguments",
    [
        {"friction": 1.5},
        {"friction": -0.1},
        {"friction": float("nan")},
        {"volume": -1.0},
        {"volume": "strong"},
        {"target_density": 0.0},
        {"cell_size": float("inf")},
        {"enabled": 1},
    ],
)
def test_bad_interaction_settings_are_refused_by_name(arguments):
    with pytest.raises(InvalidInputError, match="StrandInteraction"):
        StrandInteraction(**arguments)


def test_a_weight_of_the_wrong_length_is_refused(backend):
    model = _wisp(backend, count_side=2)
    with pytest.raises(InvalidInputError, match="weight"):
        Interaction(model, StrandInteraction(weight=np.ones(model.n_links + 1)))
    with pytest.raises(InvalidInputError, match="StrandInteraction"):
        Interaction(model, {"friction": 0.5})


def test_friction_and_volume_change_between_frames_on_the_same_grid():
    """Setting an interaction that differs only in friction and volume keeps the grid (and its
    rest-density targets) and takes effect from the next substep; a new weight builds a new
    grid."""
    from oriented_strands.core import get_backend

    model = _wisp(get_backend("numpy"), count_side=3)
    sim = Simulation(model, SolverSettings(workers=1), interaction=StrandInteraction(friction=0.1))
    grid = sim.interaction
    sim.set_interaction(StrandInteraction(friction=0.9, volume=1.0))
    assert sim.interaction is grid
    assert sim.interaction_settings.friction == 0.9
    sim.advance(1 / 24, BaseMotion.still(model.base_rest_poses))
    sim.set_interaction(StrandInteraction(friction=0.9, weight=0.5))
    assert sim.interaction is not grid
