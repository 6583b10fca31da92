"""The diagnose-vs-HTA corpus benchmark's own logic: trace facts, the gpuprobe worker, the split
of a busy difference into HTA's rounding, HTA's last-step drop and the rest. HTA is not needed."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _support import pythonpath_env

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import _diagnose_worker as worker  # noqa: E402
import diagnose_vs_hta_corpus as bench  # noqa: E402

import gpuprobe  # noqa: E402


def _x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Two steps; kernel k2 has no launch in the trace and starts before event #0 (a cpu_op)."""
    t0 = 1_700_000_000_000_000.0
    events = [
        _x("cpu_op", "aten::add", t0 + 500, 10),  # event #0
        _x("user_annotation", "ProfilerStep#1", t0, 400),
        _x("user_annotation", "ProfilerStep#2", t0 + 400, 400),
        _x("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, correlation=1),
        _x("kernel", "k1", t0 + 20, 100, correlation=1, device=0, stream=7),
        _x("kernel", "k2", t0 + 200.5, 50, correlation=2, device=0, stream=7),
        _x("cuda_runtime", "cudaLaunchKernel", t0 + 410, 5, correlation=3),
        _x("kernel", "k3", t0 + 450, 100, correlation=3, device=0, stream=7),
        _x("cuda_sync", "Stream Sync", t0 + 560, 5, device=0, stream=7),
    ]
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events, "distributedInfo": {"rank": 3}}, fh)
    return path


def test_trace_facts(trace: Path) -> None:
    f = bench.trace_facts(trace)
    assert f["gpu_events"] == 3
    assert f["gpu_events_without_launch"] == 1
    assert f["unlaunched_before_event0"] == 1  # k2 starts at +200.5, event #0 at +500
    assert f["other_events_on_a_stream"] == {"cuda_sync": 1}
    assert f["profiler_steps"] == 2
    assert f["fractional_ts"] is True
    assert f["gpu_devices"] == 1
    assert bench.trace_rank(trace) == "3"


def test_trace_facts_of_a_file_that_is_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert bench.trace_facts(bad)["error"].startswith("JSONDecodeError")


def _run_worker(path: Path, tmp_path: Path) -> dict:
    """``_diagnose_worker.py`` in its own process, as the benchmark runs it; its JSON."""
    out = tmp_path / "g.json"
    env = pythonpath_env(ROOT / "src")  # the packages this process sees, too
    subprocess.run(
        [sys.executable, str(BENCH / "_diagnose_worker.py"), str(path), str(out)],
        env=env,
        check=True,
        timeout=120,
    )
    return json.loads(out.read_text())


def test_the_gpuprobe_worker_sees_its_parents_packages_and_hta_its_own(monkeypatch) -> None:
    """gpuprobe's worker: the checkout's src first, then the entries the script was given (where
    a card's msgspec lives); HTA's process, in a venv of its own, gets no PYTHONPATH at all."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/site", "", "/co/src", "/more"]))
    args = argparse.Namespace(repo="/co", hta_python="/hta/bin/python")
    _, env = bench.gpuprobe_cmd(args, Path("t.json"))
    assert env["PYTHONPATH"].split(os.pathsep) == ["/co/src", "/site", "/more"]
    _, hta = bench.hta_cmd(args, Path("f"), variants=False)
    assert "PYTHONPATH" not in hta


def test_diagnose_worker_matches_diagnose_in_process(trace: Path, tmp_path: Path) -> None:
    got = _run_worker(trace, tmp_path)
    d = gpuprobe.diagnose(trace)
    assert got["gpu_busy_fraction"] == pytest.approx(d.summary.gpu_busy_fraction)
    assert got["host_wait_fraction"] == pytest.approx(d.summary.host_wait_fraction)
    assert [f["id"] for f in got["findings"]] == [f.id for f in d.findings]
    assert got["vmhwm_mib"] > 1.0  # a Python process with numpy holds more than 1 MiB


def test_diagnose_worker_records_a_refused_trace(tmp_path: Path) -> None:
    bad = tmp_path / "notrace.json"
    bad.write_text(json.dumps({"nodes": []}))
    got = _run_worker(bad, tmp_path)
    assert got["error"].startswith("InputError")
    assert "gpu_busy_fraction" not in got


def test_like_for_like_takes_the_gpu_events_hta_keeps(tmp_path: Path) -> None:
    """The starved loader's trace from the H200 (tests/data/diagnose/gpu_h200): 32 of its 254 GPU
    events were launched before the profiler started. HTA (traceinsight 0.6, every step kept, no
    ns rounding) drops them: its GPU span there was 324,429.216 µs and its busy 12.26 %.
    gpuprobe on the events HTA keeps gives the same span and busy %, so what is left between
    the tools is which events count, not the arithmetic."""
    trace = ROOT / "tests" / "data" / "diagnose" / "gpu_h200" / "loader_single_process.json.gz"
    out = tmp_path / "e.json"
    subprocess.run(
        [sys.executable, str(BENCH / "_diagnose_worker.py"), "--hta-event-set", str(trace),
         str(out)], env=pythonpath_env(ROOT / "src"), check=True, timeout=120,
    )  # fmt: skip
    same = json.loads(out.read_text())["hta_event_set"]
    assert same["dropped_gpu_events"] == 32
    assert same["gpu_span_us"] == pytest.approx(324_429.216, abs=0.001)
    assert 100 * same["gpu_busy_fraction"] == pytest.approx(12.26, abs=0.005)
    everything = gpuprobe.diagnose(trace).summary
    assert 100 * everything.gpu_busy_fraction == pytest.approx(10.07, abs=0.005)  # all 254 kept
    # a trace whose GPU events were all launched in it is not rewritten
    fed = trace.with_name("item_fixed.json.gz")
    assert worker.hta_event_set(str(fed), str(tmp_path)) is None


def _hta_run(busy: float) -> dict:
    return {"temporal": {"0": {"busy_pct": busy, "span_us": 1000.0}},
            "idle": {"0": {"split_pct": {"host_wait": 60.0, "kernel_wait": 40.0, "other": 0.0}}}}  # fmt: skip


def test_compare_splits_a_difference_into_rounding_last_step_and_rest() -> None:
    case = {
        "name": "t",
        "gpuprobe": {"result": {
            "gpu_busy_fraction": 0.52, "host_wait_fraction": 0.5, "kernel_wait_fraction": 0.5,
            "other_wait_fraction": 0.0, "gpu_span_us": 1000.0}},
        "hta": {"result": _hta_run(49.0)},
        "hta_variants": {"result": {"variants": {
            "exact": _hta_run(50.0), "exact_all_steps": _hta_run(51.5),
            "rounded_all_steps": _hta_run(50.5)}}},
        "facts": {"gpu_events": 10, "gpu_events_without_launch": 2, "profiler_steps": 3},
    }  # fmt: skip
    bench.finish(case)
    c = case["compare"]
    assert c["delta_hta_busy_pp"] == pytest.approx(3.0)
    assert c["effect_ns_rounding_pp"] == pytest.approx(-1.0)  # 49 − 50
    assert c["effect_last_step_dropped_pp"] == pytest.approx(-1.5)  # 50 − 51.5
    assert c["residual_pp"] == pytest.approx(0.5)  # 52 − 51.5
    assert c["delta_split_max_pp"] == pytest.approx(10.0)  # host 50 vs 60
    why = " ".join(case["why"])
    assert "-1.00 pp" in why and "-1.50 pp" in why and "+0.50 pp" in why
    assert "drops the 2 of 10 GPU events" in why
    # with gpuprobe run on the events HTA keeps, like for like is that run against HTA's
    case["gpuprobe_hta_events"] = {"result": {"hta_event_set": {
        "dropped_gpu_events": 2, "gpu_busy_fraction": 0.5149, "gpu_span_us": 1000.0}}}  # fmt: skip
    bench.finish(case)
    c = case["compare"]
    assert c["delta_hta_exact_all_steps_busy_pp"] == pytest.approx(-0.01)  # 51.49 − 51.5
    assert c["effect_unlaunched_gpu_events_pp"] == pytest.approx(0.51)  # 52 − 51.49
    assert c["delta_hta_busy_pp"] == pytest.approx(3.0)  # HTA's default: gpuprobe as it is
    assert "moves its busy % by +0.51 pp" in " ".join(case["why"])


def test_markdown_lists_differences_and_failures() -> None:
    case = {
        "name": "bad.json.gz",
        "kind": "real GPU",
        "gpuprobe": {"wall_s": 1.0, "peak_mib": 30.0, "result": {"gpu_busy_fraction": 0.5}},
        "hta": {"wall_s": 4.0, "peak_mib": 120.0, "result": {
            "load": {"error": "AttributeError: 'list' object has no attribute 'items'",
                     "where": "trace_parser.py:353"}}},
        "facts": {},
    }  # fmt: skip
    bench.finish(case)
    result = {
        "machine": "m", "when": "w", "hta_python": "p", "hta_version": "v",
        "gpuprobe_version": "g", "cases": [case], "totals": bench.totals([case]),
        "agreement": bench.agreement([case]),
    }  # fmt: skip
    md = bench.markdown(result)
    row = next(line for line in md.splitlines() if line.startswith("| bad |"))
    assert "| 50.00 | error |" in row
    assert "| 4.0× | 4.0× |" in row  # HTA ÷ gpuprobe: time 4/1, memory 120/30
    assert (
        "load: `AttributeError: 'list' object has no attribute 'items' (trace_parser.py:353)`" in md
    )
