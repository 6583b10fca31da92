"""``gpuprobe profile --now DIR|PID``: profile the next steps of a job that is running under
``gpuprobe run`` or ``gpuprobe profile --later``, from another terminal, while it keeps running.

The request is a file, ``DIR/.gpuprobe-profile/request.json`` (written whole, then renamed); the
hook in each of the job's processes polls it twice a second, opens a window at its next step
boundary and writes ``DIR/now-ID/``. This side waits until every process that was alive has
answered (or exited, or the time is up), then diagnoses what they wrote. A second request while
one is being answered is refused in one line.

Only the user's own jobs: a folder or a process of another user's is refused as such (the hook
obeys only a request file of its own user), a status folder that is a link or someone else's
is never written in, and the request goes to a random name (``O_EXCL|O_NOFOLLOW``, 0600) before
it is renamed. A PID is the job's own process or gpuprobe's (whose children are looked at, no
deeper: a shell's or init's pid names no job). Times are seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from gpuprobe.core import safejson
from gpuprobe.core.errors import GpuprobeError, InputError, UsageError
from gpuprobe.core.files import user_name, write_atomic
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME
from gpuprobe.tools.profile.engine import WriteVerdict, diagnose_traces
from gpuprobe.tools.profile.hook import (
    CONTROL,
    ENV,
    REQUEST,
    check_control,
    control_dir,
    read_control,
    read_processes,
)
from gpuprobe.tools.profile.model import ProfiledProcess, ProfileReport

__all__ = ["DEFAULT_TIMEOUT_S", "find_job", "request_now"]

DEFAULT_TIMEOUT_S = 120.0  # s to wait for the steps asked for
WAIT_POLL_S = 0.2  # s between looks at the statuses
PICKUP_S = 3.0  # s a process has to take a request before it counts as not answering


def find_job(target: str) -> Path:
    """The output folder of the job ``target`` names: that folder itself, or the PID of one of
    its processes (gpuprobe's own, or one of the command's). Only the user's own jobs: a folder
    or a process of someone else's is refused as such (root included: the job's hook trusts
    only requests of its own user)."""
    path = Path(target)
    if path.is_dir():
        if path.name == CONTROL:
            path = path.parent
        return _own_job(path, target)
    if not target.isdigit():
        raise InputError(f"{target}: no such folder; give the job's --out folder or its PID")
    pid = int(target)
    try:
        proc = psutil.Process(pid)
        uid = proc.uids().real
    except psutil.NoSuchProcess:
        raise InputError(f"no process {pid}; give the job's --out folder or a live PID") from None
    except psutil.AccessDenied:  # a system that hides other users' processes
        raise InputError(
            f"process {pid} belongs to another user, not you; only its owner can profile it "
            "(run gpuprobe profile --now as that user)"
        ) from None
    if uid != os.getuid():
        raise InputError(
            f"process {pid} belongs to {user_name(uid)}, not you; only its owner can profile it "
            "(run gpuprobe profile --now as that user)"
        )
    # the process itself (the command, a rank), or gpuprobe's own process: its children, never
    # deeper, and only the job whose timeline it is writing (a shell's or init's pid must not
    # pick some job started under it, nor an orphan of a gpuprobe that died)
    found: dict[str, int] = {}
    with contextlib.suppress(psutil.Error):
        for p in [proc, *proc.children(recursive=False)]:
            with contextlib.suppress(psutil.Error, ValueError, KeyError, TypeError):
                folder = str(safejson.loads(p.environ()[ENV])["dir"])
                if p is proc:
                    found = {folder: p.pid}
                    break
                if _writes_timeline(proc, folder):
                    found.setdefault(folder, p.pid)
    if not found:
        raise InputError(
            f"process {pid} was not started under gpuprobe run or gpuprobe profile --later (no "
            "profiling hook in it, and it is not gpuprobe's own process); give the job's --out "
            "folder, or start it so: gpuprobe profile --later -- CMD"
        )
    if len(found) > 1:
        dirs = ", ".join(sorted(found)[:3])
        raise InputError(
            f"process {pid} started {len(found)} jobs ({dirs}); give the --out folder of the "
            "one to profile"
        )
    (folder,) = found
    return _own_job(Path(folder), folder)


def _writes_timeline(proc: psutil.Process, folder: str) -> bool:
    """``proc`` holds ``folder``'s timeline open: it is the gpuprobe that runs that job."""
    timeline = os.path.realpath(os.path.join(folder, TIMELINE_NAME))
    return any(os.path.realpath(f.path) == timeline for f in proc.open_files())


def _own_job(path: Path, target: str) -> Path:
    """``path`` when it is a job's folder of the user's own, or a one-line refusal."""
    if not path.is_dir():
        raise InputError(f"{target}: the job's folder is gone; nothing to profile")
    st = path.stat()
    if st.st_uid != os.geteuid():
        raise InputError(
            f"{target} belongs to {user_name(st.st_uid)}, not you; only its owner can profile "
            "the job in it (run gpuprobe profile --now as that user)"
        )
    if os.path.lexists(control_dir(path)):
        check_control(path)
        return path
    if (path / TIMELINE_NAME).exists():
        raise InputError(
            f"no process of the job in {target} has imported torch yet (or it runs with "
            "--no-hook, or has ended); nothing to profile"
        )
    raise InputError(f"{target}: not a job's --out folder (gpuprobe run or profile --later)")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _answered(p: ProfiledProcess, rid: str) -> bool:
    state = p.requests.get(rid)
    return state is not None and state != "pending"


def request_now(
    target: str,
    *,
    steps: int = 5,
    warmup: int = 1,
    seconds: float | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    write_verdict: WriteVerdict | None = None,
    on_wait: Callable[[float], None] | None = None,
) -> ProfileReport:
    """Ask the job ``target`` (its folder or a PID) to profile its next ``steps`` steps (after
    ``warmup``), or ``seconds`` of time; wait up to ``timeout`` and diagnose the traces."""
    if steps < 1 or warmup < 0:
        raise UsageError("profile --now: need --active >= 1 and --warmup >= 0 steps")
    if seconds is not None and seconds <= 0:
        raise UsageError(f"profile --now: --seconds must be above 0, not {seconds:g}")
    if timeout <= 0:
        raise UsageError(f"profile --now: --timeout must be above 0, not {timeout:g}")
    out = find_job(target)
    alive = [p for p in read_processes(out) if not p.exited and _alive(p.pid)]
    # a launcher (torchrun, mp.spawn's parent) imports torch but makes no step: not asked
    live = [p for p in alive if p.mode is not None]
    if not live:
        raise InputError(
            f"no live process of the job in {out} has made a step yet (or the job has "
            "ended); nothing to profile"
            if alive
            else f"no live process of the job in {out} has imported torch yet (or the job has "
            "ended); nothing to profile"
        )
    _refuse_if_busy(out, live)
    rid = time.strftime("%Y%m%d-%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"
    request = {"id": rid, "steps": steps, "warmup": warmup, "seconds": seconds, "t": time.time()}
    path = control_dir(out) / REQUEST
    try:
        check_control(out)  # a link or someone else's folder is refused, never written through
        write_atomic(path, json.dumps(request), private=True)  # a random name, O_EXCL|O_NOFOLLOW
    except OSError as exc:
        raise InputError(f"cannot write the request in {path.parent}: {exc.strerror}") from None
    waiting = {p.pid for p in live}
    t0 = time.monotonic()
    deadline = t0 + timeout
    processes: list[ProfiledProcess] = []
    while True:
        processes = read_processes(out)
        by_pid = {p.pid: p for p in processes}
        waiting = {
            pid
            for pid in waiting
            if _alive(pid) and not (pid in by_pid and _answered(by_pid[pid], rid))
        }
        if not waiting or time.monotonic() > deadline:
            break
        if on_wait is not None:
            on_wait(time.monotonic() - t0)
        time.sleep(WAIT_POLL_S)
    notes = [_late(by_pid.get(pid), pid, rid, timeout) for pid in sorted(waiting)]
    asked = {p.pid for p in live}
    for p in processes:
        state = p.requests.get(rid, "")
        if state.startswith("not taken"):
            notes.append(f"gpuprobe: {p.name}: {state}")
        elif p.pid not in asked and not p.exited:
            notes.append(f"gpuprobe: {p.name}: no steps yet (a launcher?): not asked")
    traces = [t for p in processes for w in p.windows if w.request == rid and (t := w.trace)]
    what = f"{seconds:g} s" if seconds else f"the next {steps} steps after {warmup} of warm-up"
    report = ProfileReport(
        command=(),
        out_dir=str(out),
        window=what,
        processes=tuple(p for p in processes if p.pid in asked),
        notes=tuple(notes),
        request=rid,
    )
    if not traces:
        return report
    return diagnose_traces(report, traces, processes, out / f"now-{rid}", write_verdict)


def _refuse_if_busy(out: Path, live: list[ProfiledProcess]) -> None:
    """A request that a live process is still answering (or has not picked up yet) refuses a
    second one."""
    try:
        last = safejson.loads(read_control(out, REQUEST).decode("utf-8"))
        rid = str(last["id"])
        age = time.time() - float(last.get("t", 0))
    except (OSError, ValueError, KeyError, TypeError):
        return
    busy = [p for p in live if p.requests.get(rid) == "pending" or p.open_window]
    unseen = [p for p in live if rid not in p.requests] if age < PICKUP_S else []
    if busy or unseen:
        who = ", ".join(p.name for p in (busy or unseen)[:3])
        raise GpuprobeError(
            f"a profile of this job is being taken already (request {rid}, {age:.0f} s ago, "
            f"{who}); wait for it to finish, then ask again",
            2,
        )


def _late(p: ProfiledProcess | None, pid: int, rid: str, timeout: float) -> str:
    name = p.name if p is not None else f"pid {pid}"
    if p is not None and p.requests.get(rid) == "pending":
        return (
            f"gpuprobe: {name}: took the request but did not finish its steps within "
            f"{timeout:g} s (a step slower than that, or the loop is stuck); raise --timeout"
        )
    return (
        f"gpuprobe: {name}: did not take the request within {timeout:g} s (no step boundary: "
        "use --seconds S for a time window)"
    )
