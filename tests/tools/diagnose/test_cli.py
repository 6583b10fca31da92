"""`gpuprobe diagnose` end to end through the real main(), plus --html and --compare."""

from __future__ import annotations

import importlib
import json
import re

import pytest

import gpuprobe
import gpuprobe.cli as cli
from gpuprobe.tools.diagnose.engine import Diagnosis, compare, diagnose

from .traces import SCENARIOS


@pytest.fixture(autouse=True)
def _only_diagnose(monkeypatch):
    # other commands live on other branches; main() must only build the one under test
    monkeypatch.setattr(cli, "COMMANDS", ("diagnose",))


def test_human_output_findings_first_then_table(gpu_trace, capsys):
    assert cli.main(["diagnose", gpu_trace("sync_every_step")]) == 0
    out = capsys.readouterr().out
    first_warn = out.index("WARN")
    assert (
        first_warn < out.index("OK ") < out.index("GPU time per step") < out.index("Host per step")
    )
    assert "sync" in out and "fix:" in out
    assert "Steps' GPU span (HTA's definitions)" in out


def test_json_round_trips(gpu_trace, capsys):
    assert cli.main(["diagnose", gpu_trace("launch_bound"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    d = Diagnosis.from_dict(data)
    assert d.finding("launch-bound").status.value == "warn"
    assert d.summary.steps == (0, 1, 2, 3, 4)
    assert d == diagnose(d.summary.path).__class__.from_dict(data)


def test_cpu_only_trace_says_gpu_rules_skipped(tmp_path, capsys):
    pytest.importorskip("torch")
    with gpuprobe.profile(tmp_path / "cpu.json", show=False, skip=0) as prof:
        for _ in range(3):
            prof.step()
    assert cli.main(["diagnose", str(tmp_path / "cpu.json")]) == 0
    out = capsys.readouterr().out
    assert "skipped: no GPU events" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diagnose", "/nonexistent/trace.json"], "no such file"),
        (["diagnose"], "needs a TRACE"),
        (["diagnose", "a.json", "--compare", "b.json", "c.json"], "not both"),
    ],
)
def test_errors_are_one_line_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuprobe: ") and message in err and err.count("\n") == 1


def test_bad_steps_range(gpu_trace, capsys):
    path = gpu_trace("launch_bound")
    assert cli.main(["diagnose", path, "--steps", "x..y"]) == 2
    assert cli.main(["diagnose", path, "--steps", "50..60"]) == 2
    assert "no profiled step" in capsys.readouterr().err
    assert cli.main(["diagnose", path, "--steps", "3..", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["steps"] == [3, 4]


def test_html_is_self_contained(gpu_trace, tmp_path, capsys):
    page = tmp_path / "t.html"
    assert (
        cli.main(
            ["diagnose", gpu_trace("sync_every_step"), "--html", str(page), "--html-step", "2"]
        )
        == 0
    )
    text = page.read_text()
    assert "gp-tl-data" in text and "ProfilerStep#2" in text
    assert "GPU 0 stream 7" in text and "GPU 0 idle" in text and "cudaStreamSynchronize" in text
    # nothing to fetch: the one script is inline, no stylesheet or image from elsewhere; the
    # one link is Perfetto's UI, for the full trace
    assert re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"' >]*)""", text) == [
        "https://ui.perfetto.dev"
    ]
    assert "<script>" in text and "<script src" not in text
    assert (
        cli.main(
            ["diagnose", gpu_trace("sync_every_step"), "--html", str(page), "--html-step", "99"]
        )
        == 2
    )


def test_compare_before_after(gpu_trace, tmp_path, capsys):
    before = gpu_trace("fp32_gemm")
    after = gpu_trace("tf32_gemm")
    assert cli.main(["diagnose", "--compare", before, after]) == 0
    out = capsys.readouterr().out
    assert "no-tensor-cores" in out and "warn" in out and "ok" in out
    c = compare(before, after)
    change = next(f for f in c.findings if f.id == "no-tensor-cores")
    assert (change.before.value, change.after.value) == ("warn", "ok")
    assert cli.main(["diagnose", "--compare", before, after, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {m["name"] for m in data["metrics"]} >= {"step time (median)", "syncs per step"}


def test_compare_shows_the_sync_fix(tmp_path):
    slow = SCENARIOS["sync_every_step"](str(tmp_path / "slow.json.gz"))
    fast = SCENARIOS["healthy"](str(tmp_path / "fast.json.gz"))
    c = compare(slow, fast)
    syncs = next(m for m in c.metrics if m.name == "syncs per step")
    assert (syncs.before, syncs.after, syncs.improved) == (1.0, 0.0, True)
    assert "syncs per step" in str(c)


def test_public_api_and_repr_html(gpu_trace):
    d = gpuprobe.diagnose(gpu_trace("pageable"))
    assert isinstance(d, Diagnosis)
    importlib.import_module(
        "gpuprobe.tools.diagnose.kineto"
    )  # a submodule import must not break it

    assert isinstance(gpuprobe.diagnose(gpu_trace("pageable")), Diagnosis)
    html = d._repr_html_()
    assert "<table>" in html and "pageable-copies" in html
    assert "pageable-copies" in str(d)
