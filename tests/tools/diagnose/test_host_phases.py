"""Where the step goes on the host (diagnose/phases.py), checked on real traces against a split
computed here by hand from the trace's JSON: the spans of each phase merged with a plain interval
union, each instant given to the first phase that covers it (DataLoader, backward, forward,
optimizer, other ops on the loop's thread), the rest untraced."""

from __future__ import annotations

import re
from typing import Any

import pytest

import gpuprobe
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.model import Diagnosis

from .realdata import DATA, intersection, length, load, union

PLAIN = DATA / "cpu_mlp_slow_loader.json.gz"  # recorded here: record_cpu_loop.py
STACK = DATA / "cpu_mlp_slow_loader_stack.json.gz"  # the same with with_stack=True
TORCHREC = DATA / "hta_rank_non_gpu__rank_non_gpu.json.gz"  # real CPU-only TorchRec rank
R50 = DATA / "kineto_r50_nw0_2021feb.pt.trace.json.gz"  # real V100 run, PyTorch 1.8 names

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_BACKWARD_FRAME = re.compile(r"^torch/(_tensor|autograd/__init__)\.py\(\d+\): backward$")


def _is(e: dict[str, Any], phase: str, old_autograd: bool) -> bool:
    n = e["name"]
    if phase == "dataloader":
        return n.startswith("enumerate(DataLoader)#")
    if phase == "backward":
        if old_autograd:  # PyTorch <= 1.9: the backward functions, no evaluate_function span
            return e.get("cat") in ("cpu_op", "Operator") and bool(
                re.match(r"^(\w+Backward\d*|torch::autograd::AccumulateGrad)$", n)
            )
        return (
            n.startswith("autograd::engine::evaluate_function: ")
            or n == "## backward ##"
            or bool(_BACKWARD_FRAME.match(n))
        )
    if phase == "forward":
        return n.startswith("nn.Module: ") or n == "## forward ##"
    assert phase == "optimizer"
    return n.startswith(("Optimizer.step#", "Optimizer.zero_grad#")) or n in (
        "## optimizer ##",
        "## zero_grad ##",
    )


def _by_hand(path) -> tuple[dict[int, dict[str, float]], bool]:
    """Per step number, µs per phase; whether the trace marks its forward."""
    evs = [e for e in load(path)["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    steps = {}
    for e in evs:
        m = _STEP.match(e["name"])
        if m and (int(m[1]) not in steps or e["dur"] > steps[int(m[1])]["dur"]):
            steps[int(m[1])] = e
    old = not any(e["name"].startswith("autograd::engine::evaluate_function") for e in evs)
    spans = {
        p: union([(e["ts"], e["ts"] + e["dur"]) for e in evs if _is(e, p, old)])
        for p in ("dataloader", "backward", "forward", "optimizer")
    }
    # the loop's thread: the one that records the steps; every cpu_op of it, merged (the union
    # of nested ops is the union of the top-level ones)
    loop = next(iter(steps.values()))["tid"]
    ops = [e for e in evs if e.get("cat") in ("cpu_op", "Operator") and e["tid"] == loop]
    spans["cpu_ops"] = union(
        [(e["ts"], e["ts"] + e["dur"]) for e in ops if not _STEP.match(e["name"])]
    )
    out = {}
    for n, st in steps.items():
        lo, hi = st["ts"], st["ts"] + st["dur"]
        row, claimed = {}, []
        for p in ("dataloader", "backward", "forward", "optimizer", "cpu_ops"):
            inside = [(max(s, lo), min(e, hi)) for s, e in spans[p] if e > lo and s < hi]
            row[p] = length(inside) - intersection(inside, union(claimed))
            claimed += inside
        row["other"] = st["dur"] - sum(row.values())
        out[n] = row
    return out, bool(spans["forward"])


def _check(path, steps: set[int] | None = None) -> Diagnosis:
    d = gpuprobe.diagnose(path)
    hand, marked = _by_hand(path)
    rows = {r.step: r for r in d.steps}
    assert set(rows) == (steps if steps is not None else set(hand))
    for n, r in rows.items():
        want = dict(hand[n])
        if not marked:
            assert "forward" not in r.host_phase_us
            want.pop("forward")
        assert r.host_phase_us == pytest.approx(want, abs=0.01)
        assert sum(r.host_phase_us.values()) == pytest.approx(r.cpu_duration_us or r.duration_us)
    # the shares: each phase's time over the steps' time, adding up to 100 %
    s = d.summary
    total = sum(sum(hand[n].values()) for n in rows)
    for p, share in s.host_phase_share.items():
        assert share == pytest.approx(sum(hand[n][p] for n in rows) / total, abs=1e-6)
    assert sum(s.host_phase_share.values()) == pytest.approx(1.0)
    return d


def _ev(f, name):
    return next(e.value for e in f.evidence if e.name == name)


def test_recorded_cpu_loop_with_slow_loader():
    d = _check(PLAIN)
    s = d.summary.host_phase_share
    assert s["dataloader"] == pytest.approx(0.936, abs=0.001)  # the 2 ms sleeps per sample
    assert 0.01 < s["backward"] < 0.02 and 0.01 < s["optimizer"] < 0.02
    f = d.finding("host-work")
    assert f.status is Status.INFO and f.gain is None
    assert f.title == (
        "Where the step goes on the host (no GPU in the trace): DataLoader 94 %, forward and "
        "other ops 2 %, backward 1 %, optimizer 1 %, other 2 %"
    )
    assert _ev(f, "dataloader_share") == 93.6
    assert _ev(f, "forward_marked") is False
    med = d.summary.host_phase_median_us["dataloader"]
    assert _ev(f, "dataloader_median") == round(med, 1)
    assert f.details[0].startswith("aten::linear: ")  # the top ops stay as details
    # the input-starved loop is still named input-bound, and first
    assert d.headline is not None and d.headline.id == "input-bound"
    assert d.problems()[0].id == "input-bound"


def test_recorded_cpu_loop_with_stack_marks_the_forward():
    d = _check(STACK)
    s = d.summary.host_phase_share
    assert s["forward"] > 0.02 and s["backward"] > 0.02  # nn.Module frames, backward() frames
    title = d.finding("host-work").title
    assert re.search(r"DataLoader 9\d %, forward \d %, backward \d %, optimizer \d %", title)
    assert d.headline is not None and d.headline.id == "input-bound"


def test_torchrec_rank_without_gpu():
    # TorchRec's train pipeline marks its phases: ## forward ## 19.3 ms, ## backward ## 34.2 ms,
    # ## zero_grad ## + ## optimizer ## 3.1 ms of a 75.5 ms step
    d = _check(TORCHREC)
    (r,) = d.steps
    assert r.host_phase_us["forward"] == pytest.approx(19324, abs=1)
    assert r.host_phase_us["backward"] == pytest.approx(34160, abs=1)
    assert r.host_phase_us["optimizer"] == pytest.approx(187 + 2906, abs=1)
    assert d.finding("host-work").title.startswith(
        "Where the step goes on the host (no GPU in the trace): forward 26 %, backward 45 %, "
        "optimizer 4 %, other ops 19 %, other 6 %"
    )


def test_gpu_trace_keeps_its_verdicts_and_has_host_phases():
    # PyTorch 1.8: the DataLoader and the optimizer as Operator events, backward functions
    # without evaluate_function spans (on autograd's own thread)
    d = _check(R50)
    assert d.summary.has_gpu
    assert d.finding("host-work").title.startswith("The GPU idles")  # the GPU verdict, as before
    assert d.summary.host_phase_share["backward"] > 0.1


def test_host_phases_round_trip_through_json():
    d = gpuprobe.diagnose(STACK)
    back = Diagnosis.from_dict(d.to_dict())
    assert back.summary.host_phase_share == d.summary.host_phase_share
    assert back.summary.host_phase_median_us == d.summary.host_phase_median_us
    assert [r.host_phase_us for r in back.steps] == [r.host_phase_us for r in d.steps]


def test_host_table_shows_the_phases_per_step():
    d = gpuprobe.diagnose(PLAIN)
    text = str(d)
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("step ") and "fwd+ops" in line)
    assert head.split() == [
        "step",
        "time",
        "data",
        "fwd+ops",
        "bwd",
        "optim",
        "other",
        "syncs",
        "reads",
        "ops",
    ]
    r = d.steps[0]
    row = next(line for line in lines if line.startswith(r.label + " ")).split()
    p = r.host_phase_us
    want = [p["cpu_ops"], p["backward"], p["optimizer"], p["other"]]
    assert row[3:7] == [f"{v / 1e3:.1f}" for v in want]
    assert len(head.rstrip()) <= 80
    # a GPU trace keeps its table
    assert "fwd" not in str(gpuprobe.diagnose(R50)).split("Host per step")[1].splitlines()[1]
