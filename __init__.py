"""Oriented Strands for Blender: hair, braids, tails and foliage as articulated strands.

The engine (``core``) is a plain Python library and is importable without Blender; this file
imports nothing from Blender until Blender calls :func:`register`, so ``import oriented_strands``
works in any interpreter. Every import inside the package is relative: Blender loads the
extension as ``bl_ext.<repository>.oriented_strands``.
"""


def _pointer_properties() -> dict:
    import bpy

    from .panels import properties

    return {
        "oriented_strands": bpy.props.PointerProperty(
            type=properties.StrandSystemProperties, name="Oriented Strands"
        ),
        "oriented_strands_obstacle": bpy.props.PointerProperty(
            type=properties.StrandObstacleProperties, name="Strand Obstacle"
        ),
        "oriented_strands_bake": bpy.props.PointerProperty(
            type=properties.StrandBakeProperties, name="Strand Bake"
        ),
    }


def register() -> None:
    """Register classes, the object properties and the live-preview handlers."""
    import bpy

    from . import operators, panels, scene

    for cls in panels.properties.classes:
        bpy.utils.register_class(cls)
    for name, prop in _pointer_properties().items():
        setattr(bpy.types.Object, name, prop)
    for cls in panels.physics.classes + operators.classes:
        bpy.utils.register_class(cls)
    operators.register_preset_items()
    scene.handlers.register()


def unregister() -> None:
    """Undo :func:`register` in reverse order."""
    import bpy

    from . import operators, panels, scene

    scene.handlers.unregister()
    for cls in reversed(panels.physics.classes + operators.classes):
        bpy.utils.unregister_class(cls)
    for name in _pointer_properties():
        delattr(bpy.types.Object, name)
    for cls in reversed(panels.properties.classes):
        bpy.utils.unregister_class(cls)
