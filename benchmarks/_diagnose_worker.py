"""Run ``gpuprobe.diagnose`` on one trace file or one folder of rank files, as one process.

Used by ``diagnose_vs_hta_corpus.py`` with ``<checkout>/src`` first on ``PYTHONPATH`` (then the
parent's entries), so it measures whatever gpuprobe that checkout has. It reads fields with ``getattr`` so that newer gpuprobe versions
(multi-rank reports, kernel breakdowns, comm/comp overlap) are recorded when present.

    python benchmarks/_diagnose_worker.py PATH OUT.json

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


def main() -> int:
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
