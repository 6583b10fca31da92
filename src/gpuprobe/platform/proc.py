"""Helper processes started safely: the current directory never on their path, and gone when
gpuprobe is gone.

- :func:`python_module` is the argument list that runs ``python -m MODULE`` with ``-P`` (Python
  3.11+; a small bootstrap on 3.10), so that a ``torch.py`` in the folder where the user typed
  ``gpuprobe`` is never imported in place of the real one. ``-I`` would also do it, but it drops
  ``PYTHONPATH`` and the user's site-packages, where gpuprobe or torch may be installed.
- :func:`child_env` adds ``PYTHONSAFEPATH=1`` (the same as ``-P``) for interpreters that
  multiprocessing starts (the fork server, spawned children).
- :func:`die_with_parent` is called first thing in a helper: ``PR_SET_PDEATHSIG`` makes the
  kernel kill it when its parent ends, even by SIGKILL, and it exits at once when the parent is
  already gone.
- :func:`find_leftovers` finds the processes a command left running when it exited (``cmd &``,
  ``setsid``, a daemon), three ways: the processes seen in its tree while it ran, those in its
  process group or session, and those whose environment carries the run's marker
  (:data:`RUN_ID_ENV`, inherited by every descendant, ``setsid`` or double fork or not);
  :func:`end_processes` ends them, SIGTERM first.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

__all__ = [
    "KILL_GRACE_S",
    "PARENT_ENV",
    "RUN_ID_ENV",
    "Leftover",
    "abandon",
    "child_env",
    "die_with_parent",
    "end_processes",
    "exit_now_if_abandoned",
    "find_leftovers",
    "new_run_id",
    "python_module",
    "safe_path_env",
]

PARENT_ENV = "GPUPROBE_PARENT_PID"  # the pid a helper must outlive no more than
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RUN_ID_ENV = "GPUPROBE_RUN_ID"  # in a recorded command's environment: finds what it left running
KILL_GRACE_S = 10.0  # s between SIGTERM and SIGKILL; docker stop's default (--time 10)
CMDLINE_WORDS = 8  # words of a command line kept for a leftover (a finding's line, not an audit)
# Python 3.10 has no -P: drop sys.path[0] (the current directory under -c), then run the module.
_BOOT_310 = (
    "import runpy, sys; del sys.path[0]; m = sys.argv.pop(1); "
    "runpy.run_module(m, run_name='__main__', alter_sys=True)"
)


def python_module(module: str, *args: str) -> list[str]:
    """``[python, -P, -m, module, *args]``: a helper whose path has no current directory."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _BOOT_310, module, *args]  # pragma: no cover - 3.10


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for a helper: ``base`` (default ours), ``PYTHONSAFEPATH=1``, this
    process's pid for :func:`die_with_parent`, and ``extra``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONSAFEPATH"] = "1"
    env[PARENT_ENV] = str(os.getpid())
    env.update(extra)
    return env


@contextlib.contextmanager
def safe_path_env() -> Iterator[None]:
    """``PYTHONSAFEPATH=1`` in this process's environment while the block runs (for interpreters
    that multiprocessing starts from it), restored after."""
    old = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = old


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Ask the kernel for ``sig`` when this process's parent ends (Linux); exit now if the
    expected parent (``parent_pid``, else ``$GPUPROBE_PARENT_PID``) is already gone.
    ``parent_pid=0``: no expected parent, exit only when the parent is already init (pid 1)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent_pid is None:
        text = os.environ.get(PARENT_ENV, "")
        parent_pid = int(text) if text.isdigit() else None
    if parent_pid == 0:
        if os.getppid() == 1:
            os._exit(128 + int(sig))
    elif parent_pid is not None and os.getppid() != parent_pid:
        os._exit(128 + int(sig))  # the parent died before the request was in place


def new_run_id() -> str:
    """A fresh value for :data:`RUN_ID_ENV`: 16 hex digits, unguessable (no process of another
    run carries it by chance)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Leftover:
    """A process a command left running, and how it was found (``tree``: seen in the command's
    process tree; ``group``/``session``: in the command's process group or session;
    ``marker``: its environment carries the run's :data:`RUN_ID_ENV`)."""

    pid: int
    ppid: int | None
    cmdline: tuple[str, ...]  # the first CMDLINE_WORDS words, or (name,) when it has none
    found_by: tuple[str, ...]
    process: psutil.Process | None = None  # to end it (psutil checks it is the same process)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "cmdline": list(self.cmdline),
            "found_by": list(self.found_by),
        }


def _ancestors() -> set[int]:
    out = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        out.update(p.pid for p in psutil.Process().parents())
    return out


def find_leftovers(
    run_id: str | None,
    *,
    command_pid: int | None,
    started: float,
    seen: Iterable[psutil.Process] = (),
) -> list[Leftover]:
    """The processes still running that the command (pid ``command_pid``, exited, started at
    ``started``, seconds since the epoch) left behind: in ``seen`` (its tree while it ran), in
    its process group or session (``command_pid`` leads them when it had its own), or carrying
    ``RUN_ID_ENV=run_id`` (``command_pid=None``: several commands, the marker and ``seen``
    only). gpuprobe and its ancestors, zombies, and processes older than the
    command (a reused pid) are left out. Processes of other users are found only through the
    tree and the group (their environment cannot be read)."""
    skip = _ancestors()
    found: dict[int, tuple[psutil.Process, list[str]]] = {}

    def add(p: psutil.Process, how: str) -> None:
        entry = found.setdefault(p.pid, (p, []))
        if how not in entry[1]:
            entry[1].append(how)

    for p in seen:
        with contextlib.suppress(psutil.Error):
            if p.pid != command_pid and p.is_running():  # is_running: not a reused pid
                add(p, "tree")
    for p in psutil.process_iter():
        if p.pid in skip:
            continue
        if command_pid is not None:
            with contextlib.suppress(OSError, psutil.Error):
                if os.getpgid(p.pid) == command_pid:
                    add(p, "group")
                if os.getsid(p.pid) == command_pid:
                    add(p, "session")
        if run_id is not None:
            with contextlib.suppress(psutil.Error, OSError):
                if p.environ().get(RUN_ID_ENV) == run_id:
                    add(p, "marker")
    out = []
    for pid, (p, how) in sorted(found.items()):
        if pid in skip:
            continue
        try:
            with p.oneshot():
                if p.status() == psutil.STATUS_ZOMBIE or p.create_time() < started - 1.0:
                    continue  # 1 s: create_time is rounded to the clock tick
                ppid = p.ppid()
                try:
                    words = tuple(p.cmdline()[:CMDLINE_WORDS]) or (p.name(),)
                except psutil.AccessDenied:
                    words = (p.name(),)
        except psutil.Error:  # gone meanwhile
            continue
        out.append(Leftover(pid, ppid, words, tuple(how), p))
    return out


def end_processes(
    leftovers: Iterable[Leftover], grace_s: float = KILL_GRACE_S
) -> tuple[list[int], list[int]]:
    """SIGTERM each, SIGKILL those still running after ``grace_s``; (pids ended, pids that
    could not be ended: another user's, or still there)."""
    procs = [lo.process for lo in leftovers if lo.process is not None]
    refused: list[int] = []
    for p in procs:
        try:
            p.terminate()  # psutil refuses a pid that is no longer this process
        except psutil.NoSuchProcess:
            pass
        except psutil.AccessDenied:
            refused.append(p.pid)
    _, alive = psutil.wait_procs([p for p in procs if p.pid not in refused], timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            p.kill()
    _, alive = psutil.wait_procs(alive, timeout=1.0)  # SIGKILL cannot be caught: 1 s is plenty
    left = sorted({*refused, *(p.pid for p in alive)})
    return sorted(p.pid for p in procs if p.pid not in left), left


_ABANDONED: list[Any] = []  # threads left running native code when the command was stopped


def abandon(thread: Any) -> None:
    """Note a daemon thread left running native code (LAPACK) when the command was stopped:
    the process must then end with :func:`exit_now_if_abandoned`. OpenBLAS's exit handler
    joins its own server thread, which never ends while a call of the abandoned thread is cut
    short: a normal exit hangs there for ever (issue 41 #1, seen under ``scale lstsq``)."""
    _ABANDONED.append(thread)


def exit_now_if_abandoned(code: int) -> None:
    """End the process now with ``code`` (stdout and stderr flushed, no exit handlers) if a
    thread was noted by :func:`abandon`; return otherwise."""
    if not _ABANDONED:  # one that has ended since may have left OpenBLAS mid-call all the same
        return
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # the semaphores of Dask's worker queues, as a normal exit would
        with contextlib.suppress(Exception):
            mp_util._run_finalizers(0)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
