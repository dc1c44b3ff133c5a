"""`make demo` end to end, at a reduced size."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("alembic3d")

from alembic_samples import read_positions  # noqa: E402

FRAMES = 24
SYSTEMS = {"Hair", "Ponytail", "Tree"}
# The face, in the head's space (about its centre, m; the face looks along -y): in front of the
# cheekbones, no wider than them, from the chin up to the brows. Above the brows the hair grows
# from the hairline, on the 10 cm scalp.
FACE_PLANE = -0.06
FACE_HALF_WIDTH = 0.06
CHIN, BROW = -0.12, 0.0
SCALP_FRONT = -0.1


def _hiding_face(points: np.ndarray) -> np.ndarray:
    """Which of ``points`` (..., 3), in the head's space, hide the face from the front: in
    front of it, or hanging forward, more than 15 mm in front of the scalp, over the brows."""
    x, y, z = np.moveaxis(points, -1, 0)
    on_face = (y < FACE_PLANE) & (np.abs(x) < FACE_HALF_WIDTH) & (z < BROW)
    over_brows = (y < SCALP_FRONT - 0.015) & (np.abs(x) < -SCALP_FRONT) & (z >= BROW)
    return (on_face | over_brows) & (z > CHIN)


def test_demo_simulates_bakes_exports_saves_and_renders(tmp_path, capsys):
    from oriented_strands import demo

    assert demo.main(["--output", str(tmp_path), "--quick"]) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path / "demo.blend") in printed
    assert (tmp_path / "demo.blend").stat().st_size > 0
    for frame in (1, FRAMES // 2, FRAMES):
        assert (tmp_path / f"shot_{frame:04d}.png").stat().st_size > 0
    assert (tmp_path / "shot.mp4").stat().st_size > 0
    with np.load(tmp_path / "strands.npz") as caches:
        caches_npz = {name: caches[name] for name in caches.files}
    assert set(caches_npz) == SYSTEMS
    for frames in caches_npz.values():
        assert frames.shape[0] == FRAMES
        assert np.isfinite(frames).all()
    # The ponytail swings as the head starts turning and nodding (after half a second), and the
    # tree bends in the gusts.
    for name in ("Ponytail", "Tree"):
        assert np.abs(caches_npz[name] - caches_npz[name][0]).max() > 0.05

    for name in ("Hair", "Ponytail"):
        cache = np.load(tmp_path / "strands_cache" / f"{name}.npy")
        np.testing.assert_allclose(cache, caches_npz[name], atol=1e-6)
    hair_abc = read_positions(str(tmp_path / "hair.abc"))
    keys = read_positions(str(tmp_path / "shape_keys.abc"))
    for name in ("Hair", "Ponytail"):
        np.testing.assert_allclose(hair_abc[f"{name}_baked_hair"][1], caches_npz[name], atol=1e-5)
        np.testing.assert_allclose(keys[f"{name}_shape_keys"][1], caches_npz[name], atol=1e-5)
    assert f"alembic        {tmp_path / 'hair.abc'}" in printed

    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "demo.blend"))
    # The hair lies on the turning 10 cm scalp, not in it; swept back, it stays off the face
    # through the head's turns and nods.
    hair = caches_npz["Hair"].reshape(FRAMES, -1, demo.QUICK.guide_points, 3)
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        scalp = np.array(bpy.data.objects["Scalp"].matrix_world)
        assert np.linalg.norm(hair[frame - 1, :, 2:] - scalp[:3, 3], axis=-1).min() > 0.1
        in_head = (hair[frame - 1] - scalp[:3, 3]) @ scalp[:3, :3]
        hiding = np.nonzero(_hiding_face(in_head).any(axis=1))[0]
        assert hiding.size == 0, f"frame {frame}: guides {hiding} in front of the face"
    # Every trunk, bough, branch and twig is baked to six bones.
    assert len(bpy.data.objects["Tree_rig"].data.bones) == len(demo._tree_curves()) * 6
    assert bpy.data.objects["Hair_baked_hair"].type == "CURVES"
    assert len(bpy.data.objects["Ponytail_shape_keys"].data.shape_keys.key_blocks) == 1 + FRAMES
    children = bpy.data.objects["Hair_children"]
    bpy.context.scene.frame_set(FRAMES)
    grown = children.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    assert len(grown.curves) > 3 * 60
