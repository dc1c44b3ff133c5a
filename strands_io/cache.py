"""The live-preview cache: a strand system's sampled input, and the frames simulated from it.

Two things are cached per strand system, with different rules:

- :class:`PreparedInput`, what was read from Blender at *several* frames: the rest shape (the
  curves at the start frame) and the bases' world transforms at every frame of the simulation
  range, with the obstacles, force fields, pose curves and pin object of those frames. Reading
  another frame means ``scene.frame_set``, which must not run inside a frame handler, so
  ``scene.sampling`` samples it up front, outside handlers, frame by frame into
  :class:`InputSamples`. The whole range is sampled so that the bases' C² motion between two
  frames is the same whatever order frames are visited in: live playback, scrubbing and a bake
  agree. Its methods (:meth:`~PreparedInput.bases_changed`, ...) tell whether what the scene
  shows at a frame still matches what was sampled there.
- :class:`StrandSystemRuntime`, what the frame handler computes: the strand model, the
  simulation and the points of every simulated frame. It is rebuilt whenever a parameter
  changes, and steps forward from the last simulated frame to the frame asked for.

Nothing here reads Blender: the runtime takes the animated parameters through
:class:`~.parameters.AnimatedParameters`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import (
    BaseTrajectory,
    ConstraintSettings,
    Fallback,
    JointLimits,
    Model,
    ObstacleMotion,
    PointPath,
    Simulation,
    StrandError,
    TriangleMesh,
    VertexTrajectory,
    build_model,
    build_obstacles,
)
from ..core.art_direction import ArtDirectedBase
from ..core.fields import ForceFields, RootToTip, Wind
from ..core.obstacles import Obstacles
from ..core.pose import PoseTrajectory, pose_rotations
from ..core.rest_shape import zero_gravity_model
from ..core.simulation import BaseSource
from .errors import SceneInputError
from .geometry import resample_by_arc_length
from .layout import StrandLayout, convert
from .parameters import (
    AnimatedParameters,
    ModelSettings,
    StrandSettings,
    engine_parameters,
    gravity_vector,
    point_radius,
    strand_interaction,
    strand_parameters,
)
from .records import DrawnCurves, ObstacleShapes, SceneFields, SurfaceAttachment

# Two samples of the same base at the same frame agree bit for bit; anything beyond float32
# round-off means the animation that carries the roots was edited.
BASE_MATCH_TOLERANCE = 1e-5
# A mesh whose vertices move by more than this (m, in the object's axes) between frames of the
# range deforms.
DEFORMATION_TOLERANCE = 1e-6


@dataclass
class PreparedInput:
    """What was read from Blender for one strand system, at every frame of its range.

    Attributes
    ----------
    drawn : DrawnCurves
        The curves at ``frame_start``, world space: the rest shape.
    frame_start, frame_end : int
    fps : float
    base_of_curve : (n_curves,) int
        Base driving each curve when it is a root strand: 0 (the object) for free curves, one
        base per curve for hair on a surface.
    base_matrices : (F, n_bases, 4, 4) float64
        Rigid world transforms of the bases at frames ``frame_start .. frame_end``.
    attachment : SurfaceAttachment or None
        For hair on a surface, where each root sits on it.
    fingerprint : str
        ``scene.inputs.input_fingerprint`` of the object when sampled.
    trajectory : BaseTrajectory
        C² interpolation of ``base_matrices``, time 0 at ``frame_start``.
    reference_matrices : (F, 1, 4, 4) float64 or None
        Rigid world transforms of the local-dynamics reference at the same frames, if it has one.
    reference : BaseTrajectory or None
        C² interpolation of ``reference_matrices``.
    fields : list of SceneFields
        The force fields acting at each frame of the range.
    obstacles : ObstacleShapes
        The obstacles' shapes at ``frame_start`` (none when the system's collisions are off),
        the meshes whose shape changed over the range marked deforming.
    obstacle_fingerprint : str
        ``scene.obstacles.obstacle_fingerprint`` of the obstacle objects when sampled.
    obstacle_matrices : (F, K, 4, 4) float64
        Rigid world transforms of the K obstacles at every frame of the range.
    obstacle_trajectory : BaseTrajectory or None
        C² interpolation of ``obstacle_matrices`` (None without obstacles).
    deforming : dict of int -> VertexTrajectory
        The vertices of each deforming obstacle at every frame, by obstacle index.
    pose_curves : list of DrawnCurves, or None
        The pose object's curves at every frame of the range (None without a pose object).
    pin_matrices : (F, 1, 4, 4) float64 or None
        Rigid world transforms of the Pin Object at the same frames, if the system has one.
    pin : BaseTrajectory or None
        C² interpolation of ``pin_matrices``.
    """

    drawn: DrawnCurves
    frame_start: int
    frame_end: int
    fps: float
    base_of_curve: np.ndarray
    base_matrices: np.ndarray
    attachment: SurfaceAttachment | None
    fingerprint: str
    trajectory: BaseTrajectory
    reference_matrices: np.ndarray | None
    reference: BaseTrajectory | None
    fields: list[SceneFields]
    obstacles: ObstacleShapes
    obstacle_fingerprint: str
    obstacle_matrices: np.ndarray
    obstacle_trajectory: BaseTrajectory | None
    deforming: dict[int, VertexTrajectory]
    pose_curves: list[DrawnCurves] | None
    pin_matrices: np.ndarray | None
    pin: BaseTrajectory | None

    def matrices_at(self, frame: int) -> np.ndarray:
        """Sampled base transforms (n_bases, 4, 4) at a frame inside the range."""
        return self.base_matrices[frame - self.frame_start]

    def bases_changed(self, frame: int, observed: np.ndarray) -> bool:
        """Whether the base transforms ``observed`` (n_bases, 4, 4) at ``frame`` differ from
        those sampled there (another count, or beyond :data:`BASE_MATCH_TOLERANCE`)."""
        sampled = self.matrices_at(frame)
        if observed.shape != sampled.shape:
            return True
        return bool(abs(observed - sampled).max() > BASE_MATCH_TOLERANCE)

    def reference_changed(self, frame: int, observed: np.ndarray | None) -> bool:
        """Whether the local-dynamics reference ``observed`` (1, 4, 4) at ``frame`` (None: it
        has none) differs from the one sampled there, or one of the two has none."""
        return _transform_changed(self.reference_matrices, frame - self.frame_start, observed)

    def pin_changed(self, frame: int, observed: np.ndarray | None) -> bool:
        """Whether the Pin Object's transform ``observed`` (1, 4, 4) at ``frame`` (None: there
        is none) differs from the one sampled there, or one of the two has none."""
        return _transform_changed(self.pin_matrices, frame - self.frame_start, observed)

    def obstacles_moved(self, frame: int, observed: np.ndarray) -> bool:
        """Whether the obstacle transforms ``observed`` (K, 4, 4) at ``frame`` differ from those
        sampled there; the same K obstacles are assumed (their fingerprint says so)."""
        sampled = self.obstacle_matrices[frame - self.frame_start]
        return bool(abs(observed - sampled).max(initial=0.0) > BASE_MATCH_TOLERANCE)

    def pose_changed(self, frame: int, curves: DrawnCurves | None) -> bool:
        """Whether the pose object's ``curves`` at ``frame`` (None: there is no pose object)
        differ from those sampled there: another count of curves or points, or a point moved."""
        if (curves is None) != (self.pose_curves is None):
            return True
        if curves is None:
            return False
        sampled = self.pose_curves[frame - self.frame_start].polylines
        return len(curves.polylines) != len(sampled) or any(
            a.shape != b.shape or abs(a - b).max() > BASE_MATCH_TOLERANCE
            for a, b in zip(curves.polylines, sampled, strict=True)
        )

    def same_input(self, other: PreparedInput) -> bool:
        """Whether ``other`` sampled the same scene: every value read equal (the trajectories
        are made from them)."""
        derived = {"trajectory", "reference", "obstacle_trajectory", "pin"}
        return all(
            _same(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
            if f.name not in derived
        )


def _transform_changed(sampled: np.ndarray | None, index: int, observed: np.ndarray | None) -> bool:
    """Whether a transform ``observed`` (1, 4, 4) differs from ``sampled[index]`` beyond
    :data:`BASE_MATCH_TOLERANCE`, or only one of the two exists (``sampled`` None: it was not
    sampled; ``observed`` None: the scene has none now)."""
    if (observed is None) != (sampled is None):
        return True
    if observed is None:
        return False
    return bool(abs(observed - sampled[index]).max() > BASE_MATCH_TOLERANCE)


def _same(a: Any, b: Any) -> bool:
    """Whether two values read from the scene are equal: arrays element by element (NaN never
    equals), records field by field, containers item by item."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and bool(np.array_equal(a, b))
        )
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def with_deformation(
    shapes: ObstacleShapes, per_frame: list[tuple]
) -> tuple[ObstacleShapes, dict[int, np.ndarray]]:
    """The shapes with the meshes whose vertices moved over the frames marked deforming, and
    those meshes' vertices at every frame (F, V, 3) by obstacle index.

    ``per_frame`` holds, for every frame, one entry per shape: the mesh's vertices (V, 3) in its
    axes, or None for the shapes that are not a ``TriangleMesh``. A mesh deforms where a vertex
    moved from its first frame's place by more than :data:`DEFORMATION_TOLERANCE`.
    """
    marked, trajectories = list(shapes.shapes), {}
    for index, shape in enumerate(shapes.shapes):
        if not isinstance(shape, TriangleMesh):
            continue
        vertices = np.stack([frame[index] for frame in per_frame])
        if np.abs(vertices - vertices[0]).max() > DEFORMATION_TOLERANCE:
            marked[index] = dataclasses.replace(shape, deforming=True)
            trajectories[index] = vertices
    return ObstacleShapes(tuple(marked), shapes.names), trajectories


@dataclass
class InputSamples:
    """What is read of one strand system while its range is sampled, frame by frame, until
    :meth:`prepared` makes it a :class:`PreparedInput`.

    The start frame's reads (``drawn``, ``attachment``, ``obstacles``,
    ``obstacle_fingerprint``) are set once; the lists get one entry per frame of
    ``frame_start .. frame_end``, in order (``reference_matrices``, ``pose_curves`` and
    ``pin_matrices`` stay empty for a system without a reference, a pose or a pin object). See
    :class:`PreparedInput` for each value's shape and frame.
    """

    frame_start: int
    frame_end: int
    drawn: DrawnCurves | None = None
    attachment: SurfaceAttachment | None = None
    obstacles: ObstacleShapes | None = None
    obstacle_fingerprint: str = ""
    base_matrices: list = field(default_factory=list)
    reference_matrices: list = field(default_factory=list)
    fields: list = field(default_factory=list)
    obstacle_matrices: list = field(default_factory=list)
    obstacle_vertices: list = field(default_factory=list)
    pose_curves: list = field(default_factory=list)
    pin_matrices: list = field(default_factory=list)

    def prepared(self, fps: float, fingerprint: str) -> PreparedInput:
        """The sampled input at ``fps`` frames per second, with its C² trajectories (time 0 at
        ``frame_start``) and the deforming obstacles found; ``fingerprint`` is the object's
        input fingerprint. The per-frame obstacle vertices are handed over (this record's list
        is emptied). Raises :class:`SceneInputError` naming the object when its motion cannot
        drive strands (the engine refuses the trajectory)."""
        matrices = np.stack(self.base_matrices)
        times = np.arange(len(matrices)) / fps
        reference_matrices = np.stack(self.reference_matrices) if self.reference_matrices else None
        pin_matrices = np.stack(self.pin_matrices) if self.pin_matrices else None
        obstacle_poses = np.stack(self.obstacle_matrices)
        try:
            trajectory = BaseTrajectory(times, matrices)
            reference = (
                None if reference_matrices is None else BaseTrajectory(times, reference_matrices)
            )
            obstacle_trajectory = (
                BaseTrajectory(times, obstacle_poses) if obstacle_poses.shape[1] else None
            )
            pin = None if pin_matrices is None else BaseTrajectory(times, pin_matrices)
        except StrandError as error:
            raise SceneInputError(
                f"object {self.drawn.object_name!r}: its motion cannot drive strands: {error}"
            ) from None
        n_curves = len(self.drawn.polylines)
        obstacles, deforming = with_deformation(self.obstacles, self.obstacle_vertices)
        self.obstacle_vertices.clear()
        return PreparedInput(
            drawn=self.drawn,
            frame_start=self.frame_start,
            frame_end=self.frame_end,
            fps=fps,
            base_of_curve=(
                np.arange(n_curves) if self.attachment is not None else np.zeros(n_curves, int)
            ),
            base_matrices=matrices,
            attachment=self.attachment,
            fingerprint=fingerprint,
            trajectory=trajectory,
            reference_matrices=reference_matrices,
            reference=reference,
            fields=self.fields,
            obstacles=obstacles,
            obstacle_fingerprint=self.obstacle_fingerprint,
            obstacle_matrices=obstacle_poses,
            obstacle_trajectory=obstacle_trajectory,
            deforming={index: VertexTrajectory(fps, v) for index, v in deforming.items()},
            pose_curves=self.pose_curves or None,
            pin_matrices=pin_matrices,
            pin=pin,
        )


class StrandSystemRuntime:
    """The simulation of one strand system and the points of every frame it has simulated.

    Cached points are float32 copies, so replaying a frame writes exactly what was written when
    it was first simulated.
    """

    def __init__(self, prepared: PreparedInput) -> None:
        self.prepared = prepared
        self.stale = ""
        """Why the prepared input no longer matches the scene ("" while it does)."""
        self.error = ""
        """The last error met while simulating ("" if none)."""
        self.layout: StrandLayout | None = None
        self.model: Model | None = None
        """The engine's strand model (read-only), once built."""
        self.point_radius: np.ndarray | None = None
        self.simulation: Simulation | None = None
        self.frames: dict[int, np.ndarray] = {}
        self._key: tuple | None = None
        self._failure: StrandError | None = None
        self._start_rotations = None
        self._base: BaseSource | None = None
        self._air: Callable[[SceneFields], tuple[list, list]] | None = None
        self._pose: PoseTrajectory | None = None
        self._constraints = ConstraintInputs()
        self.failed_frame: int | None = None
        """The frame whose step failed, if one did."""
        self.fallbacks: dict[int, tuple[Fallback, ...]] = {}
        """The simulated frames in which strands fell back (the engine's :class:`Fallback`:
        a step that failed even halved as often as it may be carried them rigidly)."""
        self._pinned: PinnedTips | None = None
        self.trailing: dict[int, float] = {}
        """The simulated frames in which a pinned tip ended farther from its target than half
        its last link's length: the largest such distance (m)."""

    @property
    def last_frame(self) -> int | None:
        """The latest simulated frame, or None if nothing is cached."""
        return max(self.frames) if self.frames else None

    def has_played(self, other: StrandSystemRuntime) -> bool:
        """Whether this runtime (the live preview's) has simulated every frame of ``other``'s
        range, without an error, from the same sampled input, settings and keyframes as
        ``other`` (built just now, for a bake): its frames are then the frames ``other`` would
        simulate, each run starting from the same fresh engine state."""
        prepared = other.prepared
        return (
            not self.stale
            and not self.error
            and self._failure is None
            and self.model is not None
            and self._key == other._key
            and all(f in self.frames for f in range(prepared.frame_start, prepared.frame_end + 1))
            and self.prepared.same_input(prepared)
        )

    def free_frames(self) -> None:
        """Forget every simulated frame; the next request starts again from the rest shape."""
        self.frames.clear()
        self.fallbacks.clear()
        self.trailing.clear()
        self.error = ""
        self._failure = None
        self.failed_frame = None

    def fallback_summary(self) -> str:
        """A short line for the status on the strands held rigid in the simulated frames ("" if
        none)."""
        if not self.fallbacks:
            return ""
        strands = {fallback.strand for frame in self.fallbacks.values() for fallback in frame}
        return (
            f"{len(strands)} strand(s) held rigid in {len(self.fallbacks)} frame(s) from frame "
            f"{min(self.fallbacks)}: raise Substeps"
        )

    def fallback_report(self) -> str:
        """What :meth:`fallback_summary` says, with the first strand's name and why it fell back
        ("" if none)."""
        if not self.fallbacks:
            return ""
        first_frame = min(self.fallbacks)
        first = self.fallbacks[first_frame][0]
        return (
            f"{self.fallback_summary()}. Their step failed even halved five times and they "
            f"were held rigid for it: first {self.model.strand_names[first.strand]!r} at frame "
            f"{first_frame}, {first.reason}"
        )

    def trailing_summary(self) -> str:
        """A short line for the status on pinned tips left behind by their Pin Object in the
        simulated frames ("" if none)."""
        if not self.trailing:
            return ""
        return (
            f"pinned tips up to {1e3 * max(self.trailing.values()):.0f} mm off their Pin Object "
            f"in {len(self.trailing)} frame(s) from frame {min(self.trailing)}: raise Steps per "
            "Second, or give the strands slack"
        )

    def frame_fallbacks(self, frame: int) -> str:
        """The strands held rigid in ``frame`` by name, and why the first was ("" if none)."""
        fell_back = self.fallbacks.get(frame, ())
        if not fell_back:
            return ""
        names = ", ".join(
            repr(self.model.strand_names[strand])
            for strand in sorted({fallback.strand for fallback in fell_back})
        )
        return f"{names} held rigid for a step: {fell_back[0].reason}"

    def rest_points(self) -> np.ndarray:
        """(n_points, 3) float32 rest shape, strand order."""
        return self.layout.rest_points.astype(np.float32)

    def build(self, settings: StrandSettings, animated: AnimatedParameters) -> None:
        """(Re)build layout, model and simulation if the settings or keyframes changed.

        Raises the engine's and the adapter's errors (:class:`StrandError`); on error the
        previous build is kept, but its frames are dropped as they no longer match the settings.
        """
        key = (settings, animated.fingerprint())
        if key == self._key and self.model is not None:
            return
        self.free_frames()
        prepared = self.prepared
        layout = convert(
            prepared.drawn,
            prepared.base_of_curve,
            prepared.base_matrices[0],
            settings.conversion,
            allow_branches=prepared.attachment is None,
        )
        values = animated.at(prepared.frame_start)
        model = build_model(
            layout.specs,
            strand_parameters(layout, settings.model, values),
            base_rest_poses=layout.base_rest_poses,
            backend=settings.model.backend,
            dtype=settings.model.precision,
        )
        # The drawn shape is where every run starts; with a zero-gravity rest shape it is not
        # the rest shape but the shape that gravity bends the rest shape into.
        self._start_rotations = None
        if settings.rest_shape == "HOLD_UNDER_GRAVITY":
            shaped = zero_gravity_model(model, gravity_vector(settings, values))
            model, self._start_rotations = shaped.model, shaped.modelled_q
        self._base = self._base_source(values)
        self._air = self._air_source(values)
        self._pose = pose_trajectory(prepared, layout, model)
        self._constraints = constraint_inputs(prepared, settings.model)
        self._interaction = strand_interaction(layout, settings.model, values)
        self.layout, self.model, self._key = layout, model, key
        self._solver = settings.model.solver
        if prepared.pin is not None:
            # Pinned tips are animated constraints, which step in one process
            # (Simulation.add_constraint ends worker processes): start none.
            self._solver = dataclasses.replace(self._solver, workers=1)
        self._start_gravity = gravity_vector(settings, values)
        # Dropped, a simulation's worker processes end with it (its finalizer).
        self.simulation = None
        self.point_radius = point_radius(layout, settings.model)
        self.error = ""

    def _start_simulation(self) -> None:
        # A new Simulation rather than reset(): every run from the start frame begins from the
        # same fresh engine state, so a re-simulated frame equals the first result bit for bit.
        # Dropping the last one first ends its worker processes before new ones start.
        self.simulation = None
        constraints = self._constraints
        simulation = Simulation(
            self.model,
            self._solver,
            gravity=self._start_gravity,
            obstacles=constraints.obstacles,
            joint_limits=constraints.joint_limits,
            constraint_settings=constraints.settings,
            interaction=self._interaction,
        )
        simulation.reset(base_poses=self.prepared.matrices_at(self.prepared.frame_start))
        if self._start_rotations is not None:
            simulation.state.q[...] = self._start_rotations
        pin = self.prepared.pin
        self._pinned = None if pin is None else pin_tips(simulation, pin)
        self.simulation = simulation
        self.frames[self.prepared.frame_start] = simulation.points().astype(np.float32)

    def points_at(
        self, frame: int, settings: StrandSettings, animated: AnimatedParameters
    ) -> np.ndarray:
        """Simulated points (n_points, 3) float32 at ``frame``, stepping forward as needed.

        Before the start frame the strands are at rest; after the end frame they hold the end
        frame's shape. Call :meth:`build` first. If a step fails (the engine raises), the frames
        before it stay cached and replayable, and asking for a later frame raises the same error
        again without stepping, until the cache is freed or the settings change.
        """
        prepared = self.prepared
        frame = min(max(frame, prepared.frame_start), prepared.frame_end)
        if frame in self.frames:
            return self.frames[frame]
        if self._failure is not None:
            raise self._failure
        if not self.frames:
            self._start_simulation()
        simulation = self.simulation
        dt = 1.0 / prepared.fps
        for step_frame in range(self.last_frame + 1, frame + 1):
            try:
                if animated.is_animated:
                    self._set_animated_parameters(settings, animated.at(step_frame))
                wind, force = self._air(prepared.fields[step_frame - prepared.frame_start])
                stats = simulation.advance(
                    dt,
                    self._base,
                    pose=self._pose,
                    fields=ForceFields(wind, force),
                    obstacle_motion=(
                        None if self._constraints.obstacles is None else self._obstacle_motion
                    ),
                )
            except StrandError as error:
                self._failure, self.failed_frame = error, step_frame
                raise
            if stats.fallbacks:
                self.fallbacks[step_frame] = stats.fallbacks
            points = simulation.points()
            if self._pinned is not None:
                self._note_trailing(step_frame, points, simulation.time)
            self.frames[step_frame] = points.astype(np.float32)
        return self.frames[frame]

    def _note_trailing(self, frame: int, points: np.ndarray, time: float) -> None:
        # Half the last link: a tip that far off its pin shows it, and one that reaches its pin
        # keeps within a fraction of a millimetre.
        tips = self.model.point_offsets[1:] - 1
        rest = self.layout.rest_points
        allowed = 0.5 * np.linalg.norm(rest[tips] - rest[tips - 1], axis=1)
        off = np.linalg.norm(points[tips] - self._pinned.targets(time), axis=1)
        if (off > allowed).any():
            self.trailing[frame] = float(off.max())

    def _set_animated_parameters(self, settings: StrandSettings, values: dict) -> None:
        # The values at a frame drive the step that ends on it.
        simulation = self.simulation
        for name, value in engine_parameters(self.layout, settings.model, values).items():
            simulation.set_parameter(name, value)
        simulation.set_parameter("gravity", gravity_vector(settings, values))
        # Friction and volume may be animated; the grid is kept (Simulation.set_interaction).
        interaction = strand_interaction(self.layout, settings.model, values)
        if interaction is not None:
            simulation.set_interaction(interaction)
        self._base = self._base_source(values)
        self._air = self._air_source(values)

    @staticmethod
    def _air_source(values: dict) -> Callable[[SceneFields], tuple[list, list]]:
        """Turns a frame's scene fields into the wind and force fields the strands feel: the
        system's own uniform Wind plus the scene's fields under its root-to-tip Field Weight."""
        own_wind = Wind(values["wind_velocity"])
        weight = RootToTip(
            values["field_weight"],
            values["field_weight"] * values["field_weight_tip"],
            values["field_weight_shape"],
        )

        def air(fields: SceneFields) -> tuple[list, list]:
            wind, force = fields.weighted(weight)
            return [own_wind, *wind], force

        return air

    def _base_source(self, values: dict) -> BaseSource:
        """What drives the roots: the sampled motion as the strands feel it under Time Scale
        and Local Dynamics (paper eq. 19); the plain motion when both are at their defaults."""
        prepared = self.prepared
        time_scale, local_dynamics = float(values["time_scale"]), float(values["local_dynamics"])
        if time_scale == 1.0 and local_dynamics == 0.0:
            return prepared.trajectory
        if local_dynamics != 0.0 and prepared.reference is None:
            raise SceneInputError(
                f"object {prepared.drawn.object_name!r}: Local Dynamics is "
                f"{local_dynamics:g} but no Reference is set; pick the object (or armature "
                "bone) whose motion to take out, or set Local Dynamics to 0"
            )
        return ArtDirectedBase(prepared.trajectory, time_scale, local_dynamics, prepared.reference)

    def _obstacle_motion(self, time: float) -> ObstacleMotion:
        """The obstacles' poses and velocities at ``time`` (s from the start frame), with the
        deforming meshes' vertices."""
        obstacles = self._constraints.obstacles
        deformed = {index: vertices(time) for index, vertices in self.prepared.deforming.items()}
        return ObstacleMotion.from_base_motion(
            obstacles,
            self.prepared.obstacle_trajectory(time),
            {index: positions for index, (positions, _) in deformed.items()},
            {index: velocities for index, (_, velocities) in deformed.items()},
        )

    def cached_bytes(self) -> int:
        """Memory held by cached frames."""
        return sum(points.nbytes for points in self.frames.values())


def pose_trajectory(
    prepared: PreparedInput, layout: StrandLayout, model: Model
) -> PoseTrajectory | None:
    """The pose object's shape at every frame as target joint rotations, C² in time (None
    without a pose object). Its curves are resampled like the strands, curve ``i`` for strand
    ``i``, and posed on the bases as they are at that frame."""
    if prepared.pose_curves is None:
        return None
    rotations = []
    for index, curves in enumerate(prepared.pose_curves):
        if len(curves.polylines) != len(layout.specs):
            raise SceneInputError(
                f"object {prepared.drawn.object_name!r}: its Pose {curves.object_name!r} has "
                f"{len(curves.polylines)} curves, one per strand ({len(layout.specs)}) is needed"
            )
        points = np.concatenate(
            [
                resample_by_arc_length(polyline, count - 1)
                for polyline, count in zip(curves.polylines, layout.point_counts, strict=True)
            ]
        )
        rotations.append(pose_rotations(model, points, prepared.base_matrices[index]))
    times = np.arange(len(rotations)) / prepared.fps
    return PoseTrajectory(times, np.stack(rotations))


class PinnedTips:
    """Where strand tips pinned to an object go: each keeps the offset it had in the pin's frame
    at time 0, carried by the pin's rigid motion.

    Attributes
    ----------
    motion : BaseTrajectory
        The pin's world motion (one base), time 0 at the start frame.
    offsets : (n_tips, 3) float64, m, the pin's axes
        Each tip relative to the pin's origin at time 0.
    """

    def __init__(self, motion: BaseTrajectory, tips: np.ndarray) -> None:
        """Pin ``tips`` (n_tips, 3), world positions at time 0, to ``motion``."""
        start = motion(0.0)
        self.motion = motion
        self.offsets = (np.asarray(tips, dtype=np.float64) - start.position[0]) @ start.rotation[0]
        self._time: float | None = None
        self._pose: tuple[np.ndarray, np.ndarray] | None = None

    def targets(self, time: float) -> np.ndarray:
        """Every tip's target, world (n_tips, 3) m, at the time (s)."""
        rotation, position = self._pose_at(time)
        return self.offsets @ rotation.T + position

    def path(self, tip: int) -> Callable[[float], np.ndarray]:
        """Tip ``tip``'s target, world (3,) m, as a function of the time (s)."""
        offset = self.offsets[tip]

        def target(time: float) -> np.ndarray:
            rotation, position = self._pose_at(time)
            return rotation @ offset + position

        return target

    def _pose_at(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        # The constraint pass asks every tip's target at one time before the next: the pin's
        # spline is evaluated once per time, not once per strand.
        if time != self._time:
            motion = self.motion(time)
            self._time, self._pose = time, (motion.rotation[0], motion.position[0])
        return self._pose


def pin_tips(simulation: Simulation, pin: BaseTrajectory) -> PinnedTips:
    """Pin the tip of every strand of ``simulation`` (each drawn curve's, branches' too) to the
    motion ``pin`` with a point-to-path constraint on its last link, each keeping its offset in
    the pin's frame from the simulation's current state (its start); their targets."""
    model = simulation.model
    tips = PinnedTips(pin, simulation.points()[model.point_offsets[1:] - 1])
    for strand, link_count in enumerate(np.diff(model.link_offsets)):
        simulation.add_constraint(PointPath(strand, int(link_count) - 1, tips.path(strand)))
    return tips


@dataclass(frozen=True, eq=False)
class ConstraintInputs:
    """What a strand system's simulation is constrained by: the sampled obstacles on the model's
    backend, the joint limits and the constraint settings (all None: no constraint solver)."""

    obstacles: Obstacles | None = None
    joint_limits: JointLimits | None = None
    settings: ConstraintSettings | None = None


def constraint_inputs(prepared: PreparedInput, model: ModelSettings) -> ConstraintInputs:
    """The simulation's :class:`ConstraintInputs` from the sampled obstacles and the system's
    joint limits (None where there are none; without either, no constraint solver)."""
    shapes = prepared.obstacles.shapes
    obstacles = build_obstacles(shapes, model.backend, model.precision) if shapes else None
    limited = model.swing_limit < math.pi or model.twist_limit < math.pi
    joint_limits = (
        JointLimits(
            swing=model.swing_limit if model.swing_limit < math.pi else math.inf,
            twist_min=-model.twist_limit if model.twist_limit < math.pi else -math.inf,
            twist_max=model.twist_limit if model.twist_limit < math.pi else math.inf,
        )
        if limited
        else None
    )
    if obstacles is None and joint_limits is None:
        return ConstraintInputs()
    settings = ConstraintSettings(contact_iterations=model.contact_iterations)
    return ConstraintInputs(obstacles, joint_limits, settings)
