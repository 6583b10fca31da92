"""An MTIA accelerator trace (HolisticTraceAnalysis's inference rank): its device activity
(``mtia_ccp_events``) is not read as GPU work, and the diagnosis says so rather than calling it
a CPU-only trace."""

from __future__ import annotations

from gpuprobe import cli
from gpuprobe.tools.diagnose.engine import diagnose

from .realdata import DATA, load

MTIA = DATA / "hta_mtia_inference_trace__mtia_inference_rank_0.json.gz"


def test_mtia_trace_is_not_called_cpu_only(capsys):
    data = load(MTIA)
    assert data["deviceProperties"][0]["name"] == "ARTEMIS"
    cats = {e.get("cat") for e in data["traceEvents"]}
    assert {"mtia_ccp_events", "mtia_runtime"} <= cats
    d = diagnose(MTIA)
    assert d.summary.accelerator == "MTIA" and not d.summary.has_gpu
    assert "MTIA trace" in d.finding("gpu-idle").title
    assert "MTIA trace" in d.finding("sync").title
    assert cli.main(["diagnose", str(MTIA)]) == 0
    out = capsys.readouterr().out
    assert "CPU-only" not in out and "ARTEMIS (MTIA 17)" in out
