"""fit: the bounded search, in-process against real torch allocator errors, and isolated
trials under a real RLIMIT_AS cap."""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprobe.core.errors import UsageError
from gpuprobe.tools.memory import demo
from gpuprobe.tools.memory.fit import StepError, fit, knee, search, trial_bound
from gpuprobe.tools.memory.model import FitResult

torch = pytest.importorskip("torch")


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=100_000),
    frac=st.floats(min_value=0.0, max_value=1.2),
    tol=st.sampled_from([0.0, 0.05, 0.2]),
)
def test_search_finds_the_limit_within_tolerance_and_bound(n: int, frac: float, tol: float) -> None:
    sizes = list(range(1, n + 1))
    limit = int(frac * n)  # the largest size that fits (0: nothing fits; > n: all fit)
    tried: list[int] = []

    def fits(b: int) -> bool:
        tried.append(b)
        return b <= limit

    fit_i, fail_i, used = search(sizes, fits, tol)
    assert used == len(tried) <= trial_bound(n) == math.ceil(math.log2(n)) + 2
    true = min(limit, n)
    if true < 1:
        assert fit_i == -1
        return
    found = sizes[fit_i]
    assert found <= true and found >= (1 - tol) * true
    if limit >= n:  # everything fits: the search has tried the largest size itself
        assert found == n
    assert fail_i == len(sizes) or sizes[fail_i] > true


def test_search_over_uneven_candidates() -> None:
    sizes = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    fit_i, fail_i, used = search(sizes, lambda b: b <= 100, 0.0)
    assert (sizes[fit_i], sizes[fail_i]) == (96, 128)
    assert used <= trial_bound(len(sizes))


def test_fit_in_process_with_real_torch_oom_errors() -> None:
    step = functools.partial(demo.oom_past, limit=300, bytes_per_sample=1024)
    r = fit(step, range(1, 1025), repeats=1)
    assert r.best is not None and 0.95 * 300 <= r.best <= 300
    assert r.first_fail is not None and r.first_fail > 300
    assert r.search_trials <= r.trial_bound == 12
    failed = [t for t in r.trials if not t.fits]
    assert failed and all("DefaultCPUAllocator" in (t.error or "") for t in failed)
    fitting = [t for t in r.trials if t.fits]
    assert all(t.throughput and t.median_s and t.n == 1 for t in fitting)
    assert {t.phase for t in r.trials} == {"search", "curve"}
    assert 1 in {t.batch_size for t in r.trials}  # the curve reaches the smallest size
    assert r.knee is not None and r.knee <= r.best
    assert {f.id for f in r.findings} >= {"fit-largest", "fit-knee"}
    assert FitResult.from_dict(r.to_dict()) == r
    assert "largest batch that fits" in str(r)


def test_fit_nothing_fits_and_no_limit() -> None:
    none = fit(functools.partial(demo.oom_past, limit=0), range(4, 64), repeats=1)
    assert none.best is None and none.findings[0].id == "fit-nothing-fits"
    assert none.search_trials <= none.trial_bound
    all_fit = fit(functools.partial(demo.oom_past, limit=10**6), [1, 2, 4], repeats=1)
    assert all_fit.best == 4 and all_fit.first_fail is None
    assert all_fit.findings[0].id == "fit-no-limit"


def _shape_bug(batch_size: int) -> None:
    if batch_size > 8:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied ({batch_size}x3)")


def test_a_step_error_that_is_not_oom_is_raised_not_swallowed() -> None:
    with pytest.raises(ValueError, match="shapes cannot be multiplied") as info:
        fit(_shape_bug, range(1, 100), repeats=1)
    notes = getattr(info.value, "__notes__", [])
    assert any("not an out-of-memory error" in n for n in notes) or not hasattr(
        info.value, "add_note"
    )


def test_isolated_fit_under_a_real_address_space_cap() -> None:
    mib = 2**20
    step = functools.partial(demo.alloc_step, bytes_per_sample=mib)
    r = fit(step, range(1, 513), repeats=1, memory_limit=160 * mib, curve=False)
    assert r.isolated and r.memory_limit == 160 * mib and "RLIMIT_AS" in (r.cap or "")
    # each sample is 1 MiB of a 160 MiB cap; start-up slack and glibc's bookkeeping take a little
    assert r.best is not None and 120 <= r.best < 160
    assert r.first_fail is not None and r.first_fail <= 1.06 * r.best + 1
    failed = [t for t in r.trials if not t.fits]
    assert any("can't allocate memory" in (t.error or "") for t in failed)
    fitted = [t for t in r.trials if t.fits]
    # the trial's own process: its peak RSS grows with the batch (1 MiB per sample)
    big = max(fitted, key=lambda t: t.batch_size)
    assert big.peak_memory is not None and big.peak_memory >= big.batch_size * mib * 0.9
    assert r.search_trials <= r.trial_bound


def test_isolated_step_error_is_shown() -> None:
    with pytest.raises(StepError, match=r"step\(\d+\) raised ValueError: mat1 and mat2"):
        fit(_shape_bug, range(1, 100), repeats=1, isolate=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_sizes": []},
        {"batch_sizes": [0, 1]},
        {"batch_sizes": ["a"]},
        {"batch_sizes": [1], "tolerance": 0.7},
        {"batch_sizes": [1], "repeats": 0},
        {"batch_sizes": [1], "memory_limit": 0},
    ],
)
def test_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(UsageError):
        fit(demo.pid_step, **kwargs)


def test_knee_is_the_smallest_size_near_the_best() -> None:
    from gpuprobe.tools.memory.model import FitTrial

    pts = [(1, 10.0), (8, 70.0), (64, 95.0), (256, 100.0), (512, 99.0)]
    trials = [FitTrial(batch_size=b, fits=True, throughput=v) for b, v in pts]
    assert knee(trials) == 64
