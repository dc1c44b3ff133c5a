"""Engine tests run on every backend: NumPy, the strict CuPy stand-in, and CuPy where a GPU is."""

import pytest

from oriented_strands.core import Backend, available_backends, get_backend
from strict_xp import strict_xp

BACKENDS = ["numpy", "strict"] + (["cupy"] if available_backends()["cupy"] == "" else [])


@pytest.fixture(params=BACKENDS)
def backend(request) -> Backend:
    """Each engine test runs once per backend; ``strict`` refuses implicit host conversions."""
    if request.param == "strict":
        return Backend("strict", strict_xp, "float64")
    return get_backend(request.param)


@pytest.fixture
def blas_threads(monkeypatch):
    """Tell the process's BLAS to run ``threads`` threads (None: as it likes), as
    ``dynamics.single_threaded_blas`` reads it: LAPACK's dense solves with one thread, the
    block factorisation otherwise."""

    def told(threads: str | None) -> None:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            monkeypatch.delenv(name, raising=False)
        if threads is not None:
            monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)

    return told
