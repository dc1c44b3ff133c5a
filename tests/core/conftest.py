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
