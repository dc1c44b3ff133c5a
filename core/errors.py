"""Typed errors of the engine.

The Blender layer turns every one of these into an operator report; nothing here is swallowed.
"""


class StrandError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidInputError(StrandError, ValueError):
    """An argument has the wrong shape, type or value; the message names it and the expectation."""


class InvalidStrandError(InvalidInputError):
    """A strand cannot be built: the message names the strand (index and name) and the fault."""


class BackendUnavailableError(StrandError, RuntimeError):
    """The requested array backend (e.g. CuPy on a machine without an NVIDIA GPU) cannot be used."""


class SimulationDivergedError(StrandError, FloatingPointError):
    """A step produced non-finite values, or its Newton iteration did not converge even with the
    step subdivided to the limit; the message names the strand affected."""


class WorkerError(StrandError, RuntimeError):
    """A worker process (:mod:`.workers`) could not start, or exited while stepping its trees."""
