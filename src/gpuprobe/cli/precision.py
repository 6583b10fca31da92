"""``gpuprobe precision``: latency, throughput and output error per dtype (fp32, tf32, bf16,
fp16, int8) of a small built-in encoder (``nn.TransformerEncoder``, random weights), a demo of
``gpuprobe.precision_sweep``."""

from __future__ import annotations

import argparse
from typing import Any

from gpuprobe.cli._args import float_in, int_in

MAX_PRECISION_BATCH = 4096  # sequences; the demo encoder's activations reach ~2 GiB there

__all__ = ["register", "run"]


def _dtypes(text: str) -> tuple[str, ...]:
    from gpuprobe.api import precision_dtypes

    known = precision_dtypes()
    names = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: dtypes are {', '.join(known)} (comma-separated)"
        )
    return names


def register(sub: Any) -> None:
    """Add ``gpuprobe precision``."""
    p = sub.add_parser(
        "precision",
        help="speed and accuracy per dtype (fp32/tf32/bf16/fp16/int8) on a demo encoder",
        description="Time a small built-in TransformerEncoder (random weights, no download) in "
        "each dtype and measure how far its output moves from fp32 (E4: docs/experiments.md#e4). "
        "From Python: "
        "gpuprobe.precision_sweep(model, inputs).",
    )
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if torch sees one)")
    p.add_argument(
        "--batch",
        type=int_in(1, MAX_PRECISION_BATCH),
        default=8,
        help=f"sequences per batch (default 8, at most {MAX_PRECISION_BATCH})",
    )
    p.add_argument(
        "--dtypes",
        type=_dtypes,
        default=None,
        help="comma-separated subset of fp32,tf32,bf16,fp16,int8 (default all)",
    )
    p.add_argument(
        "--budget",
        type=float_in(0, 60, "seconds"),
        default=0.5,
        help="seconds of timing per dtype (default 0.5)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the sweep on the demo encoder."""
    from gpuprobe import api
    from gpuprobe.cli._common import print_json, progress
    from gpuprobe.core.errors import GpuprobeError
    from gpuprobe.core.wrap import hang

    device = args.device or api.demo_device()
    try:
        with progress(not args.json, "gpuprobe precision"):
            model, x = api.demo_encoder(args.batch, device)
            dtypes = args.dtypes or api.precision_dtypes()
            report = api.precision_sweep(model, x, dtypes, budget_s=args.budget)
    except Exception as exc:  # out of memory is bad input here (too big a batch), not a bug
        found = api.classify_oom(exc)
        if found is None:
            raise
        raise GpuprobeError(
            f"--batch {args.batch} does not fit in memory on {device} ({found.message}); "
            "try a smaller --batch"
        ) from None
    # a dtype that ran out of memory (or any failed check) is a failure, not a result
    code = 1 if any(f.failed for f in report.findings) else 0
    if args.json:
        print_json(report.to_dict(), findings=report.findings, exit_code=code)
    else:
        d = api.demo_models()["encoder"]
        model = (
            f"model: demo nn.TransformerEncoder ({d['layers']} layers, d_model {d['d_model']}, "
            f"{d['nhead']} heads, seq {d['seq']}), random weights"
        )
        print("\n".join(hang(model)))
        print(report)
    return code
