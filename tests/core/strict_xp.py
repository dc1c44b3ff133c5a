"""A strict CPU stand-in for CuPy, so that the engine's GPU code path stays honest without a GPU.

``strict_xp`` is used like the ``numpy`` module (``strict_xp.zeros``, ``strict_xp.einsum``,
``strict_xp.linalg.norm``, ``strict_xp.add.at``, ``strict_xp.float64`` …) but its arrays are
:class:`StrictArray` objects that, like ``cupy.ndarray``, never turn into host data by accident:

- ``numpy.asarray(a)`` / ``numpy.array(a)`` raise ``TypeError`` (CuPy: ``__array__`` raises).
- Mixing a ``StrictArray`` with a ``numpy.ndarray`` in any operation, function, index or
  assignment raises ``TypeError`` (CuPy refuses cupy/numpy mixes). Python scalars, NumPy scalars
  and Python lists of numbers are fine, as in CuPy.
- Stricter than CuPy, which would quietly synchronise and copy to the host: ``float(a)``,
  ``int(a)``, ``bool(a)`` (hence ``if a:``), ``operator.index(a)``, ``a.item()``, ``a.tolist()``
  and iteration (``for x in a``, ``x, y = a``) raise ``TypeError``. ``len(a)``, ``a.shape``,
  ``repr(a)`` and formatting are fine.

Host transfers are explicit, as in CuPy: ``strict_xp.asarray(host)`` / ``strict_xp.array(host)``
copy host data in, ``strict_xp.asnumpy(a)`` copies it out (``Backend.to_host`` calls it).

Everything is generic: NumPy's ``__array_ufunc__`` and ``__array_function__`` protocols route
operators, ufuncs and NumPy functions through one unwrap/compute/wrap step, and the namespace
wraps whatever attribute of ``numpy`` it is asked for (functions, ufuncs, submodules such as
``linalg``), so nothing is listed by hand except the refusals.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

# Creation functions that accept host data: the explicit host-to-device transfers.
_TRANSFERS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
# ndarray attributes that would hand out host data or Python scalars.
_REFUSED_ATTRIBUTES = frozenset(
    {"item", "tolist", "tobytes", "tofile", "dump", "dumps", "data", "ctypes", "base", "flat"}
)


def _refuse(what: str) -> TypeError:
    return TypeError(
        f"StrictArray refuses {what}: device arrays never become host data implicitly "
        "(use strict_xp.asnumpy(a) to copy to the host, as cupy.asnumpy)"
    )


def _unwrap(value: Any, host_allowed: bool = False) -> Any:
    """The NumPy data inside ``value`` (recursing into lists and tuples); refuse host arrays."""
    if isinstance(value, StrictArray):
        return value._data
    if isinstance(value, np.ndarray):
        if host_allowed:
            return value.copy()  # a device array never aliases host memory
        raise TypeError(
            "StrictArray cannot be mixed with a numpy.ndarray (CuPy refuses this too); move host "
            "data explicitly with strict_xp.asarray(...)"
        )
    if isinstance(value, list | tuple):
        items = [_unwrap(item, host_allowed) for item in value]
        return type(value)(items) if type(value) in (list, tuple) else type(value)(*items)
    if isinstance(value, dict):
        return {key: _unwrap(item, host_allowed) for key, item in value.items()}
    return value


def _wrap(value: Any) -> Any:
    """``value`` with every NumPy array or scalar result turned into a StrictArray."""
    if isinstance(value, np.ndarray | np.generic):
        return StrictArray(np.asarray(value))
    if isinstance(value, list | tuple):
        items = [_wrap(item) for item in value]
        return type(value)(items) if type(value) in (list, tuple) else type(value)(*items)
    return value


class StrictArray(np.lib.mixins.NDArrayOperatorsMixin):
    """A NumPy array on the "device": all of NumPy's computation, none of its implicit exits.

    Arithmetic, comparison and in-place operators come from ``NDArrayOperatorsMixin`` (through
    ``__array_ufunc__``); other ndarray attributes (``shape``, ``T``, ``astype``, ``copy``,
    ``reshape``, ``sum`` …) are forwarded and their array results wrapped.
    """

    __slots__ = ("_data",)

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    # --- the refusals ------------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise _refuse("conversion to a numpy.ndarray")

    def __float__(self) -> float:
        raise _refuse("float()")

    def __int__(self) -> int:
        raise _refuse("int()")

    def __complex__(self) -> complex:
        raise _refuse("complex()")

    def __bool__(self) -> bool:
        raise _refuse("bool() (an `if` or `and` on an array)")

    def __index__(self) -> int:
        raise _refuse("use as a Python integer (operator.index)")

    def __iter__(self) -> Any:
        raise _refuse("iteration (index it instead)")

    # --- NumPy protocols ---------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        kwargs = _unwrap(kwargs)
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        if out is not None:
            # Hand back the caller's own out= arrays, so `a += b` keeps `a` the same object.
            results = tuple(out) if isinstance(result, tuple) else (out[0],)
            return results if isinstance(result, tuple) else results[0]
        return _wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # --- the array interface -----------------------------------------------------------------
    def __getitem__(self, key: Any) -> StrictArray:
        return StrictArray(self._data[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[_unwrap(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"StrictArray({self._data!r})"

    def __format__(self, spec: str) -> str:
        return format(self._data, spec)

    def __getattr__(self, name: str) -> Any:
        # Dunder look-ups (e.g. NumPy probing __array_interface__) must not reach the data.
        if name.startswith("__") or name == "_data":
            raise AttributeError(name)
        if name in _REFUSED_ATTRIBUTES:
            raise _refuse(f".{name}")
        value = getattr(self._data, name)
        if not callable(value):
            return _wrap(value)
        return lambda *args, **kwargs: _wrap(value(*_unwrap(args), **_unwrap(kwargs)))


class _StrictUfunc:
    """A NumPy ufunc whose results are StrictArrays, also for Python-scalar inputs
    (``strict_xp.sqrt(2.0)``); methods such as ``at`` and ``reduce`` are wrapped the same way."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._ufunc = ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _checked_call(self._ufunc, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._ufunc, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: _checked_call(value, args, kwargs)


def _checked_call(ufunc: Any, args: tuple, kwargs: dict) -> Any:
    """Call a ufunc (or ufunc method) after refusing host arrays.

    StrictArray arguments go through ``StrictArray.__array_ufunc__`` (which keeps ``out=``
    objects); calls on Python scalars alone are wrapped here.
    """
    _unwrap((args, kwargs))
    return _wrap(ufunc(*args, **kwargs))


class _StrictNamespace(types.ModuleType):
    """A stand-in for a NumPy (sub)module: every function's results are StrictArrays."""

    def __init__(self, module: types.ModuleType, name: str) -> None:
        super().__init__(name, f"Strict stand-in for {module.__name__}.")
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._module, name)
        if isinstance(value, types.ModuleType):
            wrapped: Any = _StrictNamespace(value, f"{self.__name__}.{name}")
        elif isinstance(value, np.ufunc):
            wrapped = _StrictUfunc(value)
        elif isinstance(value, type) or not callable(value):
            wrapped = value  # dtypes (float64 …), exceptions, constants (pi, newaxis …)
        else:
            host_allowed = name in _TRANSFERS

            def wrapped(*args: Any, _f: Any = value, **kwargs: Any) -> Any:
                return _wrap(_f(*_unwrap(args, host_allowed), **_unwrap(kwargs, host_allowed)))

        setattr(self, name, wrapped)  # cache: later look-ups skip __getattr__
        return wrapped

    @staticmethod
    def asnumpy(array: Any) -> np.ndarray:
        """A host copy of ``array`` (like ``cupy.asnumpy``): the one way out."""
        return np.array(array._data if isinstance(array, StrictArray) else array, copy=True)


strict_xp = _StrictNamespace(np, "strict_xp")
strict_xp.ndarray = StrictArray  # so isinstance(a, xp.ndarray) holds for its arrays
