"""What the artist sees: property groups (``properties``) and Physics-tab panels (``physics``)."""

from . import physics, properties

__all__ = ["physics", "properties"]
