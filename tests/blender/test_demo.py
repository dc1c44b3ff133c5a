"""`make demo` end to end, at a reduced size."""

import numpy as np
import pytest

pytest.importorskip("bpy")


def test_demo_simulates_saves_and_renders(tmp_path, capsys):
    from oriented_strands import demo

    assert demo.main(["--output", str(tmp_path), "--small"]) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path / "demo.blend") in printed
    assert (tmp_path / "demo.blend").stat().st_size > 0
    for frame in (1, 12, 24):
        assert (tmp_path / f"preview_{frame:04d}.png").stat().st_size > 0
    with np.load(tmp_path / "strands.npz") as caches:
        assert set(caches.files) == {"Ponytail", "Tree"}
        for name in caches.files:
            frames = caches[name]
            assert frames.shape[0] == 24
            assert np.isfinite(frames).all()
            # The ponytail swings with the head and the tree bends in the wind.
            assert np.abs(frames - frames[0]).max() > 0.05
