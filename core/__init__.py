"""Oriented Strands engine: implicit reduced-coordinate strand dynamics on NumPy or CuPy.

Never imports Blender. See ``docs/scripting.md`` for the public API and ``docs/physics.md`` for
the formulation.
"""

from .art_direction import ArtDirectedBase, art_directed_motion
from .backend import Backend, available_backends, get_backend
from .base_motion import BaseMotion, BaseTrajectory
from .constraints import ConstraintSettings, ConstraintStats
from .errors import (
    BackendUnavailableError,
    InvalidInputError,
    InvalidStrandError,
    SimulationDivergedError,
    StrandError,
    WorkerError,
)
from .fields import (
    Falloff,
    ForceFields,
    PointField,
    RootToTip,
    Turbulence,
    VortexField,
    Wind,
)
from .integrators import Fallback, SolverSettings, StepStats
from .interaction import InteractionStats, StrandInteraction
from .lcp import solve_lcp
from .model import Model, StrandParameters, StrandSpec, build_model
from .obstacles import (
    Capsule,
    Material,
    ObstacleMotion,
    Placement,
    Plane,
    Sphere,
    TriangleMesh,
    VertexTrajectory,
    build_obstacles,
    find_contacts,
    place,
)
from .pose import Pose, PoseTrajectory, pose_rotations
from .presets import PRESETS, MaterialPreset
from .rest_shape import ZeroGravityRestShape, zero_gravity_model
from .rows import JointLimits, JointRotation, PointPath
from .simulation import Simulation, apply_fields

__all__ = [
    "ArtDirectedBase",
    "Backend",
    "BackendUnavailableError",
    "BaseMotion",
    "BaseTrajectory",
    "Capsule",
    "ConstraintSettings",
    "ConstraintStats",
    "Fallback",
    "Falloff",
    "ForceFields",
    "InteractionStats",
    "InvalidInputError",
    "InvalidStrandError",
    "JointLimits",
    "JointRotation",
    "Material",
    "MaterialPreset",
    "Model",
    "ObstacleMotion",
    "PRESETS",
    "Placement",
    "Plane",
    "PointField",
    "Pose",
    "PoseTrajectory",
    "PointPath",
    "RootToTip",
    "Simulation",
    "SimulationDivergedError",
    "SolverSettings",
    "Sphere",
    "StepStats",
    "StrandError",
    "StrandInteraction",
    "StrandParameters",
    "StrandSpec",
    "TriangleMesh",
    "VertexTrajectory",
    "Turbulence",
    "VortexField",
    "Wind",
    "WorkerError",
    "ZeroGravityRestShape",
    "apply_fields",
    "art_directed_motion",
    "available_backends",
    "build_model",
    "build_obstacles",
    "find_contacts",
    "get_backend",
    "place",
    "pose_rotations",
    "solve_lcp",
    "zero_gravity_model",
]
