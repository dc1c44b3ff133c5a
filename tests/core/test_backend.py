"""Backend selection, precision and the strict stand-in that keeps the GPU path honest."""

import ctypes

import numpy as np
import pytest

from oriented_strands.core import (
    BackendUnavailableError,
    BaseMotion,
    InvalidInputError,
    Simulation,
    StrandSpec,
    available_backends,
    build_model,
    get_backend,
)
from strands import polyline


def test_unknown_backend_and_dtype_are_refused():
    with pytest.raises(InvalidInputError, match="unknown backend 'metal'"):
        get_backend("metal")
    with pytest.raises(InvalidInputError, match="dtype"):
        get_backend("numpy", "float16")


def test_the_engine_leaves_its_host_process_settings_alone(monkeypatch):
    """The engine runs inside the user's Blender: stepping there loads no C library to change
    process-wide settings (the allocator's thresholds are set in worker processes only)."""
    loaded = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *args, **kwargs: loaded.append(args))
    model = build_model([StrandSpec(polyline(6, 0.3))], backend=get_backend("numpy"))
    sim = Simulation(model)
    sim.advance(1 / 24, BaseMotion.still(np.eye(4)[None]))
    assert sim.processes == 1
    assert loaded == []


@pytest.mark.skipif(available_backends()["cupy"] == "", reason="this machine can run CuPy")
def test_cupy_without_a_gpu_says_why():
    reason = available_backends()["cupy"]
    assert reason
    with pytest.raises(BackendUnavailableError, match="backend 'cupy' is unavailable"):
        get_backend("cupy")


def test_float32_follows_float64(backend):
    points = polyline(12, 0.3, direction=(1.0, 0.0, -0.5))
    still = BaseMotion.still(np.eye(4)[None])
    results = []
    for dtype in ("float64", "float32"):
        sim = Simulation(
            build_model(
                [StrandSpec(points)], backend=type(backend)(backend.name, backend.xp, dtype)
            )
        )
        for _ in range(24):
            sim.advance(1 / 24, still)
        results.append(sim.points())
    assert np.abs(results[0] - results[1]).max() < 1e-4 * 0.3
    assert np.abs(results[0] - points).max() > 1e-3  # it did sag
