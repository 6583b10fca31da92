"""``gpuprobe fit``: the largest batch that fits, on a small built-in model (a demo of
``gpuprobe.fit``): a 12-block MLP trained with SGD on random data, on ``cuda`` when torch sees a
GPU, else on the CPU under a real memory cap (each trial in its own process, RLIMIT_AS)."""

from __future__ import annotations

import argparse
from typing import Any

from gpuprobe.cli._args import MAX_BATCH, int_in, positive_int, size_bytes

__all__ = ["DEFAULT_CPU_LIMIT", "register", "run"]

DEFAULT_CPU_LIMIT = "512MiB"  # the CPU demo's cap: a limit found in seconds on a laptop


def register(sub: Any) -> None:
    """Add ``gpuprobe fit``."""
    p = sub.add_parser(
        "fit",
        help="the largest batch that fits, and throughput against batch size (demo model)",
        description="Search batch sizes for the largest one-step training batch of a small "
        "built-in MLP that fits in memory, timing each size that fits (E9's throughput curve, "
        "docs/experiments.md#e9). "
        "On the CPU each trial runs in its own process under a real memory cap. From Python: "
        "gpuprobe.fit(step, batch_sizes=range(1, 4097)).",
    )
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if torch sees one)")
    p.add_argument("--min", type=positive_int, default=1, help="smallest batch size (default 1)")
    p.add_argument(
        "--max",
        type=positive_int,
        default=None,
        help=f"largest batch size (default 16384; 262144 on a GPU; at most {MAX_BATCH:,})",
    )
    p.add_argument(
        "--memory-limit",
        type=size_bytes,
        metavar="SIZE",
        help=f"cap each trial's memory, e.g. 2GiB (default on the CPU {DEFAULT_CPU_LIMIT}; on a "
        "GPU the card itself)",
    )
    p.add_argument(
        "--repeats", type=int_in(1, 1000), default=2, help="timed steps per size (default 2)"
    )
    p.add_argument("--no-curve", action="store_true", help="search only; skip the extra sizes")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo search; exit 1 when not even the smallest batch fits."""
    from gpuprobe import api
    from gpuprobe.cli._common import print_json, progress
    from gpuprobe.core.errors import UsageError
    from gpuprobe.core.units import parse_size

    device = args.device or api.demo_device()
    on_gpu = device.startswith("cuda")
    limit = args.memory_limit
    if limit is None and not on_gpu:
        limit = parse_size(DEFAULT_CPU_LIMIT)
    top = args.max or (262_144 if on_gpu else 16_384)
    if top < args.min:
        raise UsageError(f"--max {top} is below --min {args.min}")
    step = api.demo_fit_step(device)
    with progress(not args.json, "gpuprobe fit") as update:
        result = api.fit(
            step,
            range(args.min, top + 1),
            repeats=args.repeats,
            device=device if on_gpu else None,
            memory_limit=limit,
            curve=not args.no_curve,
            on_trial=lambda t: update(str(t)),
        )
    code = 0 if result.best is not None else 1
    if args.json:
        print_json(result.to_dict(), findings=result.findings, exit_code=code)
    else:
        from gpuprobe.core.wrap import hang

        m = api.demo_models()["mlp"]
        model = (
            f"model: demo MLP ({m['depth']} layers of {m['width']} on {m['features']} features, "
            f"{m['classes']} classes), one SGD training step, on {device}"
        )
        print("\n".join(hang(model)))
        print(result)
    return code
