"""Strand shapes shared by the engine tests."""

import numpy as np

from oriented_strands.core import StrandSpec


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
