"""The adapter between Blender and the engine: the only non-UI code that imports ``bpy``.

Reads curves, hair curves and the transforms that carry their roots into plain arrays, builds
the engine's model from them, runs the live preview (frame cache and handlers) and writes
simulated points to a generated preview object. Operators and panels call only what is
re-exported here.
"""

from . import handlers
from .errors import SceneInputError
from .inputs import STRAND_OBJECT_TYPES
from .strands import preset_names, preset_property_values
from .systems import (
    add_strand_systems,
    backend_items,
    backend_unavailable_reason,
    enabled_changed,
    free_cache,
    ignored_fields,
    input_changed,
    is_strand_system,
    parameters_changed,
    refresh,
    remove_strand_system,
    reset_to_rest,
    runtime,
    status,
)

__all__ = [
    "STRAND_OBJECT_TYPES",
    "SceneInputError",
    "add_strand_systems",
    "backend_items",
    "backend_unavailable_reason",
    "enabled_changed",
    "free_cache",
    "handlers",
    "ignored_fields",
    "input_changed",
    "is_strand_system",
    "preset_names",
    "preset_property_values",
    "parameters_changed",
    "refresh",
    "remove_strand_system",
    "reset_to_rest",
    "runtime",
    "status",
]
