"""The legacy autograd-profiler export (a JSON list of events without Kineto's categories) read
and diagnosed: a real PyTorch 1.0 export (ENAS-pytorch, CPU), a GPU export constructed from a real
V100 Kineto trace by the 1.7 exporter's rules (make_legacy_fixture.py: no real one was found), and
one written by this machine's torch through its legacy exporter. Every expected number is also
computed here from the JSON itself."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from gpuprobe import cli
from gpuprobe.core.errors import InputError
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.legacy import own_pieces

from .realdata import DATA, length, union

ENAS = DATA / "legacy_enas_get_loss_2019.json.gz"
LEGACY_V100 = DATA / "legacy_constructed_r50_v100.json.gz"
KINETO_V100 = DATA / "cycles_r50_nw0" / "worker0.1623143089861.pt.trace.json.gz"


def _list(path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _ev(d, fid: str, name: str):
    return next(e.value for e in d.finding(fid).evidence if e.name == name)


def test_a_real_pytorch_1_0_export_is_read_as_cpu_ops():
    events = _list(ENAS)
    raw = read_trace(ENAS)
    assert raw.trace_format == "legacy"
    assert raw.events == len(events) == 5676
    assert len(raw.op_ts) == sum(e["pid"] == "CPU functions" for e in events) == 5676
    assert len(raw.gpu_ts) == 0 and raw.steps == [] and raw.skipped == 0


def test_a_real_pytorch_1_0_export_is_diagnosed_over_the_whole_trace(capsys):
    events = _list(ENAS)
    d = diagnose(ENAS)
    assert d.summary.trace_format == "legacy" and d.summary.steps == () and not d.summary.has_gpu
    window = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    matmul = sum(e["dur"] for e in events if e["name"] == "matmul")  # top-level: mm is inside
    assert _ev(d, "host-work", "top_op") == "matmul"
    assert _ev(d, "host-work", "top_op_share_of_step") == round(100 * matmul / window, 1) == 25.4
    # its ops have no aten:: namespace yet: .item() is "item" / "_local_scalar_dense"
    reads = sum(e["name"] == "_local_scalar_dense" for e in events)
    assert _ev(d, "sync", "scalar_reads_per_step_median") == reads == 35
    assert d.finding("gpu-unused").status is Status.SKIPPED  # no header, no sign of a GPU
    assert cli.main(["diagnose", str(ENAS)]) == 0
    out = capsys.readouterr().out
    assert "legacy autograd-profiler export" in out and "judged over the whole trace" in out


def _proven_busy(events: list[dict]) -> float:
    """The GPU time the legacy spans prove (the backlog before and after each op), the plain way:
    each "CUDA functions" span follows its op in the file."""
    op = None
    proven = []
    for e in events:
        if e["ph"] != "X":
            continue
        if e["pid"] == "CPU functions":
            op = (e["ts"], e["ts"] + e["dur"])
            continue
        s, end = e["ts"], e["ts"] + e["dur"]
        if s > op[0]:
            proven.append((op[0], s))
        if end > op[1]:
            proven.append((op[1], end))
    return length(union(proven))


def test_legacy_gpu_spans_count_the_busy_time_they_prove_below_the_real_kernels():
    events = _list(LEGACY_V100)
    raw = read_trace(LEGACY_V100)
    spans = [e for e in events if e["ph"] == "X" and e["pid"] == "CUDA functions"]
    assert raw.legacy_gpu_spans == len(spans) == 2909
    assert raw.legacy_launches == sum(e["ph"] == "s" for e in events) == 2909
    dur = np.frombuffer(raw.gpu_dur)
    assert dur.sum() == pytest.approx(_proven_busy(events), abs=1e-6)
    assert round(dur.sum() / 1e3, 2) == 99.53  # ms
    # the real run's kernels, copies and memsets: 100.62 ms; what the spans prove stays under it
    with gzip.open(KINETO_V100, "rt") as f:
        kineto = json.load(f)["traceEvents"]
    cats = ("Kernel", "Memcpy", "Memset")
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in kineto if e.get("cat") in cats]
    assert round(length(union(kernels)) / 1e3, 2) == 100.62
    assert dur.sum() <= length(union(kernels))


def test_legacy_export_of_a_gpu_run_gets_the_kineto_trace_s_headline(capsys):
    legacy, kineto = diagnose(LEGACY_V100), diagnose(KINETO_V100)
    assert legacy.summary.trace_format == "legacy" and legacy.summary.steps == ()
    assert legacy.summary.has_gpu and legacy.summary.devices[0].name == "GPU 0"
    assert legacy.headline.id == kineto.headline.id == "input-bound"
    assert math.isclose(legacy.headline.gain, kineto.headline.gain, abs_tol=0.01)
    for d in (legacy, kineto):
        assert _ev(d, "input-bound", "dataloader_per_step_median") == 73418.0
    assert legacy.finding("gpu-unused").status is Status.OK
    assert cli.main(["diagnose", str(LEGACY_V100)]) == 0
    assert "GPU busy here is what the spans prove" in capsys.readouterr().out.replace("\n  ", " ")


def test_this_torch_s_own_legacy_exporter_is_read(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.autograd import profiler_legacy

    x = torch.randn(32, 32)
    with profiler_legacy.profile() as prof:
        for _ in range(3):
            (x @ x).relu().sum().item()
    path = tmp_path / "legacy.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())
    assert isinstance(events, list) and all("cat" not in e for e in events if e["ph"] == "X")
    d = diagnose(path)
    assert d.summary.trace_format == "legacy"
    assert d.summary.cpu_ops == sum(e["pid"] == "CPU functions" for e in events)
    assert _ev(d, "sync", "scalar_reads_per_step_median") == 3


def test_legacy_events_that_are_damaged_are_skipped_and_others_refused(tmp_path):
    ok = {"name": "aten::mm", "ph": "X", "ts": 1.0, "dur": 2.0, "tid": 0, "pid": "CPU functions"}
    bad_dev = {"name": "aten::mm", "ph": "X", "ts": 1.0, "dur": 2.0, "tid": "x"}
    bad_dev["pid"] = "CUDA functions"
    listy = {"name": "aten::mm", "ph": "X", "ts": 1.0, "dur": 2.0, "tid": 0, "pid": [1]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps([ok, bad_dev, listy]))
    raw = read_trace(p)
    assert raw.trace_format == "legacy" and len(raw.op_ts) == 1 and raw.skipped == 2
    p.write_text(json.dumps([{"name": "frame", "ph": "X", "ts": 1, "dur": 2, "pid": "renderer"}]))
    with pytest.raises(InputError, match=r'not a PyTorch profiler trace.*"CPU functions"'):
        read_trace(p)


def test_own_pieces_are_the_union_of_the_spans_each_instant_once():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 25))
        ts = rng.integers(0, 60, n).astype(float)
        end = ts + rng.integers(1, 20, n)
        dev = rng.integers(0, 2, n)
        which, lo, hi = own_pieces(ts, end, dev)
        assert ((lo >= ts[which]) & (hi <= end[which])).all()
        for d in (0, 1):
            m, p = dev == d, dev[which] == d
            spans = list(zip(ts[m], end[m], strict=True))
            assert (hi[p] - lo[p]).sum() == pytest.approx(length(union(spans)))
            order = np.argsort(lo[p])
            assert (lo[p][order][1:] >= hi[p][order][:-1]).all()  # disjoint
    # nested ops: each instant under the innermost; equal spans: the last in the file
    which, lo, hi = own_pieces(np.array([0.0, 1, 2, 0]), np.array([10.0, 9, 8, 10]), np.zeros(4))
    pieces = list(zip(which.tolist(), lo.tolist(), hi.tolist(), strict=True))
    assert pieces[:3] == [(3, 0, 1), (1, 1, 2), (2, 2, 8)]
