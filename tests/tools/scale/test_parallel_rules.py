"""The scale tools' rules have one shape: each is a :class:`~gpuprobe.core.rules.Rule` and emits
only the finding ids it declares, over what a solve sees and the sweep rows the scale tests build."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuprobe.core.rules import Rule, undeclared
from gpuprobe.tools.scale.model import ScaleRow
from gpuprobe.tools.scale.rules import RULES_LSTSQ, RULES_SWEEP, LstsqFacts, SweepFacts
from gpuprobe.tools.scale.solvers import _Unsafe
from gpuprobe.tools.scale.sweep import _with_speedup


@pytest.mark.parametrize("rules", [RULES_LSTSQ, RULES_SWEEP])
def test_every_scale_rule_is_a_rule(rules: tuple[Any, ...]) -> None:
    assert rules and all(isinstance(r, Rule) for r in rules)


def test_lstsq_rules_emit_only_the_ids_they_declare() -> None:
    paused = ({"address": "tcp://w:1", "status": "paused", "memory": 9, "memory_limit": 8},)
    facts = [
        LstsqFacts("auto"),
        LstsqFacts("normal", _Unsafe("κ²·eps 3.1 > 1e-3", 1e7), reference="numpy"),
        LstsqFacts("auto", _Unsafe("Cholesky failed", None), (3, 4, 1e-12, 1e-17)),
        LstsqFacts("tsqr", paused=paused, reference="numpy", reference_skipped="too large"),
        LstsqFacts("local-sgd", sgd=(0.3, 1.2, 1.1), reference="numpy"),
        LstsqFacts("normal", reference="given", reference_error=1e-3, cond=10.0),
        LstsqFacts("normal", reference="given", reference_error=1e-15, cond=10.0),
    ]
    for f in facts:
        assert undeclared(RULES_LSTSQ, f) == []


def _row(method: str, workers: int, wall: float, err: float | None = 1e-15) -> ScaleRow:
    # as tests/tools/scale/test_parallel_scale.py builds them
    exact = method != "local-sgd"
    return ScaleRow(
        method, method, workers, wall, wall, 0.0, 0.0, 1.0, 1.0, 1.0, err, None, exact, 2, 1.0
    )


def test_sweep_rules_emit_only_the_ids_they_declare() -> None:
    rows = _with_speedup(
        [
            _row("normal", 1, 8.0),
            _row("normal", 2, 4.5),
            dataclasses.replace(_row("normal", 4, 4.0, err=1e-3), cpu_per_worker=0.4),
            _row("local-sgd", 1, 5.0, err=0.3),
            _row("local-sgd", 4, 5.0, err=0.3),
        ],
        1,
    )
    for sizes in ([1, 2, 4], [4], [1, 4]):
        for cores in (0, 2):
            assert undeclared(RULES_SWEEP, SweepFacts(rows, sizes, cores)) == []
