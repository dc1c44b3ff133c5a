"""Oriented Strands engine: implicit reduced-coordinate strand dynamics on NumPy or CuPy.

Never imports Blender. See ``docs/scripting.md`` for the public API and ``docs/physics.md`` for
the formulation.
"""

from .backend import Backend, available_backends, get_backend
from .base_motion import BaseMotion, BaseTrajectory
from .errors import (
    BackendUnavailableError,
    InvalidInputError,
    InvalidStrandError,
    SimulationDivergedError,
    StrandError,
)
from .integrators import SolverSettings, StepStats
from .model import Model, StrandParameters, StrandSpec, build_model
from .simulation import Simulation

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "BaseMotion",
    "BaseTrajectory",
    "InvalidInputError",
    "InvalidStrandError",
    "Model",
    "SimulationDivergedError",
    "SolverSettings",
    "StepStats",
    "Simulation",
    "StrandError",
    "StrandParameters",
    "StrandSpec",
    "available_backends",
    "build_model",
    "get_backend",
]
