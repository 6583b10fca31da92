"""Running and watching jobs: run, profile, record, pack, top, the exporter, timelines. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    import os
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path

    from rich.console import Console

    from gpuprobe.tools.monitor.exporter import GpuprobeCollector, MetricsServer
    from gpuprobe.tools.monitor.live import TopView
    from gpuprobe.tools.monitor.pack_model import PackLevel, PackReport
    from gpuprobe.tools.monitor.record import Recording
    from gpuprobe.tools.monitor.records import Sample
    from gpuprobe.tools.monitor.run import RunResult
    from gpuprobe.tools.monitor.sampler import NvmlFactory, Sampler
    from gpuprobe.tools.monitor.summary import RunSummary
    from gpuprobe.tools.monitor.timeline import Timeline
    from gpuprobe.tools.profile.model import ProfileReport

if TYPE_CHECKING:
    PathLike = str | os.PathLike[str]

__all__ = [
    "pack",
    "parse_counts",
    "plot_timeline",
    "profile_command",
    "profile_now",
    "read_timeline",
    "record",
    "run",
    "serve_metrics",
    "summarize",
    "top",
    "write_run_report",
]


def run(
    cmd: Sequence[str],
    out: PathLike | None = None,
    *,
    hz: float = 2.0,
    pcie_throughput: bool = False,
    report: bool = True,
    hook: bool = True,
    kill_leftovers: bool = False,
    capture_on: Sequence[str] = (),
    capture_steps: int = 5,
    capture_every_s: float = 600.0,
    serve: str | None = None,
    on_serving: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``cmd`` (an argument list, never a shell string), record every GPU, the host and the
    command's process tree until it exits, then judge the run. ``out`` (default
    ``./gpuprobe-run-DATE``) gets ``timeline.jsonl`` and, with ``report``, ``summary.json``,
    ``report.html`` and ``report.png``. The result carries the command's exit code, the summary
    (``None`` when no timeline could be read), the files written and notes on what could not be.
    A report that cannot be written is a note, never an exception: the exit code survives.
    With ``hook``, its PyTorch processes can be profiled while it runs: :func:`profile_now`.
    Processes the command leaves running when it exits are named in a finding
    (``monitor-leftover-processes``); ``kill_leftovers`` ends them (SIGTERM, then SIGKILL).
    Every step of its PyTorch processes is recorded (``result.summary.steps``); with
    ``capture_on=("slow",)`` a slow step (``"drift"``: a running median 1.5× its lowest) makes
    its process profile ``capture_steps`` steps by
    itself (at most once in ``capture_every_s``), each capture diagnosed and listed
    (``monitor-captures``). ``serve`` (``PORT`` or ``HOST:PORT``, 127.0.0.1 without a host)
    serves ``/metrics`` while the command runs: what ``gpuprobe export`` serves, and each
    process's steps (``gpuprobe_step_seconds``, ``gpuprobe_step_joules``; see
    :mod:`gpuprobe.tools.monitor.run_metrics`); ``on_serving(url)`` is told where, before the
    command starts."""
    import contextlib
    import time
    from pathlib import Path

    from gpuprobe.core.errors import GpuprobeError, UsageError
    from gpuprobe.tools.monitor.run import check_run, finish_run, run_command
    from gpuprobe.tools.monitor.steps import step_events
    from gpuprobe.tools.profile.engine import capture_events
    from gpuprobe.tools.profile.hook import (
        HookSettings,
        clear_control,
        hook_env,
        prepare_out,
        read_steps,
    )

    out = Path(out) if out is not None else Path(time.strftime("gpuprobe-run-%Y%m%d-%H%M%S"))
    env = None
    if capture_on and not hook:
        raise UsageError("capture_on needs the hook: hook=True")
    settings = HookSettings(  # checks capture_on and its numbers
        mode="later",
        capture_on=tuple(capture_on),
        capture_steps=capture_steps,
        capture_every_s=capture_every_s,
    )
    if serve is not None and not hook:
        raise UsageError("serve needs the hook for its steps: hook=True")
    server = None
    if hook:
        check_run(cmd, hz)  # 127 for the command, 2 for --hz, before the folder is made
        if serve is not None:  # a bad address or a taken port, before the folder is made
            from gpuprobe.tools.monitor.run_metrics import RunServer, parse_listen

            try:
                host, port = parse_listen(serve)
            except ValueError as exc:
                raise UsageError(f"serve {exc}") from None
            server = RunServer(host, port, lambda: read_steps(out))
        try:
            prepare_out(out)
        except BaseException:
            if server is not None:
                server.close()
            raise
        env = hook_env(out, settings)
    if server is not None and on_serving is not None:
        on_serving(server.url)
    try:
        result = run_command(
            cmd,
            out,
            hz=hz,
            pcie_throughput=pcie_throughput,
            env=env,
            kill_leftovers=kill_leftovers,
            # the flight recorder: each PyTorch process's steps and captures, into the timeline
            at_end=(lambda: step_events(read_steps(out)) + capture_events(out)) if hook else None,
            serve=server,
        )
    finally:
        if server is not None:
            server.close()
    if hook:  # the job is over: nothing to ask it any more, no .gpuprobe-profile/ left behind
        with contextlib.suppress(GpuprobeError):
            clear_control(out)
    if not report:
        return finish_run(result, None)
    from gpuprobe.tools.monitor.show.files import write_run_files

    return finish_run(result, write_run_files)


def profile_command(
    cmd: Sequence[str],
    out: PathLike | None = None,
    *,
    skip: int = 10,
    warmup: int = 2,
    active: int = 5,
    seconds: float | None = None,
    delay: float = 5.0,
    later: bool = False,
    with_stack: bool = False,
    memory: bool = False,
    record_shapes: bool = False,
    hz: float = 2.0,
) -> ProfileReport:
    """Run ``cmd`` unchanged, profile a window of steady-state steps in each of its PyTorch
    processes (``skip`` steps, ``warmup``, then ``active`` recorded; or ``seconds`` of time after
    ``delay``), record its timeline like :func:`run`, and diagnose the traces. ``out`` (default
    ``./gpuprobe-profile-DATE``) gets ``traces/``, ``diagnosis.html`` and the run's files. With
    ``later``, no window until :func:`profile_now` asks for one."""
    import time
    from pathlib import Path

    from gpuprobe.tools.monitor.show.files import write_run_files
    from gpuprobe.tools.profile.engine import profile_command as _profile
    from gpuprobe.tools.profile.hook import HookSettings
    from gpuprobe.tools.profile.show import write_verdict_page

    settings = HookSettings(
        mode="later" if later else "auto",
        skip=skip,
        warmup=warmup,
        active=active,
        seconds=seconds,
        delay=delay,
        with_stack=with_stack,
        memory=memory,
        record_shapes=record_shapes,
    )
    out = Path(out) if out is not None else Path(time.strftime("gpuprobe-profile-%Y%m%d-%H%M%S"))
    return _profile(
        cmd, out, settings, hz=hz, write_run=write_run_files, write_verdict=write_verdict_page
    )


def profile_now(
    job: PathLike | int,
    *,
    steps: int = 5,
    warmup: int = 1,
    seconds: float | None = None,
    timeout: float = 120.0,
) -> ProfileReport:
    """Profile the next ``steps`` steps (or ``seconds``) of a job running under :func:`run` or
    ``profile_command(later=True)`` (``job``: its output folder or a PID), while it keeps
    running; waits up to ``timeout`` seconds and diagnoses the traces."""
    import os

    from gpuprobe.tools.profile.ondemand import request_now
    from gpuprobe.tools.profile.show import write_verdict_page

    target = str(job) if isinstance(job, int) else os.fspath(job)
    return request_now(
        target,
        steps=steps,
        warmup=warmup,
        seconds=seconds,
        timeout=timeout,
        write_verdict=write_verdict_page,
    )


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


def pack(
    cmd: Sequence[str],
    counts: Sequence[int] | str = (1, 2, 3, 4),
    *,
    rate: str | None = None,
    hz: float = 2.0,
    nvml: NvmlFactory | None = None,
    on_level: Callable[[PackLevel], None] | None = None,
    kill_leftovers: bool = False,
) -> PackReport:
    """Run 1, 2, 3… copies of ``cmd`` side by side on one GPU and find how many to pack: the
    total throughput (read from the job's output with the ``rate`` pattern), memory and
    utilization at each count. What the copies leave running is named in a finding;
    ``kill_leftovers`` ends it before the next level."""
    from gpuprobe.tools.monitor.pack import pack as _pack

    return _pack(
        cmd,
        counts,
        rate=rate,
        hz=hz,
        nvml=nvml,
        on_level=on_level,
        kill_leftovers=kill_leftovers,
    )


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
    allow_hosts: tuple[str, ...] = (),
) -> tuple[MetricsServer, Sampler, GpuprobeCollector]:
    """Serve ``/metrics`` for Prometheus (dcgm-exporter's metric names, and the host's): start
    the sampler and the HTTP server; returns (server, sampler, collector). ``port=0`` picks a
    free port. Requests whose Host header names neither this machine nor one of
    ``allow_hosts`` are refused (403: DNS rebinding); an empty ``host`` is a UsageError. Stop
    with ``server.shutdown(); server.server_close(); sampler.close()``."""
    from gpuprobe.tools.monitor.exporter import serve

    server, sampler, collector = serve(
        host, port, hz=hz, pcie_throughput=pcie_throughput, nvml=nvml, allow_hosts=allow_hosts
    )
    return server, sampler, collector


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


def plot_timeline(tl: Timeline, path: PathLike) -> Path:
    """Draw a recording's charts (the panels with data: GPU ones when GPUs were recorded, then
    the CPU) into one figure titled with its command, written to ``path`` in the format its
    suffix names (``.png``, ``.svg``, ``.pdf``, ``.jpg``); returns the path. A wrong suffix, or a
    file that cannot be written, raises :class:`~gpuprobe.core.errors.UsageError`."""
    import pathlib

    return tl.plot(pathlib.Path(path))


def parse_counts(text: str) -> list[int]:
    """The copy counts of :func:`pack` from text: ``"1,2,3,4"`` or ``"1-4"``; a clear
    :class:`~gpuprobe.core.errors.UsageError` for zero, negatives, non-integers and too many."""
    from gpuprobe.tools.monitor.pack import parse_counts as _parse

    return _parse(text)
