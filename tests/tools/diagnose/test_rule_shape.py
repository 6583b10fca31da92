"""The diagnose rules have the one rule shape (:mod:`gpuprobe.core.rules`): each is a ``Rule``,
and none emits a finding id it does not declare, on real traces and on the synthetic scenarios
the rule tests use."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprobe.core.rules import Rule, undeclared
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.rules import RULES

from .traces import DATA, SCENARIOS

# a few real traces of different kinds: CUDA training, AMD, CPU only, CUDA-graph capture,
# several streams, an old PyTorch, a recommender with many small kernels
REAL = (
    "kineto_r50_nw0_2021feb.pt.trace.json.gz",
    "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta_rank_non_gpu__rank_non_gpu.json.gz",
    "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "tracelens_vllm_decode_graph_capture.json.gz",
    "hta_critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz",
    "param_dlrm_worker0_step_12.1694128201545.pt.trace.json.gz",
    "hta_large_integer_trace__rank-70.pt.trace.json.gz",
)


def test_every_diagnose_rule_is_a_rule_with_ids() -> None:
    assert RULES
    for r in RULES:
        assert isinstance(r, Rule), r
        assert r.ids and all(isinstance(i, str) and i for i in r.ids), r
    names = [r.name for r in RULES]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name", REAL)
def test_diagnose_rules_emit_only_declared_ids_on_real_traces(name: str) -> None:
    ctx = TraceContext(read_trace(DATA / name), None)
    assert undeclared(RULES, ctx) == []


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_diagnose_rules_emit_only_declared_ids_on_synthetic_traces(
    name: str, tmp_path: Path
) -> None:
    ctx = TraceContext(read_trace(SCENARIOS[name](str(tmp_path / f"{name}.json.gz"))), None)
    assert undeclared(RULES, ctx) == []
