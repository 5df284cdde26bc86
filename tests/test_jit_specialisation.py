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
    assert callee.linked.signatures == [(types.int64,)]  # jitted callers call the twin


def test_an_entry_point_only_jitted_code_calls_compiles_no_entry_point(monkeypatch):
    """A first run compiles nothing for Python where only jitted code calls a function: the
    caller links the internal twin (no entry wrapper, no machine code of its own)."""
    from numba.core import types
    from numba.core.caching import NullCache

    from dfsearch.cost._jit import jit

    callee = jit(_double)
    monkeypatch.setitem(globals(), "_DOUBLE", callee)
    caller = jit(_double_twice)
    caller._cache = NullCache()
    assert caller(4) == 0 + 8 - 2
    assert callee.signatures == []  # never called from Python: no entry point compiled
    assert callee.linked.signatures == [(types.int64,)]
    callee._cache = NullCache()
    assert callee(21) == 42  # a Python call compiles the entry point itself
    assert callee.signatures == [(types.int64,)]


def _plus_one(x):
    return x + 1


def _twice_plus_one(x):
    return 2 * _PLUS_ONE(x)


_PLUS_ONE = None  # set by the test: ``_plus_one`` jitted as a step


def test_a_step_runs_inlined_in_jitted_code_and_refuses_a_python_call(monkeypatch):
    import pytest

    from dfsearch.cost._jit import jit

    step = jit(_plus_one, step=True)
    monkeypatch.setitem(globals(), "_PLUS_ONE", step)
    caller = jit(_twice_plus_one)
    assert caller(20) == 42
    with pytest.raises(TypeError, match="only jitted code may call it"):
        step(20)  # no Python entry point is compiled for a step


def _twice_plus_one_step(x):
    return 2 * _PLUS_ONE(x)


def test_an_inline_step_is_spliced_into_its_caller_and_never_compiled_alone(monkeypatch):
    import pytest
    from numba.core.caching import NullCache

    from dfsearch.cost._jit import jit

    spliced = jit(_plus_one, inline=True)
    monkeypatch.setitem(globals(), "_PLUS_ONE", spliced)
    step = jit(_twice_plus_one_step, step=True)
    monkeypatch.setitem(globals(), "_STEP", step)
    caller = jit(_call_step)
    caller._cache = NullCache()
    assert caller(20) == 42
    assert spliced.signatures == []  # its code went into the step's, typed there
    with pytest.raises(TypeError, match="only jitted code may call it"):
        spliced(20)


def _call_step(x):
    return _STEP(x)


_STEP = None  # set by the test: ``_twice_plus_one_step`` jitted as a step
