"""The package imports without Blender, from this checkout."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# A fresh interpreter per case: in this process other tests may already have imported bpy.
@pytest.mark.parametrize("module", ["oriented_strands", "oriented_strands.core"])
def test_import_leaves_bpy_out(module: str) -> None:
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(sorted(m for m in ('bpy', 'mathutils', 'bmesh') if m in sys.modules))\n"
    )
    # -P: only the installed package counts, not whatever the current folder holds.
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_package_is_this_checkout() -> None:
    import oriented_strands

    assert oriented_strands.__file__ is not None, "the repository root has no __init__.py"
    assert Path(oriented_strands.__file__).resolve() == REPO_ROOT / "__init__.py"
