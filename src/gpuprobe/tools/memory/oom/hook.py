"""The opt-in exception hook: the out-of-memory report printed under the traceback.

:func:`install_oom_hook` wraps ``sys.excepthook`` (in IPython and Jupyter, a custom exception
handler): the traceback is printed as before, and when the error is an out-of-memory error the
report of :func:`gpuprobe.tools.memory.oom.explain.explain_oom` follows it on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from gpuprobe.tools.memory.oom.classify import classify_oom

__all__ = ["install_oom_hook", "uninstall_oom_hook"]

_previous_hook: Callable[..., Any] | None = None


def _hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    previous = _previous_hook or sys.__excepthook__
    previous(exc_type, exc, tb)
    _explain_after(exc)


def _explain_after(exc: BaseException) -> None:
    """Below the user's traceback: the explanation of an out-of-memory error (nothing for
    another error); a failure to explain is one line, never hiding the user's own error."""
    from gpuprobe.tools.memory.oom.explain import explain_oom

    if classify_oom(exc) is None:
        return
    try:
        report = explain_oom(exc)
    except Exception as inner:  # the report must never hide the user's own error
        print(f"gpuprobe: could not explain the out-of-memory error: {inner!r}", file=sys.stderr)
        return
    print(str(report), file=sys.stderr)


def _ipython_handler(shell: Any, etype: Any, evalue: Any, tb: Any, tb_offset: Any = None) -> Any:
    shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
    _explain_after(evalue)


def install_oom_hook() -> None:
    """After the traceback of an uncaught out-of-memory error, print who holds the memory and
    what to do, and give the memory back (``sys.excepthook``; in IPython and Jupyter, a custom
    exception handler). Idempotent; :func:`uninstall_oom_hook` undoes it."""
    global _previous_hook
    shell = _ipython()
    if shell is not None:
        shell.set_custom_exc((BaseException,), _ipython_handler)
        return
    if sys.excepthook is not _hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _hook


def uninstall_oom_hook() -> None:
    """Put back the exception hook that was there before :func:`install_oom_hook`."""
    global _previous_hook
    shell = _ipython()
    if shell is not None:
        shell.set_custom_exc((), None)
    if sys.excepthook is _hook:
        sys.excepthook = _previous_hook or sys.__excepthook__
    _previous_hook = None


def _ipython() -> Any:
    mod = sys.modules.get("IPython")
    if mod is None:
        return None
    try:
        return mod.get_ipython()
    except Exception:
        return None
