"""Checks of the values the public API is given, one of each kind for every module.

Each check either returns the value in the form the engine uses (a float, an int, a float64
array) or raises :class:`~.errors.InvalidInputError` with a message that names the argument
(``name``, as the caller spells it: ``"Sphere radius"``, ``"StrandInteraction.friction"``).
Nothing else escapes: a string, a complex number, a bool or an object that cannot be converted
is refused like a NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import InvalidInputError


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (a Python or NumPy int or float; not a bool, a string
    or a complex)."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def is_whole(value: Any) -> bool:
    """Whether ``value`` is a whole number (a Python or NumPy integer, not a bool)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def finite_number(name: str, value: Any) -> float:
    """``value`` as a float: a real number, finite."""
    if not is_real(value):
        raise InvalidInputError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidInputError(f"{name} must be finite, got {value}")
    return float(value)


def positive_number(name: str, value: Any) -> float:
    """``value`` as a float: a real number, finite and above zero."""
    if not (is_real(value) and math.isfinite(value) and value > 0.0):
        raise InvalidInputError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


def positive_whole(name: str, value: Any) -> int:
    """``value`` as an int: a whole number of at least one."""
    if not is_whole(value) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 copy of any shape: real numbers (ints or floats, not bools,
    complex numbers, strings or objects), not checked for finiteness."""
    try:
        array = np.array(value)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{name} must be an array of numbers: {error}") from None
    if array.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must be real numbers, got {value!r}")
    return array.astype(np.float64)


def array_above(name: str, value: Any, minimum: float = 0.0, inclusive: bool = False) -> np.ndarray:
    """``value`` as a float64 copy of any shape: real numbers, finite, above ``minimum`` (at or
    above if ``inclusive``)."""
    array = real_array(name, value)
    if not np.isfinite(array).all():
        raise InvalidInputError(f"{name} must be finite, got {value!r}")
    bad = array < minimum if inclusive else array <= minimum
    if bad.any():
        relation = ">=" if inclusive else ">"
        raise InvalidInputError(
            f"{name} must be {relation} {minimum}, got {array[bad].flat[0]!r}"
            + (f" (at index {tuple(int(i) for i in np.argwhere(bad)[0])})" if array.ndim else "")
        )
    return array


def finite_array(name: str, value: Any, shape: tuple[int | str | None, ...]) -> np.ndarray:
    """``value`` as a float64 copy of ``shape``, finite. An entry of ``shape`` that is not an
    int is any length: ``None`` is shown as ``n`` in the message, a string as itself
    (``"n_links"``)."""
    array = real_array(name, value)
    expected = "(" + ", ".join("n" if d is None else str(d) for d in shape) + ")"
    mismatch = array.ndim != len(shape) or any(
        isinstance(d, int) and d != a for d, a in zip(shape, array.shape, strict=True)
    )
    if mismatch:
        raise InvalidInputError(f"{name} must have shape {expected}, got {array.shape}")
    if not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise InvalidInputError(f"{name} must be finite, got {array[index]} at index {index}")
    return array


def vector3(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array of three finite numbers."""
    try:
        vector = real_array(name, value)
    except InvalidInputError:
        raise InvalidInputError(f"{name} must be 3 finite numbers, got {value!r}") from None
    if vector.shape != (3,) or not np.isfinite(vector).all():
        raise InvalidInputError(f"{name} must be 3 finite numbers, got {value!r}")
    return vector
