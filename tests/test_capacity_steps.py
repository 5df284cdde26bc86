"""Step times of the serving simulation: the affine closed form and the interpolated table."""

from __future__ import annotations

import numpy as np
import pytest

from dfsearch.capacity.steps import AffineSteps, TabulatedSteps
from dfsearch.errors import SpecError

TABLE = TabulatedSteps(tokens=(1, 65, 257), contexts=(0, 4096, 65536),
                       seconds=((1.0, 2.0, 5.0), (3.0, 6.0, 11.0), (7.0, 9.0, 20.0)))


def test_affine_is_its_formula():
    s = AffineSteps(base_s=0.5, per_token_s=0.25, per_context_token_s=0.125)
    assert s.step_s(8, 4, 16) == 0.5 + 0.25 * 12 + 0.125 * 16
    assert s.step_s(0, 1, 0) == 0.75


def test_table_is_exact_on_its_grid_points():
    for i, n in enumerate(TABLE.tokens):
        for j, c in enumerate(TABLE.contexts):
            assert TABLE.step_s(n - 1, 1, c) == TABLE.seconds[i][j]


def test_table_is_bilinear_between_grid_points():
    # halfway along the tokens at a grid context: the mean of the two rows
    assert TABLE.step_s(32, 1, 4096) == pytest.approx((2.0 + 6.0) / 2)
    # a quarter along the context at grid tokens 65
    assert TABLE.step_s(60, 5, 1024) == pytest.approx(3.0 + (6.0 - 3.0) / 4)
    # the centre of a cell: the mean of its four corners
    assert TABLE.step_s(160, 1, 34816) == pytest.approx((6.0 + 11.0 + 9.0 + 20.0) / 4)


def test_table_vector_and_scalar_agree():
    rng = np.random.Generator(np.random.PCG64(0))
    n = rng.integers(1, 258, size=200)
    c = rng.integers(0, 65537, size=200)
    vec = TABLE.step_s(n - 1, 1, c)
    assert np.allclose(vec, [TABLE.step_s(int(a) - 1, 1, int(b)) for a, b in zip(n, c)], rtol=1e-12, atol=0)


@pytest.mark.parametrize(("tokens", "context"), [(258, 0), (0, 100), (10, 65537)])
def test_table_never_extrapolates(tokens, context):
    with pytest.raises(SpecError, match=r"steps has no time for .* and is never extrapolated"):
        TABLE.step_s(tokens, 0, context)
    with pytest.raises(SpecError, match=r"never extrapolated"):
        TABLE.step_s(np.array([1, tokens]), 0, np.array([0, context]))


def test_one_point_axis_admits_only_its_value():
    t = TabulatedSteps(tokens=(1, 3), contexts=(0,), seconds=((1.0,), (2.0,)))
    assert t.step_s(2, 0, 0) == pytest.approx(1.5)
    assert t.step_s(np.array([2, 3]), 0, np.array([0, 0])).tolist() == [1.5, 2.0]
    with pytest.raises(SpecError):
        t.step_s(1, 0, 1)


def test_bad_tables_and_forms_are_refused():
    with pytest.raises(SpecError, match=r"steps.tokens must be increasing"):
        TabulatedSteps(tokens=(4, 4), contexts=(0,), seconds=((1.0,), (1.0,)))
    with pytest.raises(SpecError, match=r"steps.seconds must be 2 x 1 positive times"):
        TabulatedSteps(tokens=(1, 4), contexts=(0,), seconds=((1.0,), (0.0,)))
    with pytest.raises(SpecError, match=r"steps.per_token_s must be >= 0"):
        AffineSteps(base_s=1.0, per_token_s=-1.0)
    with pytest.raises(SpecError, match=r"positive time"):
        AffineSteps(base_s=0.0, per_token_s=0.0)
