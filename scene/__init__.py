"""The Blender side of the adapter: with the UI, the only code that imports ``bpy``.

Reads curves, hair curves, the transforms that carry their roots, force fields, obstacles and
settings from the evaluated scene into the plain records of ``strands_io``; runs the live
preview (handlers that ask a ``strands_io`` runtime for a frame, and a generated preview object
that shows its points); and bakes them to shape keys, bones, hair-curve caches and Alembic.
What happens in between (conversion to strands, parameter mapping, the frame cache) is
``strands_io``'s, which imports no Blender. Operators and panels call what is re-exported here,
and ``strands_io`` for what needs no scene (the material presets).
"""

from . import handlers
from .alembic import export_alembic
from .bake import BakeJob, bake_systems
from .bake_outputs import (
    BAKE_TARGET_ITEMS,
    baked_objects,
    cache_problem,
    free_bake,
    gather_hair_caches,
)
from .inputs import STRAND_OBJECT_TYPES
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
    "cache_problem",
    "obstacle_names",
    "obstacles_setting_changed",
    "parameters_changed",
    "refresh",
    "remove_strand_system",
    "reset_to_rest",
    "runtime",
    "settings_changed_together",
    "status",
]
