"""Run Holistic Trace Analysis (HTA) on one trace folder, in HTA's own virtualenv, as one process.

Used by ``diagnose_vs_hta_corpus.py``; it imports nothing from gpuprobe (HTA lives in another
venv). Every analysis is tried on its own and its exception recorded: an HTA failure is a result.

    HTA_PYTHON benchmarks/_hta_worker.py TRACE_DIR OUT.json [--variants]

Default mode: ``TraceAnalysis(trace_dir=TRACE_DIR)`` with HTA's defaults (ns rounding on, last
profiler step dropped), then the temporal breakdown, idle-time breakdown (all ranks), comm/comp
overlap, GPU kernel breakdown and CUDA kernel launch stats (all ranks).
``--variants``: only temporal + idle breakdown, once per (ns rounding, last step) setting, so the
parent can tell how much each of HTA's choices moves the numbers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import traceback
from typing import Any

from _worker_common import vmhwm_mib  # benchmarks/, next to this script

T_START = time.perf_counter()
logging.disable(logging.CRITICAL)

# (label, disable ns rounding, include last profiler step)
VARIANTS = (
    ("exact", True, False),
    ("exact_all_steps", True, True),
    ("rounded_all_steps", False, True),
)
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")


def _num(x: Any) -> Any:
    """A JSON-safe number (NaN/inf → None)."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _err(e: BaseException) -> dict[str, str]:
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return {"error": f"{type(e).__name__}: {str(e)[:300]}", "where": where}


def _timed(out: dict, key: str, fn: Any) -> Any:
    t = time.perf_counter()
    try:
        value = fn()
    except Exception as e:
        out[key] = _err(e)
        value = None
    out.setdefault("seconds", {})[key] = round(time.perf_counter() - t, 4)
    return value


def _set_rounding(disable: bool) -> None:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1" if disable else "0"
    try:  # traceinsight 0.6.x caches its options; HolisticTraceAnalysis 0.5.0 reads the env
        from hta.configs.env_options import HTAEnvOptions

        HTAEnvOptions.instance().set_disable_ns_rounding(disable)
    except Exception:
        pass


def _ranks(ta: Any) -> list[int]:
    t = ta.t
    return list(t.get_ranks()) if hasattr(t, "get_ranks") else sorted(t.traces)


def _gpu_event_counts(ta: Any) -> dict[str, dict[str, int]]:
    """Per rank, HTA's events on a GPU stream (stream != -1) after its filtering, by category."""
    sym = ta.t.symbol_table.get_sym_table()
    out = {}
    for rank, df in ta.t.traces.items():
        g = df[df["stream"].ne(-1)]
        counts = g["cat"].value_counts()
        out[str(rank)] = {str(sym[int(k)]): int(v) for k, v in counts.items()}
    return out


def temporal(ta: Any) -> dict[str, Any]:
    df = ta.get_temporal_breakdown(visualize=False)
    out = {}
    for row in df.to_dict("records"):
        span = float(row["kernel_time(us)"])
        idle = float(row["idle_time(us)"])
        out[str(int(row["rank"]))] = {
            "span_us": _num(span),
            "idle_us": _num(idle),
            "compute_us": _num(row["compute_time(us)"]),
            "non_compute_us": _num(row["non_compute_time(us)"]),
            "busy_pct": _num(100.0 * (span - idle) / span) if span else None,
            "idle_pct": _num(100.0 * idle / span) if span else None,
            "compute_pct": _num(row["compute_time_pctg"]),
            "non_compute_pct": _num(row["non_compute_time_pctg"]),
        }
    return out


def idle(ta: Any, ranks: list[int]) -> dict[str, Any]:
    """Per rank (HTA's frame has no rank column, so one call per rank), summed over streams."""
    out: dict[str, Any] = {}
    for rank in ranks:
        df, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        per_stream: dict[str, dict[str, Any]] = {}
        totals = dict.fromkeys(IDLE_CATEGORIES, 0.0)
        for row in df.to_dict("records"):
            cat = str(row["idle_category"])
            per_stream.setdefault(str(_num(row["stream"])), {})[cat] = _num(row["idle_time"])
            totals[cat] = totals.get(cat, 0.0) + float(row["idle_time"])
        total = sum(totals.values())
        out[str(rank)] = {
            "idle_us_sum_over_streams": _num(total),
            "split_pct": {k: _num(100.0 * v / total) if total else None for k, v in totals.items()},
            "per_stream_us": per_stream,
        }
    return out


def kernel_breakdown(ta: Any) -> dict[str, Any]:
    kt, _ = ta.get_gpu_kernel_breakdown(visualize=False)
    return {
        str(r["kernel_type"]): {"us": _num(r["sum"]), "pct": _num(r["percentage"])}
        for r in kt.to_dict("records")
    }


def comm_comp(ta: Any) -> dict[str, Any]:
    df = ta.get_comm_comp_overlap(visualize=False)
    return {str(int(r["rank"])): _num(r["comp_comm_overlap_pctg"]) for r in df.to_dict("records")}


def launch_stats(ta: Any, ranks: list[int]) -> dict[str, Any]:
    res = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    out = {}
    for rank, df in res.items():
        if df is None or len(df) == 0:
            out[str(rank)] = {"launches": 0}
            continue
        out[str(rank)] = {
            "launches": len(df),
            "short_kernels": int((df["gpu_duration"] < df["cpu_duration"]).sum()),
            "runtime_outliers_gt_50us": int((df["cpu_duration"] > 50).sum()),
            "launch_delay_outliers_gt_100us": int((df["launch_delay"] > 100).sum()),
            "median_cpu_us": _num(df["cpu_duration"].median()),
            "median_gpu_us": _num(df["gpu_duration"].median()),
            "median_launch_delay_us": _num(df["launch_delay"].median()),
        }
    return out


def default_mode(trace_dir: str, out: dict) -> None:
    _set_rounding(False)
    from hta.trace_analysis import TraceAnalysis

    out["seconds"] = {"import": round(time.perf_counter() - T_START, 4)}
    ta = _timed(out, "load", lambda: TraceAnalysis(trace_dir=trace_dir))
    if ta is None:
        return
    ranks = _ranks(ta)
    out["ranks"] = ranks
    out["gpu_events"] = _timed(out, "gpu_events", lambda: _gpu_event_counts(ta))
    for key, fn in (
        ("temporal", lambda: temporal(ta)),
        ("idle", lambda: idle(ta, ranks)),
        ("comm_comp_overlap_pct", lambda: comm_comp(ta)),
        ("kernel_breakdown", lambda: kernel_breakdown(ta)),
        ("launch_stats", lambda: launch_stats(ta, ranks)),
    ):
        value = _timed(out, key, fn)
        if value is not None:
            out[key] = value


def variants_mode(trace_dir: str, out: dict) -> None:
    from hta.trace_analysis import TraceAnalysis

    out["seconds"] = {"import": round(time.perf_counter() - T_START, 4)}
    out["variants"] = {}
    for label, no_rounding, last_step in VARIANTS:
        _set_rounding(no_rounding)
        v: dict[str, Any] = {"ns_rounding": not no_rounding, "include_last_step": last_step}
        out["variants"][label] = v
        ta = _timed(
            v,
            "load",
            lambda last_step=last_step: TraceAnalysis(
                trace_dir=trace_dir, include_last_profiler_step=last_step
            ),
        )
        if ta is None:
            continue
        ranks = _ranks(ta)
        v["gpu_events"] = _timed(v, "gpu_events", lambda ta=ta: _gpu_event_counts(ta))
        for key, fn in (
            ("temporal", lambda ta=ta: temporal(ta)),
            ("idle", lambda ta=ta, ranks=ranks: idle(ta, ranks)),
        ):
            value = _timed(v, key, fn)
            if value is not None:
                v[key] = value


def main() -> int:
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    trace_dir, out_path = [a for a in sys.argv[1:] if not a.startswith("--")][:2]
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        from importlib import metadata

        for dist in ("HolisticTraceAnalysis", "traceinsight"):
            try:
                out["hta_version"] = f"{dist} {metadata.version(dist)}"
                break
            except metadata.PackageNotFoundError:
                continue
        if "--variants" in flags:
            variants_mode(trace_dir, out)
        else:
            default_mode(trace_dir, out)
    except Exception as e:
        out["fatal"] = _err(e)
    out["worker_seconds"] = round(time.perf_counter() - T_START, 4)
    out["vmhwm_mib"] = vmhwm_mib()
    with open(out_path, "w") as fh:
        json.dump(out, fh, indent=1, default=_num)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
