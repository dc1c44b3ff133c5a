"""Array backends: NumPy everywhere, CuPy on an NVIDIA GPU.

The engine never imports an array library globally for state data: every array it touches is
created through ``backend.xp`` of the model it belongs to, and host transfers happen only through
:meth:`Backend.to_host` and :meth:`Backend.from_host`, at the boundaries of a step.
CuPy is imported lazily, only when asked for.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .errors import BackendUnavailableError, InvalidInputError

DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Backend:
    """An array module and a floating-point type.

    Attributes
    ----------
    name : str
        ``"numpy"``, ``"cupy"``, or the name of a stand-in used by the tests.
    xp : module
        The array namespace (``numpy``, ``cupy``, or a NumPy-compatible stand-in).
    dtype : str
        ``"float64"`` (default) or ``"float32"``.
    """

    name: str
    xp: ModuleType
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidInputError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")

    def __reduce__(self) -> tuple:
        # By name: a model sent to a worker process (:mod:`.workers`) finds the array module
        # there; a stand-in backend of the tests has no name to be found by.
        return get_backend, (self.name, self.dtype)

    @property
    def float(self) -> Any:
        """The floating-point type of the backend's arrays, e.g. ``xp.float64``."""
        return getattr(self.xp, self.dtype)

    def from_host(self, values: Any, dtype: Any = None) -> Any:
        """Copy host data (NumPy arrays, lists, scalars) onto the backend; floats get ``dtype``.

        Always a copy, also on the NumPy backend, so device arrays never alias caller data.
        """
        host = np.asarray(values)
        if dtype is None:
            dtype = self.dtype if host.dtype.kind == "f" else host.dtype
        return self.xp.asarray(np.array(host, dtype=dtype, order="C", copy=True))

    def to_host(self, array: Any) -> np.ndarray:
        """Copy a backend array to a host NumPy array: the one explicit device-to-host transfer."""
        asnumpy = getattr(self.xp, "asnumpy", None)
        if asnumpy is not None:
            return asnumpy(array)
        return np.array(array, copy=True)


def _cupy_or_reason() -> tuple[ModuleType | None, str]:
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as error:
        return None, f"CuPy is not installed ({error}); install cupy-cuda12x or cupy-cuda13x"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return None, f"CuPy cannot reach a CUDA device: {error}"
    if count < 1:
        return None, "CuPy is installed but no CUDA device is present"
    return cupy, ""


def available_backends() -> dict[str, str]:
    """Which backends this machine can run, each with ``""`` or the reason it cannot."""
    _, cupy_reason = _cupy_or_reason()
    return {"numpy": "", "cupy": cupy_reason}


def get_backend(name: str | Backend = "numpy", dtype: str = "float64") -> Backend:
    """The backend called ``name``; :class:`BackendUnavailableError` if it cannot run here."""
    if isinstance(name, Backend):
        return name
    if name == "numpy":
        return Backend("numpy", np, dtype)
    if name == "cupy":
        cupy, reason = _cupy_or_reason()
        if cupy is None:
            raise BackendUnavailableError(f"backend 'cupy' is unavailable: {reason}")
        return Backend("cupy", cupy, dtype)
    raise InvalidInputError(f"unknown backend {name!r}; expected 'numpy' or 'cupy'")
