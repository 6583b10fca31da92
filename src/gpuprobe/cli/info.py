"""``gpuprobe info [--json]``: the machine, read once."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuprobe.cli._common import console, print_json

if TYPE_CHECKING:
    from gpuprobe import Inventory

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info",
        help="the machine read once: host, driver, GPUs with their peaks, frameworks",
        description="Read the host, the NVIDIA driver, every GPU (with theoretical peaks) and "
        "the installed frameworks. Frameworks are imported (in child processes) only when there "
        "is a GPU for them to see, or with --frameworks runtime.",
    )
    p.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    p.add_argument(
        "--frameworks",
        choices=("auto", "static", "runtime"),
        default="auto",
        help="static: read package files only (fast); runtime: import each framework in a child "
        "process to list the GPUs it sees; auto (default): runtime when a GPU is present",
    )
    p.add_argument(
        "--from",
        dest="snapshot",
        metavar="SNAPSHOT",
        help="show a snapshot written by 'gpuprobe info --json' (from another machine) instead "
        "of this machine",
    )
    p.set_defaults(handler=run)


def load_snapshot(path: str | None) -> Inventory | None:
    """The inventory in ``path`` (``--from``), None when not given; a clear error for ''."""
    from gpuprobe.api import load_inventory
    from gpuprobe.core.errors import UsageError

    if path is None:
        return None
    if not path.strip():
        raise UsageError(
            "--from needs a file name: the snapshot written by 'gpuprobe info --json > FILE'"
        )
    return load_inventory(path)


def run(args: argparse.Namespace) -> int:
    from gpuprobe.api import inventory
    from gpuprobe.core import render

    snap = load_snapshot(args.snapshot)
    inv = snap if snap is not None else inventory(frameworks=args.frameworks)
    if args.json:
        print_json(inv.to_dict(), findings=(), exit_code=0)  # what the machine is: no check
    else:
        render.terminal(inv, console())
    return 0
