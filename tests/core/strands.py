"""Strand shapes and models, a still base and spring-less joints, shared by the engine tests."""

import numpy as np

from oriented_strands.core import BaseMotion, Model, StrandParameters, StrandSpec, build_model

# One base at the identity pose, at rest.
STILL = BaseMotion.still(np.eye(4)[None])
# Free (spring-less, undamped) spherical joints.
FREE = {"bend_stiffness": 0.0, "twist_stiffness": 0.0, "bend_damping": 0.0, "twist_damping": 0.0}


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
