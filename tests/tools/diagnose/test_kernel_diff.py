"""Kernel diff on HTA's own trace-diff pair (real A100 traces, one step each), against json sums."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

import gpuprobe.cli as cli
from _support import too_wide
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernel_diff import (
    KERNEL_CHANGE_FRACTION,
    KERNEL_CHANGE_MIN_US,
    KernelDiff,
    compare_kernels,
)
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.show.ranks import render_kernel_diff_text

from .realdata import DIFF_CONTROL, DIFF_TEST, gpu_events, load


@pytest.fixture(autouse=True)
def _only_diagnose(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("diagnose",))


def _ctx(path) -> TraceContext:
    return TraceContext(read_trace(path))


@pytest.fixture(scope="module")
def diff() -> KernelDiff:
    return compare_kernels(_ctx(DIFF_CONTROL), _ctx(DIFF_TEST))


def _per_name(path) -> dict[str, tuple[int, float]]:
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for e in gpu_events(load(path)):
        out[e["name"]][0] += 1
        out[e["name"]][1] += e["dur"]
    return {k: (c, t) for k, (c, t) in out.items()}


def _status(before, after) -> str:
    """By GPU time per step (one step in each file): more time is slower, however it grew."""
    if before is None:
        return "new"
    if after is None:
        return "gone"
    tb, ta = before[1], after[1]
    if abs(ta - tb) < KERNEL_CHANGE_MIN_US:
        return "same"
    if (ta - tb) / tb >= KERNEL_CHANGE_FRACTION:
        return "slower"
    if (tb - ta) / tb >= KERNEL_CHANGE_FRACTION:
        return "faster"
    return "same"


def test_counts_of_new_gone_faster_slower_match_json(diff):
    b, a = _per_name(DIFF_CONTROL), _per_name(DIFF_TEST)
    expected = defaultdict(int)
    for name in b.keys() | a.keys():
        expected[_status(b.get(name), a.get(name))] += 1
    got = {s: getattr(diff, s) for s in ("new", "gone", "faster", "slower", "same")}
    assert got == {s: expected[s] for s in got}
    assert diff.new > 0 and diff.gone > 0 and diff.slower > 0
    assert diff.steps_before == diff.steps_after == 1


def test_rows_are_the_largest_changes_with_json_totals(diff):
    b, a = _per_name(DIFF_CONTROL), _per_name(DIFF_TEST)
    deltas = {n: a.get(n, (0, 0.0))[1] - b.get(n, (0, 0.0))[1] for n in b.keys() | a.keys()}
    top = max(deltas, key=lambda n: abs(deltas[n]))
    assert diff.changes[0].name == top
    assert diff.changes[0].delta_us == pytest.approx(deltas[top])
    for row in diff.changes[:10]:
        assert row.total_before_us == pytest.approx(b.get(row.name, (0, 0.0))[1])
        assert row.total_after_us == pytest.approx(a.get(row.name, (0, 0.0))[1])
        assert row.count_after == a.get(row.name, (0, 0.0))[0]
    assert [abs(r.delta_us) for r in diff.changes] == sorted(
        (abs(r.delta_us) for r in diff.changes), reverse=True
    )
    nccl = [r for r in diff.changes if r.name.startswith("ncclKernel_AllReduce")]
    assert nccl and nccl[0].family == "communication"
    # the all-reduce doubled: 2,093 -> 4,457 µs mean, 3 calls each
    assert nccl[0].status == _status(b[nccl[0].name], a[nccl[0].name]) == "slower"
    assert nccl[0].why == "longer calls"
    # each DtoD copy got shorter (152 -> 22 µs) but there are 256 times as many: slower
    dtod = diff.kernel("Memcpy DtoD (Device -> Device)")
    assert dtod is not None and b[dtod.name] == (3, 455.0) and a[dtod.name] == (768, 17076.0)
    assert dtod.mean_after_us < dtod.mean_before_us
    assert (dtod.status, dtod.why) == ("slower", "more calls, shorter calls")
    assert sum(f.before_us for f in diff.families) == pytest.approx(diff.total_before_us)
    assert diff.total_after_us == pytest.approx(sum(e["dur"] for e in gpu_events(load(DIFF_TEST))))


def test_a_trace_against_itself_changes_nothing():
    ctx = _ctx(DIFF_CONTROL)
    d = compare_kernels(ctx, ctx)
    assert d.new == d.gone == d.faster == d.slower == 0
    assert all(r.status == "same" and r.delta_us == 0 for r in d.changes)


def test_round_trip_and_text(diff):
    assert KernelDiff.from_dict(json.loads(json.dumps(diff.to_dict()))) == diff
    text = render_kernel_diff_text(diff)
    assert too_wide(text) == []
    assert f"{diff.new} new, {diff.gone} gone" in text
    assert not re.search(r"\d…", text)


def test_cli_compare_with_kernels(capsys):
    argv = ["diagnose", "--compare", str(DIFF_CONTROL), str(DIFF_TEST), "--kernels"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "Largest changes of GPU time per step" in out
    assert "GPU time per step by family (ms)" in out
    assert cli.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert KernelDiff.from_dict(data["kernels"]).new > 0
    assert "metrics" in data  # the finding diff is still there


def test_changed_kernels_are_named_as_the_kernel_tables_name_them(diff):
    """A ~1,300-character signature (void, then the template and its 25 arguments) is its
    short name: no lone ``void`` line, two lines at most, the template arguments that tell
    the 2ul and the 5ul instance apart kept; the JSON keeps the whole name."""
    text = render_kernel_diff_text(diff)
    lines = text.splitlines()
    assert "void" not in [line.strip() for line in lines]
    assert "GenericPackedTensorAccessor" not in text
    start = next(i for i, line in enumerate(lines) if line.startswith("Largest changes"))
    body = lines[start + 2 :]  # the title takes two lines
    new = next(i for i, line in enumerate(body) if line.startswith("new    +8.7 ms"))
    assert [line.strip() for line in body[new + 1 : new + 3]] == [
        "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_pe",
        "r_row_1<float, float, float, 5ul>",
    ]
    assert "5ul>(at::GenericPackedTensorAccessor" in diff.to_dict()["changes"][1]["name"]
