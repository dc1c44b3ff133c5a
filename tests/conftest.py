"""Session set-up shared by every test folder.

Blender as a module reads ``BLENDER_USER_RESOURCES`` once, when ``bpy`` is first imported, and
keeps its configuration, scripts and user extension repository there. pytest imports this file
before any test module or lower conftest, so setting the variable here, at import time, sends
every later ``import bpy`` of the session to a throw-away folder and never to the developer's
home.
"""

import atexit
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

_user_resources = tempfile.mkdtemp(prefix="oriented-strands-blender-user-")
os.environ["BLENDER_USER_RESOURCES"] = _user_resources
# Registered before bpy is imported, so it runs after bpy's own exit handlers (atexit is LIFO).
atexit.register(shutil.rmtree, _user_resources, ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse the layouts that break pytest's "prepend" imports (see pyproject.toml).

    An ``__init__.py`` under tests/ would make pytest import tests as part of the repository-root
    package; two helper modules with one name in two folders would make one of them shadow the
    other silently when tests/core and tests/blender run in one session.
    """
    tests_dir = Path(__file__).parent
    modules = [p for p in tests_dir.rglob("*.py") if p.name != "conftest.py"]
    packages = [str(p) for p in modules if p.name == "__init__.py"]
    if packages:
        raise pytest.UsageError(f"tests/ must not contain packages: {packages}")
    clashes = [name for name, n in Counter(p.name for p in modules).items() if n > 1]
    if clashes:
        raise pytest.UsageError(f"module names used twice under tests/: {clashes}")
