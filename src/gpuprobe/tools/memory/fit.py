"""The largest batch that fits: a search over batch sizes, each trial isolated, out-of-memory
caught and the memory given back, and the throughput at each size (E9's curve:
docs/experiments.md#e9).

The search keeps the largest size known to fit and the smallest known to fail, and tries a size
between them until the largest fitting one is within ``tolerance`` of the largest that could fit
(or they are neighbours). It picks the geometric midpoint (sizes spread over orders of magnitude)
when that still lets it finish within the bound, else the middle candidate, so it never uses more
than ⌈log2(number of candidates)⌉ + 2 trials. Then, with ``curve``, sizes known to fit at powers
of two below the limit are timed too, so the curve has its low end.

Each trial: garbage collected and the cache emptied before, one call (the memory test and
warm-up), then ``repeats`` timed calls on the device's clock (CUDA events on a GPU), then the
memory given back. Units: seconds, bytes, samples per second.
"""

from __future__ import annotations

import bisect
import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gpuprobe.core.errors import GpuprobeError, UsageError
from gpuprobe.core.rules import apply_rules
from gpuprobe.platform.hardware.load import HostLoad
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.memory.model import DEFAULT_TOLERANCE, KNEE_FRACTION, FitResult, FitTrial, Phase
from gpuprobe.tools.memory.oom.classify import classify_oom

__all__ = [
    "CURVE_MAX_POINTS",
    "StepError",
    "fit",
    "search",
    "trial_bound",
]

CURVE_MAX_POINTS = 12  # extra sizes timed for the curve (powers of two below the limit)
DEFAULT_REPEATS = 3  # timed calls per fitting size, after the untimed first call


class StepError(GpuprobeError):
    """The step raised something other than out-of-memory (shown, never swallowed);
    ``traceback_text`` is the child's traceback when the step ran in a child process."""

    traceback_text: str = ""


def trial_bound(candidates: int) -> int:
    """The most search trials :func:`search` uses over ``candidates`` sizes."""
    return math.ceil(math.log2(max(1, candidates))) + 2


def _finished(sizes: Sequence[int], fit_i: int, fail_i: int, tol: float) -> bool:
    if fail_i == fit_i + 1:
        return True
    if fail_i == len(sizes):  # nothing failed yet: only the largest size itself settles it
        return False
    return fit_i >= 0 and sizes[fit_i] >= (1 - tol) * sizes[fail_i - 1]


def _index_cost(k: int) -> int:
    """Trials a middle-candidate bisection needs for ``k`` untried candidates, at most."""
    return math.ceil(math.log2(k + 1))


def _next_index(sizes: Sequence[int], fit_i: int, fail_i: int, budget: int) -> int:
    lo = sizes[fit_i] if fit_i >= 0 else sizes[0]
    hi = sizes[fail_i - 1]
    g = bisect.bisect_right(sizes, math.sqrt(lo * hi)) - 1
    g = min(max(g, fit_i + 1), fail_i - 1)
    worst = max(g - fit_i - 1, fail_i - g - 1)
    if _index_cost(worst) <= budget - 1:
        return g
    return (fit_i + fail_i) // 2


def search(
    sizes: Sequence[int], fits: Callable[[int], bool], tolerance: float = DEFAULT_TOLERANCE
) -> tuple[int, int, int]:
    """Search sorted ``sizes`` for the largest that ``fits``; returns (index of the largest
    fitting size or -1, index of the smallest failing size or len(sizes), trials used)."""
    fit_i, fail_i, used = -1, len(sizes), 0
    bound = trial_bound(len(sizes))
    while not _finished(sizes, fit_i, fail_i, tolerance):
        m = _next_index(sizes, fit_i, fail_i, bound - used)
        used += 1
        if fits(sizes[m]):
            fit_i = m
        else:
            fail_i = m
    return fit_i, fail_i, used


# -- one trial ------------------------------------------------------------------------------------


class _StepOom(Exception):
    """The step ran out of memory (its message kept); internal to :func:`_trial`."""


def _call_step(fn: Callable[[], Any], batch_size: int) -> Any:
    """Call the user's step: out-of-memory becomes :class:`_StepOom`; any other error is the
    step's own and goes on with a note saying so (gpuprobe's own failures get no such note)."""
    try:
        return fn()
    except Exception as exc:
        found = classify_oom(exc)
        if found is None:
            if hasattr(exc, "add_note"):
                exc.add_note(
                    f"gpuprobe.fit: raised by step({batch_size}); not an out-of-memory error"
                )
            raise
        message = found.message
        traceback.clear_frames(exc.__traceback__)  # the failed step's tensors go with them
    raise _StepOom(message)  # outside the handler: the error, and its frames, are not kept


def _trial(
    step: Callable[[int], Any],
    batch_size: int,
    repeats: int,
    device: str | None,
    own_process: bool = False,
) -> dict[str, Any]:
    """Run one trial here (in this process or, ``own_process``, in a child made for it, where
    the peak RSS is the trial's). Out-of-memory becomes ``{"fits": False}``; any other error
    propagates. Under an RLIMIT_AS cap the trial also says what its process had mapped when the
    cap was set (``cap_baseline``) and how much of the cap was taken before the step ran
    (``cap_overhead``)."""
    import resource

    from gpuprobe.platform.frameworks import torch_memory as tm
    from gpuprobe.platform.frameworks.base import host_times
    from gpuprobe.tools.memory.isolate import address_space_use

    tm.release_memory()
    if device is not None:
        tm.reset_peak_memory(device)
    rss0 = _rss()
    use = address_space_use() if own_process else None  # the last thing before the step
    try:
        _call_step(lambda: step(batch_size), batch_size)
        # the clock: the device asked for ("cuda" made "cuda:N" here, where the step runs),
        # else the CUDA device when the step initialised CUDA, else the host's
        dev = tm.cuda_device(device) if device else None
        dev = dev or (_cuda_device() if tm.cuda_initialized() else "cpu")
        if dev.startswith("cuda"):
            from gpuprobe.platform.frameworks.torch import TorchBackend

            backend = TorchBackend(dev)
            backend.synchronize()
            times = _call_step(lambda: backend.time(lambda: step(batch_size), repeats), batch_size)
            timer = "cuda-event"
        else:
            times = _call_step(lambda: host_times(lambda: step(batch_size), repeats), batch_size)
            timer = "perf_counter"
    except _StepOom as oom:
        tm.release_memory()
        return {"fits": False, "error": str(oom), **_cap_use(use)}
    peak = tm.peak_memory(dev)
    kind: str | None = "cuda allocator peak"
    if peak is None and not own_process:
        kind = None
    elif peak is None:
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak, kind = max(0, peak_rss - rss0), "peak RSS above the trial's start"
    tm.release_memory()
    return {
        "fits": True,
        "times": times,
        "timer": timer,
        "peak": peak,
        "kind": kind,
        "device": dev,
        **_cap_use(use),
    }


def _cap_use(use: tuple[int, int] | None) -> dict[str, int]:
    return {} if use is None else {"cap_baseline": use[0], "cap_overhead": use[1]}


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _cuda_device() -> str:
    from gpuprobe.platform.frameworks import torch as ft

    torch = ft.loaded()
    assert torch is not None
    return f"cuda:{torch.cuda.current_device()}"


def _isolated_trial(
    step: Callable[[int], Any],
    batch_size: int,
    repeats: int,
    device: str | None,
    memory_limit: int | None,
) -> dict[str, Any]:
    from gpuprobe.tools.memory.isolate import ChildDied, ChildRaised, run_in_child

    try:
        return dict(
            run_in_child(
                _trial,
                (step, batch_size, repeats, device, True),
                memory_limit=memory_limit,
                device=device or "cpu",
            )
        )
    except ChildRaised as exc:  # one line for people; the child's traceback kept for code
        err = StepError(f"step({batch_size}) raised {exc.type_name}: {exc.text}".splitlines()[0])
        err.traceback_text = exc.traceback_text
        raise err from None
    except ChildDied as exc:
        if exc.signal_number == 9:  # SIGKILL: the kernel's OOM killer (or a person)
            return {"fits": False, "error": exc.message}
        raise StepError(f"step({batch_size}): {exc.message}") from None


def _to_trial(batch_size: int, raw: dict[str, Any], phase: Phase) -> FitTrial:
    if not raw["fits"]:
        return FitTrial(batch_size=batch_size, fits=False, phase=phase, error=raw.get("error"))
    m = Measurement.from_times("step", "step", raw["device"], raw["times"], timer=raw["timer"])
    return FitTrial(
        batch_size=batch_size,
        fits=True,
        phase=phase,
        median_s=m.median,
        p20_s=m.p20,
        p80_s=m.p80,
        n=m.n,
        throughput=batch_size / m.median if m.median > 0 else None,
        peak_memory=raw.get("peak"),
        memory_kind=raw.get("kind"),
    )


# -- the API --------------------------------------------------------------------------------------


MAX_MEMORY_LIMIT = 1 << 50  # bytes (1 PiB): past any machine; RLIMIT_AS takes up to 2**63
MAX_CANDIDATES = 1 << 40  # batch sizes one search may cover; the search tries ~log2 of them


def _sizes(batch_sizes: Sequence[int] | range) -> Sequence[int]:
    """The candidates, ascending and unique. A ``range`` stays a range (``range(1, 10**20)``
    must not be built in memory); anything else is sorted into a list."""
    if isinstance(batch_sizes, range):
        values: Sequence[int] = batch_sizes if batch_sizes.step > 0 else batch_sizes[::-1]
        try:
            n = len(values)
        except OverflowError:
            n = MAX_CANDIDATES + 1
        if n > MAX_CANDIDATES:
            raise UsageError(
                f"batch_sizes covers more than {MAX_CANDIDATES:,} sizes; give a smaller range"
            )
    else:
        try:
            values = sorted({int(b) for b in batch_sizes})
        except (TypeError, ValueError):
            raise UsageError(
                "batch_sizes must be whole numbers, e.g. range(1, 4097) or [8, 16, 32]"
            ) from None
    if not values:
        raise UsageError("batch_sizes is empty; give e.g. range(1, 4097)")
    if values[0] < 1:
        raise UsageError(f"batch sizes must be 1 or more, not {values[0]}")
    return values


def fit(
    step: Callable[[int], Any],
    batch_sizes: Sequence[int] | range = range(1, 4097),
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    repeats: int = DEFAULT_REPEATS,
    device: str | None = None,
    isolate: bool = False,
    memory_limit: int | None = None,
    curve: bool = True,
    on_trial: Callable[[FitTrial], None] | None = None,
) -> FitResult:
    """Find the largest batch size in ``batch_sizes`` for which ``step(batch_size)`` (one
    training or inference step) does not run out of memory, and time each size that fits.

    ``device`` says whose clock times the step (``cuda:0``: CUDA events); by default the CUDA
    device when torch has initialised one in this process, else the host clock. ``isolate``
    runs each trial in a fresh child process (``step`` must pickle: a module-level function or
    a ``functools.partial`` of one); ``memory_limit`` (bytes) caps each trial for real and
    implies ``isolate``. A step that raises anything but out-of-memory stops the search with
    that error (in-process: the step's own exception; isolated: :class:`StepError`).
    """
    sizes = _sizes(batch_sizes)
    if not 0 <= tolerance < 0.5:
        raise UsageError(f"tolerance must be in [0, 0.5), not {tolerance}")
    if repeats < 1:
        raise UsageError(f"repeats must be 1 or more, not {repeats}")
    if memory_limit is not None and not 0 < memory_limit <= MAX_MEMORY_LIMIT:
        raise UsageError(
            f"memory_limit must be from 1 to {MAX_MEMORY_LIMIT:,} bytes, not {memory_limit}"
        )
    if device is not None:
        from gpuprobe.platform.frameworks.torch import check_device

        check_device(device)  # one line for a CPU-only torch or a GPU it lacks, before any trial
    isolated = isolate or memory_limit is not None
    trials: dict[int, FitTrial] = {}
    cap_use: dict[str, int] = {}  # the largest of each trial's cap_baseline and cap_overhead
    resolved: list[str] = []  # the device the trials ran on ("cuda" given: "cuda:N")

    def run_one(b: int, phase: Phase) -> FitTrial:
        if isolated:
            raw = _isolated_trial(step, b, repeats, device, memory_limit)
        else:
            raw = _trial(step, b, repeats, device)
        for key in ("cap_baseline", "cap_overhead"):
            if key in raw:
                cap_use[key] = max(cap_use.get(key, 0), int(raw[key]))
        if raw.get("device") and not resolved:
            resolved.append(str(raw["device"]))
        t = _over_cap(_to_trial(b, raw, phase), memory_limit, int(raw.get("cap_overhead", 0)))
        trials[b] = t
        if on_trial is not None:
            on_trial(t)
        return t

    load = HostLoad(children=isolated, self_too=True)
    try:
        fit_i, fail_i, used = search(sizes, lambda b: run_one(b, "search").fits, tolerance)
        best = sizes[fit_i] if fit_i >= 0 else None
        if curve and best is not None:
            for b in _curve_sizes(sizes, best, set(trials)):
                run_one(b, "curve")
    finally:
        if isolated:  # leave no server process behind
            from gpuprobe.tools.memory.isolate import stop_server

            stop_server()
    others = load.others_cores()
    timed = [t for t in trials.values() if t.fits and t.throughput]
    timer = "cuda-event" if (device or "").startswith("cuda") else "perf_counter"
    result = FitResult(
        best=best,
        first_fail=sizes[fail_i] if fail_i < len(sizes) else None,
        trials=tuple(sorted(trials.values(), key=lambda t: t.batch_size)),
        search_trials=used,
        trial_bound=trial_bound(len(sizes)),
        candidates=len(sizes),
        smallest=sizes[0],
        largest=sizes[-1],
        tolerance=tolerance,
        knee=knee(timed),
        best_throughput_batch=max(timed, key=lambda t: t.throughput or 0).batch_size
        if timed
        else None,
        device=(resolved[0] if resolved and device == "cuda" else device) or "auto",
        timer=timer,
        isolated=isolated,
        memory_limit=memory_limit,
        cap=_cap_text(memory_limit, device),
        cap_baseline=cap_use.get("cap_baseline"),
        cap_overhead=cap_use.get("cap_overhead"),
        others_cores=others,  # as measured, for the rules; the result keeps it rounded
    )
    from gpuprobe.tools.memory.rules import RULES_FIT

    findings = apply_rules(RULES_FIT, result)
    return replace(
        result,
        findings=tuple(findings),
        others_cores=None if others is None else round(others, 3),
    )


def _over_cap(t: FitTrial, memory_limit: int | None, overhead: int) -> FitTrial:
    """``t`` as not fitting when it ran but used more than ``memory_limit``: its peak above the
    trial's start plus what the trial took of the cap before the step (``overhead``). Under
    RLIMIT_AS a step can fault in pages mapped before the cap was set, so its RSS can grow past
    the cap without an allocation failing (7049 rows peaked at 526 MiB under a 512 MiB cap)."""
    if memory_limit is None or not t.fits or t.peak_memory is None:
        return t
    used = t.peak_memory + overhead
    if used <= memory_limit:
        return t
    from gpuprobe.core.units import size

    return replace(
        t,
        fits=False,
        over_cap=True,
        error=f"step({t.batch_size}) peaked at {size(used)}, over the {size(memory_limit)} cap "
        f"({t.memory_kind or 'peak memory'}"
        + (f", with {size(overhead)} taken before the step" if overhead else "")
        + ")",
    )


def _cap_text(memory_limit: int | None, device: str | None) -> str | None:
    if memory_limit is None:
        return None
    from gpuprobe.tools.memory.isolate import cap_description

    return cap_description(memory_limit, device or "cpu")


def _curve_sizes(sizes: Sequence[int], best: int, tried: set[int]) -> list[int]:
    out: list[int] = []
    p = sizes[0]
    while p < best and len(out) < CURVE_MAX_POINTS:
        i = bisect.bisect_right(sizes, p) - 1
        b = sizes[max(0, i)]
        if b not in tried and b not in out and b < best:
            out.append(b)
        p *= 2
    return out


def knee(trials: Sequence[FitTrial]) -> int | None:
    """The smallest batch whose throughput is at least KNEE_FRACTION of the best measured."""
    pts = [(t.batch_size, t.throughput) for t in trials if t.fits and t.throughput]
    if not pts:
        return None
    top = max(v for _, v in pts)
    return min(b for b, v in pts if v >= KNEE_FRACTION * top)
