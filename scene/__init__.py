"""The adapter between Blender and the engine: the only non-UI code that imports ``bpy``.

Reads curves, hair curves and the transforms that carry their roots into plain arrays, builds
the engine's model from them, runs the live preview (frame cache and handlers), writes
simulated points to a generated preview object, and bakes them to shape keys, bones, hair-curve
caches and Alembic. Operators and panels call only what is re-exported here.
"""

from . import handlers
from .alembic import export_alembic
from .bake import BakeJob, bake_systems
from .bake_outputs import (
    BAKE_TARGET_ITEMS,
    baked_objects,
    free_bake,
    gather_hair_caches,
    missing_cache,
)
from .errors import SceneInputError
from .inputs import STRAND_OBJECT_TYPES
from .strands import preset_names, preset_property_values
from .systems import (
    add_child_hair,
    add_strand_systems,
    backend_items,
    backend_unavailable_reason,
    enabled_changed,
    free_cache,
    ignored_fields,
    input_changed,
    is_strand_system,
    obstacle_names,
    obstacles_setting_changed,
    parameters_changed,
    refresh,
    remove_strand_system,
    reset_to_rest,
    runtime,
    settings_changed_together,
    status,
)

__all__ = [
    "BAKE_TARGET_ITEMS",
    "BakeJob",
    "STRAND_OBJECT_TYPES",
    "SceneInputError",
    "add_child_hair",
    "add_strand_systems",
    "backend_items",
    "bake_systems",
    "baked_objects",
    "backend_unavailable_reason",
    "enabled_changed",
    "export_alembic",
    "free_bake",
    "free_cache",
    "gather_hair_caches",
    "handlers",
    "ignored_fields",
    "input_changed",
    "is_strand_system",
    "missing_cache",
    "obstacle_names",
    "obstacles_setting_changed",
    "preset_names",
    "preset_property_values",
    "parameters_changed",
    "refresh",
    "remove_strand_system",
    "reset_to_rest",
    "runtime",
    "settings_changed_together",
    "status",
]
