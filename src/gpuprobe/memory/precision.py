"""Precision sweep (E4, docs/experiments.md#e4): latency and throughput of a torch ``nn.Module``
per dtype, and how far its output moves from fp32.

- ``fp32``: the reference (TF32 off).
- ``tf32``: fp32 tensors, matmuls on TF32 tensor cores (CUDA, compute capability 8.0+).
- ``bf16``, ``fp16``: ``torch.autocast`` (mixed precision: matmuls in the low dtype, reductions
  kept in fp32), on CUDA or the CPU.
- ``int8``: ``torch.ao.quantization.quantize_dynamic`` on the ``nn.Linear`` layers (CPU only;
  elsewhere skipped with the reason).

Each dtype is timed with :func:`gpuprobe.measure.timing.measure` (CUDA events on a GPU) under
``torch.inference_mode()``; the deviation from fp32 is the max absolute difference, the relative
error ‖out − ref‖ / ‖ref‖ (float64) and, when given, the user's own metric of (out, ref).

Units: seconds, samples per second.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from gpuprobe._data import Record
from gpuprobe.errors import UsageError
from gpuprobe.findings import Evidence, Finding, Status, status_counts
from gpuprobe.hardware.host import usable_cores
from gpuprobe.hardware.load import HostLoad, host_busy_finding

__all__ = [
    "DTYPES",
    "REL_ERROR_OK",
    "SPEEDUP_MIN",
    "PrecisionReport",
    "PrecisionResult",
    "precision_sweep",
]

DTYPES = ("fp32", "tf32", "bf16", "fp16", "int8")
# Relative output error (‖out − ref‖ / ‖ref‖) up to which a lower precision counts as accurate
# enough to recommend without the user's own metric. bf16 keeps 8 mantissa bits (relative
# rounding 2^-8 ≈ 0.4 %); 2 % allows its accumulation over a few layers. gpuprobe's choice; with
# a task metric, judge by the metric (E4: BERT SQuAD F1 −6.43 % at INT8).
REL_ERROR_OK = 0.02
# A lower precision must be at least this much faster than fp32 to be worth recommending.
SPEEDUP_MIN = 1.1  # x; gpuprobe's choice, above run-to-run noise
DEFAULT_BUDGET_S = 0.5  # s of timed repetitions per dtype

Outcome = Literal["ok", "skipped", "error"]


@dataclass(frozen=True)
class PrecisionResult(Record):
    """One dtype."""

    dtype: str
    outcome: Outcome
    reason: str | None = None  # why skipped, or the error
    how: str | None = None  # what was done: autocast, quantize_dynamic, ...
    median_s: float | None = None  # one forward pass
    p20_s: float | None = None
    p80_s: float | None = None
    n: int = 0
    timer: str | None = None
    throughput: float | None = None  # samples/s
    speedup: float | None = None  # fp32 median / this median
    max_abs: float | None = None
    rel_error: float | None = None
    metric: float | None = None  # the user's metric(out, ref)


@dataclass(frozen=True)
class PrecisionReport(Record):
    """Latency, throughput and accuracy per dtype for one model on one device."""

    device: str
    batch: int
    results: tuple[PrecisionResult, ...]
    metric_name: str | None = None
    recommended: str | None = None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    others_cores: float | None = None  # cores other processes kept busy during the sweep

    def result(self, dtype: str) -> PrecisionResult | None:
        """The row for ``dtype``."""
        return next((r for r in self.results if r.dtype == dtype), None)

    def __str__(self) -> str:
        from gpuprobe.report.precision_text import precision_text

        return precision_text(self)

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{r.dtype} {r.speedup:.2f}×" if r.speedup is not None else f"{r.dtype} {r.outcome}"
            for r in self.results
        )
        return (
            f"<PrecisionReport {self.device}, batch {self.batch}: {rows}; recommended "
            f"{self.recommended or 'none'}; findings: {status_counts(self.findings)}>"
        )

    def _repr_html_(self) -> str:
        from gpuprobe.report.reprs import result_html

        return result_html(self)


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
    from gpuprobe.frameworks import torch as ft
    from gpuprobe.frameworks import torch_precision as tp
    from gpuprobe.frameworks.torch import TorchBackend
    from gpuprobe.measure.timing import measure

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
    dev = device or tp.module_device(model)
    backend = TorchBackend(dev if dev.startswith("cuda") else "cpu")
    was_training = model.training
    model.eval()
    order = ["fp32", *[d for d in dtypes if d != "fp32"]]
    results: dict[str, PrecisionResult] = {}
    ref = None
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
                from gpuprobe.memory.oom.classify import classify_oom

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
    )
    others = load.others_cores()
    rec = recommend(report)
    report = replace(
        report, recommended=rec, others_cores=None if others is None else round(others, 3)
    )
    findings = judge(report)
    busy = host_busy_finding(
        "precision-host-busy",
        "the precision sweep",
        others,
        usable_cores(),
        effect="its latencies are slowed and noisy, so one precision may look faster or slower "
        "than another when it is not",
        fix="re-run when the machine is idle (see 'gpuprobe top') before choosing a precision",
        group="precision",
        subject="host",
    )
    if busy is not None:
        findings.append(busy)
    return replace(report, findings=tuple(findings))


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


_FIX = {
    "tf32": "torch.backends.cuda.matmul.allow_tf32 = True  (or torch.set_float32_matmul_precision('high'))",
    "bf16": "with torch.autocast('{dev}', dtype=torch.bfloat16): out = model(x)",
    "fp16": "with torch.autocast('{dev}', dtype=torch.float16): out = model(x)  (train with torch.amp.GradScaler)",
    "int8": "model = torch.ao.quantization.quantize_dynamic(model, {{torch.nn.Linear}}, dtype=torch.qint8)",
    "fp32": "",
}


OOM_REASON = "out of memory"  # how a result that ran out of memory starts its reason
# CPU flags (/proc/cpuinfo spelling) that compute each precision in hardware: Intel AMX tiles and
# AVX-512 extensions (Linux arch/x86/include/asm/cpufeatures.h).
LOWP_CPU_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("amx_bf16", "avx512_bf16"),
    "fp16": ("amx_fp16", "avx512_fp16"),
    "int8": ("amx_int8", "avx512_vnni", "avx_vnni"),
}


def _cpu_flags() -> frozenset[str]:
    from gpuprobe.hardware.host import _cpuinfo

    return frozenset(_cpuinfo()[1])


def _cpu_no_gain(dtype: str, flags: frozenset[str]) -> str:
    """Why a lower precision was not faster on this CPU, from what its flags say it has."""
    wanted = LOWP_CPU_FLAGS.get(dtype, ())
    has = [f for f in wanted if f in flags]
    if has:
        return (
            f"this CPU computes {dtype} in hardware ({', '.join(has)}), yet it was not faster: "
            "the model is bound by per-call overhead, not arithmetic, or its layers' kernels "
            "do not use those instructions"
        )
    if not wanted:
        return "a small model is bound by launch overhead, not arithmetic"
    return (
        f"this CPU has none of {', '.join(wanted)}: {dtype} is converted back to fp32 for the "
        "arithmetic, which costs time; a small model is bound by launch overhead too"
    )


def judge(r: PrecisionReport, cpu_flags: frozenset[str] | None = None) -> list[Finding]:
    """precision-recommend, precision-accuracy-loss, precision-no-gain, precision-skipped.
    ``cpu_flags``: this CPU's (read from /proc/cpuinfo when None)."""
    out: list[Finding] = []
    dev = r.device.partition(":")[0]
    rec = r.result(r.recommended) if r.recommended else None
    if rec is not None:
        title = (
            f"{rec.dtype}: {rec.speedup:.2f}x fp32's throughput with relative error "
            f"{rec.rel_error:.2g}"
            if rec.dtype != "fp32" and rec.speedup and rec.rel_error is not None
            else "stay in fp32: no lower precision here is both faster and accurate enough"
        )
        out.append(
            Finding(
                id="precision-recommend",
                status=Status.OK if rec.dtype != "fp32" else Status.INFO,
                title=title,
                evidence=(
                    Evidence("dtype", rec.dtype),
                    Evidence("speedup", round(rec.speedup or 1, 3), "x"),
                    Evidence("rel_error", rec.rel_error),
                    Evidence("rel_error_ok", REL_ERROR_OK),
                    Evidence("speedup_min", SPEEDUP_MIN, "x"),
                ),
                fix=_FIX[rec.dtype].format(dev=dev),
                group="precision",
            )
        )
    for x in r.results:
        if x.outcome == "ok" and x.rel_error is not None and x.rel_error > REL_ERROR_OK:
            out.append(
                Finding(
                    id="precision-accuracy-loss",
                    status=Status.WARN,
                    title=f"{x.dtype} moves the output by {x.rel_error:.2g} (relative), "
                    f"more than {REL_ERROR_OK:g}",
                    evidence=(
                        Evidence("rel_error", x.rel_error),
                        Evidence("max_abs", x.max_abs),
                        Evidence("metric", x.metric),
                    ),
                    fix="check it on your task metric (precision_sweep(..., metric=fn)) before "
                    "using it; keep sensitive layers (softmax, norms, the head) in fp32",
                    group="precision",
                    subject=x.dtype,
                )
            )
        elif x.outcome == "ok" and x.dtype != "fp32" and (x.speedup or 0) < SPEEDUP_MIN:
            out.append(
                Finding(
                    id="precision-no-gain",
                    status=Status.INFO,
                    title=f"{x.dtype} is not faster here ({x.speedup or 0:.2f}x fp32)",
                    evidence=(Evidence("speedup", round(x.speedup or 0, 3), "x"),),
                    fix="",
                    group="precision",
                    subject=x.dtype,
                    details=(
                        _cpu_no_gain(x.dtype, _cpu_flags() if cpu_flags is None else cpu_flags),
                    )
                    if dev == "cpu"
                    else (),
                )
            )
        elif x.outcome == "error" and (x.reason or "").startswith(OOM_REASON):
            out.append(
                Finding(
                    id="precision-out-of-memory",
                    status=Status.FAIL,
                    title=f"{x.dtype} ran out of memory at batch {r.batch}: "
                    f"{(x.reason or '')[len(OOM_REASON) + 2 :]}",
                    evidence=(Evidence("batch", r.batch), Evidence("dtype", x.dtype)),
                    fix="use a smaller batch (gpuprobe precision --batch N, or fewer rows in the "
                    "inputs); gpuprobe fit finds the largest batch that fits",
                    group="precision",
                    subject=x.dtype,
                )
            )
        elif x.outcome in ("skipped", "error"):
            out.append(
                Finding(
                    id="precision-skipped" if x.outcome == "skipped" else "precision-error",
                    status=Status.SKIPPED if x.outcome == "skipped" else Status.WARN,
                    title=f"{x.dtype}: {x.reason}",
                    group="precision",
                    subject=x.dtype,
                )
            )
    return out
