"""Fixtures of the scene tests: a factory scene per test, the extension from the source tree.

``bpy`` is imported inside fixtures: the engine's venv has no Blender, and each test module
skips itself there with ``pytest.importorskip("bpy")``. ``BLENDER_USER_RESOURCES`` points at a
throw-away folder (tests/conftest.py) before anything imports ``bpy``.
"""

import pytest


@pytest.fixture(autouse=True)
def factory_scene():
    """An empty factory-settings scene, the way every test starts."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    return bpy.context.scene


@pytest.fixture
def extension(factory_scene):
    """The extension registered from this checkout (``import oriented_strands``), removed after."""
    import oriented_strands

    oriented_strands.register()
    yield oriented_strands
    oriented_strands.unregister()
