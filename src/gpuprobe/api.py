"""The public API: every function a user calls, typed, in one place.

``gpuprobe/__init__.py`` re-exports these names. Each function imports its implementation when it
is called, so ``import gpuprobe`` stays cheap (no NVML, no torch, no matplotlib); the
``TYPE_CHECKING`` block gives type checkers and IDEs the real types, so
``reveal_type(gpuprobe.doctor())`` is :class:`~gpuprobe.tools.doctor.model.DoctorReport`.

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
    from pathlib import Path

    from rich.console import Console

    from gpuprobe.platform.inventory import FrameworkMode, Inventory
    from gpuprobe.tools.bench.model import BenchReport
    from gpuprobe.tools.bench.runner import Progress
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
    from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
    from gpuprobe.tools.diagnose.kernels import KernelBreakdown
    from gpuprobe.tools.diagnose.kineto import ProgressCallback
    from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison
    from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
    from gpuprobe.tools.doctor.model import DoctorReport
    from gpuprobe.tools.memory.model import FitResult, FitTrial, PrecisionReport
    from gpuprobe.tools.memory.oom.classify import OomError
    from gpuprobe.tools.memory.oom.report import OomReport
    from gpuprobe.tools.monitor.exporter import GpuprobeCollector, MetricsServer
    from gpuprobe.tools.monitor.live import TopView
    from gpuprobe.tools.monitor.pack_model import PackLevel, PackReport
    from gpuprobe.tools.monitor.record import Recording
    from gpuprobe.tools.monitor.records import Sample
    from gpuprobe.tools.monitor.run import RunResult
    from gpuprobe.tools.monitor.sampler import NvmlFactory, Sampler
    from gpuprobe.tools.monitor.summary import RunSummary
    from gpuprobe.tools.monitor.timeline import Timeline
    from gpuprobe.tools.scale.lstsq import LstsqResult, SgdSettings
    from gpuprobe.tools.scale.model import ScaleResult

__all__ = [
    "available_cores",
    "bench",
    "classify_oom",
    "compare",
    "demo_device",
    "demo_encoder",
    "demo_fit_step",
    "demo_models",
    "diagnose",
    "diagnose_folder",
    "diagnose_ranks",
    "diagnose_with_context",
    "doctor",
    "explain_oom",
    "find_trace_files",
    "fit",
    "install_oom_hook",
    "inventory",
    "kernel_breakdown",
    "kernel_diff",
    "load_inventory",
    "lstsq",
    "pack",
    "parse_counts",
    "plot_timeline",
    "precision_dtypes",
    "precision_sweep",
    "read_timeline",
    "record",
    "run",
    "scale_lstsq",
    "serve_metrics",
    "summarize",
    "top",
    "uninstall_oom_hook",
    "write_diagnosis_html",
    "write_run_report",
]

if TYPE_CHECKING:
    PathLike = str | os.PathLike[str]


def inventory(frameworks: FrameworkMode = "auto") -> Inventory:
    """Read this machine once: host (CPU, memory, BLAS), driver, every GPU through NVML, and the
    array frameworks (``frameworks``: ``"static"`` reads versions without importing them,
    ``"runtime"`` imports each in a subprocess to ask it what it sees, ``"auto"`` picks)."""
    import gpuprobe.ui.inventory  # noqa: F401  (registers how an Inventory shows itself)
    from gpuprobe.platform.inventory import inventory as _inventory

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
    from gpuprobe.tools.doctor.engine import doctor as _doctor

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
    from gpuprobe.tools.bench.runner import run_bench

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

    from gpuprobe.tools.monitor.run import finish_run, run_command

    if out is None:
        out = Path(time.strftime("gpuprobe-run-%Y%m%d-%H%M%S"))
    result = run_command(cmd, Path(out), hz=hz, pcie_throughput=pcie_throughput)
    if not report:
        return finish_run(result, None)
    from gpuprobe.tools.monitor.show.files import write_run_files

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

    from gpuprobe.tools.monitor.record import record as _record

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
    :class:`~gpuprobe.core.errors.InputError`."""
    from gpuprobe.tools.diagnose.engine import diagnose as _diagnose

    return _diagnose(path, steps=steps, progress=progress)


def compare(
    before: PathLike | Diagnosis,
    after: PathLike | Diagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
    contexts: tuple[TraceContext, TraceContext] | None = None,
) -> TraceComparison:
    """What changed between two traces (step time and why, shares of GPU time, kernels, findings);
    for two :class:`Diagnosis`, ``contexts`` from :func:`diagnose_with_context` add the shares."""
    from gpuprobe.tools.diagnose.engine import compare as _compare

    return _compare(before, after, steps=steps, contexts=contexts)


def diagnose_ranks(
    paths: PathLike | Sequence[PathLike],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> MultiRankDiagnosis:
    """The ranks of one job (a folder or several files, read one at a time): per-rank busy,
    communication and overlap, the straggler; traces not of one job's ranks are refused."""
    from gpuprobe.tools.diagnose.ranks import diagnose_ranks as _diagnose_ranks

    return _diagnose_ranks(paths, steps=steps, progress=progress)


def diagnose_folder(
    paths: PathLike | Sequence[PathLike],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> MultiRankDiagnosis | CycleDiagnosis:
    """``gpuprobe diagnose DIR``: a job's ranks or one process's profiler cycles (a mix: error)."""
    from gpuprobe.tools.diagnose.cycles import diagnose_folder as _diagnose_folder

    return _diagnose_folder(paths, steps=steps, progress=progress)


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
    arrays, or paths (``.npy``, Zarr, Parquet). See :func:`gpuprobe.tools.scale.lstsq.lstsq` for
    every parameter."""
    from gpuprobe.tools.scale.lstsq import lstsq as _lstsq

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
    from gpuprobe.tools.memory.oom.explain import explain_oom as _explain_oom

    return _explain_oom(exc, release=release, top=top)


def install_oom_hook() -> None:
    """From now on, an uncaught out-of-memory error also prints :func:`explain_oom`'s report."""
    from gpuprobe.tools.memory.oom.hook import install_oom_hook as _install

    _install()


def uninstall_oom_hook() -> None:
    """Undo :func:`install_oom_hook`: uncaught errors are printed as Python prints them again."""
    from gpuprobe.tools.memory.oom.hook import uninstall_oom_hook as _uninstall

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
    from gpuprobe.tools.memory.fit import fit as _fit

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
    from gpuprobe.tools.monitor.pack import pack as _pack

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
    from gpuprobe.tools.memory.precision import precision_sweep as _sweep

    return _sweep(model, example_inputs, dtypes, metric=metric, budget_s=budget_s, device=device)


def diagnose_with_context(
    path: PathLike,
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Diagnosis, TraceContext]:
    """Like :func:`diagnose`, also returning the trace read into memory (its
    :class:`~gpuprobe.tools.diagnose.analysis.TraceContext`), for :func:`kernel_breakdown`,
    :func:`kernel_diff` and :func:`write_diagnosis_html`."""
    from gpuprobe.tools.diagnose.engine import diagnose_with_context as _diagnose

    return _diagnose(path, steps=steps, progress=progress)


def kernel_breakdown(
    ctx: TraceContext, *, top: int = 10, rank: int | None = None, launches: bool = True
) -> KernelBreakdown:
    """GPU time by kernel family, the ``top`` kernels and the launch statistics of a trace's
    selected steps (``ctx`` from :func:`diagnose_with_context`); microseconds."""
    from gpuprobe.tools.diagnose.kernels import kernel_breakdown as _breakdown

    return _breakdown(ctx, top=top, rank=rank, launches=launches)


def kernel_diff(ctx_before: TraceContext, ctx_after: TraceContext, *, rows: int = 50) -> KernelDiff:
    """Which kernels appeared, went, got faster or slower between two traces (each from
    :func:`diagnose_with_context`); the ``rows`` largest changes are kept."""
    from gpuprobe.tools.diagnose.kernel_diff import compare_kernels

    return compare_kernels(ctx_before, ctx_after, rows=rows)


def write_diagnosis_html(
    path: str, d: Diagnosis, ctx: TraceContext, step: int | None = None
) -> str:
    """Write the page of diagnosis ``d`` to ``path`` with the timeline of one ``step`` of its
    trace ``ctx`` (default: the median-length step); returns the path."""
    from gpuprobe.tools.diagnose.show.html import write_html

    return write_html(path, d, ctx, step)


def find_trace_files(paths: PathLike | Iterable[PathLike]) -> list[str]:
    """A folder's trace files (``*.json``, ``*.json.gz``, sorted), or the files given."""
    from gpuprobe.tools.diagnose.ranks import find_trace_files as _find

    return _find(paths)


def load_inventory(path: str | Path) -> Inventory:
    """Read an inventory snapshot written by ``gpuprobe info --json`` (on this machine or
    another); a missing or unreadable file raises :class:`~gpuprobe.core.errors.InputError`."""
    import gpuprobe.ui.inventory  # noqa: F401  (registers how an Inventory shows itself)
    from gpuprobe.platform.inventory import load

    return load(path)


def read_timeline(path: str | Path) -> Timeline:
    """Read a recording's timeline (a ``timeline.jsonl`` or the run directory holding it); a
    damaged file is read up to its last whole line (the timeline says what was dropped)."""
    from gpuprobe.tools.monitor.timeline import read_timeline as _read

    return _read(path)


def summarize(tl: Timeline) -> RunSummary:
    """Judge a recording read by :func:`read_timeline`: the numbers per GPU and for the host,
    and the findings, worst first."""
    from gpuprobe.tools.monitor.judge import summarize as _summarize

    return _summarize(tl)


def write_run_report(
    tl: Timeline,
    summary: RunSummary,
    *,
    html_path: str | Path | None = None,
    png_path: str | Path | None = None,
) -> list[Path]:
    """Write the report of a recording and its :func:`summarize` summary: the HTML page to
    ``html_path`` and/or the one-figure PNG to ``png_path``; returns the files written."""
    from gpuprobe.tools.monitor.show.html import write_run_report as _write

    return _write(tl, summary, html_path=html_path, png_path=png_path)


def plot_timeline(tl: Timeline, path: PathLike) -> None:
    """Draw a recording's charts (GPU panels when GPUs were recorded, then the CPU) into one
    figure titled with its command, written to ``path`` (``.png``, ``.svg`` or ``.pdf``); a file
    that cannot be written raises :class:`OSError`."""
    from gpuprobe.tools.monitor.show.plots import timeline_figure
    from gpuprobe.tools.monitor.summary import command_text

    fig = timeline_figure(tl, title=f"gpuprobe run: {command_text(tl.header.command)}")
    fig.savefig(path, dpi=100)


def top(
    *,
    interval: float = 1.0,
    iterations: int | None = None,
    console: Console | None = None,
    nvml: NvmlFactory | None = None,
    sink: Callable[[Sample], None] | None = None,
    pcie_throughput: bool = False,
) -> TopView:
    """The live view of every GPU, its processes and the host's cores, redrawn every
    ``interval`` seconds, ``iterations`` times (until ``q`` or Ctrl-C when None); each sample
    also goes to ``sink``. Returns the view."""
    from gpuprobe.tools.monitor.show.top import run_top

    return run_top(
        interval=interval,
        iterations=iterations,
        console=console,
        nvml=nvml,
        sink=sink,
        pcie_throughput=pcie_throughput,
    )


def serve_metrics(
    host: str = "127.0.0.1",
    port: int = 19400,
    *,
    hz: float = 1.0,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
) -> tuple[MetricsServer, Sampler, GpuprobeCollector]:
    """Serve ``/metrics`` for Prometheus (dcgm-exporter's metric names, and the host's): start
    the sampler and the HTTP server; returns (server, sampler, collector). ``port=0`` picks a
    free port. Stop with ``server.shutdown(); server.server_close(); sampler.close()``."""
    from gpuprobe.tools.monitor.exporter import serve

    server, sampler, collector = serve(
        host, port, hz=hz, pcie_throughput=pcie_throughput, nvml=nvml
    )
    return server, sampler, collector


def parse_counts(text: str) -> list[int]:
    """The copy counts of :func:`pack` from text: ``"1,2,3,4"`` or ``"1-4"``; a clear
    :class:`~gpuprobe.core.errors.UsageError` for zero, negatives, non-integers and too many."""
    from gpuprobe.tools.monitor.pack import parse_counts as _parse

    return _parse(text)


def precision_dtypes() -> tuple[str, ...]:
    """The precisions :func:`precision_sweep` knows, in the order it runs them (fp32 first: the
    reference the others are measured against)."""
    from gpuprobe.tools.memory.precision import DTYPES

    return DTYPES


def classify_oom(exc: BaseException) -> OomError | None:
    """What an out-of-memory error says (the request, the device, the allocator's numbers) when
    ``exc`` (or an exception it was raised from) is one, from any framework; else None."""
    from gpuprobe.tools.memory.oom.classify import classify_oom as _classify

    return _classify(exc)


def demo_device() -> str:
    """Where the demo models of ``gpuprobe fit`` and ``gpuprobe precision`` run by default:
    ``cuda`` when torch sees a GPU, else ``cpu`` (torch is needed)."""
    from gpuprobe.tools.memory.demo import best_device

    return best_device()


def demo_models() -> dict[str, dict[str, int]]:
    """The shapes of the demo models: ``"mlp"`` (what :func:`demo_fit_step` trains) and
    ``"encoder"`` (what :func:`demo_encoder` builds)."""
    from gpuprobe.tools.memory.demo import DEMO_ENCODER, DEMO_MLP

    return {"mlp": DEMO_MLP, "encoder": DEMO_ENCODER}


def demo_fit_step(device: str) -> Callable[[int], float]:
    """One SGD training step of the demo MLP at a batch size, on ``device``: a ``step`` for
    :func:`fit` (it pickles into a trial's child process)."""
    import functools

    from gpuprobe.tools.memory.demo import check_device, mlp_train_step

    check_device(device)
    return functools.partial(mlp_train_step, device=device)


def demo_encoder(batch: int, device: str) -> tuple[Any, Any]:
    """The demo ``nn.TransformerEncoder`` (random weights, no download) on ``device`` and a
    ``batch`` of random inputs for it: a model and inputs for :func:`precision_sweep`."""
    from gpuprobe.tools.memory.demo import encoder, encoder_inputs

    model = encoder(device)
    return model, encoder_inputs(batch, device)


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one): how many
    local workers :func:`scale_lstsq` can give a core each."""
    from gpuprobe.tools.scale.engine import available_cores as _cores

    return _cores()


def scale_lstsq(
    rows: int = 100_000,
    cols: int = 500,
    *,
    input: str | Path | None = None,
    target: str | None = None,
    workers: Sequence[int] = (1, 2),
    methods: Sequence[str] = ("normal", "tsqr"),
    problem: str = "gaussian",
    cond: float = 1.0,
    seed: int = 0,
    chunk_rows: int | None = None,
    repeats: int = 1,
    scheduler: str | None = None,
    processes: bool = True,
    compare_numpy: bool = True,
    compare_dask: bool = False,
    sgd: SgdSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> ScaleResult:
    """How :func:`lstsq` scales: every method on every worker count of a local Dask cluster (or
    ``scheduler``'s), on a generated problem of ``rows`` x ``cols`` or on ``input``, against
    NumPy; the times, speed-ups, accuracy checks and findings."""
    from gpuprobe.tools.scale.sweep import scale_lstsq as _scale

    return _scale(
        rows,
        cols,
        input=input,
        target=target,
        workers=workers,
        methods=methods,
        problem=problem,
        cond=cond,
        seed=seed,
        chunk_rows=chunk_rows,
        repeats=repeats,
        scheduler=scheduler,
        processes=processes,
        compare_numpy=compare_numpy,
        compare_dask=compare_dask,
        sgd=sgd,
        progress=progress,
    )
