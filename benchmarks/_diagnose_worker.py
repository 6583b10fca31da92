"""Run ``gpuprobe.diagnose`` on one trace file or one folder of rank files, as one process.

Used by ``diagnose_vs_hta_corpus.py`` with ``<checkout>/src`` first on ``PYTHONPATH`` (then the
parent's entries), so it measures whatever gpuprobe that checkout has. It reads fields with ``getattr`` so that newer gpuprobe versions
(multi-rank reports, kernel breakdowns, comm/comp overlap) are recorded when present.

    python benchmarks/_diagnose_worker.py PATH OUT.json

    python benchmarks/_diagnose_worker.py --hta-event-set TRACE OUT.json

The second diagnoses the events Holistic Trace Analysis keeps (:func:`hta_event_set`), when
that is fewer, for the comparison of like with like.

A folder is first given to ``diagnose`` whole (a gpuprobe that reads a folder of ranks); when
that raises, each ``.json``/``.json.gz`` file in it is diagnosed in turn, in this process.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

from _worker_common import vmhwm_mib  # benchmarks/, next to this script

T_START = time.perf_counter()

SUMMARY_FIELDS = (
    "events",
    "skipped_events",
    "has_gpu",
    "gpu_activities",
    "span_us",
    "gpu_span_us",
    "gpu_busy_fraction",
    "gpu_idle_fraction",
    "host_wait_fraction",
    "kernel_wait_fraction",
    "other_wait_fraction",
    "read_seconds",
    "analyse_seconds",
)
# fields a later gpuprobe may add, on the Diagnosis or on its summary
EXTRA_FIELDS = (
    "ranks",
    "rank",
    "kernel_breakdown",
    "kernel_types",
    "comm_comp",
    "comm_comp_overlap",
    "comm_comp_overlap_fraction",
    "overlap",
    "idle_breakdown",
    "launch_stats",
)


def _plain(x: Any, depth: int = 0) -> Any:
    """JSON-safe copy of a record, dataclass, mapping or sequence (depth-limited)."""
    if depth > 6:
        return repr(x)[:200]
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if hasattr(x, "to_dict"):
        try:
            return _plain(x.to_dict(), depth + 1)
        except Exception:
            pass
    if isinstance(x, dict):
        return {str(k): _plain(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v, depth + 1) for v in x]
    if hasattr(x, "value") and not callable(x.value):  # an Enum
        return _plain(x.value, depth + 1)
    if hasattr(x, "__dataclass_fields__"):
        return {k: _plain(getattr(x, k), depth + 1) for k in x.__dataclass_fields__}
    try:
        return float(x)
    except (TypeError, ValueError):
        return repr(x)[:200]


def _extras(obj: Any) -> dict[str, Any]:
    out = {}
    for name in EXTRA_FIELDS:
        v = getattr(obj, name, None)
        if v is not None and not callable(v):
            out[name] = _plain(v)
    return out


def describe(d: Any) -> dict[str, Any]:
    """What the comparison needs from one Diagnosis."""
    s = d.summary
    out: dict[str, Any] = {f: _plain(getattr(s, f, None)) for f in SUMMARY_FIELDS}
    out["steps"] = len(getattr(s, "steps", ()) or ())
    out["devices"] = len(getattr(s, "devices", ()) or ())
    out["findings"] = [{"id": f.id, "status": _plain(f.status)} for f in getattr(d, "findings", ())]
    extras = {**_extras(s), **_extras(d)}
    if extras:
        out["extras"] = extras
    return out


def hta_event_set(path: str, out_dir: str) -> tuple[str, int] | None:
    """The trace with the GPU events Holistic Trace Analysis drops dropped, for a comparison of
    like with like: with two or more ProfilerStep names HTA keeps only the GPU events (a stream
    and a correlation) joined by correlation to a CPU event that began by the last step's end
    (traceinsight 0.6, ``Trace._filter_irrelevant_gpu_kernels`` with all steps kept). gpuprobe
    keeps them all (a kernel queued before the profiler started still ran in its window). The
    copy's path and how many GPU events it lost; None when HTA would drop nothing."""
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return None

    def args(e: Any) -> dict:
        a = e.get("args") if isinstance(e, dict) else None
        return a if isinstance(a, dict) else {}

    def on_gpu(e: Any) -> bool:
        a = args(e)
        return isinstance(a.get("stream"), int) and a["stream"] >= 0 and "correlation" in a

    steps = [e for e in events if isinstance(e, dict) and "ProfilerStep" in str(e.get("name", ""))]
    if len({e.get("name") for e in steps}) < 2:
        return None
    last_end = max(float(e.get("ts", 0)) + float(e.get("dur", 0) or 0) for e in steps)
    launched = {
        args(e).get("correlation")
        for e in events
        if isinstance(e, dict) and not on_gpu(e) and "correlation" in args(e)
        and float(e.get("ts", 0)) <= last_end
    }  # fmt: skip
    kept = [e for e in events if not on_gpu(e) or args(e)["correlation"] in launched]
    dropped = len(events) - len(kept)
    if not dropped:
        return None
    doc["traceEvents"] = kept
    dest = os.path.join(out_dir, "hta_event_set.json")
    with open(dest, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return dest, dropped


def event_set_main(path: str, out_path: str) -> int:
    """``--hta-event-set``: gpuprobe's busy % on the events HTA keeps (a run of its own, so that
    the main run's time and memory are the diagnosis alone)."""
    import tempfile

    out: dict[str, Any] = {}
    try:
        import gpuprobe

        with tempfile.TemporaryDirectory() as tmp:
            same = hta_event_set(path, tmp)
            if same is not None:
                d = gpuprobe.diagnose(same[0])
                out["hta_event_set"] = {
                    "dropped_gpu_events": same[1],
                    "gpu_busy_fraction": _plain(d.summary.gpu_busy_fraction),
                    "gpu_span_us": _plain(d.summary.gpu_span_us),
                }
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    with open(out_path, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


def main() -> int:
    if sys.argv[1] == "--hta-event-set":
        return event_set_main(sys.argv[2], sys.argv[3])
    path, out_path = sys.argv[1], sys.argv[2]
    out: dict[str, Any] = {}
    try:
        import gpuprobe

        out["gpuprobe_file"] = gpuprobe.__file__
        out["seconds"] = {"import": round(time.perf_counter() - T_START, 4)}
        t = time.perf_counter()
        if os.path.isdir(path):
            try:
                out["folder"] = describe(gpuprobe.diagnose(path))
            except Exception as e:
                out["folder_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                out["ranks"] = {}
                for name in sorted(os.listdir(path)):
                    if not name.endswith((".json", ".json.gz")):
                        continue
                    try:
                        out["ranks"][name] = describe(gpuprobe.diagnose(os.path.join(path, name)))
                    except Exception as e2:
                        out["ranks"][name] = {"error": f"{type(e2).__name__}: {str(e2)[:300]}"}
        else:
            out.update(describe(gpuprobe.diagnose(path)))
        out["seconds"]["diagnose"] = round(time.perf_counter() - t, 4)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    out["worker_seconds"] = round(time.perf_counter() - T_START, 4)
    out["vmhwm_mib"] = vmhwm_mib()
    with open(out_path, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
