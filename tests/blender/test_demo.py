"""`make demo` end to end, at a reduced size."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("alembic3d")

from alembic_samples import read_positions  # noqa: E402


def test_demo_simulates_bakes_exports_saves_and_renders(tmp_path, capsys):
    from oriented_strands import demo

    assert demo.main(["--output", str(tmp_path), "--small"]) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path / "demo.blend") in printed
    assert (tmp_path / "demo.blend").stat().st_size > 0
    for frame in (1, 12, 24):
        assert (tmp_path / f"preview_{frame:04d}.png").stat().st_size > 0
    with np.load(tmp_path / "strands.npz") as caches:
        caches_npz = {name: caches[name] for name in caches.files}
        assert set(caches.files) == {"Ponytail", "Tree"}
        for name in caches.files:
            frames = caches[name]
            assert frames.shape[0] == 24
            assert np.isfinite(frames).all()
            # The ponytail swings with the head and the tree bends in the wind.
            assert np.abs(frames - frames[0]).max() > 0.05
        # The ponytail collides with the head, a 10 cm ball at (0, 0, 1.6) m, 4 mm thick.
        head_distance = np.linalg.norm(caches["Ponytail"] - (0.0, 0.0, 1.6), axis=2)
        assert head_distance.min() > 0.1 + 0.9 * 0.004

    for name in ("Ponytail", "Tree"):
        cache = np.load(tmp_path / "strands_cache" / f"{name}.npy")
        np.testing.assert_array_equal(cache, caches_npz[name])
    hair = read_positions(str(tmp_path / "hair.abc"))
    keys = read_positions(str(tmp_path / "shape_keys.abc"))
    for name in ("Ponytail", "Tree"):
        assert hair[f"{name}_baked_hair"][1].shape[0] == 24
        np.testing.assert_allclose(keys[f"{name}_shape_keys"][1], caches_npz[name], atol=1e-5)
    assert f"alembic        {tmp_path / 'hair.abc'}" in printed

    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "demo.blend"))
    assert len(bpy.data.objects["Tree_rig"].data.bones) == 4 * 6
    assert bpy.data.objects["Ponytail_baked_hair"].type == "CURVES"
    assert len(bpy.data.objects["Ponytail_shape_keys"].data.shape_keys.key_blocks) == 1 + 24
