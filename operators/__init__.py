"""Operators: thin translations of what the artist asks for into calls of ``scene``."""

from . import bake, strand_system
from .strand_system import register_preset_items

classes = strand_system.classes + bake.classes

__all__ = ["classes", "register_preset_items"]
