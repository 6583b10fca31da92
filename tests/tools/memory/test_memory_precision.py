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
