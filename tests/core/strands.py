"""Strand shapes and models (hair on a head with its obstacles), a still base and spring-less
joints, shared by the engine tests."""

import math

import numpy as np
import pytest

from oriented_strands.core import (
    BaseMotion,
    Capsule,
    Material,
    Model,
    ObstacleMotion,
    Sphere,
    StrandParameters,
    StrandSpec,
    build_model,
    build_obstacles,
    get_backend,
)
from oriented_strands.core.dynamics import Data
from oriented_strands.core.integrators import StepStats, step_implicit
from oriented_strands.core.obstacles import Obstacles
from oriented_strands.core.state import Control, State, StepMemory

# One base at the identity pose, at rest.
STILL = BaseMotion.still(np.eye(4)[None])
# Free (spring-less, undamped) spherical joints.
FREE = {"bend_stiffness": 0.0, "twist_stiffness": 0.0, "bend_damping": 0.0, "twist_damping": 0.0}


def scene_frames(backend, frames: int) -> int:
    """The NumPy backend runs the whole scene; the slower strict stand-in (and CuPy, bound by
    kernel launches on these small scenes) half of it."""
    return frames if backend.name == "numpy" else frames // 2


def skip_where_rounding_depends_on_batch(backend) -> None:
    """Skip a test that compares strands stepped together and alone bit for bit on CuPy: its
    batched products (cuBLAS, einsum) round an item differently by the batch around it (the
    last bit of ``einsum("nij,nj->ni")`` differs between a batch of 1 and of 8, measured on an
    H200), so the strands part at rounding from the first step, and a strand landing on a plane
    with friction grows that to millimetres. Bitwise independence is proven on NumPy and the
    stand-in."""
    if backend.name == "cupy":
        pytest.skip("CuPy's batched products round by batch size")


def batch_rounding(backend) -> float:
    """How far (absolute) strands stepped together may end from the same strands stepped alone
    where the scene does not magnify rounding: nothing on NumPy and the stand-in; on CuPy, whose
    batched products round an item by the batch around it
    (:func:`skip_where_rounding_depends_on_batch`), 1e-6, which the measured differences (2e-13
    on a struck strand after two frames, below 1e-27 on a collapsing tree, on an H200) stay far
    below and a tree whose step depended on another's would not: its Newton iteration stops
    within 3e-3 rad/s, not at rounding."""
    return 1e-6 if backend.name == "cupy" else 0.0


def polyline(
    n_links: int, length: float, direction=(0.0, 0.0, -1.0), start=(0.0, 0.0, 0.0)
) -> np.ndarray:
    """A straight polyline of ``n_links`` equal segments."""
    direction = np.asarray(direction, dtype=float)
    direction = direction / np.linalg.norm(direction)
    return (
        np.asarray(start, dtype=float) + np.linspace(0.0, length, n_links + 1)[:, None] * direction
    )


def random_walk(rng: np.random.Generator, n_links: int, start) -> np.ndarray:
    """A random polyline with segments of 5 to 20 cm in random directions."""
    steps = rng.normal(size=(n_links, 3))
    steps *= rng.uniform(0.05, 0.2, (n_links, 1)) / np.linalg.norm(steps, axis=1, keepdims=True)
    return np.vstack([start, np.asarray(start) + np.cumsum(steps, axis=0)])


def random_tree(rng: np.random.Generator) -> list[StrandSpec]:
    """A main strand with two branches: one mid-link, one at a link's tip, one nested."""
    trunk = random_walk(rng, 5, np.zeros(3))
    branch = random_walk(rng, 3, trunk[2] + 0.3 * (trunk[3] - trunk[2]))
    twig = random_walk(rng, 2, branch[2])
    tip_branch = random_walk(rng, 2, trunk[4])
    return [
        StrandSpec(trunk, name="trunk"),
        StrandSpec(branch, parent=(0, 2), name="branch"),
        StrandSpec(twig, parent=(1, 1), name="twig"),
        StrandSpec(tip_branch, parent=(0, 3), name="tip branch"),
    ]


def swaying_base(t: float) -> BaseMotion:
    """A base swaying ±20° about x at 1.5 Hz, with exact velocity and acceleration."""
    rate = 2 * np.pi * 1.5
    angle, speed, accel = (
        0.35 * np.sin(rate * t),
        0.35 * rate * np.cos(rate * t),
        -0.35 * rate**2 * np.sin(rate * t),
    )
    c, s = np.cos(angle), np.sin(angle)
    rotation = np.array([[[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]])
    zero = np.zeros((1, 3))
    return BaseMotion(
        rotation, zero, np.array([[speed, 0.0, 0.0]]), zero, np.array([[accel, 0.0, 0.0]]), zero
    )


def soft_hair(backend, n_strands: int = 3) -> Model:
    """``n_strands`` hanging 20 cm hairs of 8 links, named ``hair0``, ``hair1``, ..., fanned out
    in x, with soft springs."""
    specs = [
        StrandSpec(
            polyline(8, 0.2, direction=(0.2 * k, 0.0, -1.0), start=(0.05 * k, 0.0, 0.0)),
            name=f"hair{k}",
        )
        for k in range(n_strands)
    ]
    return build_model(
        specs, StrandParameters(bend_stiffness=1e-5, twist_stiffness=1e-5), backend=backend
    )


def hair_parameters(**extra) -> StrandParameters:
    """Hair-like strands: 0.01 kg/m, radius 1 mm, bending and twisting rigidity 2·10⁻⁵ N·m² with
    a hundredth of it as damping, collision radius 2 mm; ``extra`` adds or replaces fields."""
    values = {
        "mass_per_length": 0.01,
        "radius": 1e-3,
        "bend_stiffness": 2e-5,
        "twist_stiffness": 2e-5,
        "bend_damping": 2e-7,
        "twist_damping": 2e-7,
        "collision_radius": 2e-3,
    }
    return StrandParameters(**{**values, **extra})


def hanging_curtain(backend, xs) -> Model:
    """A row of 40 cm strands of 16 links (:func:`hair_parameters`) hanging from ``(x, 0, 0)``
    for each ``x`` of ``xs``."""
    specs = [StrandSpec(polyline(16, 0.4, start=(x, 0.0, 0.0))) for x in xs]
    return build_model(specs, hair_parameters(), backend=backend)


def hair_on_head(backend, n_strands: int, n_links: int, **parameters) -> tuple[Model, Obstacles]:
    """Strands rooted around a head sphere (radius 10 cm) at 50° of elevation, pointing down its
    side, a neck capsule below; the first link of each strand is out of collisions (its root
    sits on the scalp). ``parameters`` replace :func:`hair_parameters`' own."""
    head_radius = 0.1
    strands = []
    for k in range(n_strands):
        azimuth, elevation = 2 * math.pi * k / n_strands, math.radians(50.0)
        outward = np.array(
            [
                math.cos(elevation) * math.cos(azimuth),
                math.cos(elevation) * math.sin(azimuth),
                math.sin(elevation),
            ]
        )
        down = np.array(
            [
                math.sin(elevation) * math.cos(azimuth),
                math.sin(elevation) * math.sin(azimuth),
                -math.cos(elevation),
            ]
        )
        strands.append(
            StrandSpec(
                polyline(n_links, 0.25, direction=down + 0.1 * outward, start=head_radius * outward)
            )
        )
    weight = np.tile([0.0] + [1.0] * (n_links - 1), n_strands)
    model = build_model(
        strands,
        hair_parameters(**{"drag": 1e-3, "collision_weight": weight, **parameters}),
        backend=backend,
    )
    skin = Material(0.0, 0.3, 0.2)
    obstacles = build_obstacles(
        [
            Sphere(head_radius, skin, name="head"),
            Capsule((0.0, 0.0, -0.25), (0.0, 0.0, -0.08), 0.05, skin, name="neck"),
        ],
        backend,
    )
    return model, obstacles


def hair_combed_over_scalp(
    backend, n_strands: int, n_links: int, **parameters
) -> tuple[Model, Obstacles]:
    """Soft strands (25 cm, bending and twisting rigidity 2·10⁻⁵ N·m²) rooted on a Fibonacci
    lattice over the upper half of :func:`hair_on_head`'s head, each combed down its meridian
    (tilted 0.1 rad outward) so that gravity lays it on the head: many contacts per strand.
    ``parameters`` replace :func:`hair_parameters`' own."""
    index = np.arange(n_strands) + 0.5
    z = 1.0 - index / n_strands
    ring = np.sqrt(1.0 - z * z)
    azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
    outward = np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)
    down = np.stack((z * np.cos(azimuth), z * np.sin(azimuth), -ring), axis=1)
    strands = [
        StrandSpec(polyline(n_links, 0.25, direction=d + 0.1 * o, start=0.1 * o))
        for o, d in zip(outward, down, strict=True)
    ]
    weight = np.tile([0.0] + [1.0] * (n_links - 1), n_strands)
    model = build_model(
        strands, hair_parameters(collision_weight=weight, **parameters), backend=backend
    )
    return model, hair_on_head(backend, 1, 2)[1]


# The head's turn: ±90° about z at up to 360°/s.
HEAD_TURN_PEAK = 2 * math.pi  # rad/s


def turning_head(obstacles: Obstacles) -> tuple:
    """The head of :func:`hair_on_head` turning ±90° about z at up to 360°/s, as a base motion
    ``head(t)`` and as the obstacles' motion ``obstacle_motion(t)`` (the head sphere turns with
    it, its angular velocity entering the contacts; the neck capsule stands still)."""
    peak = HEAD_TURN_PEAK

    def head(t: float) -> BaseMotion:
        angle = 0.25 * peak * math.sin(4.0 * t)
        c, s = math.cos(angle), math.sin(angle)
        rotation = np.array([[[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]])
        omega = np.array([[0.0, 0.0, peak * math.cos(4.0 * t)]])
        alpha = np.array([[0.0, 0.0, -4.0 * peak * math.sin(4.0 * t)]])
        zero = np.zeros((1, 3))
        return BaseMotion(rotation, zero, omega, zero, alpha, zero)

    def obstacle_motion(t: float) -> ObstacleMotion:
        motion = head(t)
        pose = np.eye(4)
        pose[:3, :3] = motion.rotation[0]
        spin = np.concatenate((motion.angular_velocity, np.zeros((1, 3))))
        return ObstacleMotion.from_host(obstacles, np.stack((pose, np.eye(4))), spin)

    return head, obstacle_motion


def step_afresh(
    model: Model, state: State, control: Control, h: float, settings, **options
) -> tuple[State, StepStats]:
    """One implicit step of ``h`` from ``state`` with a new workspace and no step memory (the
    way the tests against the dense reference take it): the end state and its statistics."""
    out = state.copy()
    memory = StepMemory.for_model(model)
    stats = step_implicit(
        model, Data.for_model(model), memory, state, control, h, settings, out, **options
    )
    return out, stats


def box_mesh(low, high) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (8, 3) and outward-wound triangles (12, 3) of the closed box from ``low`` to
    ``high``."""
    (x0, y0, z0), (x1, y1, z1) = low, high
    vertices = np.array(
        [
            [x0, y0, z0], [x1, y0, z0], [x1, y1, z0], [x0, y1, z0],
            [x0, y0, z1], [x1, y0, z1], [x1, y1, z1], [x0, y1, z1],
        ]
    )  # fmt: skip
    triangles = np.array(
        [
            [0, 2, 1], [0, 3, 2], [4, 5, 6], [4, 6, 7], [0, 1, 5], [0, 5, 4],
            [1, 2, 6], [1, 6, 5], [2, 3, 7], [2, 7, 6], [3, 0, 4], [3, 4, 7],
        ]
    )  # fmt: skip
    return vertices, triangles


def swung_sideways(amplitude, frequency):
    """A base moved ``amplitude`` m sideways (x) and back at ``frequency`` Hz, with exact velocity
    and acceleration."""
    rate = 2 * np.pi * frequency

    def base(t):
        zero = np.zeros((1, 3))
        return BaseMotion(
            np.eye(3)[None],
            np.array([[amplitude * np.sin(rate * t), 0.0, 0.0]]),
            zero,
            np.array([[amplitude * rate * np.cos(rate * t), 0.0, 0.0]]),
            zero,
            np.array([[-amplitude * rate**2 * np.sin(rate * t), 0.0, 0.0]]),
        )

    return base


def hanging_hair(links, length, backend=None):
    """A straight strand of the benchmark's hair (0.01 kg/m, 2·10⁻⁴ N·m², no drag) hanging
    down, on ``backend`` (NumPy by default)."""
    return build_model(
        [StrandSpec(polyline(links, length, (0.0, 0.0, -1.0)))],
        StrandParameters(
            mass_per_length=0.01,
            radius=1e-3,
            bend_stiffness=2e-4,
            twist_stiffness=2e-4,
            bend_damping=2e-6,
            twist_damping=2e-6,
            drag=0.0,
        ),
        backend=backend or get_backend("numpy"),
    )
