"""The extension zip installs into Blender, works, and leaves nothing behind when removed.

Built by the project's own command (``tools/build_extension.py``, i.e. ``make build``, Blender's
builder), installed into the user repository of the throw-away Blender configuration that
tests/conftest.py set up. This test does not use the ``extension`` fixture: the installed copy
registers itself, under Blender's module name for it.
"""

import importlib
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import addon_utils  # noqa: E402

from scene_builders import add_strand_system, poly_curve, preview_points  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ID = "oriented_strands"
MODULE = f"bl_ext.user_default.{PACKAGE_ID}"


def _registered() -> dict:
    """What an extension can leave registered in Blender."""
    handlers = bpy.app.handlers
    return {
        "object properties": sorted(p.identifier for p in bpy.types.Object.bl_rna.properties),
        "scene properties": sorted(p.identifier for p in bpy.types.Scene.bl_rna.properties),
        "handlers": {
            name: [f"{h.__module__}.{h.__name__}" for h in getattr(handlers, name)]
            for name in dir(handlers)
            if isinstance(getattr(handlers, name), list)
        },
        "types": sorted(dir(bpy.types)),
        "operators": sorted(dir(bpy.ops.oriented_strands)),
        "add-ons": sorted(addon.module for addon in bpy.context.preferences.addons),
    }


def _build(output_dir: Path) -> Path:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tools" / "build_extension.py"),
            "--output-dir",
            str(output_dir),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (zip_path,) = output_dir.glob("*.zip")
    return zip_path


def _user_repository():
    repos = bpy.context.preferences.extensions.repos
    index = next(i for i, repo in enumerate(repos) if repo.module == "user_default")
    return index, Path(repos[index].directory)


def _worker_processes_import_the_installed_engine() -> None:
    """Worker processes find the engine under Blender's name for it, in a package Blender made
    up in memory (``bl_ext.user_default``), and step as this process does."""
    core = importlib.import_module(f"{MODULE}.core")
    strands = [
        core.StrandSpec(
            np.array([(0.1 * k, 0.0, 0.0), (0.1 * k, 0.0, -0.1), (0.1 * k, 0.05, -0.2)])
        )
        for k in range(3)
    ]
    model = core.build_model(strands, core.StrandParameters())
    base = core.BaseMotion.still(np.eye(4)[None])
    points = []
    for workers in (1, 2):
        simulation = core.Simulation(model, core.SolverSettings(workers=workers))
        assert simulation.processes == workers
        simulation.advance(1 / 24, base)
        simulation.close()
        points.append(simulation.points())
    np.testing.assert_allclose(points[1], points[0], rtol=0, atol=1e-12)
    assert not np.allclose(points[0], model.rest_points)


def test_zip_installs_runs_and_uninstalls_without_leaks(tmp_path, factory_scene):
    zip_path = _build(tmp_path)
    names = zipfile.ZipFile(zip_path).namelist()
    assert {
        "blender_manifest.toml",
        "__init__.py",
        "core/__init__.py",
        "scene/__init__.py",
        "operators/__init__.py",
        "panels/__init__.py",
    } <= set(names)
    for left_out in ("tests/", "docs/", "bench/", "tools/", ".venv/", "dist/", "Makefile"):
        assert not any(name.startswith(left_out) for name in names), left_out

    before = _registered()
    result = bpy.ops.extensions.package_install_files(
        repo="user_default", filepath=str(zip_path), enable_on_install=True
    )
    assert result == {"FINISHED"}
    repo_index, repo_dir = _user_repository()
    try:
        assert MODULE in {addon.module for addon in bpy.context.preferences.addons}
        assert (repo_dir / PACKAGE_ID / "blender_manifest.toml").exists()

        factory_scene.frame_end = 10
        ob = poly_curve("strand", [[(0, 0, 0), (0.2, 0, 0)]])
        assert add_strand_system(ob) == {"FINISHED"}
        rest = preview_points(ob)
        factory_scene.frame_set(5)
        assert not (preview_points(ob) == rest).all(), "the installed extension did not simulate"
        _worker_processes_import_the_installed_engine()
    finally:
        addon_utils.disable(MODULE, default_set=True)
        after_disable = _registered()
        bpy.ops.extensions.package_uninstall(repo_index=repo_index, pkg_id=PACKAGE_ID)

    assert after_disable == before
    assert _registered() == before
    assert not (repo_dir / PACKAGE_ID).exists()
