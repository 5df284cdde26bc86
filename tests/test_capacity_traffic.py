"""Traffic of the serving simulation: seeded draws, length distributions, trace files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dfsearch.capacity.trace import read_trace
from dfsearch.capacity.traffic import (
    Fixed,
    FromTrace,
    LogNormal,
    Poisson,
    TraceArrivals,
    Traffic,
    Uniform,
    requests,
)
from dfsearch.errors import SpecError


def _write(tmp_path, text: str, name: str = "trace.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_same_seed_same_requests_other_seed_other_arrivals():
    traffic = Traffic(Poisson(5.0), LogNormal(300, 0.8), Uniform(1, 200))
    a, b, c = (requests(traffic, 1000, seed=s) for s in (3, 3, 4))
    for x, y in ((a.arrival_s, b.arrival_s), (a.prompt_tokens, b.prompt_tokens), (a.output_tokens, b.output_tokens)):
        assert np.array_equal(x, y)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_each_draw_has_its_own_stream():
    """Changing the prompt distribution leaves the arrivals and the outputs as they were."""
    a = requests(Traffic(Poisson(5.0), Fixed(10), Uniform(1, 50)), 500, seed=1)
    b = requests(Traffic(Poisson(5.0), Uniform(1, 9), Uniform(1, 50)), 500, seed=1)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.output_tokens, b.output_tokens)


def test_poisson_gaps_have_mean_one_over_rate():
    """The mean of n exponential gaps of mean 1/rate has standard deviation 1/(rate sqrt n):
    the sample mean lies within 5 of them."""
    rate, n = 8.0, 100_000
    r = requests(Traffic(Poisson(rate), Fixed(1), Fixed(1)), n, seed=11)
    gaps = np.diff(np.concatenate(([0.0], r.arrival_s)))
    assert (gaps >= 0).all()
    assert abs(gaps.mean() - 1 / rate) < 5 / (rate * math.sqrt(n))


def test_length_distributions_stay_in_their_ranges():
    n = 20_000
    r = requests(Traffic(Poisson(1.0), Uniform(3, 7), LogNormal(100, 1.0, lo=20, hi=400)), n, seed=2)
    assert r.prompt_tokens.min() == 3 and r.prompt_tokens.max() == 7  # both ends drawn
    assert r.output_tokens.min() >= 20 and r.output_tokens.max() <= 400
    assert (r.output_tokens == 20).any() and (r.output_tokens == 400).any()  # clipped mass
    # the median of round(median x exp(sigma Z)) is the median (Z's median is 0), clipping aside
    assert abs(np.median(r.output_tokens) - 100) <= 3
    assert r.prompt_tokens.dtype == np.int64 and r.output_tokens.dtype == np.int64


def test_lognormal_with_sigma_zero_is_the_median():
    r = requests(Traffic(Poisson(1.0), LogNormal(37.0, 0.0), Fixed(2)), 50, seed=0)
    assert (r.prompt_tokens == 37).all()


def test_trace_arrivals_replay_the_rows_and_lengths(tmp_path):
    path = _write(tmp_path, "prompt_tokens,arrival_s,output_tokens,user\n5,0.0,2,a\n\n7,0.5,3,b\n9,0.5,1,c\n")
    r = requests(Traffic(TraceArrivals(path)), 3, seed=0)
    assert r.arrival_s.tolist() == [0.0, 0.5, 0.5]
    assert r.prompt_tokens.tolist() == [5, 7, 9] and r.output_tokens.tolist() == [2, 3, 1]
    r = requests(Traffic(TraceArrivals(path), Fixed(4), FromTrace(path)), 2, seed=0)
    assert r.prompt_tokens.tolist() == [4, 4] and set(r.output_tokens.tolist()) <= {1, 2, 3}


def test_from_trace_samples_only_the_traces_values(tmp_path):
    path = _write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,20,2\n2,30,3\n")
    r = requests(Traffic(Poisson(1.0), FromTrace(path), FromTrace(path)), 3000, seed=5)
    assert set(r.prompt_tokens.tolist()) == {10, 20, 30}
    assert set(r.output_tokens.tolist()) == {1, 2, 3}


def test_more_requests_than_trace_rows_is_refused(tmp_path):
    path = _write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0,10,1\n")
    with pytest.raises(SpecError, match=r"requests.n must be <= the trace's 1 rows. Got 2 instead"):
        requests(Traffic(TraceArrivals(path)), 2, seed=0)


@pytest.mark.parametrize(("text", "where", "value", "expected"), [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,x,2\n", "line 3, column prompt_tokens", "'x'", "an integer >= 1"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,0\n", "line 2, column output_tokens", "'0'", "an integer >= 1"),
    ("arrival_s,prompt_tokens,output_tokens\n-1,10,2\n", "line 2, column arrival_s", "'-1'", "a number >= 0"),
    ("arrival_s,prompt_tokens,output_tokens\n2,10,2\n\n1,10,2\n", "line 4, column arrival_s", "'1'", "a number >= the line before (2)"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10\n", "line 2, column output_tokens", "''", "an integer >= 1"),
    ("arrival_s,prompt_tokens,output_tokens\nnan,10,2\n", "line 2, column arrival_s", "'nan'", "a number >= 0"),
])
def test_bad_trace_cells_name_file_line_column_value_and_expectation(tmp_path, text, where, value, expected):
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as e:
        read_trace(path)
    assert str(e.value) == f"{path}: {where} must be {expected}. Got {value} instead."
    assert e.value.exit_code == 2


def test_bad_trace_files(tmp_path):
    path = _write(tmp_path, "arrival,prompt_tokens,output_tokens\n0,1,1\n")
    with pytest.raises(SpecError, match=r"trace.csv: header must name the columns .* Missing arrival_s"):
        read_trace(path)
    with pytest.raises(SpecError, match=r"empty.csv: must hold at least one request row"):
        read_trace(_write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n", "empty.csv"))
    with pytest.raises(SpecError, match=r"missing.csv: cannot be read"):
        read_trace(str(tmp_path / "missing.csv"))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Poisson(0.0), "traffic.arrivals.rate_per_s must be > 0. Got 0.0 instead."),
    (lambda: Fixed(0), "traffic.length.n must be an integer >= 1. Got 0 instead."),
    (lambda: Uniform(5, 4), "traffic.length.hi must be an integer >= lo (5). Got 4 instead."),
    (lambda: LogNormal(100, -1.0), "traffic.length.sigma must be >= 0. Got -1.0 instead."),
    (lambda: Traffic(Poisson(1.0), None, Fixed(1)), "traffic.prompt must be given: only a trace's arrivals bring their own lengths."),
    (lambda: requests(Traffic(Poisson(1.0), Fixed(1), Fixed(1)), 0, seed=0), "requests.n must be an integer >= 1. Got 0 instead."),
])
def test_bad_parameters_are_refused_with_their_field(make, message):
    with pytest.raises(SpecError) as e:
        make()
    assert str(e.value) == message
