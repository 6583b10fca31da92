"""argparse value types with a sane range, shared by the commands: one line of error text each,
which argparse turns into ``gpuprobe: argument ...: <text>`` and exit code 2. Every number is
checked here, before any work starts (a batch size of 10**20 must not build a range, a budget of
``inf`` must not run forever)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "HZ_HELP",
    "MAX_BATCH",
    "MAX_SIZE_BYTES",
    "MIN_SIZE_BYTES",
    "add_cluster_flags",
    "add_command",
    "command_of",
    "float_in",
    "int_in",
    "positive_int",
    "sample_rate",
    "size_bytes",
]

MAX_BATCH = 1 << 24  # batch sizes: 16,777,216, 64x fit's largest default (262,144 on a GPU)
MIN_SIZE_BYTES = 1 << 20  # 1 MiB: a memory cap below this cannot even start a trial
MAX_SIZE_BYTES = 1 << 50  # 1 PiB: more memory than any one machine has
# samples/s for --hz: the sampler's own range (MIN_HZ, MAX_HZ in tools/monitor/sampler.py, which
# the command line does not import to stay fast; tests/test_cli_messages.py checks they agree)
MIN_HZ = 0.1
MAX_HZ = 20.0


def int_in(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """A whole number from ``lo`` to ``hi``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not lo <= value <= hi:
            unit = f" {what}" if what else ""
            raise argparse.ArgumentTypeError(f"{text}: give {lo:,} to {hi:,}{unit}")
        return value

    return parse


def float_in(
    lo: float, hi: float, what: str = "", *, open_low: bool = True
) -> Callable[[str], float]:
    """A finite number in (``lo``, ``hi``] (``[lo, hi]`` with ``open_low=False``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        ok = math.isfinite(value) and value <= hi and (value > lo if open_low else value >= lo)
        if not ok:
            unit = f" {what}" if what else ""
            low = f"more than {lo:g}" if open_low else f"{lo:g}"
            raise argparse.ArgumentTypeError(f"{text}: give {low} to {hi:g}{unit}")
        return value

    return parse


positive_int = int_in(1, MAX_BATCH)
# --hz of every command that samples (run, profile, pack, export): one range, one wording
sample_rate = float_in(MIN_HZ, MAX_HZ, "samples per second", open_low=False)
HZ_HELP = f"samples per second ({MIN_HZ:g}-{MAX_HZ:g})"


def size_bytes(text: str) -> int:
    """A size like ``2GiB`` or ``512MiB``, from 1 MiB to 1 PiB."""
    from gpuprobe.core.units import parse_size, size

    try:
        value = parse_size(text)
    except (ValueError, OverflowError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not MIN_SIZE_BYTES <= value <= MAX_SIZE_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text}: give a size from {size(MIN_SIZE_BYTES)} to {size(MAX_SIZE_BYTES)}"
        )
    return value


def add_command(p: argparse.ArgumentParser, json_help: str) -> None:
    """``--json`` and ``-- CMD ARGS...``, for the commands that run one (``run``, ``profile``)."""
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run"
    )


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse keeps the ``--`` of a REMAINDER)."""
    cmd = list(args.cmd)
    return cmd[1:] if cmd and cmd[0] == "--" else cmd


def add_cluster_flags(p: argparse.ArgumentParser, what: str, cluster_help: str) -> Any:
    """The flags of a command that runs on every worker of a Dask cluster (docs/fleet.md):
    ``--cluster ADDRESS`` or ``--scheduler-file FILE``, ``--connect-timeout`` and
    ``--node-timeout`` (``what``: the command's work on each node). Returns the argument group,
    for the command's own cluster flags."""
    fleet = p.add_argument_group("a Dask cluster (every node at once; docs/fleet.md)")
    where = fleet.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="ADDRESS", help=cluster_help)
    where.add_argument(
        "--scheduler-file",
        metavar="FILE",
        help="the same, with the scheduler named by FILE (as 'dask scheduler --scheduler-file' "
        "and dask-jobqueue write it)",
    )
    for flag, lo, hi, default, help_ in (
        ("--connect-timeout", 0.1, 600.0, 10.0, "how long the scheduler has to answer"),
        ("--node-timeout", 1.0, 3600.0, 600.0,
         f"how long each worker has for its {what} before it is called lost"),
    ):  # fmt: skip
        fleet.add_argument(flag, type=float_in(lo, hi), default=default, metavar="SECONDS",
                           help=f"{help_} (default {default:g})")  # fmt: skip
    return fleet
