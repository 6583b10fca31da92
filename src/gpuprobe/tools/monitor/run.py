"""``gpuprobe run``: start a command, record the machine and its process tree until it exits.

The command is an argument list (never a shell string), started with ``subprocess.Popen``. When
gpuprobe is the foreground job of a terminal, the command stays in gpuprobe's process group, so it
keeps the terminal (``input()``, ``pdb`` work); otherwise (a pipeline, CI, ``nohup``) it gets a
process group of its own, so that ``kill -INT -PGID`` of gpuprobe's group reaches it once, through
gpuprobe, and not twice. SIGINT, SIGTERM and SIGHUP are taken with ``sigtimedwait``: a signal the
kernel sent to the whole foreground group (Ctrl-C at the terminal, a hang-up, ``si_code ==
SI_KERNEL``) already reached the command and is not sent twice; one sent to gpuprobe alone
(``kill``) is forwarded (to the command's group when it has its own). SIGHUP is handled like
SIGTERM: the command ends, and gpuprobe still writes the end line and the report. gpuprobe then waits for the
command to exit and finishes its report; the command's exit code becomes gpuprobe's (a command
killed by signal N gives 128 + N, as a shell does).

What the command left running when it exited (``cmd &``, ``setsid``, a daemon) is found
(:func:`~gpuprobe.platform.proc.find_leftovers`: its tree as recorded, its process group and
session, and ``GPUPROBE_RUN_ID`` in the environment of all it started), written to the timeline
as a ``leftovers`` event (the rule ``monitor-leftover-processes`` reads it) and, with
``kill_leftovers``, ended: SIGTERM, then SIGKILL after
:data:`~gpuprobe.platform.proc.KILL_GRACE_S`.

Times are seconds.
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psutil

from gpuprobe.core import render
from gpuprobe.core.errors import GpuprobeError, UsageError
from gpuprobe.core.findings import status_counts
from gpuprobe.platform.proc import RUN_ID_ENV, end_processes, find_leftovers, new_run_id
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.sampler import DEFAULT_HZ, NvmlFactory, Sampler, check_hz
from gpuprobe.tools.monitor.timeline import Timeline, TimelineWriter, read_timeline

if TYPE_CHECKING:
    from gpuprobe.core.findings import Finding
    from gpuprobe.tools.monitor.summary import RunSummary

# writes the report files of a judged run into a folder: (paths written, notes on what failed)
WriteFiles = Callable[[Timeline, "RunSummary", Path], tuple[list[Path], list[str]]]

__all__ = [
    "EXIT_NOT_FOUND",
    "FORWARDED_SIGNALS",
    "RunResult",
    "check_run",
    "finish_run",
    "resolve_command",
    "run_command",
]

EXIT_NOT_FOUND = 127  # POSIX shells: command not found (or not executable, here)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel sent (the tty's Ctrl-C); <asm/siginfo.h>
POLL_S = 0.1  # s between checks that the command has exited while waiting for signals
KILL_ROUNDS = 3  # ends of leftovers, each followed by a look for ones started meanwhile
SEEN_PRUNE = 4096  # processes of the tree kept to look for leftovers; past it the dead are dropped


@dataclass(frozen=True)
class RunResult:
    """What ``gpuprobe run`` (:func:`gpuprobe.run`) produced: the command's exit code, the
    timeline, and once judged (:func:`finish_run`) the summary and the report files."""

    exit_code: int  # the command's, 128 + N when signal N killed it
    out_dir: Path
    timeline: Path
    duration_s: float
    samples: int
    sampler_cpu_s: float
    signals: tuple[str, ...]  # SIGINT/SIGTERM/SIGHUP seen while the command ran
    leftovers: tuple[int, ...] = ()  # pids the command left running (ended with kill_leftovers)
    write_error: str | None = None  # why the timeline stopped short (a full disk), if it did
    summary: RunSummary | None = None  # None until judged, or when the timeline was unreadable
    files: tuple[Path, ...] = ()  # the timeline, then the report files written
    notes: tuple[str, ...] = ()  # what could not be read or written, one line each

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The run's findings, worst first (none before it is judged)."""
        return self.summary.findings if self.summary is not None else ()

    def __repr__(self) -> str:
        judged = ""
        if self.summary is not None:
            judged = f"; findings: {status_counts(self.summary.findings)}"
        return (
            f"<RunResult exit code {self.exit_code}: {self.duration_s:.1f} s, "
            f"{self.samples} samples in {self.out_dir}{judged}>"
        )

    def __str__(self) -> str:
        if self.summary is None:
            return repr(self)
        return render.text(self)

    def plot(self, path: str | Path | None = None, *, panels: tuple[str, ...] | None = None) -> Any:
        """The run's charts, read from its timeline, as a matplotlib Figure (Jupyter shows it
        inline); with ``path``, written there in the format its suffix names (.png, .svg, .pdf,
        .jpg) and the path returned."""
        return read_timeline(self.timeline).plot(path, panels=panels)

    def _repr_html_(self) -> str:
        """The summary and findings in a notebook; the charts are in ``report.html`` and
        ``.plot()``."""
        if self.summary is None:
            return f"<pre>{html.escape(repr(self))}</pre>"
        return render.html(self)


def finish_run(result: RunResult, write: WriteFiles | None = None) -> RunResult:
    """Read the run's timeline back, judge it, and (with ``write``) write the report files.

    Never raises for what happens to the files: an unreadable timeline or a report that cannot
    be written becomes a note, so the command's exit code always survives.
    """
    from gpuprobe.tools.monitor.judge import summarize

    try:
        tl = read_timeline(result.timeline)
    except GpuprobeError as exc:
        return replace(
            result, files=(result.timeline,), notes=(f"gpuprobe: no summary: {exc.message}",)
        )
    if result.write_error and tl.end is None:  # the end line did not fit; the exit code is known
        tl.end = {
            "type": "end",
            "t": tl.start + result.duration_s,
            "exit_code": result.exit_code,
            "write_error": result.write_error,
        }
    summary = summarize(tl)
    files: list[Path] = [result.timeline]
    notes: list[str] = []
    if write is not None:
        more, more_notes = write(tl, summary, result.out_dir)
        files += more
        notes += more_notes
    return replace(result, summary=summary, files=tuple(files), notes=tuple(notes))


def resolve_command(cmd: Sequence[str]) -> str:
    """The executable ``cmd[0]`` will run, or a clear error with exit code 127 (2 for a command
    given as one string: gpuprobe never runs a shell)."""
    if isinstance(cmd, str):
        example = ", ".join(repr(w) for w in cmd.split()[:3]) or "'python', 'train.py'"
        raise UsageError(
            f"the command {cmd!r} is one string; give it as an argument list, such as "
            f"[{example}] (gpuprobe never runs a shell)"
        )
    if not cmd:
        raise UsageError("no command given: gpuprobe run [OPTIONS] -- CMD [ARGS...]")
    name = cmd[0]
    if os.sep in name:
        path = Path(name)
        if not path.exists():
            raise GpuprobeError(f"{name}: no such file", EXIT_NOT_FOUND)
        if path.is_dir():
            raise GpuprobeError(
                f"{name}: a directory, not a command; give the program to run in it",
                EXIT_NOT_FOUND,
            )
        if not os.access(path, os.X_OK):
            raise GpuprobeError(
                f"{name}: not executable (chmod +x it, or run it with its interpreter)",
                EXIT_NOT_FOUND,
            )
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise GpuprobeError(f"{name}: command not found on PATH", EXIT_NOT_FOUND)
    return found


def check_run(cmd: Sequence[str], hz: float) -> str:
    """Everything about a run that can be refused, refused before any file or folder is made:
    the command (:func:`resolve_command`) and the sampling rate. Returns the executable."""
    executable = resolve_command(cmd)
    check_hz(hz)
    return executable


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _can_wait_signals() -> bool:
    return (
        threading.current_thread() is threading.main_thread()
        and hasattr(signal, "sigtimedwait")
        and hasattr(signal, "pthread_sigmask")
    )


def _foreground_of_terminal() -> bool:
    """True when gpuprobe is in the foreground process group of its controlling terminal."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return True
    return False


def run_command(
    cmd: Sequence[str],
    out_dir: str | Path,
    *,
    hz: float = DEFAULT_HZ,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
    on_started: Callable[[int], None] | None = None,
    env: Mapping[str, str] | None = None,
    kill_leftovers: bool = False,
    at_end: Callable[[], Sequence[dict[str, Any]]] | None = None,
    serve: RunWatcher | None = None,
) -> RunResult:
    """Record ``cmd`` until it exits; return its exit code and where the timeline is. ``env``:
    the command's environment (default: gpuprobe's own), to which ``GPUPROBE_RUN_ID`` is added.
    The processes the command left running are recorded, and with ``kill_leftovers`` ended.
    ``at_end()``, once the command has exited, gives more events for the timeline (each a dict
    with ``kind`` and ``t``: the steps its processes recorded), written before the end line.
    ``serve`` (a :class:`~gpuprobe.tools.monitor.run_metrics.RunServer`) gets the sampler once
    it is open and every sample, and is closed when the recording ends.

    Refuses an unwritable ``out_dir`` (:class:`~gpuprobe.core.errors.InputError`, exit 2) and a
    command that is not found or not executable (exit 127) before anything starts.
    """
    executable = check_run(cmd, hz)
    cmd = list(cmd)
    writer = TimelineWriter.create(out_dir)  # refuses before the command starts
    forwarded: list[str] = []
    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    run_id = new_run_id()
    env = {**(os.environ if env is None else env), RUN_ID_ENV: run_id}
    seen: list[psutil.Process] = []  # the tree as recorded, to look for leftovers at the end

    def on_new(proc: psutil.Process) -> None:
        seen.append(proc)
        if len(seen) > SEEN_PRUNE:
            seen[:] = [p for p in seen if p.is_running()]
        name = cmdline = ppid = None
        with contextlib.suppress(psutil.Error):
            name = proc.name()
            cmdline = proc.cmdline()[:8]
        with contextlib.suppress(psutil.Error):
            ppid = proc.ppid()
        writer.write_event("process", pid=proc.pid, ppid=ppid, name=name, cmdline=cmdline)

    sampler = Sampler(hz=hz, pcie_throughput=pcie_throughput, on_new_process=on_new, **kwargs)
    sink: Callable[[Sample], None] = writer.write_sample
    pending: list[int] = []
    old_handlers: dict[int, Any] = {}
    use_sigwait = _can_wait_signals()
    own_group = not _foreground_of_terminal()
    group_kwargs: dict[str, Any] = {}
    if own_group:
        if sys.version_info >= (3, 11):
            group_kwargs["process_group"] = 0
        else:  # pragma: no cover - Python 3.10
            group_kwargs["preexec_fn"] = os.setpgrp
    try:
        sampler.open()  # NVML first: its init can take a second without persistence mode
        if serve is not None:
            serve.attach(sampler)
            sink = _tee(writer.write_sample, serve.update)
        if use_sigwait:
            for sig in FORWARDED_SIGNALS:  # a signal before the mask is in place is not lost
                if signal.getsignal(sig) is signal.SIG_IGN:
                    continue  # nohup's SIGHUP, a script's background job's SIGINT: the
                    # command inherits the ignore across exec, as it would without gpuprobe
                old_handlers[sig] = signal.signal(sig, lambda s, f: pending.append(s))
        try:
            proc = subprocess.Popen(cmd, executable=executable, env=env, **group_kwargs)
        except OSError as exc:
            writer.close()  # nothing was recorded: leave no headerless file behind
            with contextlib.suppress(OSError):
                writer.path.unlink()
            raise GpuprobeError(
                f"{cmd[0]}: cannot start: {exc.strerror or exc}", EXIT_NOT_FOUND
            ) from None
        t_start = time.time()
        if use_sigwait:
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
        with contextlib.suppress(psutil.Error):  # gone already: the host is still recorded
            sampler.watch(proc.pid)
        writer.write_header(sampler.header(started=t_start, command=tuple(cmd), pid=proc.pid))
        writer.write_event("start", t=t_start, pid=proc.pid, executable=executable)
        sampler.start(sink)  # the thread inherits the blocked mask
        if on_started is not None:
            on_started(proc.pid)

        def forward(sig: int, why: str) -> None:
            name = signal.Signals(sig).name
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if own_group:
                    os.killpg(proc.pid, sig)  # the command and what it started, as a tty would
                else:
                    proc.send_signal(sig)
            forwarded.append(name)
            writer.write_event("signal", signal=name, forwarded=True, why=why)

        while pending:  # taken off the list: the loop below forwards what is left on it
            forward(pending.pop(0), "arrived while starting")
        returncode = None
        if use_sigwait:
            while returncode is None:
                info = signal.sigtimedwait(FORWARDED_SIGNALS, POLL_S)
                # a siginfo whose number is none of ours has been seen once under a loaded
                # pytest run (si_signo -2108306568): ignore it rather than fail the recording
                if info is not None and info.si_signo in FORWARDED_SIGNALS:
                    if info.si_code == SI_KERNEL and not own_group:
                        # Ctrl-C at the terminal: the whole foreground group got it already.
                        writer.write_event(
                            "signal",
                            signal=signal.Signals(info.si_signo).name,
                            forwarded=False,
                            why="sent to the process group",
                        )
                        forwarded.append(signal.Signals(info.si_signo).name)
                    else:
                        forward(info.si_signo, f"from pid {info.si_pid}")
                while pending:  # delivered to a thread that had them unblocked
                    forward(pending.pop(0), "caught by the handler")
                returncode = proc.poll()
        else:
            returncode = proc.wait()
        exit_code = _exit_code(returncode)
        duration = time.time() - t_start
        writer.write_event("exit", returncode=returncode, exit_code=exit_code)
        sampler.stop(final_sink=sink)
        leftovers = find_leftovers(run_id, command_pid=proc.pid, started=t_start, seen=seen)
        ended: list[int] = []
        running = [lo.pid for lo in leftovers]
        if kill_leftovers and leftovers:
            found = {lo.pid: lo for lo in leftovers}
            for _ in range(KILL_ROUNDS):  # a leftover may start more while it is being ended
                done, running = end_processes([found[p] for p in running])
                ended += done
                more = find_leftovers(run_id, command_pid=proc.pid, started=t_start)
                new = [lo for lo in more if lo.pid not in found]
                found |= {lo.pid: lo for lo in new}
                running += [lo.pid for lo in new]
                if not running:
                    break
            leftovers = list(found.values())
        if leftovers:
            writer.write_event(
                "leftovers",
                processes=[lo.to_dict() for lo in leftovers],
                kill=kill_leftovers,
                ended=sorted(ended),
                still_running=sorted(running),
            )
        if at_end is not None:
            for event in at_end():
                writer.write_event(**event)
        _restore_signals(old_handlers)
        writer.write_end(exit_code=exit_code, duration_s=round(duration, 4), **sampler.end_fields())
        return RunResult(
            exit_code=exit_code,
            out_dir=writer.path.parent,
            timeline=writer.path,
            duration_s=duration,
            samples=sampler.samples,
            sampler_cpu_s=sampler.cpu_s,
            signals=tuple(forwarded),
            leftovers=tuple(lo.pid for lo in leftovers),
            write_error=writer.error,
        )
    finally:
        _restore_signals(old_handlers)
        if serve is not None:
            serve.close()
        sampler.close()
        writer.close()


class RunWatcher(Protocol):
    """What :func:`run_command` feeds while it records (``serve``)."""

    def attach(self, sampler: Sampler) -> None: ...
    def update(self, sample: Sample) -> None: ...
    def close(self) -> None: ...


def _tee(*sinks: Callable[[Sample], None]) -> Callable[[Sample], None]:
    def sink(sample: Sample) -> None:
        for each in sinks:
            each(sample)

    return sink


def _restore_signals(old_handlers: dict[int, Any]) -> None:
    """Unblock SIGINT/SIGTERM and put the previous handlers back (once; idempotent)."""
    if not old_handlers:
        return
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
    for sig, handler in old_handlers.items():
        signal.signal(sig, handler)
    old_handlers.clear()
