"""Run one function in a child process, optionally under a real memory cap, and bring back its
result or its error.

Children are forked from a fork server that has imported torch once (so each starts in
milliseconds and never inherits a CUDA context). The cap is real: on the CPU ``RLIMIT_AS``
limits the child's address space to what it had mapped after start-up plus the cap, so an
allocation past it fails inside the allocator (torch: "DefaultCPUAllocator: can't allocate
memory"); on a GPU torch's caching allocator is capped with
``set_per_process_memory_fraction``.

Units: bytes, seconds.
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
import traceback
from collections.abc import Callable
from typing import Any

from gpuprobe.core.errors import GpuprobeError
from gpuprobe.platform.proc import safe_path_env

__all__ = [
    "CHILD_TIMEOUT_S",
    "ChildDied",
    "ChildRaised",
    "address_space_use",
    "cap_description",
    "run_in_child",
    "stop_server",
]

CHILD_TIMEOUT_S = 600.0  # s a child may run before it is killed; a stuck trial must not hang fit

# Modules imported once by the fork server (not by each child): the first makes the fork server
# die with gpuprobe; then what every trial needs (psutil: each trial reads its RSS, and its C
# extension cannot be mapped in a child already under a small cap).
PRELOAD = (
    "gpuprobe.platform.die_with_parent",
    "gpuprobe.tools.memory.fit",
    "gpuprobe.tools.memory.demo",
    "psutil",
)
_context: Any = None
_cap_base: int | None = None  # VmSize when this trial process's RLIMIT_AS cap was set
_own_tracker = False  # the resource tracker was started for our fork server, not by the user


class ChildRaised(GpuprobeError):
    """The function raised in the child; ``type_name``, ``text`` and ``traceback_text`` say
    what."""

    def __init__(self, type_name: str, text: str, traceback_text: str) -> None:
        super().__init__(f"{type_name}: {text}")
        self.type_name = type_name
        self.text = text
        self.traceback_text = traceback_text


class ChildDied(GpuprobeError):
    """The child ended without an answer (a crash, a signal, the time limit)."""

    def __init__(self, message: str, signal_number: int | None = None) -> None:
        super().__init__(message)
        self.signal_number = signal_number


def _tracker_running() -> bool:
    from multiprocessing import resource_tracker

    return getattr(resource_tracker._resource_tracker, "_pid", None) is not None


def _mp_context() -> Any:
    global _context, _own_tracker
    if _context is None:
        _own_tracker = not _tracker_running()  # the fork server starts one if none runs
        from gpuprobe.platform.frameworks import torch as ft

        if "forkserver" in multiprocessing.get_all_start_methods():
            _context = multiprocessing.get_context("forkserver")
            _context.set_forkserver_preload([PRELOAD[0], *ft.preload_modules(), *PRELOAD[1:]])
        else:
            _context = multiprocessing.get_context("spawn")
    return _context


def _vm_size() -> int:
    """Bytes of address space this process has mapped (Linux /proc/self/status VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def address_space_use() -> tuple[int, int] | None:
    """In a trial process under an RLIMIT_AS cap: (bytes it had mapped when the cap was set,
    which the cap sits on top of; bytes mapped since, which count against the cap). None in
    any other process."""
    if _cap_base is None:
        return None
    return _cap_base, max(0, _vm_size() - _cap_base)


def cap_description(limit: int, device: str) -> str:
    """What a cap of ``limit`` bytes limits, in words, for a trial on ``device``."""
    from gpuprobe.core.units import size

    if device.startswith("cuda"):
        return f"{size(limit)} of torch's CUDA allocator (set_per_process_memory_fraction)"
    return (
        f"{size(limit)} of address space per trial process (RLIMIT_AS, on top of what "
        "the interpreter and torch had mapped at start)"
    )


def _apply_cap(limit: int, device: str) -> None:
    global _cap_base
    from gpuprobe.platform.frameworks import torch_memory as tm

    if device.startswith("cuda"):
        tm.cap_cuda_memory(limit, device)
        return
    tm.warm_up()  # the thread pool and allocator arenas count as start-up, not as the step
    base = _vm_size()
    resource.setrlimit(resource.RLIMIT_AS, (base + limit, base + limit))
    _cap_base = base


def _child_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], cap: Any) -> None:
    from gpuprobe.platform.proc import die_with_parent

    # the fork server is our parent; it exits when gpuprobe does (even on SIGKILL), and then so
    # does this trial, instead of running on for up to CHILD_TIMEOUT_S
    die_with_parent(parent_pid=0)
    try:
        if cap is not None:
            _apply_cap(*cap)
        result: tuple[Any, ...] = ("ok", fn(*args))
    except BaseException as exc:
        result = ("error", type(exc).__qualname__, str(exc), traceback.format_exc())
    try:
        conn.send(result)
    finally:
        conn.close()


def run_in_child(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    *,
    memory_limit: int | None = None,
    device: str = "cpu",
    timeout_s: float = CHILD_TIMEOUT_S,
) -> Any:
    """``fn(*args)`` in a fresh child process (``fn`` and its result must pickle), under a cap
    of ``memory_limit`` bytes when given. Raises :class:`ChildRaised` when ``fn`` raised and
    :class:`ChildDied` when the child ended without an answer."""
    ctx = _mp_context()
    receiver, sender = ctx.Pipe(duplex=False)
    cap = (memory_limit, device) if memory_limit is not None else None
    proc = ctx.Process(target=_child_main, args=(sender, fn, args, cap), daemon=True)
    with safe_path_env():  # the fork server's interpreter: no current directory on its path
        proc.start()
    sender.close()
    answer = None
    timed_out = False
    try:
        if receiver.poll(timeout_s):
            answer = receiver.recv()
        else:
            timed_out = True
    except EOFError:  # the child closed the pipe without an answer: it died
        answer = None
    except BaseException:  # Ctrl-C, SIGTERM: the trial goes with us
        proc.kill()
        proc.join()
        raise
    finally:
        receiver.close()
    if timed_out:
        proc.kill()
        proc.join()
        raise ChildDied(f"the trial ran longer than {timeout_s:g} s and was stopped")
    proc.join()
    if answer is None:
        code = proc.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            why = " (the kernel's out-of-memory killer sends it)" if -code == signal.SIGKILL else ""
            raise ChildDied(f"the trial process was killed by {name}{why}", -code)
        raise ChildDied(f"the trial process exited with code {code} without an answer")
    if answer[0] == "error":
        raise ChildRaised(answer[1], answer[2], answer[3])
    return answer[1]


def stop_server() -> None:
    """Stop the fork server and the resource tracker it started (children of this process that
    would otherwise live as long as it); the next :func:`run_in_child` starts them again."""
    global _context
    if _context is None:
        return
    if _context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        stop = getattr(forkserver._forkserver, "_stop", None)  # CPython 3.8+
        if stop is not None:
            stop()
    if _own_tracker:  # and its resource tracker, unless the user's code had one running
        from multiprocessing import resource_tracker

        stop = getattr(resource_tracker._resource_tracker, "_stop", None)
        if stop is not None:
            stop()
    _context = None
