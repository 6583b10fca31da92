"""The public API: every function a user calls, typed, in one place.

``gpuprobe/__init__.py`` re-exports these names. Each function imports its implementation when it
is called, so ``import gpuprobe`` stays cheap (no NVML, no torch, no matplotlib); the
``TYPE_CHECKING`` block gives type checkers and IDEs the real types, so
``reveal_type(gpuprobe.doctor())`` is :class:`~gpuprobe.checks.DoctorReport`.

The signatures here repeat those of the implementations (the defaults as literals, to keep this
module free of imports); ``tests/test_api.py`` checks that they stay the same.

Units: seconds, bytes, hertz.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    import os
    from collections.abc import Callable, Iterable, Sequence
    from contextlib import AbstractContextManager

    from gpuprobe.checks import DoctorReport
    from gpuprobe.machine import FrameworkMode, Inventory
    from gpuprobe.measure.report import BenchReport
    from gpuprobe.measure.runner import Progress
    from gpuprobe.memory.fit import FitResult, FitTrial
    from gpuprobe.memory.oom import OomReport
    from gpuprobe.memory.precision import PrecisionReport
    from gpuprobe.monitor.pack import PackLevel, PackReport
    from gpuprobe.monitor.record import Recording
    from gpuprobe.monitor.run import RunResult
    from gpuprobe.monitor.sampler import NvmlFactory
    from gpuprobe.parallel.lstsq import LstsqResult, SgdSettings
    from gpuprobe.trace.kineto import ProgressCallback
    from gpuprobe.trace.model import Comparison, Diagnosis
    from gpuprobe.trace.ranks import MultiRankDiagnosis

__all__ = [
    "bench",
    "compare",
    "diagnose",
    "diagnose_ranks",
    "doctor",
    "explain_oom",
    "fit",
    "install_oom_hook",
    "inventory",
    "lstsq",
    "pack",
    "precision_sweep",
    "record",
    "run",
    "uninstall_oom_hook",
]

if TYPE_CHECKING:
    PathLike = str | os.PathLike[str]


def inventory(frameworks: FrameworkMode = "auto") -> Inventory:
    """Read this machine once: host (CPU, memory, BLAS), driver, every GPU through NVML, and the
    array frameworks (``frameworks``: ``"static"`` reads versions without importing them,
    ``"runtime"`` imports each in a subprocess to ask it what it sees, ``"auto"`` picks)."""
    from gpuprobe.machine import inventory as _inventory

    return _inventory(frameworks)


def doctor(
    quick: bool = False,
    *,
    inventory: Inventory | None = None,
    run_kernels: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check this machine (or a recorded ``inventory``): driver, environment, frameworks, each
    GPU and real kernels; every finding with its evidence and fix. ``quick`` uses smaller
    problems. Kernels run on a live machine; a recorded inventory is judged without them unless
    ``run_kernels`` says otherwise. ``progress`` is called with what runs now."""
    from gpuprobe.checks import doctor as _doctor

    return _doctor(quick, inventory=inventory, run_kernels=run_kernels, progress=progress)


def bench(
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    quick: bool = False,
    *,
    budget_s: float | None = None,
    rep_limit_s: float | None = None,
    sizes: dict[str, Sequence[int]] | None = None,
    isolate: bool = True,
    save: bool = True,
    compare: bool = False,
    inventory: Inventory | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Measure what this machine can do: each workload (``gpuprobe bench --list``) on every
    framework and device asked for, each framework in its own process, timed by the one timer
    (CUDA events on GPUs), as a fraction of the card's peak. ``save`` appends to the history;
    ``compare`` judges against the last saved run."""
    from gpuprobe.measure.runner import run_bench

    return run_bench(
        workloads,
        backends,
        devices,
        quick,
        budget_s=budget_s,
        rep_limit_s=rep_limit_s,
        sizes=sizes,
        isolate=isolate,
        save=save,
        compare=compare,
        inventory=inventory,
        progress=progress,
    )


def run(
    cmd: Sequence[str],
    out: PathLike | None = None,
    *,
    hz: float = 2.0,
    pcie_throughput: bool = False,
    report: bool = True,
) -> RunResult:
    """Run ``cmd`` (an argument list, never a shell string), record every GPU, the host and the
    command's process tree until it exits, then judge the run. ``out`` (default
    ``./gpuprobe-run-DATE``) gets ``timeline.jsonl`` and, with ``report``, ``summary.json``,
    ``report.html`` and ``report.png``. The result carries the command's exit code, the summary
    (``None`` when no timeline could be read), the files written and notes on what could not be.
    A report that cannot be written is a note, never an exception: the exit code survives."""
    import time
    from pathlib import Path

    from gpuprobe.monitor.run import finish_run, run_command

    if out is None:
        out = Path(time.strftime("gpuprobe-run-%Y%m%d-%H%M%S"))
    result = run_command(cmd, Path(out), hz=hz, pcie_throughput=pcie_throughput)
    if not report:
        return finish_run(result, None)
    from gpuprobe.report.run_files import write_run_files

    return finish_run(result, write_run_files)


def record(
    out: PathLike | None = None,
    *,
    hz: float = 2.0,
    pid: int | None = None,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
) -> AbstractContextManager[Recording]:
    """``with gpuprobe.record() as rec:`` records every GPU, the host and process ``pid``
    (default: this one) with its children while the block runs; ``rec.findings``, ``rec.plot()``
    and ``rec.report()`` afterwards. ``out`` is a new or empty directory (default: a temporary
    one)."""
    from pathlib import Path

    from gpuprobe.monitor.record import record as _record

    return _record(
        None if out is None else Path(out),
        hz=hz,
        pid=pid,
        pcie_throughput=pcie_throughput,
        nvml=nvml,
    )


def diagnose(
    path: PathLike,
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> Diagnosis:
    """Read a PyTorch profiler (Kineto) trace (``.json`` or ``.json.gz``) and say why the GPU
    waits, step by step, with the evidence and the fix. ``steps``: only these profiled steps, as
    ``"N..M"`` or an inclusive ``(N, M)``. A file that is not a readable trace raises
    :class:`~gpuprobe.errors.InputError`."""
    from gpuprobe.trace import diagnose as _diagnose

    return _diagnose(path, steps=steps, progress=progress)


def compare(
    before: PathLike | Diagnosis,
    after: PathLike | Diagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
) -> Comparison:
    """What changed between two traces or diagnoses (before and after a fix): step time, GPU
    busy, the idle time by cause, and findings resolved or new."""
    from gpuprobe.trace import compare as _compare

    return _compare(before, after, steps=steps)


def diagnose_ranks(
    paths: PathLike | Sequence[PathLike],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> MultiRankDiagnosis:
    """Diagnose the traces of a distributed job (a folder, or several files; one rank at a time,
    so memory stays that of one trace): per-rank busy, communication and its overlap, the
    straggler and the collective the others wait in."""
    from gpuprobe.trace.ranks import diagnose_ranks as _diagnose_ranks

    return _diagnose_ranks(paths, steps=steps, progress=progress)


def lstsq(
    A: Any,
    b: Any = None,
    method: str = "auto",
    client: Any = None,
    devices: str | Sequence[int] | None = None,
    *,
    scheduler: str | None = None,
    workers: Sequence[str] | None = None,
    chunk_rows: int | None = None,
    reference: Any = None,
    rcond: float | None = None,
    max_refine: int = 3,
    sgd: SgdSettings | None = None,
    engine: str = "auto",
    timeout: float | None = 600.0,
) -> LstsqResult:
    """Solve min ‖b − Ax‖₂ exactly, in this process or data-parallel on Dask (normal equations or
    TSQR, refined); ``x, report = gpuprobe.lstsq(A, b)``. ``A``/``b``: NumPy, CuPy, torch or dask
    arrays, or paths (``.npy``, Zarr, Parquet). See :func:`gpuprobe.parallel.lstsq.lstsq` for
    every parameter."""
    from gpuprobe.parallel.lstsq import lstsq as _lstsq

    return _lstsq(
        A,
        b,
        method,
        client,
        devices,
        scheduler=scheduler,
        workers=workers,
        chunk_rows=chunk_rows,
        reference=reference,
        rcond=rcond,
        max_refine=max_refine,
        sgd=sgd,
        engine=engine,
        timeout=timeout,
    )


def explain_oom(
    exc: BaseException | None = None, *, release: bool = True, top: int = 10
) -> OomReport:
    """Explain a CUDA out-of-memory error (``exc``, default the one being handled): what asked
    for how much, what holds the card (this process's tensors, the allocator's cache, other
    processes), and the fix. ``release`` frees the cache after reading it; ``top`` live tensors
    are listed."""
    from gpuprobe.memory.oom import explain_oom as _explain_oom

    return _explain_oom(exc, release=release, top=top)


def install_oom_hook() -> None:
    """From now on, an uncaught out-of-memory error also prints :func:`explain_oom`'s report."""
    from gpuprobe.memory.oom import install_oom_hook as _install

    _install()


def uninstall_oom_hook() -> None:
    """Undo :func:`install_oom_hook`: uncaught errors are printed as Python prints them again."""
    from gpuprobe.memory.oom import uninstall_oom_hook as _uninstall

    _uninstall()


def fit(
    step: Callable[[int], Any],
    batch_sizes: Sequence[int] | range = range(1, 4097),
    *,
    tolerance: float = 0.05,
    repeats: int = 3,
    device: str | None = None,
    isolate: bool = False,
    memory_limit: int | None = None,
    curve: bool = True,
    on_trial: Callable[[FitTrial], None] | None = None,
) -> FitResult:
    """The largest batch size in ``batch_sizes`` for which ``step(batch_size)`` fits in memory
    (within ``tolerance``), and the throughput at each size tried. ``isolate`` runs each trial
    in a child process, under ``memory_limit`` bytes when given."""
    from gpuprobe.memory.fit import fit as _fit

    return _fit(
        step,
        batch_sizes,
        tolerance=tolerance,
        repeats=repeats,
        device=device,
        isolate=isolate,
        memory_limit=memory_limit,
        curve=curve,
        on_trial=on_trial,
    )


def pack(
    cmd: Sequence[str],
    counts: Sequence[int] | str = (1, 2, 3, 4),
    *,
    rate: str | None = None,
    hz: float = 2.0,
    nvml: NvmlFactory | None = None,
    on_level: Callable[[PackLevel], None] | None = None,
) -> PackReport:
    """Run 1, 2, 3… copies of ``cmd`` side by side on one GPU and find how many to pack: the
    total throughput (read from the job's output with the ``rate`` pattern), memory and
    utilization at each count."""
    from gpuprobe.monitor.pack import pack as _pack

    return _pack(cmd, counts, rate=rate, hz=hz, nvml=nvml, on_level=on_level)


def precision_sweep(
    model: Any,
    example_inputs: Any,
    dtypes: Sequence[str] = ("fp32", "tf32", "bf16", "fp16", "int8"),
    *,
    metric: Callable[[Any, Any], float] | None = None,
    budget_s: float = 0.5,
    device: str | None = None,
) -> PrecisionReport:
    """Latency and error of ``model`` on ``example_inputs`` at each precision in ``dtypes``,
    against fp32, on ``device`` (default: the first GPU, else the CPU)."""
    from gpuprobe.memory.precision import precision_sweep as _sweep

    return _sweep(model, example_inputs, dtypes, metric=metric, budget_s=budget_s, device=device)
