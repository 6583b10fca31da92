"""precision_sweep on CPU dtypes with a real (small) torch model."""

from __future__ import annotations

from typing import Any

import pytest

from gpuprobe.core.errors import UsageError
from gpuprobe.tools.memory.model import PrecisionReport
from gpuprobe.tools.memory.precision import precision_sweep

torch = pytest.importorskip("torch")


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 16)
    ).eval()


def test_sweep_on_cpu_dtypes() -> None:
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    seen: list[tuple[Any, Any]] = []

    def agreement(out: Any, ref: Any) -> float:
        seen.append((out, ref))
        return float(
            (out.reshape(32, 16).argmax(1) == ref.reshape(32, 16).argmax(1)).double().mean()
        )

    r = precision_sweep(_model(), x, metric=agreement, budget_s=0.02)
    rows = {x.dtype: x for x in r.results}
    assert list(rows) == ["fp32", "tf32", "bf16", "fp16", "int8"]
    fp32 = rows["fp32"]
    assert fp32.outcome == "ok" and fp32.rel_error == 0 and fp32.max_abs == 0 and fp32.metric == 1
    assert fp32.throughput == pytest.approx(32 / fp32.median_s)
    assert rows["tf32"].outcome == "skipped" and "compute capability 8.0" in (
        rows["tf32"].reason or ""
    )
    bf16 = rows["bf16"]
    assert bf16.outcome == "ok" and "autocast" in (bf16.how or "")
    assert 0 < bf16.rel_error < 0.05  # 8 mantissa bits: visible, small
    int8 = rows["int8"]
    assert int8.outcome == "ok" and "quantize_dynamic" in (int8.how or "")
    assert 0 < int8.rel_error < 0.2
    assert rows["fp16"].outcome in ("ok", "skipped", "error")
    assert seen and all(o.dtype == torch.float64 for o, _ in seen)
    assert r.metric_name == "agreement" and r.batch == 32 and r.device == "cpu"
    assert r.recommended in {"fp32", "bf16", "fp16", "int8"}
    assert any(f.id == "precision-recommend" for f in r.findings)
    assert PrecisionReport.from_dict(r.to_dict()) == r
    assert "rel err" in str(r)
    # the work of one pass, counted: two Linear layers, 2 x 32 x (64 x 128 + 128 x 16) FLOP
    assert r.flops == 2 * 32 * (64 * 128 + 128 * 16)


def encoder_flops(batch: int) -> tuple[int, int]:
    """(FLOP of the demo encoder's matmuls, the same plus its attention) for one pass: per token
    and layer, 2 x (4 d^2 + 2 d ff) for the projections and the feed-forward, and
    2 x 2 x seq x d for the attention (which torch counts on some devices only)."""
    from gpuprobe.tools.memory.demo import DEMO_ENCODER as E

    tokens = batch * E["seq"] * E["layers"]
    linear = 2 * tokens * (4 * E["d_model"] ** 2 + 2 * E["d_model"] * E["dim_feedforward"])
    return linear, linear + 4 * tokens * E["seq"] * E["d_model"]


def test_the_demo_encoders_work_is_counted_through_its_fused_path() -> None:
    """In eval mode the encoder runs torch's fused fast path, one kernel a layer, which torch's
    FLOP counter sees as nothing; the count turns it off."""
    from gpuprobe.tools.memory import demo

    r = precision_sweep(demo.encoder("cpu"), demo.encoder_inputs(2), ["fp32"], budget_s=0.01)
    low, high = encoder_flops(2)
    assert r.flops is not None and low <= r.flops <= high  # 1.61 GFLOP at batch 2
    assert torch.backends.mha.get_fastpath_enabled()  # and it is on again
    assert f"batch 2, {r.flops / 1e9:.3g} GFLOP a forward pass" in str(r)


# `gpuprobe precision --device cuda` on the H200 (torch 2.11+cu130, the demo encoder, batch 8):
# median seconds a forward pass; 6.44 GFLOP a pass (encoder_flops(8), as torch counts it)
H200_MEDIANS = {"fp32": 714.336e-6, "tf32": 731.392e-6, "bf16": 1353.728e-6, "fp16": 1400.928e-6}


def _h200_report() -> PrecisionReport:
    from dataclasses import replace

    from gpuprobe.core.rules import apply_rules
    from gpuprobe.tools.memory.model import PrecisionResult
    from gpuprobe.tools.memory.precision import recommend
    from gpuprobe.tools.memory.rules import RULES_PRECISION

    base = H200_MEDIANS["fp32"]
    rows = tuple(
        PrecisionResult(
            dtype=d, outcome="ok", median_s=m, speedup=base / m, rel_error=0.002, timer="cuda-event"
        )
        for d, m in H200_MEDIANS.items()
    )
    r = PrecisionReport(device="cuda:0", batch=8, results=rows, flops=encoder_flops(8)[0])
    r = replace(r, recommended=recommend(r))
    return replace(r, findings=tuple(apply_rules(RULES_PRECISION, r)))


def test_a_slower_lower_precision_on_a_gpu_is_called_slower_and_explained() -> None:
    """On the H200 bf16 and fp16 took twice fp32's time; the report said only "not faster" and,
    on a GPU, nothing about why."""
    r = _h200_report()
    assert r.recommended == "fp32"
    no_gain = {f.subject: f for f in r.findings if f.id == "precision-no-gain"}
    bf16 = no_gain["bf16"]
    assert bf16.title == (
        "bf16 is 1.90× slower than fp32 here (1.35 ms a forward pass, fp32 714.3 µs)"
    )
    assert bf16.details[0].startswith(
        "one forward pass is 6.44 GFLOP: fp32 ran it at 9.0 TFLOP/s, bf16 at 4.8 TFLOP/s; too "
        "little work per kernel"
    )
    assert "cast kernels autocast adds" in bf16.details[0]
    assert "--batch" in bf16.fix
    ev = {e.name: e.value for e in bf16.evidence}
    assert ev["flops"] == encoder_flops(8)[0] and ev["batch"] == 8
    # 0.98x is within noise of fp32: not faster, and not called slower
    assert no_gain["tf32"].title == "tf32 is not faster here (0.98x fp32)"
    assert "cast" not in no_gain["tf32"].details[0]


def test_the_model_is_left_as_it_was() -> None:
    m = _model().train()
    before = [p.detach().clone() for p in m.parameters()]
    precision_sweep(m, torch.randn(4, 64), dtypes=("fp32", "int8"), budget_s=0.01)
    assert m.training
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True))


def test_int8_skipped_without_linear_layers() -> None:
    m = torch.nn.Sequential(torch.nn.ReLU())
    r = precision_sweep(m, torch.randn(4, 8), dtypes=("fp32", "int8"), budget_s=0.01)
    int8 = r.result("int8")
    assert int8 is not None and int8.outcome == "skipped" and "nn.Linear" in (int8.reason or "")


def test_bad_input() -> None:
    with pytest.raises(UsageError, match=r"nn\.Module"):
        precision_sweep(lambda x: x, torch.randn(2))
    with pytest.raises(UsageError, match="fp8"):
        precision_sweep(_model(), torch.randn(2, 64), dtypes=("fp8",))


def test_int8_work_is_counted_in_operations_not_flops() -> None:
    """Issue 27: int8 figures are TOP/s (the spec sheets' unit for integer products)."""
    from gpuprobe.tools.memory.rules.precision import _rate

    assert _rate(2_000_000_000_000, 1.0, "int8") == "2.0 TOP/s"
    assert _rate(2_000_000_000_000, 1.0, "bf16") == "2.0 TFLOP/s"
    assert _rate(None, 1.0, "int8") == "n/a"
