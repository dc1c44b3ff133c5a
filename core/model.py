"""Strand models: topology, rest shape and per-link physical parameters, laid out for batching.

A *model* is built once per bake by :func:`build_model`, which validates the strands and then
freezes the result. All strands of a bake form one forest of links joined by spherical joints.

Link layout (level-major)
-------------------------
Every per-link array of the model, its data workspace, the state and the control is
component-major (components first, links last; see :mod:`.spatial`) and indexed by *level-major*
link index: all links at depth 0 (those attached to a base) come first, then all
links at depth 1, and so on, so that ``level_bounds[d]`` is a contiguous slice and every parent of a
link at depth ``d`` lies in depth ``d - 1``. A branch strand's first link sits one level below the
link it is attached to. Recursions therefore run one vectorised operation per depth level over all
strands at once. ``link_order`` maps *strand order* (the user's order: strand 0 root to tip, then
strand 1, ...) to level-major indices.

Within a level, links are ordered by the position of their parent in the level above, then by the
height of the subtree they carry (tallest first), then by strand order. For unbranched strands this
makes the parents of every level the *first* links of the level above, in the same order, so each
recursion step reads and writes its parents through a plain slice rather than a gather or a
scatter (``level_parent_slice``); when every level but the last is equally full (strands of one
length), a link's parent is simply ``parent_shift`` places before it, so whole-forest parent
look-ups are views as well. Branched trees fall back to index arrays (``level_parent``,
``child_rounds``). The order is deterministic, and only arithmetic within a level depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import spatial
from .backend import Backend, get_backend
from .base_motion import rigid_parts
from .errors import InvalidInputError, InvalidStrandError
from .validation import finite_array, is_whole

# Segments shorter than this (metres) are degenerate: their direction is numerically meaningless.
MIN_SEGMENT_LENGTH = 1e-8
# A branch's root must lie within this many lengths of the link it grows from of that link's
# segment: a rigid offset of a link or so is how drawn branches start (a curve's root near, not
# on, its parent's resampled polyline), anything further is a wrong parent or link index.
BRANCH_ROOT_TOLERANCE = 1.0
# Rotation matrices converted to quaternions at a time (_quaternions).
QUATERNION_CHUNK = 1 << 15


@dataclass(frozen=True)
class StrandSpec:
    """One strand as drawn by the artist.

    Attributes
    ----------
    points : array_like, shape (P, 3)
        Rest points in world coordinates (m), ``P >= 2``; ``points[0]`` is the root.
    base : int
        Index of the rigid base that drives the strand's root (root strands only).
    parent : (int, int) or None
        ``(strand_index, link_index)``: the strand is a branch attached to that link of another
        strand, at the place where its root point lies in the rest pose: on the link's
        segment, within :data:`BRANCH_ROOT_TOLERANCE` times the link's length of it.
    name : str
        Shown in error messages.
    """

    points: Any
    base: int = 0
    parent: tuple[int, int] | None = None
    name: str = ""


@dataclass(frozen=True)
class StrandParameters:
    """Physical parameters; each is a scalar or a per-link array in strand order.

    Bend and twist are given per unit length (rigidity), so a strand resampled into more
    segments keeps its behaviour; each joint gets ``rigidity / joint_length`` where the joint
    length is the length of rod the joint stands for (see ``docs/physics.md``).

    Attributes
    ----------
    mass_per_length : kg/m
    radius : m, of the (round) cross-section; sets the axial and bending inertia.
    bend_stiffness : N·m², bending rigidity EI; scalar, (n_links,) or (n_links, 2) for the
        cross-section's local x and z axes (elliptic fibres, flat leaves).
    twist_stiffness : N·m², torsional rigidity GJ.
    bend_damping, twist_damping : N·m²·s, internal damping per unit length.
    drag : N·s/m², air drag force per unit length per unit speed relative to the air.
    pose_strength : N·m², rigidity of the pull towards the target pose (posable dynamics, see
        ``docs/art-direction.md``); acts only once a pose is given.
    pose_damping : N·m²·s, damping of the joints' motion relative to the target pose's.
    collision_radius : m, radius of the strand's collision spheres; None: ``radius``.
    collision_weight : >= 0, scales the collision radius along the strand (e.g. smaller toward
        the tip); 0 takes a link out of collisions (roots buried in a scalp).
    """

    mass_per_length: Any = 0.01
    radius: Any = 0.001
    bend_stiffness: Any = 1e-4
    twist_stiffness: Any = 1e-4
    bend_damping: Any = 1e-6
    twist_damping: Any = 1e-6
    drag: Any = 0.0
    pose_strength: Any = 0.0
    pose_damping: Any = 0.0
    collision_radius: Any = None
    collision_weight: Any = 1.0


@dataclass(frozen=True, eq=False)
class Model:
    """A frozen strand forest on one backend. Build with :func:`build_model`.

    Per-link device arrays are level-major (see module docstring); ``N = n_links``,
    ``T = n_bases``.

    Attributes
    ----------
    backend : Backend
    n_strands, n_links, n_points, n_bases, n_levels : int
    level_bounds : list of (int, int)
        Host ``(start, stop)`` of each depth level.
    level_parent : list of device int arrays
        Per level, the level-major index of each link's parent link (level 0: unused, empty).
    level_base : device int array (n_level0,)
        Base index of each depth-0 link.
    child_rounds : list of list of (device int array, device int array)
        Per level ``d >= 1``, ``(children, parents)`` groups in which no parent repeats, for
        accumulating children into parents with plain fancy indexing; ``children`` are indices
        within the level's slice, ``parents`` level-major indices.
    level_slices : list of slice
        ``slice(start, stop)`` of each depth level.
    level_parent_slice : list of (slice or None)
        Per level ``d >= 1``, the parents of the level's links as a slice of level ``d - 1`` when
        they are contiguous and in the same order (each parent then has exactly one child in the
        level); None for level 0 and where a gather is needed.
    parent_shift : int
        ``s > 0`` when every link ``i >= s`` has the parent ``i - s`` (equally long unbranched
        strands), else 0.
    link_parent_tail : device int (N - n_trees,)
        Level-major parent of each link below depth 0, for whole-forest gathers.
    n_trees : int
        Number of trees: root strands with their branches; tree ``t`` is depth-0 link ``t``.
    link_tree : device int (N,)
        The tree of each link.
    host_link_parent, host_link_tree : host int (N,)
        Each link's level-major parent (-1 at depth 0) and its tree, kept on the host for the
        layouts built from them (:func:`select_trees`, :class:`.dynamics.DenseLayout`).
    link_base : device int (N,)
        The base (tree) each link belongs to; its spatial quantities refer to that base's origin.
    link_parent_frame : device int (N,)
        The frame a link's joint offset is expressed in: its parent link's level-major index, or
        ``N + base`` for depth-0 links (bases are appended after the links).
    joint_offset : device float (3, N), m
        Position of the link's joint in its parent's link frame (the base frame for depth 0).
    rest_rotation : device float (4, N)
        Joint rotation (child frame relative to parent frame) in the rest shape, ``(w, x, y, z)``.
    length : device float (N,), m
    mass : device float (N,), kg
    inertia : device float (3, N), kg·m²
        Principal inertia about the centre of mass in the link frame: ``(I_xx, I_yy, I_zz)``,
        ``y`` being the (small) axial one; ``I_xx = I_zz`` (the cross-section is round).
    joint_length : device float (N,), m
        Length of rod each joint stands for (Voronoi length; half a segment at a root).
    collision_radius : device float (N,), m
        Radius of each link's collision spheres (collision radius times collision weight).
    collides : host bool (N,), level-major
        Whether a link takes part in collisions (collision weight > 0).
    parameters : dict of device arrays
        Defaults of the animatable parameters, level-major: ``bend_stiffness`` (2, N),
        ``twist_stiffness``, ``bend_damping``, ``twist_damping``, ``drag``, ``pose_strength``,
        ``pose_damping`` (N,).
    link_order : host int (N,)
        Level-major index of each link in strand order.
    link_offsets, point_offsets : host int (n_strands + 1,)
        Strand ``s`` owns strand-order links ``link_offsets[s]:link_offsets[s+1]`` and points
        ``point_offsets[s]:point_offsets[s+1]`` (its root, then the tip of each link).
    point_link : host int (n_points,)
        Level-major link whose frame carries each point; ``point_is_tip`` says if the point is
        that link's tip (else its joint).
    strand_parent, strand_parent_link, strand_base : host int (n_strands,)
        -1 where not applicable.
    strand_names : tuple of str
    strand_index : host int (n_strands,)
        Each strand's index among the strands given to :func:`build_model`; a model of some of
        those trees (:func:`select_trees`) keeps them, so messages name strands as the user
        numbered them.
    base_rest_poses : host float64 (T, 4, 4)
    rest_points : host float64 (n_points, 3), m, world
    """

    backend: Backend
    n_strands: int
    n_links: int
    n_points: int
    n_bases: int
    n_levels: int
    level_bounds: list
    level_parent: list
    level_base: Any
    child_rounds: list
    level_slices: list
    level_parent_slice: list
    parent_shift: int
    link_parent_tail: Any
    n_trees: int
    link_tree: Any
    host_link_parent: np.ndarray = field(repr=False)
    host_link_tree: np.ndarray = field(repr=False)
    link_base: Any
    link_parent_frame: Any
    joint_offset: Any
    rest_rotation: Any
    length: Any
    mass: Any
    inertia: Any
    radius: Any
    joint_length: Any
    collision_radius: Any
    collides: np.ndarray = field(repr=False)
    parameters: dict = field(repr=False)
    link_order: np.ndarray = field(repr=False)
    link_offsets: np.ndarray = field(repr=False)
    point_offsets: np.ndarray = field(repr=False)
    point_link: np.ndarray = field(repr=False)
    point_is_tip: np.ndarray = field(repr=False)
    strand_parent: np.ndarray = field(repr=False)
    strand_parent_link: np.ndarray = field(repr=False)
    strand_base: np.ndarray = field(repr=False)
    strand_names: tuple = field(repr=False)
    strand_index: np.ndarray = field(repr=False)
    base_rest_poses: np.ndarray = field(repr=False)
    rest_points: np.ndarray = field(repr=False)

    @property
    def xp(self) -> Any:
        """The array namespace of this model's backend."""
        return self.backend.xp

    def from_strand_order(self, values: Any, name: str = "values") -> Any:
        """Host per-link values ``(n_links, ...)`` in strand order -> component-major device array
        ``(..., n_links)`` in level-major order."""
        host = np.asarray(values, dtype=np.float64)
        if host.shape[:1] != (self.n_links,):
            raise InvalidInputError(
                f"{name}: expected {self.n_links} per-link values in strand order, got shape "
                f"{host.shape}"
            )
        level_major = np.empty_like(host)
        level_major[self.link_order] = host
        return self.backend.from_host(np.moveaxis(level_major, 0, -1))

    def to_strand_order(self, values: Any) -> np.ndarray:
        """Component-major level-major device array -> host ``(n_links, ...)`` in strand order."""
        return np.moveaxis(self.backend.to_host(values), -1, 0)[self.link_order]

    def depth_of(self, level_major_index: Any) -> Any:
        """Depth level of level-major link indices (host ints)."""
        starts = [start for start, _ in self.level_bounds]
        return np.searchsorted(starts, level_major_index, side="right") - 1

    def link_strand_and_index(self, level_major_index: int) -> tuple[int, int]:
        """``(strand, link within strand)`` of a level-major link index, for messages."""
        strand_order = int(np.nonzero(self.link_order == level_major_index)[0][0])
        strand = int(np.searchsorted(self.link_offsets, strand_order, side="right") - 1)
        return strand, strand_order - int(self.link_offsets[strand])

    def describe_strand(self, strand: int) -> str:
        """A strand's index and name, for messages."""
        name = self.strand_names[strand]
        return f"strand {int(self.strand_index[strand])}" + (f" ({name!r})" if name else "")


def _validated_specs(strands: Any) -> list[StrandSpec]:
    """``strands`` as a list of :class:`StrandSpec` whose base, parent and name are of the
    right kinds (whole numbers are not rounded: a base of 0.5 is refused, not taken as 0)."""
    if isinstance(strands, StrandSpec | str | bytes) or not hasattr(strands, "__iter__"):
        raise InvalidInputError(
            f"strands must be a sequence of StrandSpec, got {type(strands).__name__}"
        )
    specs = list(strands)
    if not specs:
        raise InvalidInputError("build_model needs at least one strand")
    for index, spec in enumerate(specs):
        if not isinstance(spec, StrandSpec):
            raise InvalidInputError(
                f"strands[{index}] must be a StrandSpec, got {type(spec).__name__}"
            )
        if not isinstance(spec.name, str):
            raise InvalidStrandError(f"strand {index}: name must be a str, got {spec.name!r}")
        if spec.parent is None:
            if not is_whole(spec.base) or spec.base < 0:
                raise InvalidStrandError(
                    f"{_describe(index, spec)}: base must be a whole number >= 0, got {spec.base!r}"
                )
        elif (
            isinstance(spec.parent, str | bytes)
            or not hasattr(spec.parent, "__len__")
            or len(spec.parent) != 2
            or not all(is_whole(value) for value in spec.parent)
        ):
            raise InvalidStrandError(
                f"{_describe(index, spec)}: parent must be (strand_index, link_index), two "
                f"whole numbers, got {spec.parent!r}"
            )
    return specs


def _describe(index: int, spec: StrandSpec) -> str:
    return f"strand {index}" + (f" ({spec.name!r})" if spec.name else "")


def _validated_points(specs: Sequence[StrandSpec]) -> tuple[np.ndarray, np.ndarray]:
    """Every strand's points, concatenated in strand order (n_points, 3), and the strand offsets
    into them (n_strands + 1,); rejects a strand whose points are malformed.

    The shape of each strand is checked on its own; finiteness and segment lengths are checked
    on all points at once, and the first offending strand is named.
    """
    arrays = []
    for index, spec in enumerate(specs):
        try:
            points = np.asarray(spec.points, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise InvalidStrandError(
                f"{_describe(index, spec)}: points are not numbers ({error})"
            ) from error
        if points.ndim != 2 or points.shape[1] != 3:
            raise InvalidStrandError(
                f"{_describe(index, spec)}: points must have shape (P, 3), got {points.shape}"
            )
        if points.shape[0] < 2:
            raise InvalidStrandError(
                f"{_describe(index, spec)}: needs at least 2 points, got {points.shape[0]}"
            )
        arrays.append(points)
    offsets = np.concatenate(([0], np.cumsum([len(points) for points in arrays]))).astype(np.int64)
    points = np.concatenate(arrays)

    def locate(point: int) -> tuple[int, int]:
        strand = int(np.searchsorted(offsets, point, side="right") - 1)
        return strand, point - int(offsets[strand])

    finite = np.isfinite(points).all(axis=1)
    if not finite.all():
        strand, point = locate(int(np.argmin(finite)))
        raise InvalidStrandError(
            f"{_describe(strand, specs[strand])}: point {point} is not finite "
            f"({arrays[strand][point].tolist()})"
        )
    # Segment k of the concatenation joins points k and k + 1; those across two strands are not
    # segments.
    segments = np.diff(points, axis=0)
    short = np.sqrt(np.einsum("ij,ij->i", segments, segments)) < MIN_SEGMENT_LENGTH
    short[offsets[1:-1] - 1] = False
    if short.any():
        strand, segment = locate(int(np.argmax(short)))
        length = float(np.linalg.norm(segments[int(np.argmax(short))]))
        raise InvalidStrandError(
            f"{_describe(strand, specs[strand])}: segment {segment} (points {segment} to "
            f"{segment + 1}) has zero length ({length:.3g} m)"
        )
    return points, offsets


def _strand_depths(specs: Sequence[StrandSpec], link_counts: list[int], n_bases: int) -> list[int]:
    """Depth of each strand's first link; rejects bad parents and cycles."""
    n = len(specs)
    for index, spec in enumerate(specs):
        if spec.parent is None:
            if not 0 <= int(spec.base) < n_bases:
                raise InvalidStrandError(
                    f"{_describe(index, spec)}: base {spec.base} does not exist "
                    f"({n_bases} base(s) given)"
                )
            continue
        parent, link = (int(value) for value in spec.parent)
        if not 0 <= parent < n or parent == index:
            raise InvalidStrandError(
                f"{_describe(index, spec)}: parent strand {parent} does not exist "
                f"(valid: 0..{n - 1}, not itself)"
            )
        if not 0 <= link < link_counts[parent]:
            raise InvalidStrandError(
                f"{_describe(index, spec)}: parent {_describe(parent, specs[parent])} has no "
                f"link {link} (it has {link_counts[parent]})"
            )
    depths: list[int | None] = [None] * n
    for start in range(n):
        path: list[int] = []
        index = start
        while depths[index] is None and specs[index].parent is not None:
            if index in path:
                cycle = " -> ".join(_describe(i, specs[i]) for i in path[path.index(index) :])
                raise InvalidStrandError(f"branches form a cycle: {cycle} -> back")
            path.append(index)
            index = int(specs[index].parent[0])
        if depths[index] is None:
            depths[index] = 0
        for child in reversed(path):
            parent, link = (int(value) for value in specs[child].parent)
            depths[child] = depths[parent] + link + 1
    return [int(depth) for depth in depths]


def _check_branch_roots(
    specs: Sequence[StrandSpec],
    roots: np.ndarray,
    joints: np.ndarray,
    segments: np.ndarray,
    attachment: np.ndarray,
) -> None:
    """Refuse a branch whose root (``roots``, per strand) lies further from the segment of the
    link it grows from (``attachment``, strand order, -1 for root strands; links from their
    ``joints`` along their ``segments``) than :data:`BRANCH_ROOT_TOLERANCE` times that link's
    length."""
    branches = np.nonzero(attachment >= 0)[0]
    link = attachment[branches]
    offset, segment = roots[branches] - joints[link], segments[link]
    length2 = np.einsum("ij,ij->i", segment, segment)
    along = np.clip(np.einsum("ij,ij->i", offset, segment) / length2, 0.0, 1.0)
    distance = np.linalg.norm(offset - along[:, None] * segment, axis=1)
    off = distance > BRANCH_ROOT_TOLERANCE * np.sqrt(length2)
    if off.any():
        i = int(np.argmax(off))
        strand = int(branches[i])
        parent, parent_link = (int(value) for value in specs[strand].parent)
        raise InvalidStrandError(
            f"{_describe(strand, specs[strand])}: its root lies {distance[i]:.3g} m from link "
            f"{parent_link} of its parent {_describe(parent, specs[parent])}, more than the "
            f"link's length ({np.sqrt(length2[i]):.3g} m): a branch starts on the link it grows "
            "from"
        )


def _per_link(name: str, value: Any, n_links: int, columns: int | None = None) -> np.ndarray:
    """Broadcast a parameter to strand-order per-link values, checking it is finite."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"parameter {name!r} must be a number or an array of numbers, got {value!r}"
        ) from None
    shape = (n_links,) if columns is None else (n_links, columns)
    if columns is not None and array.ndim == 1 and array.shape[0] == n_links:
        array = array[:, None]
    try:
        array = np.broadcast_to(array, shape).copy()
    except ValueError as error:
        raise InvalidInputError(
            f"parameter {name!r}: expected a scalar or {shape} per-link values in strand order, "
            f"got shape {np.shape(value)}"
        ) from error
    if not np.isfinite(array).all():
        raise InvalidInputError(f"parameter {name!r} has non-finite values")
    return array


def _rest_frames(
    directions: np.ndarray,
    link_offsets: np.ndarray,
    generation: np.ndarray,
    attachment: np.ndarray,
    root_frames: np.ndarray,
) -> np.ndarray:
    """World rest rotation (n_links, 3, 3) of every link, strand order.

    Each link's frame is its predecessor's (the base frame, or the parent link's for a branch)
    parallel-transported onto the link's segment, so twist-free rest frames follow the curve.
    ``directions`` (n_links, 3) are the unit segment directions; strands are handled by
    ``generation`` (root strands, then branches on them, ...), each generation vectorised over
    its strands and looping over link positions; ``attachment`` is the strand-order link each
    branch grows from, and ``root_frames`` (n_strands, 3, 3) the base frame of each root strand.
    """
    frames = np.empty((len(directions), 3, 3))
    counts = np.diff(link_offsets)
    for wave_generation in range(int(generation.max()) + 1):
        # Longest strands first, so the strands still going at link position k are a prefix.
        wave = np.nonzero(generation == wave_generation)[0]
        wave = wave[np.argsort(-counts[wave], kind="stable")]
        if wave_generation:
            current = frames[attachment[wave]]
        else:
            current = root_frames[wave].copy()
        first, wave_counts = link_offsets[wave], counts[wave]
        going = np.searchsorted(-wave_counts, -np.arange(int(wave_counts[0])), side="left")
        for k, rows in enumerate(going):
            links = first[:rows] + k
            previous = current[:rows]
            transport = spatial.minimal_rotation(np, previous[:, :, 1].T, directions[links].T)
            current[:rows] = transport.transpose(2, 0, 1) @ previous
            frames[links] = current[:rows]
    return frames


def _quaternions(rotations: np.ndarray) -> np.ndarray:
    """Unit quaternions (4, n) of rotation matrices (n, 3, 3), converted
    :data:`QUATERNION_CHUNK` at a time: the conversion makes about forty floats of temporaries
    per matrix, which at once would set the peak memory of building a large model."""
    quaternions = np.empty((4, len(rotations)))
    for start in range(0, len(rotations), QUATERNION_CHUNK):
        chunk = slice(start, start + QUATERNION_CHUNK)
        quaternions[:, chunk] = spatial.matrix_to_quat(np, rotations[chunk].transpose(1, 2, 0))
    return quaternions


def _level_major_order(depth: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Strand-order link indices in level-major order (see the module docstring).

    ``depth`` and ``parent`` are per link in strand order (``parent`` -1 at a base). Within a level,
    links sort by their parent's position in the level above, then tallest subtree first, then
    strand order; for unbranched strands the parents of a level are then the leading links of the
    level above, in order.
    """
    n_levels = int(depth.max()) + 1
    height = np.zeros(len(depth), dtype=np.int64)
    for d in range(n_levels - 1, 0, -1):
        links = np.nonzero(depth == d)[0]
        np.maximum.at(height, parent[links], height[links] + 1)
    position = np.empty(len(depth), dtype=np.int64)
    order = []
    placed = 0
    for d in range(n_levels):
        links = np.nonzero(depth == d)[0]
        parent_position = position[parent[links]] if d else np.zeros(len(links), np.int64)
        links = links[np.lexsort((links, -height[links], parent_position))]
        position[links] = placed + np.arange(len(links))
        placed += len(links)
        order.append(links)
    return np.concatenate(order)


def _forest_layout(backend: Backend, depth: np.ndarray, parent: np.ndarray) -> dict:
    """The level structure of a forest from level-major ``depth`` and ``parent`` (-1 at a base).

    Returns the :class:`Model` fields that describe the levels: bounds and slices, parents as
    slices where contiguous and as index arrays, child rounds for scatter-adds, the whole-forest
    parent shift, and the tree of every link (on the device and, with the parents, on the host).
    """
    n_links = len(depth)
    n_levels = int(depth.max()) + 1
    bounds = np.searchsorted(depth, np.arange(n_levels + 1))
    level_bounds = [(int(bounds[d]), int(bounds[d + 1])) for d in range(n_levels)]
    n_trees = level_bounds[0][1]
    level_parent, level_parent_slice, child_rounds = [], [], []
    for d, (start, stop) in enumerate(level_bounds):
        parents = parent[start:stop]
        level_parent.append(backend.from_host(parents if d else np.zeros(0, np.int64)))
        rounds = []
        contiguous = None
        if d:
            if np.array_equal(parents, parents[0] + np.arange(len(parents))):
                contiguous = slice(int(parents[0]), int(parents[0]) + len(parents))
            children = np.arange(start, stop)
            # The k-th round holds every parent's k-th child, so parents never repeat in a round.
            rank = np.zeros(len(parents), dtype=np.int64)
            order = np.argsort(parents, kind="stable")
            sorted_parents = parents[order]
            run_start = np.searchsorted(sorted_parents, sorted_parents, side="left")
            rank[order] = np.arange(len(parents)) - run_start
            for k in range(int(rank.max()) + 1):
                chosen = rank == k
                rounds.append(
                    (
                        backend.from_host(children[chosen] - start),
                        backend.from_host(parents[chosen]),
                    )
                )
        level_parent_slice.append(contiguous)
        child_rounds.append(rounds)
    tail = parent[n_trees:]
    shift = n_trees if np.array_equal(tail, np.arange(n_links - n_trees)) else 0
    tree = np.arange(n_links)
    tree[n_trees:] = -1
    for start, stop in level_bounds[1:]:
        tree[start:stop] = tree[parent[start:stop]]
    return {
        "n_levels": n_levels,
        "level_bounds": level_bounds,
        "level_parent": level_parent,
        "child_rounds": child_rounds,
        "level_slices": [slice(start, stop) for start, stop in level_bounds],
        "level_parent_slice": level_parent_slice,
        "parent_shift": shift,
        "link_parent_tail": backend.from_host(tail),
        "n_trees": n_trees,
        "link_tree": backend.from_host(tree),
        "host_link_parent": parent,
        "host_link_tree": tree,
    }


def build_model(
    strands: Sequence[StrandSpec],
    parameters: StrandParameters | None = None,
    base_rest_poses: Any = None,
    backend: str | Backend = "numpy",
    dtype: str = "float64",
) -> Model:
    """Validate strands and parameters and build a frozen, level-major :class:`Model`.

    Raises
    ------
    InvalidStrandError
        Naming the strand: fewer than 2 points, a zero-length segment, a non-finite point, a
        branch attached to a missing strand or link or whose root is off that link (further
        from its segment than :data:`BRANCH_ROOT_TOLERANCE` times its length), a base that does
        not exist, a cycle.
    InvalidInputError
        For parameters of the wrong shape or with non-finite values.
    """
    backend = get_backend(backend, dtype)
    specs = _validated_specs(strands)
    if parameters is None:
        parameters = StrandParameters()
    elif not isinstance(parameters, StrandParameters):
        raise InvalidInputError(
            f"parameters must be a StrandParameters, got {type(parameters).__name__}"
        )

    if base_rest_poses is None:
        # Without poses each base is the identity; a base is numbered by the strands it drives.
        for index, spec in enumerate(specs):
            if spec.parent is None and spec.base >= len(specs):
                raise InvalidStrandError(
                    f"{_describe(index, spec)}: base {spec.base} does not exist: without "
                    f"base_rest_poses there is at most one base per strand (0 to {len(specs) - 1})"
                )
        n_bases = 1 + max((spec.base for spec in specs if spec.parent is None), default=0)
        base_rest_poses = np.broadcast_to(np.eye(4), (n_bases, 4, 4)).copy()
    base_rest_poses = finite_array("base_rest_poses", base_rest_poses, (None, 4, 4))
    rigid_parts("base_rest_poses", base_rest_poses)
    n_bases = base_rest_poses.shape[0]

    points, point_offsets = _validated_points(specs)
    n_strands = len(specs)
    link_counts = np.diff(point_offsets) - 1
    link_offsets = np.concatenate(([0], np.cumsum(link_counts))).astype(np.int64)
    n_links = int(link_offsets[-1])
    first_depth = np.asarray(_strand_depths(specs, link_counts.tolist(), n_bases))
    strand_of = np.repeat(np.arange(n_strands), link_counts)
    position = np.arange(n_links) - link_offsets[strand_of]  # link index within its strand
    depth = first_depth[strand_of] + position

    # Segment k of a strand joins its points k and k + 1.
    point_of_link = point_offsets[strand_of] + position
    segments = points[point_of_link + 1] - points[point_of_link]
    lengths = np.sqrt(np.einsum("ij,ij->i", segments, segments))

    # Branches: the strand-order link each grows from; tree bases and generations (how many
    # branchings from the root strand) follow parents, which come before their branches when
    # strands are taken by the depth of their first link.
    is_branch = np.array([spec.parent is not None for spec in specs])
    strand_parent = np.array([int(spec.parent[0]) if spec.parent else -1 for spec in specs])
    strand_parent_link = np.array([int(spec.parent[1]) if spec.parent else -1 for spec in specs])
    attachment = np.where(is_branch, link_offsets[strand_parent] + strand_parent_link, -1)
    _check_branch_roots(
        specs, points[point_offsets[:-1]], points[point_of_link], segments, attachment
    )
    tree_base = np.array([-1 if spec.parent else int(spec.base) for spec in specs], np.int64)
    generation = np.zeros(n_strands, dtype=np.int64)
    for strand in np.argsort(first_depth, kind="stable")[np.count_nonzero(~is_branch) :]:
        tree_base[strand] = tree_base[strand_parent[strand]]
        generation[strand] = generation[strand_parent[strand]] + 1

    root_frames = base_rest_poses[np.maximum(tree_base, 0), :3, :3]
    frames = _rest_frames(
        segments / lengths[:, None], link_offsets, generation, attachment, root_frames
    )

    # Each link's joint offset and rest rotation relative to its parent frame: the previous link
    # of its strand, else the link it branches from, else its base.
    first = link_offsets[:-1]
    inner = np.nonzero(position > 0)[0]
    parent_link = np.arange(n_links) - 1  # strand order
    parent_link[first] = attachment
    joint_offset = np.zeros((n_links, 3))
    joint_offset[inner, 1] = lengths[inner - 1]
    rest_rotation = np.empty((n_links, 3, 3))
    rest_rotation[inner] = frames[inner - 1].transpose(0, 2, 1) @ frames[inner]
    parent_rotation = np.where(is_branch[:, None, None], frames[attachment], root_frames)
    parent_origin = np.where(
        is_branch[:, None],
        points[point_offsets[np.maximum(strand_parent, 0)] + strand_parent_link],
        base_rest_poses[np.maximum(tree_base, 0), :3, 3],
    )
    root_points = points[point_offsets[:-1]]
    joint_offset[first] = np.einsum("nji,nj->ni", parent_rotation, root_points - parent_origin)
    rest_rotation[first] = parent_rotation.transpose(0, 2, 1) @ frames[first]

    level_major_to_strand = _level_major_order(depth, parent_link)
    link_order = np.empty(n_links, dtype=np.int64)
    link_order[level_major_to_strand] = np.arange(n_links)

    # A joint stands for the rod between the midpoints of its neighbouring segments; at a root
    # (clamped to a base or a parent link) that is half of the first segment.
    joint_length = 0.5 * lengths
    joint_length[inner] += 0.5 * lengths[inner - 1]

    mass_per_length = _per_link("mass_per_length", parameters.mass_per_length, n_links)
    radius = _per_link("radius", parameters.radius, n_links)
    for name, values in (("mass_per_length", mass_per_length), ("radius", radius)):
        if (values <= 0).any():
            link = int(np.argmax(values <= 0))
            strand = int(strand_of[link])
            raise InvalidStrandError(
                f"{_describe(strand, specs[strand])}: {name} must be positive, link "
                f"{link - link_offsets[strand]} has {values[link]}"
            )
    collision_radius = _per_link(
        "collision_radius",
        parameters.radius if parameters.collision_radius is None else parameters.collision_radius,
        n_links,
    )
    collision_weight = _per_link("collision_weight", parameters.collision_weight, n_links)
    if (collision_radius < 0).any() or (collision_weight < 0).any():
        raise InvalidInputError("collision_radius and collision_weight must not be negative")
    with np.errstate(over="ignore", invalid="ignore"):
        mass = mass_per_length * lengths
        perpendicular = mass * (lengths**2 / 12.0 + radius**2 / 4.0)
        inertia = np.stack((perpendicular, 0.5 * mass * radius**2, perpendicular), axis=1)
    if not (np.isfinite(mass).all() and np.isfinite(inertia).all()):
        link = int(np.argmin(np.isfinite(mass) & np.isfinite(inertia).all(axis=1)))
        raise InvalidInputError(
            f"parameters 'mass_per_length' and 'radius' give link {link} (strand order) a mass "
            "or inertia too large to represent: check their units (kg/m and m)"
        )

    strand_parameters = {
        "bend_stiffness": _per_link("bend_stiffness", parameters.bend_stiffness, n_links, 2),
        "twist_stiffness": _per_link("twist_stiffness", parameters.twist_stiffness, n_links),
        "bend_damping": _per_link("bend_damping", parameters.bend_damping, n_links),
        "twist_damping": _per_link("twist_damping", parameters.twist_damping, n_links),
        "drag": _per_link("drag", parameters.drag, n_links),
        "pose_strength": _per_link("pose_strength", parameters.pose_strength, n_links),
        "pose_damping": _per_link("pose_damping", parameters.pose_damping, n_links),
    }
    for name, values in strand_parameters.items():
        if (values < 0).any():
            raise InvalidInputError(f"parameter {name!r} must not be negative")

    def level_major(values: np.ndarray) -> np.ndarray:
        return values[level_major_to_strand]

    parent_level_major = np.where(
        parent_link[level_major_to_strand] >= 0, link_order[parent_link[level_major_to_strand]], -1
    )
    layout = _forest_layout(backend, depth[level_major_to_strand], parent_level_major)
    link_base_host = tree_base[strand_of][level_major_to_strand]

    # Points: each strand's root (the joint of its first link), then the tip of each link.
    point_strand = np.repeat(np.arange(n_strands), link_counts + 1)
    point_position = np.arange(len(points)) - point_offsets[point_strand]
    point_link = link_order[link_offsets[point_strand] + np.maximum(point_position - 1, 0)]
    point_is_tip = point_position > 0

    device = backend.from_host
    return Model(
        backend=backend,
        n_strands=n_strands,
        n_links=n_links,
        n_points=int(point_offsets[-1]),
        n_bases=n_bases,
        **layout,
        level_base=device(link_base_host[: layout["n_trees"]]),
        link_base=device(link_base_host),
        link_parent_frame=device(
            np.where(parent_level_major >= 0, parent_level_major, n_links + link_base_host)
        ),
        joint_offset=device(level_major(joint_offset).T),
        rest_rotation=device(_quaternions(rest_rotation)[:, level_major_to_strand]),
        length=device(level_major(lengths)),
        mass=device(level_major(mass)),
        inertia=device(level_major(inertia).T),
        radius=device(level_major(radius)),
        joint_length=device(level_major(joint_length)),
        collision_radius=device(level_major(collision_radius * collision_weight)),
        collides=level_major(collision_weight > 0),
        parameters={name: device(level_major(v).T) for name, v in strand_parameters.items()},
        link_order=link_order,
        link_offsets=link_offsets,
        point_offsets=point_offsets,
        point_link=point_link,
        point_is_tip=point_is_tip,
        strand_parent=strand_parent,
        strand_parent_link=strand_parent_link,
        strand_base=tree_base,
        strand_names=tuple(s.name for s in specs),
        strand_index=np.arange(n_strands),
        base_rest_poses=base_rest_poses.copy(),
        rest_points=points,
    )


def select_trees(model: Model, trees: Any) -> tuple[Model, np.ndarray]:
    """A model of some of ``model``'s trees, and the level-major indices of its links in ``model``.

    ``trees`` (host ints) are tree indices (depth-0 links) of ``model``. The selected links keep
    their relative order, so the new model is level-major with the same order within each level
    and every per-link quantity equal to the original's: stepping it steps those trees exactly as
    the whole model would (see :func:`.integrators.step_implicit`). Strands keep their names and
    original indices (``strand_index``).
    """
    backend = model.backend
    links = np.nonzero(np.isin(model.host_link_tree, np.asarray(trees, dtype=np.int64)))[0]
    n_links = len(links)
    renumber = np.full(model.n_links, -1, dtype=np.int64)
    renumber[links] = np.arange(n_links)
    depth = np.zeros(model.n_links, dtype=np.int64)
    for d, (start, stop) in enumerate(model.level_bounds):
        depth[start:stop] = d
    parent = model.host_link_parent[links]
    parent = np.where(parent >= 0, renumber[np.maximum(parent, 0)], -1)
    layout = _forest_layout(backend, depth[links], parent)
    link_base = backend.to_host(model.link_base)[links]

    strand_of_link = np.repeat(np.arange(model.n_strands), np.diff(model.link_offsets))
    strands = np.unique(strand_of_link[renumber[model.link_order] >= 0])
    strand_renumber = np.full(model.n_strands, -1, dtype=np.int64)
    strand_renumber[strands] = np.arange(len(strands))
    strand_links = [np.arange(model.link_offsets[s], model.link_offsets[s + 1]) for s in strands]
    strand_points = [np.arange(model.point_offsets[s], model.point_offsets[s + 1]) for s in strands]
    points = np.concatenate(strand_points)
    strand_parent = model.strand_parent[strands]

    def pick(values: Any) -> Any:
        return values[..., backend.from_host(links)]

    return (
        Model(
            backend=backend,
            n_strands=len(strands),
            n_links=n_links,
            n_points=len(points),
            n_bases=model.n_bases,
            **layout,
            level_base=backend.from_host(link_base[: layout["n_trees"]]),
            link_base=backend.from_host(link_base),
            link_parent_frame=backend.from_host(np.where(parent >= 0, parent, n_links + link_base)),
            joint_offset=pick(model.joint_offset),
            rest_rotation=pick(model.rest_rotation),
            length=pick(model.length),
            mass=pick(model.mass),
            inertia=pick(model.inertia),
            radius=pick(model.radius),
            joint_length=pick(model.joint_length),
            collision_radius=pick(model.collision_radius),
            collides=model.collides[links],
            parameters={name: pick(values) for name, values in model.parameters.items()},
            link_order=renumber[model.link_order[np.concatenate(strand_links)]],
            link_offsets=np.concatenate(([0], np.cumsum([len(k) for k in strand_links]))),
            point_offsets=np.concatenate(([0], np.cumsum([len(k) for k in strand_points]))),
            point_link=renumber[model.point_link[points]],
            point_is_tip=model.point_is_tip[points],
            strand_parent=np.where(strand_parent >= 0, strand_renumber[strand_parent], -1),
            strand_parent_link=model.strand_parent_link[strands],
            strand_base=model.strand_base[strands],
            strand_names=tuple(model.strand_names[s] for s in strands),
            strand_index=model.strand_index[strands],
            base_rest_poses=model.base_rest_poses.copy(),
            rest_points=model.rest_points[points],
        ),
        links,
    )
