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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, exit code 2: argparse's own usage dump is too long for a typo."""
        self.exit(EXIT_USAGE, f"gpuprobe: {message} (see '{self.prog} --help')\n")


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
        with contextlib.suppress(ValueError, OSError):
            old[sig] = signal.signal(sig, _raise_stopped)
    return old


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    old = _stop_on_signals()
    try:
        return int(args.handler(args))
    except _Stopped as exc:  # SIGTERM/SIGHUP: `finally` blocks ran, helpers were stopped
        print(f"gpuprobe: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return 128 + exc.signum
    except GpuprobeError as exc:
        print(f"gpuprobe: {exc.cli_message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuprobe: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) or exc.errno not in _PATH_ERRORS:
            raise
        # a path the user gave that cannot be used (a 300-character --out, a read-only folder)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"gpuprobe: {where}{exc.strerror or exc}; give another path", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `gpuprobe ... | head`: the reader went away
        from gpuprobe.cli._common import EXIT_BROKEN_PIPE, say, stdout_gone

        stdout_gone()
        say("gpuprobe: broken pipe: the reader of the output went away before it was written")
        return EXIT_BROKEN_PIPE
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
