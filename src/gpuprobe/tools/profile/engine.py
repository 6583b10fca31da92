"""``gpuprobe profile -- CMD``: run an unmodified command with the start-up hook armed, record its
timeline like ``gpuprobe run``, then diagnose the traces its Python processes wrote.

The command runs exactly as under ``gpuprobe run`` (same process group and signal handling, its
exit code passed through); only its environment differs: ``PYTHONPATH`` starts with the hook's
folder and ``GPUPROBE_PROFILE`` holds the window (:mod:`~gpuprobe.tools.profile.hook`). What the
processes did comes back as status files; one trace is diagnosed alone, a job's ranks together,
unrelated processes one by one. Nothing here raises once the command has started: what fails
becomes a note, and the exit code survives.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuprobe.core.errors import GpuprobeError
from gpuprobe.tools.monitor.run import WriteFiles, check_run, finish_run, run_command
from gpuprobe.tools.monitor.sampler import DEFAULT_HZ
from gpuprobe.tools.profile.hook import (
    HookSettings,
    clear_control,
    hook_env,
    prepare_out,
    read_processes,
)
from gpuprobe.tools.profile.model import ProcessVerdict, ProfiledProcess, ProfileReport

if TYPE_CHECKING:
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.model import Diagnosis
    from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis

__all__ = ["WriteVerdict", "capture_events", "diagnose_traces", "profile_command"]

# writes the page of a verdict into a folder: (the single trace's diagnosis and context, or the
# ranks' diagnosis) -> the path written
WriteVerdict = Callable[["Diagnosis | MultiRankDiagnosis", "TraceContext | None", Path], Path]


def profile_command(
    cmd: Sequence[str],
    out_dir: Path,
    settings: HookSettings,
    *,
    hz: float = DEFAULT_HZ,
    write_run: WriteFiles | None = None,
    write_verdict: WriteVerdict | None = None,
) -> ProfileReport:
    """Run ``cmd`` with the hook, record it, and diagnose what it profiled.

    Refuses a command that is not found (exit 127) and an unusable ``out_dir`` (exit 2) before
    anything starts; afterwards never raises for what it reads or writes."""
    check_run(cmd, hz)  # before the folder is made
    out = Path(out_dir)
    prepare_out(out)
    result = run_command(cmd, out, hz=hz, env=hook_env(out, settings))
    result = finish_run(result, write_run)
    processes = read_processes(out)
    with contextlib.suppress(GpuprobeError):
        clear_control(out)  # the statuses are read: no empty .gpuprobe-profile/ left behind
    traces = [t for p in processes for w in p.windows if w.request is None and (t := w.trace)]
    report = ProfileReport(
        command=tuple(cmd),
        out_dir=str(out),
        window=settings.describe(),
        exit_code=result.exit_code,
        processes=tuple(processes),
        run=result.summary,
        files=tuple(str(f) for f in result.files),
        notes=tuple(result.notes),
    )
    if settings.mode == "later":  # the traces that --now requests took meanwhile, and pages
        taken = [
            t for p in processes for w in p.windows if w.request is not None and (t := w.trace)
        ]
        pages = [p for t in taken if (p := Path(t).parent / "diagnosis.html").is_file()]
        return replace(report, files=(*report.files, *map(str, dict.fromkeys([*taken, *pages]))))
    notes = (
        _why_no_trace(
            processes,
            settings,
            python_seen(result.timeline),
            exit_code=result.exit_code,
            leftovers=result.leftovers,
        )
        if not traces
        else []
    )
    report = replace(report, notes=(*report.notes, *notes))
    return diagnose_traces(report, traces, processes, out, write_verdict)


def diagnose_traces(
    report: ProfileReport,
    traces: Sequence[str],
    processes: Sequence[ProfiledProcess],
    out: Path,
    write_verdict: WriteVerdict | None,
) -> ProfileReport:
    """``report`` with the traces' verdict: one trace alone, the ranks of one job together,
    unrelated processes one by one; a trace that cannot be read becomes a note."""
    from gpuprobe.tools.diagnose.engine import diagnose_with_context
    from gpuprobe.tools.diagnose.ranks import diagnose_ranks

    traces = [t for t in traces if os.path.isfile(t)]
    report = replace(report, traces=tuple(traces))
    notes = list(report.notes)
    files = list(report.files)
    if not traces:
        return report
    ranked = {p.rank for p in processes if p.rank is not None and set(p.traces) & set(traces)}
    try:
        if len(traces) > 1 and len(ranked) == len(traces):
            ranks = diagnose_ranks(sorted(traces))
            report = replace(report, ranks=ranks)
            if write_verdict is not None:
                files.append(str(write_verdict(ranks, None, out)))
        elif len(traces) == 1:
            diag, ctx = diagnose_with_context(traces[0])
            report = replace(report, diagnosis=diag)
            if write_verdict is not None:
                files.append(str(write_verdict(diag, ctx, out)))
        else:
            by_trace = {t: p.pid for p in processes for t in p.traces}
            verdicts = []
            for t in traces:
                diag, _ctx = diagnose_with_context(t)
                verdicts.append(ProcessVerdict(pid=by_trace.get(t, 0), trace=t, diagnosis=diag))
            report = replace(report, verdicts=tuple(verdicts))
    except GpuprobeError as exc:
        notes.append(f"gpuprobe: the trace was written but not diagnosed: {exc.message}")
    except OSError as exc:
        notes.append(f"gpuprobe: cannot write the verdict's page: {exc.strerror or exc}")
    return replace(report, files=(*files, *traces), notes=tuple(notes))


def capture_events(out: Path) -> list[dict[str, object]]:
    """The flight recorder's captures (``run --capture-on``), each diagnosed, as timeline
    events (kind ``capture``): the slow step that set it off, the steps recorded, the trace and
    the verdict that leads (its id, status and title), or why there is none."""
    import time

    from gpuprobe.core.findings import Status
    from gpuprobe.tools.diagnose.engine import diagnose

    events: list[dict[str, object]] = []
    for p in read_processes(out):
        windows = {w.request: w for w in p.windows if w.request}
        for c in p.captures:
            w = windows.get(c.request)
            ev: dict[str, object] = {
                "kind": "capture",
                "t": time.time(),
                "pid": p.pid,
                "name": p.name,
                "step": c.step,
                "seconds": round(c.seconds, 6),
                "median_s": round(c.median_s, 6),
                "aimed_at": c.aimed_at,
                "every": c.every,
                "held_slow": c.held_slow,
                "free": c.free,
                "why": c.why,
                "from_median_s": c.from_median_s,
            }
            if w is None:
                ev["state"] = p.requests.get(c.request, "not opened: the process ended first")
            else:
                ev.update(first=w.recorded_from, last=w.last_step, state=w.state, trace=w.trace)
            if w is not None and w.trace:
                try:
                    d = diagnose(w.trace)
                    top = next(
                        (f for f in d.findings if f.status in (Status.FAIL, Status.WARN)), None
                    )
                    ev["verdict"] = None if top is None else top.id
                    ev["verdict_status"] = None if top is None else top.status.value
                    ev["verdict_title"] = (
                        "no problem worth the time in the steps recorded"
                        if top is None
                        else top.title
                    )
                except GpuprobeError as exc:
                    ev["verdict_title"] = f"not diagnosed: {exc.message}"
            events.append(ev)
    return events


def python_seen(timeline: Path) -> int:
    """How many Python processes the timeline saw in the command's tree (0 when unknown)."""
    from gpuprobe.tools.monitor.timeline import read_timeline

    try:
        events = read_timeline(timeline).events
    except GpuprobeError:
        return 0
    pids = set()
    for e in events:
        name = os.path.basename(str(e.get("name") or e.get("executable") or "")).lower()
        if e.get("kind") in ("process", "start") and name.startswith("python"):
            pids.add(e.get("pid"))
    return len(pids)


def _why_no_trace(
    processes: Sequence[ProfiledProcess],
    settings: HookSettings,
    pythons: int,
    *,
    exit_code: int | None = None,
    leftovers: Sequence[int] = (),
) -> list[str]:
    """One line per reason no trace was written, with what to do. What the processes did not
    say is said as unknown, never guessed."""
    if leftovers and not any(p.exited for p in processes):
        return [
            f"gpuprobe: no trace yet: the command exited and left {len(leftovers)} process(es) "
            f"running (pid {', '.join(map(str, leftovers[:4]))}; a detached child?): whether "
            "they profile is not known; a window of theirs is written under traces/ when it ends"
        ]
    if not processes:
        if pythons:
            return [
                f"gpuprobe: no trace: {pythons} Python process(es) ran and none imported torch "
                "that gpuprobe saw (gpuprobe profiles PyTorch; Python run with -I, -E or -S "
                "ignores PYTHONPATH, and its hook); the timeline is all there is"
            ]
        return [
            "gpuprobe: no trace: no Python process that imported torch was seen (a non-Python "
            "command, or Python run with -I, -E or -S, which ignore PYTHONPATH); the timeline "
            "is all there is"
        ]
    out = []
    need = settings.skip + settings.warmup + 1
    for p in processes:
        unit = {"optimizer": "optimizer", "dataloader": "DataLoader"}.get(p.mode or "", "")
        if p.open_window and not p.exited:
            how = "how is not known (SIGKILL, os._exit and a crash in native code leave no word)"
            # the command itself (gpuprobe's child), killed by a signal: that signal, for sure
            if exit_code is not None and exit_code > 128 and p.ppid == os.getpid():
                with contextlib.suppress(ValueError):
                    how = f"it was killed by {signal.Signals(exit_code - 128).name}"
            out.append(
                f"gpuprobe: {p.name}: no trace: it ended during its window without writing it, "
                f"after at least {p.steps} steps (its last status); {how}"
            )
        elif p.aside:
            out.append(
                f"gpuprobe: {p.name}: stood aside: {p.aside}; read its own trace with "
                "gpuprobe diagnose TRACE"
            )
        elif any(w.error for w in p.windows):
            err = next(w.error for w in p.windows if w.error)
            out.append(f"gpuprobe: {p.name}: {err}")
        elif any(w.trace is None for w in p.windows):
            w = next(w for w in p.windows if w.trace is None)
            out.append(
                f"gpuprobe: {p.name}: no trace: the window ({w.state}) closed during its "
                f"{settings.warmup} warm-up steps; lower --warmup or --skip"
            )
        elif settings.seconds is not None:
            out.append(
                f"gpuprobe: {p.name}: no trace: it ended before the window opened "
                f"({settings.delay:g} s after torch was imported); lower --delay"
            )
        elif p.mode is None:
            out.append(
                f"gpuprobe: {p.name}: imported torch but made no optimizer step and iterated "
                "no DataLoader, so it has no steps to profile: use --seconds S for a time window"
            )
        elif p.steps < need:
            out.append(
                f"gpuprobe: {p.name}: no trace: it ran {p.steps} {unit} steps and the window "
                f"records from step {need - 1} on (counting from 0); lower --skip (e.g. "
                f"--skip {max(0, p.steps // 3)})"
            )
    return out or ["gpuprobe: no trace was written, and the processes did not say why"]
