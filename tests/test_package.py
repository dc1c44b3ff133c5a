"""The package imports without Blender, from this checkout."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# The Blender-free half of the adapter, every module of it: none may import Blender.
STRANDS_IO = sorted(
    f"oriented_strands.strands_io.{path.stem}"
    for path in (REPO_ROOT / "strands_io").glob("*.py")
    if path.stem != "__init__"
)


# A fresh interpreter per case: in this process other tests may already have imported bpy.
@pytest.mark.parametrize(
    "module",
    ["oriented_strands", "oriented_strands.core", "oriented_strands.strands_io", *STRANDS_IO],
)
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


def _engine_imports() -> dict[str, set[str]]:
    """Each module of ``core/`` with the ``core`` modules it imports (at any level, type-checking
    imports included)."""
    graph = {}
    for path in (REPO_ROOT / "core").glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    imported.add(node.module.split(".")[0])
                else:
                    imported.update(alias.name for alias in node.names)
        graph[path.stem] = imported
    return graph


def test_engine_modules_import_each_other_without_a_cycle() -> None:
    graph = _engine_imports()
    assert graph["simulation"] >= {"fields", "stepping", "workers"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
