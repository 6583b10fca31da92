"""Precision sweep (E4, docs/experiments.md#e4): latency and throughput of a torch ``nn.Module``
per dtype, and how far its output moves from fp32.

- ``fp32``: the reference (TF32 off).
- ``tf32``: fp32 tensors, matmuls on TF32 tensor cores (CUDA, compute capability 8.0+).
- ``bf16``, ``fp16``: ``torch.autocast`` (mixed precision: matmuls in the low dtype, reductions
  kept in fp32), on CUDA or the CPU.
- ``int8``: ``torch.ao.quantization.quantize_dynamic`` on the ``nn.Linear`` layers (CPU only;
  elsewhere skipped with the reason).

Each dtype is timed with :func:`gpuprobe.platform.timing.measure` (CUDA events on a GPU) under
``torch.inference_mode()``; the deviation from fp32 is the max absolute difference, the relative
error ‖out − ref‖ / ‖ref‖ (float64) and, when given, the user's own metric of (out, ref).

Units: seconds, samples per second.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gpuprobe.core.errors import UsageError
from gpuprobe.core.rules import apply_rules
from gpuprobe.platform.hardware.load import HostLoad
from gpuprobe.tools.memory.model import (
    OOM_REASON,
    REL_ERROR_OK,
    SPEEDUP_MIN,
    PrecisionReport,
    PrecisionResult,
)

__all__ = [
    "DTYPES",
    "precision_sweep",
]

DTYPES = ("fp32", "tf32", "bf16", "fp16", "int8")
DEFAULT_BUDGET_S = 0.5  # s of timed repetitions per dtype


def _flat_tensors(torch: Any, out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat_tensors(torch, o)]
    return []


def _as64(torch: Any, out: Any) -> Any:
    parts = _flat_tensors(torch, out)
    if not parts:
        raise UsageError("the model's output holds no tensor to compare")
    return torch.cat([p.detach().to("cpu", torch.float64).reshape(-1) for p in parts])


def _plan(torch: Any, tp: Any, dtype: str, model: Any, device: str) -> tuple[Any, Any, str] | str:
    """(model to run, context manager factory, how) or the reason to skip."""
    null = contextlib.nullcontext
    if dtype == "fp32":
        return model, (lambda: tp.tf32_matmul(False)) if device.startswith("cuda") else null, "fp32"
    if dtype == "tf32":
        if not tp.tf32_supported(device):
            return (
                "TF32 is a tensor-core mode of NVIDIA GPUs with compute capability 8.0+; "
                f"on {device} fp32 matmuls stay fp32"
            )
        return model, lambda: tp.tf32_matmul(True), "fp32 tensors, TF32 matmuls"
    if dtype in ("bf16", "fp16"):
        if dtype == "bf16" and not tp.bf16_supported(device):
            return f"{device} has no bfloat16 support (compute capability 8.0+ needed)"
        try:
            with tp.autocast(device, dtype):
                pass
        except Exception as exc:
            return f"torch.autocast({device!r}, {dtype}) is not supported here: {exc}"
        return model, lambda: tp.autocast(device, dtype), f"torch.autocast({dtype})"
    if dtype == "int8":
        if not device.startswith("cpu"):
            return (
                "torch's int8 quantization (quantize_dynamic) runs on the CPU only; for int8 on "
                "a GPU use TensorRT or torchao"
            )
        if not any(isinstance(m, torch.nn.Linear) for m in model.modules()):
            return "the model has no nn.Linear layer for quantize_dynamic to quantize"
        try:
            q = tp.quantize_dynamic_int8(model)
        except Exception as exc:
            return f"quantize_dynamic failed: {type(exc).__name__}: {exc}"
        engine = torch.backends.quantized.engine
        how = f"quantize_dynamic(nn.Linear, qint8), engine {engine}, MHA fast path off"
        return q, lambda: tp.mha_fastpath(False), how
    raise UsageError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")


def precision_sweep(
    model: Any,
    example_inputs: Any,
    dtypes: Sequence[str] = DTYPES,
    *,
    metric: Callable[[Any, Any], float] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    device: str | None = None,
) -> PrecisionReport:
    """Run ``model(*example_inputs)`` in each of ``dtypes`` on the model's device: latency,
    throughput (samples/s, the batch being the first input's first dimension) and the output's
    deviation from fp32. ``metric(out, ref)`` (both float64 CPU tensors of the flattened
    outputs) adds a task metric, e.g. accuracy agreement. Skipped dtypes say why."""
    from gpuprobe.platform.frameworks import torch as ft
    from gpuprobe.platform.frameworks import torch_precision as tp
    from gpuprobe.platform.frameworks.torch import TorchBackend
    from gpuprobe.platform.timing import measure

    torch = ft.require("gpuprobe.precision_sweep")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"precision_sweep needs a torch nn.Module, not {type(model).__name__}")
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        raise UsageError(
            f"unknown dtype {bad[0] if bad else ''!r}; choose from {', '.join(DTYPES)}"
        )
    inputs = (
        tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    )
    first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
    batch = int(first.shape[0]) if first is not None and first.dim() > 0 else 1
    from gpuprobe.platform.frameworks import torch_memory as tm

    dev = ft.check_device(device or tp.module_device(model))  # one line for a GPU not here
    if dev.startswith("cuda"):
        dev = tm.cuda_device(dev)  # "cuda" -> "cuda:N": torch.cuda's set_device needs the index
    backend = TorchBackend(dev if dev.startswith("cuda") else "cpu")
    was_training = model.training
    model.eval()
    order = ["fp32", *[d for d in dtypes if d != "fp32"]]
    results: dict[str, PrecisionResult] = {}
    ref = None
    flops: int | None = None
    notes: list[str] = []
    load = HostLoad(children=False)
    try:
        for name in order:
            plan = _plan(torch, tp, name, model, dev)
            if isinstance(plan, str):
                results[name] = PrecisionResult(dtype=name, outcome="skipped", reason=plan)
                continue
            run_model, ctx, how = plan

            def call(m: Any = run_model, c: Any = ctx) -> Any:
                with torch.inference_mode(), c(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return m(*inputs)

            try:
                out = _as64(torch, call())
                meas = measure(f"forward-{name}", call, backend, budget_s=budget_s, warmup=1)
            except UsageError:
                raise
            except Exception as exc:
                from gpuprobe.tools.memory.oom.classify import classify_oom

                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                why = f"{type(exc).__name__}: {first}"
                results[name] = PrecisionResult(
                    dtype=name,
                    outcome="error",
                    how=how,
                    reason=f"{OOM_REASON}: {why}" if classify_oom(exc) is not None else why,
                )
                del exc
                continue
            if ref is None:
                ref = out
                flops = tp.forward_flops(call)  # the work of one pass, to read times as rates
            diff = (out - ref).abs()
            finite = bool(torch.isfinite(out).all())
            norm = float(ref.norm()) or 1.0
            results[name] = PrecisionResult(
                dtype=name,
                outcome="ok",
                how=how,
                median_s=meas.median,
                p20_s=meas.p20,
                p80_s=meas.p80,
                n=meas.n,
                timer=meas.timer,
                throughput=batch / meas.median if meas.median > 0 else None,
                max_abs=float(diff.max()) if finite else math.inf,
                rel_error=float((out - ref).norm()) / norm if finite else math.inf,
                metric=float(metric(out, ref)) if metric is not None else None,
            )
    finally:
        model.train(was_training)
    base = results.get("fp32")
    rows = []
    for name in order:
        r = results[name]
        if r.outcome == "ok" and base is not None and base.median_s and r.median_s:
            r = replace(r, speedup=base.median_s / r.median_s)
        rows.append(r)
    if base is None or base.outcome != "ok":
        notes.append("fp32 did not run, so no deviation could be measured")
    report = PrecisionReport(
        device=dev,
        batch=batch,
        results=tuple(rows),
        metric_name=getattr(metric, "__name__", "metric") if metric is not None else None,
        notes=tuple(notes),
        flops=flops,
    )
    others = load.others_cores()
    rec = recommend(report)
    # the rules judge the cores as measured; the report keeps them rounded
    report = replace(report, recommended=rec, others_cores=others)
    from gpuprobe.tools.memory.rules import RULES_PRECISION

    findings = apply_rules(RULES_PRECISION, report)
    return replace(
        report,
        findings=tuple(findings),
        others_cores=None if others is None else round(others, 3),
    )


def recommend(r: PrecisionReport) -> str | None:
    """The fastest dtype whose relative error is within REL_ERROR_OK and that is at least
    SPEEDUP_MIN faster than fp32; fp32 when none is."""
    ok = [
        x
        for x in r.results
        if x.outcome == "ok"
        and x.dtype != "fp32"
        and x.rel_error is not None
        and x.rel_error <= REL_ERROR_OK
        and (x.speedup or 0) >= SPEEDUP_MIN
    ]
    if ok:
        return max(ok, key=lambda x: x.speedup or 0).dtype
    return "fp32" if r.result("fp32") and r.result("fp32").outcome == "ok" else None  # type: ignore[union-attr]
