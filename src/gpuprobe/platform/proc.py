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
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Mapping

__all__ = [
    "PARENT_ENV",
    "child_env",
    "die_with_parent",
    "python_module",
    "safe_path_env",
]

PARENT_ENV = "GPUPROBE_PARENT_PID"  # the pid a helper must outlive no more than
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
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
