"""Operators: thin translations of what the artist asks for into calls of ``scene``."""

from .strand_system import classes, register_preset_items

__all__ = ["classes", "register_preset_items"]
