"""The constraint rows' operator, in dense per-tree blocks (paper §4; :mod:`.constraints` step 4).

Rows (:class:`.rows.Rows`) are laid out per tree, padded to the largest tree's count
(:class:`DenseRows`). Through an articulated-body factorisation of the step's Newton matrix, a
unit force of a row held over the step changes the joint velocities at ``t + h`` by ``h Y``,
``Y = solve(g)``, and every row's velocity by ``h`` times its acceleration in that solve: column
``c`` of every tree's operator comes from one solve (:func:`delassus_operator`). The solver
(:mod:`.constraints`) makes weak rows compliant (:func:`weak_rows`), tilts the pushes of weak
rows along a straight chain (:func:`buckling_directions`), solves the LCP per group of trees of
similar size (:func:`size_groups`) and loads the joints with the forces found
(:func:`joint_load`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dynamics
from .dynamics import Data
from .model import Model
from .rows import Rows, from_root
from .spatial import cross, dot


@dataclass(frozen=True, eq=False)
class DenseRows:
    """Rows laid out per tree: every array (..., T, m) holds tree ``t``'s rows in its first
    ``counts[t]`` columns and padding after (no load, force held at 0).

    Attributes
    ----------
    counts : (T,) int, host
        Each tree's row count.
    link, fraction, direction, joint, lower, upper, target, initial : as in :class:`.rows.Rows`
        ``link`` of a padding row is its tree's root (a link of the tree, never loaded).
    loaded : int
        The number of level-major links down to the deepest row's level: a load reaches only
        the levels above it.
    tree, rank : (R,) int
        Where each of the rows lies in the layout (tree, column), in the rows' own order.
    """

    counts: np.ndarray
    link: Any
    fraction: Any
    direction: Any
    joint: Any
    lower: Any
    upper: Any
    target: Any
    initial: Any
    loaded: int
    tree: Any
    rank: Any

    @classmethod
    def of(cls, model: Model, rows: Rows) -> DenseRows:
        """``rows`` laid out per tree (one read-back of the row counts, one of the deepest
        link)."""
        xp, to_host = model.xp, model.backend.to_host
        order = xp.argsort(rows.tree, kind="stable")
        tree = rows.tree[order]
        rank = xp.arange(tree.shape[0]) - xp.searchsorted(tree, tree, side="left")
        n_trees = model.n_trees
        # The row count of every tree, read back once (n_trees integers): the LCP groups trees
        # by it, so that each group is padded to its own size rather than the largest tree's.
        counts = to_host(xp.bincount(tree, minlength=n_trees))
        m = int(counts.max())
        dtype = model.backend.float

        def dense(values: Any, fill: Any, kind: Any = dtype) -> Any:
            target = xp.full((*values.shape[:-1], n_trees, m), fill, dtype=kind)
            target[..., tree, rank] = values[..., order]
            return target

        link = xp.broadcast_to(xp.arange(n_trees)[:, None], (n_trees, m)).copy()
        link[tree, rank] = rows.link[order]
        rank_of_row = xp.empty_like(rank)
        rank_of_row[order] = rank
        return cls(
            counts=counts,
            link=link,
            fraction=dense(rows.fraction, 0.0),
            direction=dense(rows.direction, 0.0),
            joint=dense(rows.joint, False, bool),
            lower=dense(rows.lower, 0.0),
            upper=dense(rows.upper, 0.0),
            target=dense(rows.target, 0.0),
            initial=dense(rows.initial, 0.0),
            # Every pass loads the links down to the deepest row's level (one number read back).
            loaded=model.level_bounds[model.depth_of(to_host(xp.max(link)))][1],
            tree=rows.tree,
            rank=rank_of_row,
        )

    def per_row(self, values: Any) -> Any:
        """Laid-out values (T, m) back in the rows' own order (R,)."""
        return values[self.tree, self.rank]

    @property
    def size(self) -> int:
        """The largest tree's row count, ``m``."""
        return self.link.shape[1]


def delassus_operator(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    joint: Any,
    h: float,
    counts: np.ndarray | None = None,
) -> Any:
    """The constraint operator ``A = h G N⁻¹ Gᵀ`` (T, m, m) of every tree's rows, by test solves
    through the last :func:`.dynamics.factorize` (of ``N``).

    Row ``i`` of tree ``t`` acts on level-major link ``link[t, i]``: a force along the world
    ``direction[:, t, i]`` at the point ``arm[:, t, i]`` (relative to the tree's reference point),
    or, where ``joint[t, i]``, a torque about the link-frame axis ``direction[:, t, i]`` on the
    link's joint. ``A[t, i, j]`` is the change of row ``i``'s velocity (m/s or rad/s) at the end
    of a step of ``h`` by a unit force (N or N·m) of row ``j`` held over it. Padding rows have a
    zero direction. Column ``c`` of every tree comes from one solve, every tree loading its own
    ``c``-th row (trees are independent; a tree's rows of one column are on one link, so no link
    is loaded twice). Uses the link frames of the last kinematics in ``data``.

    ``counts`` (host ints, (T,)) is every tree's row count (its rows from ``counts[t]`` on are
    padding), read from ``direction`` with one transfer if not given. Only trees with more than
    ``c`` rows need column ``c``: columns ``[2, 4)``, ``[4, 8)``, … are solved on a model of just
    those trees (:func:`.model.select_trees`, with the factorisation gathered from ``data`` once
    per range) when they are fewer than half the forest, so that the many columns of the few
    trees with many rows cost those trees' links only.
    """
    xp = model.xp
    n_trees, m = link.shape
    operator = xp.zeros((n_trees, m, m), dtype=model.backend.float)
    if counts is None:
        loaded = xp.any(direction != 0.0, axis=0)
        counts = model.backend.to_host(xp.max(xp.where(loaded, xp.arange(1, m + 1), 0), axis=1))
    start, stop = 0, min(2, m)
    while start < m:
        trees = np.nonzero(counts > start)[0]
        if not len(trees):
            break
        columns = range(start, stop)
        if 2 * len(trees) >= n_trees:
            operator_columns(model, data, link, arm, direction, joint, h, columns, operator)
        else:
            sub = dynamics.tree_part(model, data, trees, (*dynamics.FACTORS, "oR", "r"))
            device = model.backend.from_host
            renumber = np.full(model.n_links, -1, dtype=np.int64)
            renumber[sub.links] = np.arange(len(sub.links))
            picked = device(trees)
            part = xp.zeros((len(trees), m, m), dtype=model.backend.float)
            operator_columns(
                sub.model,
                sub.data,
                device(renumber)[link[picked]],
                arm[:, picked],
                direction[:, picked],
                joint[picked],
                h,
                columns,
                part,
            )
            operator[picked, :, start:stop] = part[:, :, start:stop]
        start, stop = stop, min(2 * stop, m)
    return operator


def operator_columns(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    joint: Any,
    h: float,
    columns: range,
    operator: Any,
) -> None:
    """Columns ``columns`` of :func:`delassus_operator` into ``operator`` (T, m, m), one solve
    each over the whole of ``model`` (down to the deepest row's level)."""
    xp, to_host = model.xp, model.backend.to_host
    # Level-major links are ordered by depth: each column's deepest link bounds the levels its
    # load reaches, the deepest of all the levels whose answers are read.
    loaded_depth = model.depth_of(to_host(xp.max(link, axis=0)))
    answered_depth = int(loaded_depth.max())
    for c in columns:
        loaded = model.level_bounds[loaded_depth[c]][1]
        point = direction[:, :, c] * ~joint[:, c]
        link_force = xp.zeros((6, loaded), dtype=model.backend.float)
        link_force[:3, link[:, c]] = cross(xp, arm[:, :, c], point)
        link_force[3:, link[:, c]] = point
        torque = dynamics.joint_load(model, data, link_force)
        torque[:, link[:, c]] += direction[:, :, c] * joint[:, c]
        dynamics.solve(model, data, torque, answered_depth)
        operator[:, :, c] = h * row_values(
            xp, data.solve_a[:, link], data.x[:, link], arm, direction, joint
        )


def row_values(
    xp: Any, spatial_motion: Any, joint_motion: Any, arm: Any, direction: Any, joint: Any
) -> Any:
    """Rows' velocities (or accelerations), (T, m): of their points along their direction from
    the spatial motion (6, T, m) of their links, or of their joints about their axis from joint
    motion (3, T, m)."""
    point = spatial_motion[3:] + cross(xp, spatial_motion[:3], arm)
    return xp.where(joint, dot(direction, joint_motion), dot(direction, point))


def weak_rows(
    xp: Any, link: Any, fraction: Any, joint: Any, diagonal: Any, ratio: float
) -> tuple[Any, Any]:
    """The diagonal level below which a row is weak, and how weak each row is (T, m).

    A point row is compared with the most mobile row at the same point (same link and fraction:
    a path's three rows): ``level = ratio × best``, and
    ``weakness = 1 − diagonal / level`` where the diagonal is below it (0 elsewhere, and for
    joint rows, whose torque always turns their own joint).
    """
    point = ~joint
    same = (link[:, :, None] == link[:, None, :]) & (fraction[:, :, None] == fraction[:, None, :])
    same &= point[:, :, None] & point[:, None, :]
    level = ratio * xp.max(xp.where(same, diagonal[:, None, :], 0.0), axis=2)
    weak = point & (diagonal < level)
    return level, xp.where(weak, 1.0 - diagonal / xp.where(weak, level, 1.0), 0.0)


def buckling_directions(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    pushing: Any,
    weakness: Any,
    tilt: float,
) -> Any:
    """Directions (3, T, m) the rows' forces are applied along: their own, except for weak rows
    that only push (``pushing``: lower bound 0) toward their tree's root, tilted by up to
    ``tilt × weakness`` sideways from their link.

    Such a row pushes a (nearly) straight chain along itself: the chain can only give way by
    buckling, and a perfectly straight one has no side to buckle to (the force has no lever on
    any joint, so the buckle would grow from rounding errors, frames later). The tilt is the
    imperfection that picks the side: the side the row already leans to across the link, or
    the link's own x axis when it leans to none.
    """
    xp = model.xp
    axis = data.oR[:, 1, link]
    lateral = direction - dot(direction, axis) * axis
    size = xp.sqrt(dot(lateral, lateral))
    lateral = xp.where(size > 1e-9, lateral / xp.where(size > 1e-9, size, 1.0), data.oR[:, 0, link])
    compressing = pushing & (dot(direction, from_root(model, data, link, arm)) < 0.0)
    return direction + (tilt * weakness * compressing) * lateral


def size_groups(backend: Any, counts: np.ndarray) -> list[tuple[Any, int]]:
    """Trees with rows grouped by row count: ``(device tree indices, padded size)`` for counts in
    ``(s/2, s]``, ``s`` = 2, 4, 8, … (capped at the largest count; counts are even)."""
    largest = int(counts.max())
    groups, size = [], 2
    while size // 2 < largest:
        members = np.nonzero((counts > size // 2) & (counts <= size))[0]
        if len(members):
            groups.append((backend.from_host(members), min(size, largest)))
        size *= 2
    return groups


def joint_load(
    model: Model,
    data: Data,
    link: Any,
    arm: Any,
    direction: Any,
    joint: Any,
    force: Any,
    loaded: int,
) -> Any:
    """Joint torques (3, loaded) of row forces (T, m) on the dense rows (at the free step's
    end), on the first ``loaded`` links: the levels down to the deepest row's (see
    :func:`.dynamics.joint_load`)."""
    xp = model.xp
    dtype = model.backend.float
    torque = xp.zeros((3, loaded), dtype=dtype)
    link_force = xp.zeros((6, loaded), dtype=dtype)
    # A column holds at most one row per tree, so its links never repeat.
    for c in range(link.shape[1]):
        point_force = direction[:, :, c] * (force[:, c] * ~joint[:, c])
        link_force[:3, link[:, c]] += cross(xp, arm[:, :, c], point_force)
        link_force[3:, link[:, c]] += point_force
        torque[:, link[:, c]] += direction[:, :, c] * (force[:, c] * joint[:, c])
    return torque + dynamics.joint_load(model, data, link_force)
