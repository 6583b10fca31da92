"""The one timer on the CPU: budgets, counts and statistics."""

from __future__ import annotations

import numpy as np

from gpuprobe.platform.frameworks.numpy import NumpyBackend
from gpuprobe.platform.timing import measure


def test_measure_respects_min_and_max_runs_and_orders_statistics() -> None:
    b = NumpyBackend()
    a = np.random.default_rng(0).random((200, 200))
    calls = []
    m = measure(
        "mm",
        lambda: calls.append(a @ a),
        b,
        budget_s=0.05,
        warmup=2,
        min_runs=5,
        max_runs=40,
        work={"flop": 2.0 * 200**3},
    )
    assert 5 <= m.n <= 40 and len(calls) == m.n + 2
    assert m.min <= m.p20 <= m.median <= m.p80 <= max(m.times)
    assert m.flops == 2.0 * 200**3 / m.median
    m1 = measure("one", lambda: None, b, budget_s=10.0, min_runs=1, max_runs=3, warmup=0)
    assert m1.n == 3


def test_setup_runs_untimed_before_each_repetition() -> None:
    b = NumpyBackend()
    order: list[str] = []
    measure(
        "s",
        lambda: order.append("fn"),
        b,
        budget_s=0.0,
        min_runs=3,
        max_runs=3,
        warmup=0,
        setup=lambda: order.append("setup"),
    )
    assert order == ["setup", "fn"] * 3
