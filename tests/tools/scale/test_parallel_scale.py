"""The worker-count sweep: rows, speedups, findings, JSON and the plot, on small problems."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuprobe.core.errors import UsageError
from gpuprobe.core.findings import Finding, Status
from gpuprobe.core.rules import apply_rules
from gpuprobe.tools.scale.lstsq import SgdSettings
from gpuprobe.tools.scale.model import ScaleResult, ScaleRow
from gpuprobe.tools.scale.rules import RULES_SWEEP, SweepFacts
from gpuprobe.tools.scale.show.plots import plot_scale
from gpuprobe.tools.scale.sweep import _with_speedup, scale_lstsq, synthetic_problem

pytest.importorskip("distributed")


def _findings(rows: list[ScaleRow], sizes: list[int], cores: int = 0) -> list[Finding]:
    return apply_rules(RULES_SWEEP, SweepFacts(rows, sizes, cores))


@pytest.fixture(scope="module")
def sweep() -> ScaleResult:
    return scale_lstsq(
        3000,
        20,
        workers=(1, 2),
        methods=("normal", "tsqr", "local-sgd"),
        chunk_rows=500,
        processes=False,
        compare_dask=True,
        sgd=SgdSettings(epochs=3, iters_per_epoch=50, batch_rows=100),
    )


def test_sweep_rows_and_accuracy(sweep):
    assert [(r.requested, r.workers) for r in sweep.results] == [
        ("normal", 1),
        ("tsqr", 1),
        ("local-sgd", 1),
        ("normal", 2),
        ("tsqr", 2),
        ("local-sgd", 2),
    ]
    assert (sweep.rows, sweep.cols, sweep.row_blocks, sweep.chunk_rows) == (3000, 20, 6, 500)
    for r in sweep.results:
        assert r.wall_s > 0 and 0 <= r.communication_share <= 1
        if r.exact:
            assert r.error_vs_numpy <= 1e-12
        else:
            assert r.error_vs_numpy > 1e-4
    numpy_base = sweep.baseline("numpy")
    assert numpy_base.wall_s == min(numpy_base.seconds_by_threads.values()) > 0
    assert str(numpy_base.threads) in numpy_base.seconds_by_threads
    normal2 = sweep.row("normal", 2)
    assert normal2.times_faster_than_numpy == pytest.approx(numpy_base.wall_s / normal2.wall_s)
    assert normal2.residual_norm == pytest.approx(numpy_base.residual_norm, rel=1e-12)
    # speedup is relative to the same method on one worker
    assert sweep.row("tsqr", 1).speedup == 1.0
    t2 = sweep.row("tsqr", 2)
    assert t2.speedup == pytest.approx(sweep.row("tsqr", 1).wall_s / t2.wall_s)
    assert t2.efficiency == pytest.approx(t2.speedup / 2)
    found = {f.id: f for f in sweep.findings}
    assert found["scale-lstsq-accuracy"].status is Status.OK
    assert found["scale-lstsq-local-sgd-approximate"].status is Status.WARN


def test_dask_baseline_ran_or_says_why(sweep):
    base = sweep.baseline("dask")
    if base.wall_s is None:
        assert "scipy" in base.note
    else:
        assert base.error_vs_numpy <= 1e-12 and base.workers == 2


def test_json_round_trip_and_text(sweep):
    again = ScaleResult.from_dict(json.loads(json.dumps(sweep.to_dict())))
    assert again == sweep
    text = str(sweep)
    assert "speedup" in text and "local-sgd (approx.)" in text and "numpy.linalg.lstsq" in text
    assert "<table>" in sweep._repr_html_()


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_plot(sweep, tmp_path, suffix, magic):
    out = plot_scale(sweep, tmp_path / f"scale{suffix}")
    assert out.read_bytes().startswith(magic)
    with pytest.raises(UsageError, match=r"\.png, \.svg, \.pdf"):
        plot_scale(sweep, tmp_path / "scale.gif")


def test_synthetic_problem_is_deterministic_and_conditioned():
    a1, b1 = synthetic_problem(900, 12, cond=1e3, seed=4, chunk_rows=200)
    a2, _ = synthetic_problem(900, 12, cond=1e3, seed=4, chunk_rows=300, tag=7)
    a1, b1, a2 = a1.compute(), b1.compute(), a2.compute()
    np.testing.assert_array_equal(a1[:200], a2[:200])  # same first block, same numbers
    assert 5e2 < np.linalg.cond(a1) < 2e3
    u, _ = synthetic_problem(100, 5, "uniform", chunk_rows=50)
    assert float(u.min().compute()) >= 0 and float(u.max().compute()) < 1
    with pytest.raises(UsageError, match="condition number"):
        synthetic_problem(10, 2, cond=0.5)


def test_bad_sweep_arguments():
    with pytest.raises(UsageError, match="worker counts"):
        scale_lstsq(10, 2, workers=(0,))
    with pytest.raises(UsageError, match="use one or more of"):
        scale_lstsq(10, 2, methods=("qr",))


def _row(method: str, workers: int, wall: float, err: float | None = 1e-15) -> ScaleRow:
    return ScaleRow(
        method,
        method,
        workers,
        wall,
        wall,
        0.0,
        0.0,
        1.0,
        1.0,
        1.0,
        err,
        None,
        method != "local-sgd",
        2,
        1.0,
    )


def test_speedup_efficiency_and_findings():
    rows = _with_speedup(
        [_row("normal", 1, 8.0), _row("normal", 2, 4.5), _row("normal", 4, 4.0)], 1
    )
    assert [round(r.speedup, 3) for r in rows] == [1.0, 1.778, 2.0]
    assert rows[2].efficiency == pytest.approx(0.5)
    found = _findings(rows, [1, 2, 4])
    eff = next(f for f in found if f.id == "scale-lstsq-efficiency")
    assert eff.status is Status.WARN and "50%" in eff.title
    bad = _findings([_row("tsqr", 1, 1.0, err=1e-3)], [1])
    assert bad[0].id == "scale-lstsq-accuracy" and bad[0].status is Status.FAIL


def test_existing_scheduler_and_too_many_workers(client):
    addr = client.scheduler.address
    res = scale_lstsq(
        800,
        4,
        workers=(1, 2),
        methods=("normal",),
        chunk_rows=200,
        scheduler=addr,
        compare_numpy=False,
    )
    assert res.cluster.startswith("existing") and [r.workers for r in res.results] == [1, 2]
    assert res.results[0].error_vs_numpy is None and res.baselines == ()
    with pytest.raises(UsageError, match="only 2 worker"):
        scale_lstsq(800, 4, workers=(4,), scheduler=addr)


def test_cpu_per_worker_measured_and_contention_judged(sweep):
    for r in sweep.results:
        assert r.cpu_per_worker is not None and 0 < r.cpu_per_worker < 2.5

    def judged(wall: float, cpu: float | None, comm: float = 0.05) -> list[str]:
        fields = {**_row("normal", 2, wall).to_dict(), "cpu_per_worker": cpu}
        row = ScaleRow(**{**fields, "communication_share": comm})
        return [f.title for f in _findings([row], [2], cores=2) if f.id.endswith("contention")]

    assert "0.40 of a core" in judged(5.0, 0.4)[0]
    assert judged(5.0, 0.95) == []  # a full core each
    assert judged(0.3, 0.4) == []  # too short: scheduling and the client's n × n work
    assert judged(5.0, 0.4, comm=0.5) == []  # waiting on communication, not on other jobs


def test_efficiency_counts_only_workers_with_a_row_block():
    """Issue 27: with one row block the second worker had nothing to do, and the sweep printed
    "74 % efficiency" (noise between two one-worker runs). Efficiency is against the workers
    that had a block; with none more than the fewest, there is none, and one finding says so."""
    runs = [_row("normal", 1, 8.0), _row("normal", 2, 10.8), _row("normal", 4, 4.0)]
    one = _with_speedup(runs, 1, blocks=1)
    assert [r.efficiency for r in one] == [None, None, None]
    assert [round(r.speedup, 2) for r in one] == [1.0, 0.74, 2.0]  # measured, still shown
    found = apply_rules(RULES_SWEEP, SweepFacts(one, [1, 2, 4], 0, 1))
    eff = [f for f in found if f.id == "scale-lstsq-efficiency"]
    assert len(eff) == 1 and eff[0].status is Status.INFO
    assert eff[0].title.startswith("1 row block: no parallel efficiency")
    assert "%" not in eff[0].title
    # two blocks on four workers: efficiency against the two that had one
    two = _with_speedup(runs, 1, blocks=2)
    assert two[2].efficiency == pytest.approx(2.0 / 2)
    title = next(
        f.title
        for f in apply_rules(RULES_SWEEP, SweepFacts(two, [1, 2, 4], 0, 2))
        if f.id == "scale-lstsq-efficiency"
    )
    assert title.startswith("normal: parallel efficiency 100% from 1 to 4 workers (2 with a row")


def test_one_row_block_sweep_shows_no_efficiency():
    res = scale_lstsq(600, 5, workers=(1, 2), methods=("normal",), chunk_rows=600, processes=False)
    assert res.row_blocks == 1 and all(r.efficiency is None for r in res.results)
    text = str(res)
    assert "1 row block of 600 rows" in text and "1 row blocks" not in text
    assert "[info] 1 row block: no parallel efficiency" in text
    assert "efficiency 1" not in text and "efficiency 7" not in text
    assert ScaleResult.from_dict(res.to_dict()) == res


def test_a_rank_deficient_input_is_a_finding_not_a_warning(tmp_path, recwarn):
    """Issue 27: the sweep printed RankDeficiencyWarning raw on the terminal, once per solve;
    lstsq (the Python API) still warns, as docs/scale.md says, and the sweep gives the finding."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((800, 4))
    a = np.hstack([a, a[:, :1]])  # rank 4 of 5
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "b.npy", rng.standard_normal(800))
    res = scale_lstsq(
        input=tmp_path / "A.npy",
        target=str(tmp_path / "b.npy"),
        workers=(1,),
        methods=("tsqr",),
        processes=False,
    )
    assert not [w for w in recwarn if "rank" in str(w.message)]
    deficient = [f for f in res.findings if f.id == "lstsq-rank-deficient"]
    assert len(deficient) == 1 and deficient[0].status is Status.WARN
    assert deficient[0].title.startswith("A has rank 4 of 5 columns")
    assert "[warn] A has rank 4 of 5 columns" in str(res)
