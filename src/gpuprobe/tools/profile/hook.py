"""The parent's side of the start-up hook: its settings, the environment that arms it, and what
each profiled process wrote back.

``startup/`` (shipped with the package, imported by no gpuprobe module) holds the code that runs
inside the command's Python processes: ``sitecustomize.py`` arms ``_gpuprobe_profile.py`` when
``GPUPROBE_PROFILE`` is set. The names of the files both sides share are kept here and there;
``tests/tools/profile/test_hook.py`` checks that they agree.

Times are seconds.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuprobe.core import safejson
from gpuprobe.core.errors import InputError, UsageError
from gpuprobe.core.files import check_own_dir, private_dir, read_own_file, user_name
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME
from gpuprobe.tools.profile.model import ProfiledCapture, ProfiledProcess, ProfiledWindow

__all__ = [
    "CAPTURES",
    "CAPTURE_ON",
    "CONTROL",
    "ENV",
    "HOOK_DIR",
    "REQUEST",
    "TRACES",
    "HookSettings",
    "check_control",
    "clear_control",
    "control_dir",
    "hook_env",
    "prepare_out",
    "read_control",
    "read_processes",
    "read_steps",
]

HOOK_DIR = Path(__file__).resolve().parent / "startup"  # put first on the command's PYTHONPATH
ENV = "GPUPROBE_PROFILE"  # the settings, JSON
CONTROL = ".gpuprobe-profile"  # under the output folder: one status per process, the requests
REQUEST = "request.json"
TRACES = "traces"

# defaults: torch.profiler's own advice (skip the first iterations: lazy init, cudnn autotuning,
# compilation; warm up so the first recorded step carries no profiler start-up)
CAPTURE_ON = ("slow", "drift")  # what run --capture-on takes
CAPTURE_SLOW_K = 2.0  # × the running median step: a slow step (the summary's SLOW_K)
DEFAULT_CAPTURE_STEPS = 5  # steps a capture records
DEFAULT_CAPTURE_EVERY_S = 600.0  # s: at most one capture a process in this long
CAPTURES = "captures"  # under the output folder: each capture's trace in step-N/
DEFAULT_SKIP = 10  # steps
DEFAULT_WARMUP = 2  # steps
DEFAULT_ACTIVE = 5  # steps
DEFAULT_DELAY_S = 5.0  # s after torch is imported, before a --seconds window opens


@dataclass(frozen=True)
class HookSettings:
    """What the hook does in each process: ``auto`` profiles one window by itself (steps, or
    ``seconds`` of time after ``delay``); ``later`` waits for ``gpuprobe profile --now``."""

    mode: Literal["auto", "later"] = "auto"
    skip: int = DEFAULT_SKIP
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    seconds: float | None = None
    delay: float = DEFAULT_DELAY_S
    with_stack: bool = False
    memory: bool = False
    record_shapes: bool = False
    # the flight recorder's own captures (run --capture-on): on what (CAPTURE_ON), how many
    # steps each records, and at most one a process per capture_every_s
    capture_on: tuple[str, ...] = ()
    capture_steps: int = DEFAULT_CAPTURE_STEPS
    capture_every_s: float = DEFAULT_CAPTURE_EVERY_S

    def __post_init__(self) -> None:
        if self.skip < 0 or self.warmup < 0 or self.active < 1:
            raise UsageError("profile: need --skip >= 0, --warmup >= 0 and --active >= 1 steps")
        bad = [c for c in self.capture_on if c not in CAPTURE_ON]
        if bad:
            raise UsageError(
                f"--capture-on {','.join(bad)}: give slow (a step past {CAPTURE_SLOW_K:g}× the "
                "running median, or more when the steps spread more), drift (the running "
                "median 1.5× its lowest) or both: slow,drift"
            )
        if self.capture_steps < 1 or self.capture_every_s < 0:
            raise UsageError("--capture-on: need 1 or more steps a capture, 0 s or more apart")
        if self.seconds is not None and self.seconds <= 0:
            raise UsageError(f"profile: --seconds must be above 0, not {self.seconds:g}")
        if self.delay < 0:
            raise UsageError(f"profile: --delay must be 0 or more, not {self.delay:g}")

    def describe(self) -> str:
        """The window in words, for the report."""
        if self.mode == "later":
            return "no window until asked (gpuprobe profile --now)"
        if self.seconds is not None:
            return f"{self.seconds:g} s, {self.delay:g} s after torch was imported"
        return f"skip {self.skip} steps, warm up {self.warmup}, record {self.active}"


def hook_env(
    out_dir: Path, settings: HookSettings, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The command's environment: ``base`` (default: this process's), the hook's folder first on
    ``PYTHONPATH`` and its settings in ``GPUPROBE_PROFILE``."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH", "")
    # an empty entry means the working directory (":x", "x:"): kept, as every other one
    parts = [p for p in old.split(os.pathsep) if not p or Path(p).resolve() != HOOK_DIR]
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR), *parts]) if old else str(HOOK_DIR)
    cfg = {
        "dir": str(Path(out_dir).resolve()),
        "mode": settings.mode,
        "skip": settings.skip,
        "warmup": settings.warmup,
        "active": settings.active,
        "seconds": settings.seconds,
        "delay": settings.delay,
        "with_stack": settings.with_stack,
        "memory": settings.memory,
        "record_shapes": settings.record_shapes,
        "capture_on": list(settings.capture_on),
        "capture_steps": settings.capture_steps,
        "capture_every_s": settings.capture_every_s,
        "capture_k": CAPTURE_SLOW_K,
    }
    env[ENV] = json.dumps(cfg)
    return env


def control_dir(out_dir: Path) -> Path:
    """Where the processes of a run under ``out_dir`` write their statuses."""
    return Path(out_dir) / CONTROL


def prepare_out(out: Path) -> None:
    """Make ``out``, or refuse in one line before anything starts: a file, an unwritable place,
    a folder that already holds a recording, a folder that is not the user's own or that another
    user can write in (:func:`~gpuprobe.core.files.check_own_dir`), or a status folder in it that
    is a link or someone else's. The status folder itself is made by the first process that
    imports torch (a command that never does leaves none); a stale one of the user's own is
    emptied."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory; give a directory")
    if os.path.lexists(out):
        check_own_dir(out)  # someone else's folder first: what is in it is theirs to say
    if (out / TIMELINE_NAME).exists():
        raise InputError(f"{out / TIMELINE_NAME} already holds a recording; give another --out")
    try:
        private_dir(out)  # 0700 when made here; an existing one must be the user's alone
        if os.path.lexists(control_dir(out)):
            clear_control(out, remove=False)
    except OSError as exc:
        raise InputError(
            f"cannot create --out {out}: {exc.strerror or exc}; give a writable directory"
        ) from None


def _open_control(out_dir: Path) -> int | None:
    """A descriptor of ``out_dir``'s status folder, or None when there is none; refuses
    (:class:`~gpuprobe.core.errors.InputError`) a link or a folder that is not the user's."""
    path = control_dir(out_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path) or exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InputError(
                f"{path} is a link or a file, not gpuprobe's status folder; remove it "
                f"(rm {path}) and try again"
            ) from None
        raise InputError(f"cannot open {path}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid():
        os.close(fd)
        raise InputError(
            f"{path} belongs to {user_name(st.st_uid)}, not you; gpuprobe trusts no request or "
            "status in it: give a folder of your own"
        )
    if mode & 0o022:
        os.close(fd)
        raise InputError(
            f"{path} can be written by other users (mode {mode:04o}); gpuprobe trusts no "
            f"request or status in it: remove it (rm -r {path}) and try again"
        )
    return fd


def check_control(out_dir: Path) -> None:
    """Refuse (InputError) a status folder that is a link or not the user's own."""
    fd = _open_control(out_dir)
    if fd is not None:
        os.close(fd)


def _own_entries(fd: int) -> list[str]:
    return [n for n in os.listdir(fd) if n.startswith(("proc-", "steps-", REQUEST, "."))]


def clear_control(out_dir: Path, *, remove: bool = True) -> None:
    """Empty ``out_dir``'s status folder of what gpuprobe writes there (statuses, the request,
    their temporary files), through its descriptor (a link in it is removed, never followed);
    with ``remove``, the folder too, once the job is done (it is left where something else
    is in it). Refuses a link or a folder of someone else's (InputError). With
    ``GPUPROBE_KEEP_STATUS=1`` in the environment the finished job's statuses are kept, to be
    looked at (how many processes wrote one, what each said)."""
    if remove and os.environ.get("GPUPROBE_KEEP_STATUS") == "1":
        return
    fd = _open_control(out_dir)
    if fd is None:
        return
    try:
        for name in _own_entries(fd):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)
    if remove:
        with contextlib.suppress(OSError):
            os.rmdir(control_dir(out_dir))


def read_control(out_dir: Path, name: str) -> bytes:
    """The bytes of one file of ``out_dir``'s status folder when it is a regular file of the
    user's own; ``OSError`` otherwise (``EPERM``: someone else's; ``ELOOP``: a link)."""
    fd = _open_control(out_dir)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "no status folder", str(control_dir(out_dir)))
    try:
        return read_own_file(name, dir_fd=fd)
    finally:
        os.close(fd)


def read_processes(out_dir: Path) -> list[ProfiledProcess]:
    """Every status the command's Python processes wrote, by pid; a torn file, a link, or one
    that is not the user's own is left out (a process killed while writing leaves only its
    ``.tmp``), and so is a trace path outside ``out_dir``."""
    out: list[ProfiledProcess] = []
    with _control_or_none(out_dir) as fd:
        if fd is None:
            return out
        names = sorted(n for n in os.listdir(fd) if n.startswith("proc-") and n.endswith(".json"))
        for name in names:
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                doc = safejson.loads(read_own_file(name, dir_fd=fd).decode("utf-8"))
                out.append(_process(doc, Path(out_dir)))
    return sorted(out, key=lambda p: (p.rank if p.rank is not None else -1, p.pid))


@contextlib.contextmanager
def _control_or_none(out_dir: Path) -> Iterator[int | None]:
    """A descriptor of ``out_dir``'s status folder, closed after; None when there is none or it
    is refused (a link, someone else's): nothing to read then."""
    try:
        fd = _open_control(out_dir)
    except InputError:
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def read_steps(out_dir: Path) -> list[tuple[int, str, str | None, list[float]]]:
    """The flight recorder's steps: ``(pid, script, mode, step ends)`` of each process that wrote
    a status and counted steps (each end in seconds since the epoch, as the process's clock
    said); a file that is torn, a link or not the user's own is left out."""
    import numpy as np

    out: list[tuple[int, str, str | None, list[float]]] = []
    processes = read_processes(out_dir)
    with _control_or_none(out_dir) as fd:
        if fd is None:
            return out
        for p in processes:
            with contextlib.suppress(OSError, ValueError):
                raw = read_own_file(f"steps-{p.pid}.f64", dir_fd=fd)
                whole = len(raw) - len(raw) % 8  # a kill mid-append leaves part of the last
                ends = np.frombuffer(raw[:whole], dtype=np.float64)
                if len(ends):
                    out.append((p.pid, p.name, p.mode, ends.tolist()))
    return out


def _process(doc: dict[str, Any], out_dir: Path) -> ProfiledProcess:
    windows = [_window(w, out_dir) for w in doc.get("windows") or ()]
    requests = {str(k): str(v.get("state")) for k, v in (doc.get("requests") or {}).items()}
    return ProfiledProcess(
        pid=int(doc["pid"]),
        ppid=doc.get("ppid"),
        host=str(doc.get("host") or ""),
        argv=tuple(str(a) for a in doc.get("argv") or ()),
        rank=doc.get("rank"),
        world_size=doc.get("world_size"),
        torch=doc.get("torch"),
        mode=doc.get("mode"),
        steps=int(doc.get("steps") or 0),
        windows=tuple(windows),
        requests=requests,
        aside=doc.get("aside"),
        notes=tuple(str(n) for n in doc.get("notes") or ()),
        exited=bool(doc.get("exited")),
        open_window=doc.get("open_window") is not None,
        captures=tuple(_capture(c) for c in doc.get("captures") or () if isinstance(c, dict)),
    )


def _capture(c: dict[str, Any]) -> ProfiledCapture:
    return ProfiledCapture(
        request=str(c.get("request") or ""),
        step=int(c.get("step") or 0),
        seconds=float(c.get("seconds") or 0.0),
        median_s=float(c.get("median_s") or 0.0),
        aimed_at=None if c.get("aimed_at") is None else int(c["aimed_at"]),
        every=None if c.get("every") is None else int(c["every"]),
        held_slow=None if c.get("held_slow") is None else bool(c["held_slow"]),
        free=bool(c.get("free")),
        why="drift" if c.get("why") == "drift" else "slow",
        from_median_s=None if c.get("from_median_s") is None else float(c["from_median_s"]),
    )


def _inside(trace: Any, out_dir: Path) -> str | None:
    """``trace`` when it is a path inside ``out_dir`` (a status names no file elsewhere)."""
    if not isinstance(trace, str):
        return None
    root = os.path.realpath(out_dir)
    return trace if os.path.commonpath([root, os.path.realpath(trace)]) == root else None


def _window(w: dict[str, Any], out_dir: Path) -> ProfiledWindow:
    return ProfiledWindow(
        request=None if w.get("request") is None else str(w["request"]),
        first_step=int(w.get("first_step") or 0),
        recorded_from=int(w.get("recorded_from") or 0),
        last_step=int(w.get("last_step") or 0),
        seconds=w.get("seconds"),
        cuda=bool(w.get("cuda")),
        span_s=_span(w),
        state=str(w.get("state") or ""),
        trace=_inside(w.get("trace"), out_dir),
        error=w.get("error"),
    )


def _span(w: dict[str, Any]) -> float | None:
    try:
        end = w.get("ending", w["stopped"])  # the recording's end, before torch's stop and export
        return max(0.0, float(end) - float(w.get("recording", w["started"])))
    except (KeyError, TypeError, ValueError):
        return None
