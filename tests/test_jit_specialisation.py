"""Compile time of the first run: a jitted function is compiled once per argument types,
not once more for every constant a compiled caller passes it."""

from __future__ import annotations


def _double(x):
    return 2 * x


def _double_twice(n):
    return _DOUBLE(0) + _DOUBLE(n) + _DOUBLE(-1)


_DOUBLE = None  # set by the test: the jitted ``_double``


def test_a_literal_argument_types_the_call_with_its_plain_type():
    from numba.core import types

    from dfsearch.cost._jit import jit

    callee = jit(_double)
    _, _, args, _ = callee.get_call_template((types.literal(0),), {})
    assert args == (types.int64,)
    assert callee.signatures == [(types.int64,)]


def test_a_callee_called_with_constants_and_variables_compiles_once(monkeypatch):
    from numba.core import types
    from numba.core.caching import NullCache

    from dfsearch.cost._jit import jit

    callee = jit(_double)
    monkeypatch.setitem(globals(), "_DOUBLE", callee)
    caller = jit(_double_twice)
    caller._cache = NullCache()  # compiled here, never loaded: its callee is typed anew
    assert caller(5) == 0 + 10 - 2
    assert callee.signatures == [(types.int64,)]
