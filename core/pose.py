"""Target poses for posable dynamics (paper §6.5): "hit this pose on frame 40".

A *pose* is a target joint rotation per link, with the joint angular velocity at which the
target moves. The step pulls every joint towards its target with the *pose strength* and damps
its motion relative to the target's with the *pose damping* (both per link and animatable, see
:class:`.model.StrandParameters`); :mod:`.dynamics` has the torques, ``docs/art-direction.md``
why they act at the joints.

Poses come from

- target joint rotations, as the engine stores them (:class:`Pose`);
- target points: :func:`pose_rotations` turns polylines (one per strand, like the points a
  model is built from) into joint rotations exactly as :func:`.model.build_model` turns the
  modelled points into the rest shape, so a polyline that repeats the modelled points gives the
  rest rotations;
- poses sampled at frames: :class:`PoseTrajectory` interpolates them C² in time, per link, by the
  base-motion interpolant (:class:`.base_motion.BaseTrajectory`), and gives the target's exact
  angular velocity with the rotation, so pose damping follows the animation instead of dragging
  against it.

Every array here is a host array in *strand order* (the links of strand 0 root to tip, then
strand 1, ...), batch first, as the scripting API's other per-link inputs;
:meth:`.state.Control.set_pose` moves a pose to the device, level-major.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import spatial
from .base_motion import BaseTrajectory
from .errors import InvalidInputError, InvalidStrandError
from .model import Model, StrandSpec, build_model
from .validation import finite_array

# Largest deviation of a target quaternion's norm from 1 that is taken for round-off (Blender
# stores rotations in float32) and normalised away; anything further is refused.
UNIT_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Pose:
    """A target pose: joint rotations and their rates (host, strand order).

    Attributes
    ----------
    rotation : (n_links, 4) float64
        Target rotation of each link relative to its parent's frame (the base frame for a root
        link), unit quaternion ``(w, x, y, z)``, as ``Model.rest_rotation`` and ``State.q``.
        Quaternions within :data:`UNIT_TOLERANCE` of unit length are normalised.
    angular_velocity : (n_links, 3) float64, rad/s, optional
        Target joint angular velocity in the link's own frame (as ``State.w``): how fast the
        target itself moves. Pose damping acts on the joint's velocity relative to it. Default
        zero: a still target.

    The arrays are read-only copies of what was passed in.
    """

    rotation: Any
    angular_velocity: Any = None

    def __post_init__(self) -> None:
        rotation = finite_array("Pose.rotation", self.rotation, ("n_links", 4))
        norm = np.linalg.norm(rotation, axis=1)
        off = np.abs(norm - 1.0) > UNIT_TOLERANCE
        if off.any():
            link = int(np.argmax(off))
            raise InvalidInputError(
                f"Pose.rotation must hold unit quaternions (w, x, y, z); link {link} (strand "
                f"order) has norm {norm[link]:.6g}"
            )
        rotation = rotation / norm[:, None]
        if self.angular_velocity is None:
            velocity = np.zeros((rotation.shape[0], 3))
        else:
            velocity = finite_array("Pose.angular_velocity", self.angular_velocity, ("n_links", 3))
            if velocity.shape[0] != rotation.shape[0]:
                raise InvalidInputError(
                    f"Pose.angular_velocity must have shape ({rotation.shape[0]}, 3) like "
                    f"Pose.rotation's links, got {velocity.shape}"
                )
        for name, value in (("rotation", rotation), ("angular_velocity", velocity)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def n_links(self) -> int:
        """Number of links the pose is for."""
        return self.rotation.shape[0]


def pose_rotations(model: Model, points: Any, base_poses: Any = None) -> np.ndarray:
    """Target joint rotations (n_links, 4), strand order, of a pose given by points.

    Parameters
    ----------
    model : Model
    points : (n_points, 3) array_like, m, world
        Every strand's root and link tips in the target pose, strand order, laid out as
        ``model.rest_points`` and :meth:`.Simulation.points` (``model.point_offsets``).
    base_poses : (n_bases, 4, 4) array_like, optional
        World transforms of the bases the points are posed on (default: their rest poses), so a
        pose modelled on an animated character at some frame is given with the character's
        base transforms at that frame. Joint rotations are relative, so the pose moves with the
        bases afterwards.

    Each link's frame is its predecessor's parallel-transported onto the target segment, as for
    the rest shape: the pose carries no invented twist, and the modelled points give the rest
    rotations. Links are rigid, so only the segments' directions matter; a branch keeps its
    place on its parent link wherever its target root point lies. The conversion builds a model
    of the target points on the host (as long as :func:`.model.build_model` takes, about 0.2 s
    for 8000 links): convert the keyed frames once and interpolate them with
    :class:`PoseTrajectory`.

    Raises
    ------
    InvalidInputError
        For a model that is not a :class:`.model.Model`, points of the wrong shape or not
        finite, base poses that are not rigid transforms.
    InvalidStrandError
        Naming the strand, for a zero-length target segment.
    """
    if not isinstance(model, Model):
        raise InvalidInputError(f"model must be a Model, got {type(model).__name__}")
    try:
        points = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"pose points must be numbers, got {type(points).__name__}"
        ) from None
    if points.shape != (model.n_points, 3) or not np.isfinite(points).all():
        raise InvalidInputError(
            f"pose points must be finite with shape ({model.n_points}, 3) (every strand's root "
            f"and link tips, strand order), got shape {points.shape}"
        )
    poses = model.base_rest_poses if base_poses is None else base_poses
    offsets = model.point_offsets
    points = _branches_on_their_links(model, points)
    specs = [
        StrandSpec(
            points[offsets[s] : offsets[s + 1]],
            base=int(model.strand_base[s]),
            parent=None
            if model.strand_parent[s] < 0
            else (int(model.strand_parent[s]), int(model.strand_parent_link[s])),
            name=model.strand_names[s],
        )
        for s in range(model.n_strands)
    ]
    try:
        posed = build_model(specs, base_rest_poses=poses)
    except InvalidStrandError:
        raise
    except InvalidInputError as error:  # the only other input build_model checks here
        raise InvalidInputError(f"pose_rotations base_poses: {error}") from error
    return posed.to_strand_order(posed.rest_rotation)


def _branches_on_their_links(model: Model, points: np.ndarray) -> np.ndarray:
    """``points`` with every branch moved as a whole so that its root lies on the joint of the
    link it grows from: rotations depend only on the segments' directions, and a model refuses a
    branch whose root is off its parent link (:func:`.model.build_model`)."""
    points = points.copy()
    offsets, parent, link = model.point_offsets, model.strand_parent, model.strand_parent_link
    placed = parent < 0
    while not placed.all():
        # Branches on placed strands, a generation at a time (build_model refused cycles).
        for strand in np.nonzero(~placed & placed[np.maximum(parent, 0)])[0]:
            joint = points[offsets[parent[strand]] + link[strand]]
            span = slice(offsets[strand], offsets[strand + 1])
            points[span] += joint - points[offsets[strand]]
            placed[strand] = True
    return points


class PoseTrajectory:
    """A target pose animated through poses sampled at increasing times: ``t -> Pose``.

    Usable wherever the engine takes a pose, e.g. ``Simulation.advance(dt, base, pose=...)``.

    Parameters
    ----------
    times : array_like, shape (F,), s
        Strictly increasing sample times (the frames at which the pose is keyed).
    rotations : array_like, shape (F, n_links, 4)
        Target joint rotations at each sample, strand order (e.g. :func:`pose_rotations` of each
        frame's points).

    Each link's target rotation follows the C² interpolant of :class:`.BaseTrajectory` (a cubic
    in so(3) through the samples, evaluated with the exponential map), so the pose's angular
    velocity is the exact derivative of the rotation the joint is pulled towards. A target must
    turn less than half a turn between two samples. Outside the sampled times the pose holds
    its first or last sample, still.
    """

    def __init__(self, times: Any, rotations: Any) -> None:
        rotations = finite_array("PoseTrajectory rotations", rotations, (None, None, 4))
        samples, n_links = rotations.shape[:2]
        matrices = np.zeros((samples, n_links, 4, 4))
        for f in range(samples):
            unit = Pose(rotations[f]).rotation
            matrices[f, :, :3, :3] = spatial.quat_to_matrix(np, unit.T).transpose(2, 0, 1)
        matrices[:, :, 3, 3] = 1.0
        try:
            self._trajectory = BaseTrajectory(times, matrices)
        except InvalidInputError as error:
            raise InvalidInputError(f"PoseTrajectory: {error}") from error

    @property
    def times(self) -> np.ndarray:
        """(F,) float64, s: the sample times (read-only)."""
        return self._trajectory.times

    def __call__(self, t: float) -> Pose:
        """The target pose at time ``t`` (s), with its angular velocity."""
        motion = self._trajectory(t)
        rotation = motion.rotation.transpose(1, 2, 0)
        # The interpolant's angular velocity is in the parent's axes; joints move in their own.
        velocity = spatial.matTvec(np, rotation, motion.angular_velocity.T)
        return Pose(spatial.matrix_to_quat(np, rotation).T, velocity.T)
