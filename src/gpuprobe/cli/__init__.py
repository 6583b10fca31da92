"""The command line: parse, call the API, render. Nothing else lives here.

Each command is a module in this package with ``register(subparsers)``, which adds its parser and
sets ``handler`` to a function ``(args) -> int`` (the exit code). Modules import nothing heavy at
import time, so ``gpuprobe --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from gpuprobe._version import __version__
from gpuprobe.core.errors import EXIT_USAGE, GpuprobeError

__all__ = ["COMMANDS", "main"]

# The order here is the order in `gpuprobe --help`.
COMMANDS: tuple[str, ...] = (
    "info",
    "doctor",
    "bench",
    "profile",
    "run",
    "top",
    "plot",
    "export",
    "diagnose",
    "scale",
    "fit",
    "pack",
    "precision",
)


_DEEPEST = "_gpuprobe_parser"  # in the namespace while parsing: the innermost (sub-)parser used


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, exit code 2: argparse's own usage dump is too long for a typo."""
        self.exit(EXIT_USAGE, f"gpuprobe: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, extras = super().parse_known_args(args, namespace)
        if not hasattr(ns, _DEEPEST):  # the innermost finishes first, so it is kept
            setattr(ns, _DEEPEST, self)
        return ns, extras

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, but what is not understood is refused by the (sub-)command it was
        given to, pointing to that command's help (``info --jsn``: ``gpuprobe info --help``),
        with the option it resembles, if any."""
        ns, extras = self.parse_known_args(args, namespace)
        parser = getattr(ns, _DEEPEST, self)
        if hasattr(ns, _DEEPEST):
            delattr(ns, _DEEPEST)
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}{_resembles(parser, extras)}")
        return ns


def _resembles(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """``; did you mean --json?`` for an option that resembles one of ``parser``'s."""
    import difflib

    known = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    for word in extras:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def build_parser() -> argparse.ArgumentParser:
    """The whole parser, one sub-command per module in :data:`COMMANDS`."""
    parser = _Parser(
        prog="gpuprobe",
        description="Does my GPU setup really work, what can this machine do, and why doesn't "
        "my job use the GPU well?",
    )
    parser.add_argument("--version", action="version", version=f"gpuprobe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"gpuprobe.cli.{name}").register(sub)
    return parser


# errno values that mean "this path cannot be used": bad input, exit 2, not a traceback
_PATH_ERRORS = frozenset(
    {
        errno.ENAMETOOLONG,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.EEXIST,
        errno.ELOOP,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
    }
)


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: unwind (so that helper processes are stopped), then exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise :class:`_Stopped` in the main thread (``run`` takes them over
    while its command runs); returns the handlers to put back."""
    old: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return old
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue  # nohup's SIGHUP stays ignored, here and in what gpuprobe runs
        with contextlib.suppress(ValueError, OSError):
            old[sig] = signal.signal(sig, _raise_stopped)
    return old


def _exit_now_if_abandoned(code: int) -> None:
    """Work left running in native code when the command was stopped (scale's numpy reference)
    cannot end cleanly: the process ends now (:func:`gpuprobe.platform.proc.abandon`)."""
    proc = sys.modules.get("gpuprobe.platform.proc")  # only where some command loaded it
    if proc is not None:
        proc.exit_now_if_abandoned(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    if sys.stdout is None:  # `gpuprobe ... >&-`: Python found no file 1; the report would be lost
        if sys.stderr is not None:
            print(
                "gpuprobe: standard output is closed, so the report would be lost; send it "
                "somewhere (> FILE, or > /dev/null to drop it)",
                file=sys.stderr,
            )
        return EXIT_USAGE
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    old = _stop_on_signals()
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # here, not at exit: a reader gone by now is a broken pipe below
        return code
    except _Stopped as exc:  # SIGTERM/SIGHUP: `finally` blocks ran, helpers were stopped
        print(f"gpuprobe: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        _exit_now_if_abandoned(128 + exc.signum)
        return 128 + exc.signum
    except GpuprobeError as exc:
        print(f"gpuprobe: {exc.cli_message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuprobe: interrupted", file=sys.stderr)
        _exit_now_if_abandoned(130)
        return 130
    except BrokenPipeError:  # `gpuprobe ... | head`: the reader went away; no check failed
        from gpuprobe.cli._common import EXIT_BROKEN_PIPE, say, stdout_gone

        stdout_gone()
        say("gpuprobe: broken pipe: the reader of the output went away before it was written")
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno not in _PATH_ERRORS:
            raise
        # a path the user gave that cannot be used (a 300-character --out, a read-only folder)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"gpuprobe: {where}{exc.strerror or exc}; give another path", file=sys.stderr)
        return EXIT_USAGE
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
