"""Errors of the adapter between Blender and the engine.

They derive from the engine's :class:`StrandError`, so an operator reports engine and adapter
problems through one ``except StrandError`` and nothing else is caught by accident.
"""

from ..core import StrandError


class SceneInputError(StrandError):
    """Blender data that cannot become strands; the message names the object and the spline."""
