"""The strict CuPy stand-in refuses every implicit host conversion and computes like NumPy."""

import operator

import numpy as np
import pytest

from oriented_strands.core import Backend
from strict_xp import StrictArray, strict_xp

xp = strict_xp
HOST = np.arange(12.0).reshape(4, 3)


@pytest.fixture
def a() -> StrictArray:
    return xp.asarray(HOST)


def host(array: StrictArray) -> np.ndarray:
    assert isinstance(array, StrictArray)
    return xp.asnumpy(array)


def _unpack(a):
    first, *rest = a
    return first


def _if(a):
    return 1 if a[0, 0] > 0 else 0


REFUSED = {
    "np.asarray": lambda a: np.asarray(a),
    "np.array": lambda a: np.array(a, dtype=float),
    "float": lambda a: float(a[0, 0]),
    "int": lambda a: int(a[0, 0]),
    "complex": lambda a: complex(a[0, 0]),
    "bool": lambda a: bool(a[0, 0] > 0),
    "if": _if,
    "and": lambda a: (a[0, 0] > 0) and 1,
    "operator.index": lambda a: operator.index(xp.asarray(2)),
    "range": lambda a: range(xp.asarray(3)),
    "list index": lambda a: [1, 2, 3][xp.asarray(1)],
    "item": lambda a: a[0, 0].item(),
    "tolist": lambda a: a.tolist(),
    "tobytes": lambda a: a.tobytes(),
    "for": lambda a: [row for row in a],
    "unpacking": _unpack,
    "in": lambda a: 3.0 in a,
    "sum()": lambda a: sum(a),
    "host + device": lambda a: np.ones(3) + a,
    "device + host": lambda a: a + np.ones(3),
    "device += host": lambda a: operator.iadd(a, np.ones(3)),
    "comparison": lambda a: a < np.ones(3),
    "matmul": lambda a: a @ np.ones(3),
    "np.add": lambda a: np.add(a, np.ones(3)),
    "xp.sqrt(host)": lambda a: xp.sqrt(np.ones(3)),
    "xp.concatenate": lambda a: xp.concatenate((a, np.ones((1, 3)))),
    "xp.einsum": lambda a: xp.einsum("ij,j->i", a, np.ones(3)),
    "xp.where": lambda a: xp.where(a > 2, a, np.zeros(3)),
    "xp.linalg.norm(host)": lambda a: xp.linalg.norm(np.ones(3)),
    "out=host": lambda a: xp.multiply(a, 2.0, out=np.empty((4, 3))),
    "host index": lambda a: a[np.array([0, 1])],
    "host value": lambda a: operator.setitem(a, 0, np.ones(3)),
    "add.at host": lambda a: xp.add.at(a, np.array([0, 0]), 1.0),
    "method with host": lambda a: a.dot(np.ones(3)),
}


@pytest.mark.parametrize("operation", REFUSED.values(), ids=REFUSED.keys())
def test_implicit_host_conversions_and_mixing_are_refused(a, operation):
    with pytest.raises(TypeError, match="StrictArray"):
        operation(a)


def test_inspection_is_allowed(a):
    assert len(a) == 4
    assert (a.shape, a.ndim, a.size, a.dtype) == ((4, 3), 2, 12, np.float64)
    assert repr(a).startswith("StrictArray(array([[ 0.,  1.,  2.]")
    assert f"{a.sum():.1f}" == "66.0"
    assert isinstance(a, xp.ndarray)
    assert (xp.float64, xp.newaxis, xp.pi) == (np.float64, None, np.pi)


def test_explicit_transfers_copy(a):
    source = HOST.copy()
    device = xp.asarray(source)
    source[0, 0] = 100.0
    back = xp.asnumpy(device)
    back[1, 1] = -1.0
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(xp.asnumpy(device), HOST)
    np.testing.assert_array_equal(xp.asnumpy(xp.asarray([[1.0, 2.0]], dtype=np.float32)), [[1, 2]])
    alias, copy = xp.asarray(a), xp.array(a)  # as in CuPy: asarray aliases, array copies
    alias[0, 0], copy[0, 1] = -1.0, -2.0
    np.testing.assert_array_equal(host(a)[0, :2], [-1.0, 1.0])
    backend = Backend("strict", xp)
    assert isinstance(backend.from_host(HOST), StrictArray)
    np.testing.assert_array_equal(backend.to_host(backend.from_host(HOST)), HOST)


def test_arithmetic_and_functions_compute_like_numpy(a):
    b = xp.asarray(HOST[::-1].copy())
    checks = {
        "arithmetic": (2.0 * a - b / 3.0 + 1) ** 2 % 5.0,
        "numpy scalar": np.float64(2.0) * a,
        "unary": -abs(a),
        "comparison": (a < b) & (a >= 2.0),
        "matmul": a @ b.T,
        "xp.matmul": xp.matmul(a.T, b),
        "einsum": xp.einsum("ij,ij->i", a, b),
        "np.einsum (protocol)": np.einsum("ij,ij->i", a, b),
        "stack": xp.stack((a[:, 0], a[:, 1]), axis=-1),
        "concatenate": xp.concatenate((a, b), axis=0),
        "where": xp.where(a > 5, a, -1.0),
        "sqrt": xp.sqrt(a),
        "arctan2": xp.arctan2(a, b + 1),
        "norm": xp.linalg.norm(a, axis=1),
        "inv": xp.linalg.inv(a[:3] + 10 * xp.eye(3)),
        "max": xp.max(xp.abs(a - b)),
        "reduction": a.sum(axis=0),
        "astype": a.astype(xp.float32),
        "T": a.T,
        "reshape": a.reshape(3, 4),
        "zeros": xp.zeros((2, 3), dtype=xp.int64),
        "empty_like": xp.empty_like(a) * 0.0,
        "sqrt scalar": xp.sqrt(2.0),
    }
    expected = {
        "arithmetic": (2.0 * HOST - HOST[::-1] / 3.0 + 1) ** 2 % 5.0,
        "numpy scalar": 2.0 * HOST,
        "unary": -abs(HOST),
        "comparison": (HOST < HOST[::-1]) & (HOST >= 2.0),
        "matmul": HOST @ HOST[::-1].T,
        "xp.matmul": HOST.T @ HOST[::-1],
        "einsum": (HOST * HOST[::-1]).sum(axis=1),
        "np.einsum (protocol)": (HOST * HOST[::-1]).sum(axis=1),
        "stack": HOST[:, :2],
        "concatenate": np.concatenate((HOST, HOST[::-1])),
        "where": np.where(HOST > 5, HOST, -1.0),
        "sqrt": np.sqrt(HOST),
        "arctan2": np.arctan2(HOST, HOST[::-1] + 1),
        "norm": np.linalg.norm(HOST, axis=1),
        "inv": np.linalg.inv(HOST[:3] + 10 * np.eye(3)),
        "max": np.max(np.abs(HOST - HOST[::-1])),
        "reduction": HOST.sum(axis=0),
        "astype": HOST.astype(np.float32),
        "T": HOST.T,
        "reshape": HOST.reshape(3, 4),
        "zeros": np.zeros((2, 3), dtype=np.int64),
        "empty_like": np.zeros_like(HOST),
        "sqrt scalar": np.sqrt(2.0),
    }
    for name, result in checks.items():
        value = host(result)  # every result is a StrictArray, scalars included (0-d)
        np.testing.assert_allclose(value, expected[name], err_msg=name)
        assert value.dtype == np.asarray(expected[name]).dtype, name


def test_indexing_and_in_place_updates_stay_on_the_device(a):
    index = xp.asarray(np.array([3, 0, 3]))
    np.testing.assert_array_equal(host(a[index]), HOST[[3, 0, 3]])
    np.testing.assert_array_equal(host(a[a[:, 0] > 4]), HOST[HOST[:, 0] > 4])
    np.testing.assert_array_equal(host(a[1:, xp.newaxis, 2]), HOST[1:, None, 2])
    np.testing.assert_array_equal(host(a[:, [0, 2]]), HOST[:, [0, 2]])

    before = a
    a += 1.0
    a *= xp.ones(3)
    assert a is before  # in-place operators keep the object (and its data)
    a[index] += 10.0  # fancy-index read-modify-write: duplicates count once, as in NumPy/CuPy
    a[0] = xp.zeros(3)
    a[1, 1] = 7.0
    xp.add.at(a, index, 100.0)  # unbuffered: duplicates accumulate
    view = a.reshape(12)
    view[-1] = -5.0
    expected = HOST + 1.0
    expected[[3, 0]] += 10.0
    expected[0] = 0.0
    expected[1, 1] = 7.0
    np.add.at(expected, [3, 0, 3], 100.0)
    expected[3, 2] = -5.0
    np.testing.assert_array_equal(host(a), expected)

    out = xp.empty_like(a)
    assert xp.multiply(a, 2.0, out=out) is out
    copy = a.copy()
    copy[:] = 0.0
    np.testing.assert_array_equal(host(out), 2 * expected)
    np.testing.assert_array_equal(host(a), expected)
