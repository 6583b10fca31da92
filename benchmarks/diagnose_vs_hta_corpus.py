"""gpuprobe ``diagnose`` against Holistic Trace Analysis (HTA) on the real trace corpus.

For each trace file of the corpus (one rank each; ``MANIFEST.tsv`` says what it is), and for the
multi-rank DLRM folders, run in separate processes, alternating which goes first:

- gpuprobe: ``gpuprobe.diagnose(path)`` from the checkout given by ``--repo`` (its ``src`` first on
  ``PYTHONPATH``, then the entries this script was given, so the worker sees this script's
  packages), via ``_diagnose_worker.py``: busy/idle fractions, idle split, findings, and any
  multi-rank, kernel-breakdown or comm/comp fields a newer gpuprobe has;
- HTA: ``TraceAnalysis(trace_dir=...)`` (a folder with a symlink to the file) with its defaults,
  then the temporal breakdown, idle-time breakdown, comm/comp overlap, GPU kernel breakdown and
  CUDA kernel launch stats, via ``_hta_worker.py``; every failure is recorded;
- HTA again (not timed for the ratios) with its ns rounding off (``HTA_DISABLE_NS_ROUNDING=1``)
  and with the last profiler step kept (``include_last_profiler_step=True``), so each difference
  can be split into what HTA's rounding, HTA's dropping of the last step, and the rest cause.

Wall and CPU time of each process come from ``os.wait4``. Peak memory is the process's own
high-water RSS (``VmHWM``), which the worker reads as it ends: wait4's ``ru_maxrss`` on Linux also
counts the parent's RSS at fork, so it is kept only as ``wait4_maxrss_mib`` (and used when a worker
died). ``tree_peak_mib`` sums the RSS of the process and its children (HTA parses several ranks
in a multiprocessing pool), sampled every 50 ms.

HTA lives in its own virtualenv, outside the repo (it pins pandas, plotly, jupyter)::

    python3 -m venv /work/hta-venv
    /work/hta-venv/bin/pip install "HolisticTraceAnalysis==0.5.0" "pandas<3"

(HTA 0.5.0 with pandas 3 fails while parsing. The newer HTA is published as ``traceinsight``;
it works the same way here: ``--hta-python`` another venv's python.) Without that python, HTA is
skipped and gpuprobe is still measured.

The 8-rank DLRM set (facebookresearch/param ``example_input_files/chakra_traces/
dlrm_kineto.tar.gz`` at a222a8f6f3f48514cee31573cb4209436c7acad2) is read from ``--multirank``
(default /work/dlrm8 when it exists: the ``*.pt.trace.json.gz`` files in it).

    .venv/bin/python benchmarks/diagnose_vs_hta_corpus.py [--hta-python PATH] [--repo DIR]
        [--corpus DIR] [--multirank DIR] [--only SUBSTRING] [--no-variants]

Output: benchmarks/results/diagnose_vs_hta_corpus.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "benchmarks" / "results"
NAME = "diagnose_vs_hta_corpus"
DEFAULT_CORPUS = Path(os.environ.get("GPUPROBE_TRACES", "/work/shared/traces"))
DEFAULT_MULTIRANK = Path("/work/dlrm8")
DEFAULT_HTA_PYTHON = os.environ.get("HTA_PYTHON", "/work/hta-venv/bin/python")
DIFF_PP = 0.1  # percentage points: a busy % difference listed in the differences section
SAMPLE_S = 0.05  # RSS sampling period of the process tree, seconds
CORPUS_DLRM_PREFIX = "param_dlrm_worker"  # the corpus's DLRM ranks, also run as one folder
IDLE_KEYS = ("host_wait", "kernel_wait", "other")

# What inspecting the traces showed (see the differences section); keyed by trace name.
NOTES: dict[str, str] = {
    "hta_ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (
        "Sub-µs timestamps: gpuprobe keeps times relative to the trace's first event, so "
        "ts + dur keeps its nanoseconds and the idle split is HTA's exactly (17.04/82.96 %); "
        "before that, absolute µs times (~1.7e15, a 0.25 µs float grid) gave 16.64/83.36 %"
    ),
    "hta_trace_compare__base__base.json.gz": (
        "A test fixture where 16 of 18 GPU events have no launch: HTA keeps 2 kernels (1 with "
        "the last step dropped), so its span is one or two kernels long"
    ),
    "kineto_docs_after_fix_trace.json.gz": (
        "A synthetic trace with one 0.02 µs kernel and two cuda_sync events: rounding its start "
        "up and end down gives the kernel a negative length, so HTA's temporal breakdown fails "
        "its assert idle_time <= kernel_time; without rounding HTA counts the syncs as busy"
    ),
    "kineto_docs_before_fix_trace.json.gz": (
        "Same synthetic shape as after_fix: HTA's rounding fails its assert, and without it HTA "
        "counts the cuda_sync events"
    ),
    "hta_mtia_inference_trace__mtia_inference_rank_0.json.gz": (
        "MTIA accelerator trace (mtia_ccp_events / mtia_runtime): HTA reads it, gpuprobe "
        "reads no GPU activity in it"
    ),
    "hta_mtia_trace_single_rank__mtia_rank_0.json.gz": (
        "MTIA accelerator trace: HTA reads it (its kernel wait comes out negative, -0.2 % of "
        "idle, from overlapping events on a stream), gpuprobe reads no GPU activity in it"
    ),
    "hta_trace_compare__test__test.json.gz": (
        "A test fixture where 16 of 17 GPU events have no launch: HTA keeps 1 kernel (span 4 µs,"
        " busy 100 %)"
    ),
}


# -- processes -------------------------------------------------------------------------------


def _tree_rss(pid: int, psutil: Any) -> int:
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_process(cmd: list[str], env: dict[str, str], timeout: float, log: Path) -> dict:
    """Run ``cmd``; wall time, CPU time and peak RSS (wait4), peak RSS of its tree (sampled)."""
    try:
        import psutil
    except ImportError:  # the tree figure is then absent
        psutil = None
    peak_tree = 0
    done = threading.Event()
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

        def sample() -> None:
            nonlocal peak_tree
            while not done.is_set():
                peak_tree = max(peak_tree, _tree_rss(proc.pid, psutil))
                done.wait(SAMPLE_S)

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        sampler = threading.Thread(target=sample, daemon=True) if psutil else None
        if sampler:
            sampler.start()
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        done.set()
        if sampler:
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    out = {
        "wall_s": round(wall, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        # KiB on Linux; includes the parent's RSS at fork, so replaced by the worker's VmHWM
        "peak_mib": round(ru.ru_maxrss / 1024, 1),
        "wait4_maxrss_mib": round(ru.ru_maxrss / 1024, 1),
        "peak_source": "wait4",
        "rc": proc.returncode,
    }
    if psutil:
        out["tree_peak_mib"] = round(peak_tree / 2**20, 1)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        out["process_error"] = (
            f"exit {proc.returncode}"
            + (f" (killed after {timeout:.0f} s)" if wall >= timeout else "")
            + ": "
            + " | ".join(tail)[-400:]
        )
    return out


def run_worker(cmd: list[str], env: dict[str, str], timeout: float, work: Path, tag: str) -> dict:
    out_json = work / f"{tag}.json"
    res = run_process([*cmd, str(out_json)], env, timeout, work / f"{tag}.log")
    if out_json.is_file():
        res["result"] = json.loads(out_json.read_text())
        if res["result"].get("vmhwm_mib"):
            res["peak_mib"] = res["result"]["vmhwm_mib"]
            res["peak_source"] = "VmHWM"
    return res


def gpuprobe_cmd(args: argparse.Namespace, path: Path) -> tuple[list[str], dict[str, str]]:
    env = src_first(Path(args.repo) / "src", PYTHONWARNINGS="ignore")  # and the parent's path
    return [sys.executable, str(HERE / "_diagnose_worker.py"), str(path)], env


def hta_cmd(args: argparse.Namespace, folder: Path, variants: bool) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)
    env.pop("HTA_DISABLE_NS_ROUNDING", None)
    cmd = [args.hta_python, str(HERE / "_hta_worker.py"), str(folder)]
    if variants:
        cmd.append("--variants")
    return cmd, env


# -- the corpus ------------------------------------------------------------------------------


def read_manifest(corpus: Path) -> dict[str, str]:
    kinds = {}
    mf = corpus / "MANIFEST.tsv"
    if mf.is_file():
        for line in mf.read_text().splitlines()[1:]:
            cols = line.split("\t")
            if len(cols) >= 5:
                kinds[cols[0]] = cols[4]
    return kinds


def cases(args: argparse.Namespace, work: Path) -> list[dict]:
    """Each case: name, kind, the path gpuprobe reads, the folder HTA reads."""
    corpus = Path(args.corpus)
    kinds = read_manifest(corpus)
    files = sorted(p for p in corpus.iterdir() if p.name != "MANIFEST.tsv" and p.is_file())
    out = []
    for f in files:
        folder = work / "dirs" / f.name
        folder.mkdir(parents=True)
        (folder / f.name).symlink_to(f)
        out.append(
            {
                "name": f.name,
                "kind": kinds.get(f.name, "?"),
                "path": f,
                "folder": folder,
                "facts": trace_facts(f),
            }
        )
    dlrm = [f for f in files if f.name.startswith(CORPUS_DLRM_PREFIX)]
    if len(dlrm) > 1:
        out.append(_rank_folder(work, "corpus_dlrm_ranks", dlrm, "param DLRM ranks in the corpus"))
    if args.multirank:
        mr = Path(args.multirank)
        ranks = sorted(mr.glob("*.pt.trace.json.gz")) or sorted(mr.glob("*.json*"))
        if ranks:
            out.append(_rank_folder(work, f"{mr.name}_ranks", ranks, f"{len(ranks)}-rank folder"))
    if args.only:
        out = [c for c in out if any(s in c["name"] for s in args.only.split(","))]
    return out


def _rank_folder(work: Path, name: str, files: list[Path], kind: str) -> dict:
    folder = work / "dirs" / name
    folder.mkdir(parents=True)
    for f in files:
        (folder / f.name).symlink_to(f.resolve())
    return {
        "name": name,
        "kind": kind,
        "path": folder,
        "folder": folder,
        "multirank": True,
        "rank_files": [f.name for f in files],
        "rank_of": {f.name: trace_rank(f) for f in files},
        "rank_facts": {f.name: trace_facts(f) for f in files},
    }


# -- comparison ------------------------------------------------------------------------------


def _pct(x: Any) -> float | None:
    return None if x is None else 100.0 * float(x)


def _first_rank(d: dict | None) -> tuple[str, Any] | tuple[None, None]:
    if not d:
        return None, None
    k = sorted(d, key=lambda r: int(r) if str(r).lstrip("-").isdigit() else 0)[0]
    return k, d[k]


def _hta_busy(run: dict | None, rank: str | None = None) -> float | None:
    if not run or "temporal" not in run or not isinstance(run["temporal"], dict):
        return None
    t = run["temporal"]
    if "error" in t:
        return None
    row = t.get(rank) if rank is not None else _first_rank(t)[1]
    return None if not row else row.get("busy_pct")


def _hta_split(run: dict | None, rank: str | None = None) -> dict | None:
    if not run or not isinstance(run.get("idle"), dict) or "error" in run["idle"]:
        return None
    row = run["idle"].get(rank) if rank is not None else _first_rank(run["idle"])[1]
    return None if not row else row.get("split_pct")


def _g_split(g: dict) -> dict | None:
    if g.get("host_wait_fraction") is None:
        return None
    return {k: _pct(g.get(f"{k.removesuffix('_wait')}_wait_fraction")) for k in IDLE_KEYS}


def _hta_errors(run: dict | None) -> dict[str, str]:
    if not run:
        return {}
    errs = {}
    if "fatal" in run:
        errs["fatal"] = run["fatal"]["error"]
    for k, v in run.items():
        if isinstance(v, dict) and "error" in v and isinstance(v["error"], str):
            errs[k] = f"{v['error']} ({v.get('where', '')})"
    for label, v in (run.get("variants") or {}).items():
        for k, e in _hta_errors(v).items():
            errs[f"{label}.{k}"] = e
    return errs


def compare_single(case: dict) -> dict:
    """Numbers for one single-file case, from the raw runs."""
    g = (case.get("gpuprobe") or {}).get("result") or {}
    h = (case.get("hta") or {}).get("result")
    hv = (case.get("hta_variants") or {}).get("result") or {}
    variants = hv.get("variants") or {}
    c: dict[str, Any] = {
        "gpuprobe_busy_pct": _pct(g.get("gpu_busy_fraction")),
        "gpuprobe_split_pct": _g_split(g),
        "gpuprobe_gpu_span_us": g.get("gpu_span_us"),
        "gpuprobe_error": g.get("error"),
        "findings": g.get("findings"),
        "hta_busy_pct": _hta_busy(h),
        "hta_exact_busy_pct": _hta_busy(variants.get("exact")),
        "hta_exact_all_steps_busy_pct": _hta_busy(variants.get("exact_all_steps")),
        "hta_rounded_all_steps_busy_pct": _hta_busy(variants.get("rounded_all_steps")),
        "hta_split_pct": _hta_split(h),
        "hta_exact_split_pct": _hta_split(variants.get("exact")),
        "hta_exact_all_steps_split_pct": _hta_split(variants.get("exact_all_steps")),
        "hta_errors": {**_hta_errors(h), **_hta_errors(hv)},
    }
    gs, hs = c["gpuprobe_split_pct"], c["hta_exact_all_steps_split_pct"] or c["hta_split_pct"]
    if gs and hs and all(hs.get(k) is not None for k in IDLE_KEYS):
        c["delta_split_max_pp"] = round(max(abs(gs[k] - hs[k]) for k in IDLE_KEYS), 4)
    gb = c["gpuprobe_busy_pct"]
    # like for like: gpuprobe on the events HTA keeps (the GPU events whose launch is in the
    # trace, when HTA drops the others: _diagnose_worker.hta_event_set), against HTA exact with
    # every step kept
    same = ((case.get("gpuprobe_hta_events") or {}).get("result") or {}).get("hta_event_set") or {}
    c["gpuprobe_hta_events_busy_pct"] = _pct(same.get("gpu_busy_fraction"))
    c["gpu_events_hta_drops"] = same.get("dropped_gpu_events", 0)
    gl = c["gpuprobe_hta_events_busy_pct"] if same else gb
    for key in ("hta_busy_pct", "hta_exact_busy_pct", "hta_exact_all_steps_busy_pct"):
        hb = c[key]
        mine = gl if key == "hta_exact_all_steps_busy_pct" else gb
        c[f"delta_{key[:-4]}_pp"] = None if mine is None or hb is None else round(mine - hb, 4)
    hd, he, ha = c["hta_busy_pct"], c["hta_exact_busy_pct"], c["hta_exact_all_steps_busy_pct"]
    if hd is not None and he is not None:
        c["effect_ns_rounding_pp"] = round(hd - he, 4)
    if he is not None and ha is not None:
        c["effect_last_step_dropped_pp"] = round(he - ha, 4)
    if same and gb is not None and gl is not None:
        c["effect_unlaunched_gpu_events_pp"] = round(gb - gl, 4)
    if gl is not None and ha is not None:
        c["residual_pp"] = round(gl - ha, 4)
    trow = _first_rank((variants.get("exact_all_steps") or {}).get("temporal"))[1]
    if isinstance(trow, dict):
        c["hta_exact_all_steps_span_us"] = trow.get("span_us")
    ev = _first_rank((variants.get("exact_all_steps") or {}).get("gpu_events"))[1]
    if ev is None and h:
        ev = _first_rank(h.get("gpu_events"))[1]
    c["hta_gpu_event_categories"] = ev
    c["gpuprobe_gpu_activities"] = g.get("gpu_activities")
    c["gpuprobe_devices"] = g.get("devices")
    return c


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


def trace_facts(path: Path) -> dict[str, Any]:
    """What the explanations need from the trace itself (read here with the json module)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
    except (OSError, ValueError, EOFError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return {"error": "no traceEvents"}
    launch_corr = set()
    gpu, steps, on_stream, devices = [], 0, {}, set()
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        cat = e.get("cat")
        if cat in GPU_CATS:
            gpu.append(e)
            devices.add(a.get("device"))
        elif "stream" in a:
            on_stream[str(cat)] = on_stream.get(str(cat), 0) + 1
        elif "correlation" in a:
            launch_corr.add(a["correlation"])
        if str(e.get("name", "")).startswith("ProfilerStep"):
            steps += 1
    first = events[0] if events and isinstance(events[0], dict) else {}
    unlaunched = [e for e in gpu if (e.get("args") or {}).get("correlation") not in launch_corr]
    return {
        "gpu_events": len(gpu),
        "gpu_events_without_launch": len(unlaunched),
        # HTA joins a GPU event with no launch to trace event #0 (index_correlation 0)
        "unlaunched_before_event0": sum(
            1 for e in unlaunched if float(e.get("ts", 0)) < float(first.get("ts", 0) or 0)
        ),
        "other_events_on_a_stream": on_stream,
        "profiler_steps": steps,
        "fractional_ts": any(float(e.get("ts", 0)) % 1 for e in gpu),
        "gpu_devices": len(devices),
    }


def trace_rank(path: Path) -> str:
    """``distributedInfo.rank`` from the start of a trace file, as HTA finds it ("0" if absent)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as fh:
        head = fh.read(1 << 16)
    m = re.search(r'"rank":\s*(\d+)', head)
    return m.group(1) if m else "0"


def compare_multirank(case: dict) -> dict:
    """Per rank: gpuprobe (per file, or its own multi-rank report) against HTA's per-rank rows."""
    gres = (case.get("gpuprobe") or {}).get("result") or {}
    h = (case.get("hta") or {}).get("result") or {}
    hv = ((case.get("hta_variants") or {}).get("result") or {}).get("variants") or {}
    file_rank = case["rank_of"]
    rows = []
    for name in case["rank_files"]:
        rank = file_rank[name]
        g = (gres.get("ranks") or {}).get(name) or {}
        hrow = (h.get("temporal") or {}).get(rank) if isinstance(h.get("temporal"), dict) else None
        rows.append(
            {
                "rank": rank,
                "file": name,
                "gpuprobe_busy_pct": _pct(g.get("gpu_busy_fraction")),
                "gpuprobe_split_pct": _g_split(g),
                "gpuprobe_error": g.get("error"),
                "hta_busy_pct": _hta_busy(h, rank),
                "hta_exact_busy_pct": _hta_busy(hv.get("exact"), rank),
                "hta_exact_all_steps_busy_pct": _hta_busy(hv.get("exact_all_steps"), rank),
                "hta_compute_pct": (hrow or {}).get("compute_pct"),
                "hta_non_compute_pct": (hrow or {}).get("non_compute_pct"),
                "hta_split_pct": _hta_split(h, rank),
                "hta_comm_comp_overlap_pct": (h.get("comm_comp_overlap_pct") or {}).get(rank)
                if isinstance(h.get("comm_comp_overlap_pct"), dict)
                else None,
                "gpuprobe_extras": g.get("extras"),
                "facts": (case.get("rank_facts") or {}).get(name),
            }
        )
    return {
        "ranks": rows,
        "gpuprobe_folder": gres.get("folder"),
        "gpuprobe_folder_error": gres.get("folder_error"),
        "hta_kernel_breakdown": h.get("kernel_breakdown"),
        "hta_errors": {**_hta_errors(h)},
    }


def finish(case: dict) -> None:
    """The comparison and the explanations, from the raw runs (again on --render)."""
    if case.get("multirank"):
        case["compare"] = compare_multirank(case)
    else:
        case["compare"] = compare_single(case)
        case["why"] = explain(case)


def explain(case: dict) -> list[str]:
    """Where a busy or idle-split difference comes from: HTA's variants and the trace's facts."""
    c, facts = case["compare"], case.get("facts") or {}
    out = []
    if case["name"] in NOTES:
        out.append(NOTES[case["name"]])
    r, ls, res = (
        c.get("effect_ns_rounding_pp"),
        c.get("effect_last_step_dropped_pp"),
        c.get("residual_pp"),
    )
    if r is not None and abs(r) > DIFF_PP / 2:
        out.append(
            f"HTA's ns rounding (start up, end down to whole µs) moves its busy % by {r:+.2f} pp"
        )
    if ls is not None and abs(ls) > DIFF_PP / 2:
        out.append(f"HTA dropping the last profiler step moves it by {ls:+.2f} pp")
    un = c.get("effect_unlaunched_gpu_events_pp")
    if un is not None and abs(un) > DIFF_PP / 2:
        out.append(
            f"HTA drops the {c['gpu_events_hta_drops']} GPU events whose launch (a CPU event with "
            "the same correlation) is not in the trace (with ≥ 2 ProfilerSteps it keeps only GPU "
            "events joined to a CPU event): gpuprobe keeps them, as they ran in the window, which "
            f"moves its busy % by {un:+.2f} pp; like for like compares gpuprobe on HTA's events"
        )
    if res is not None and abs(res) > DIFF_PP / 2:
        bits = [f"left like for like: {res:+.2f} pp"]
        n_un, steps = facts.get("gpu_events_without_launch", 0), facts.get("profiler_steps", 0)
        if n_un and steps >= 2 and un is None:
            bits.append(
                f"HTA drops the {n_un} of {facts['gpu_events']} GPU events whose launch (CPU "
                "event with the same correlation) is not in the trace: with ≥ 2 ProfilerSteps it "
                "keeps only GPU events joined to a kept CPU event; gpuprobe keeps them, in the "
                "step of their GPU time"
            )
        extra = {
            k: v for k, v in (c.get("hta_gpu_event_categories") or {}).items() if k not in GPU_CATS
        }
        if extra:
            bits.append(
                "HTA counts as GPU time its other events that have a stream: "
                + ", ".join(f"{k} ({v})" for k, v in extra.items())
            )
        gs, hs = c.get("gpuprobe_gpu_span_us"), c.get("hta_exact_all_steps_span_us")
        if gs and hs and abs(gs - hs) > 0.001 * max(gs, hs):
            bits.append(f"GPU span gpuprobe {gs:,.3f} µs vs HTA {hs:,.3f} µs")
        if facts.get("gpu_devices", 0) > 1:
            bits.append(
                f"{facts['gpu_devices']} GPUs in one file: HTA merges them into one timeline, "
                "gpuprobe sums span and busy per device"
            )
        out.append("; ".join(bits))
    ds = c.get("delta_split_max_pp")
    if ds is not None and ds > DIFF_PP:
        n_un = facts.get("gpu_events_without_launch", 0)
        why = [f"idle split differs by up to {ds:.2f} pp"]
        if facts.get("unlaunched_before_event0"):
            why.append(
                f"{facts['unlaunched_before_event0']} GPU events have no launch in the trace: "
                "HTA's fallback joins them to trace event #0 (index_correlation 0), which starts "
                "after them, so their gaps count as host wait; gpuprobe counts a gap with no "
                "launch as kernel wait or other"
            )
        elif n_un and facts.get("profiler_steps", 0) >= 2:
            why.append("HTA's idle breakdown runs on its filtered events (see above)")
        elif facts.get("fractional_ts"):
            why.append(
                "sub-µs timestamps: gpuprobe adds durations to absolute µs times (~1.7e15, where "
                "float64 steps by 0.25 µs), HTA to times relative to the trace start, so a gap "
                "near zero can fall on the other side of 'launch after the previous end'"
            )
        out.append("; ".join(why))
    return out


# -- report ----------------------------------------------------------------------------------


def _f(x: Any, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, (int, float)):
        return f"{x:.{digits}f}"
    return str(x)


def _split(s: dict | None) -> str:
    if not s:
        return "–"
    return "/".join(_f(s.get(k), 1) for k in IDLE_KEYS)


def _perf(run: dict | None) -> str:
    if not run or "wall_s" not in run:
        return "–"
    return f"{run['wall_s']:.2f} / {run['peak_mib']:.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.1f}×"


def _refusal(error: str) -> str:
    """gpuprobe's InputError is a refusal by design; any other exception is a crash."""
    return "refused" if error.startswith("InputError") else "crashed"


def _short(text: str, n: int = 90) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown(result: dict) -> str:
    cs = result["cases"]
    singles = [c for c in cs if not c.get("multirank")]
    multis = [c for c in cs if c.get("multirank")]
    L = [
        "# gpuprobe diagnose vs HTA on the real trace corpus",
        "",
        f"Machine: {result['machine']}. Run: {result['when']}. HTA: {result['hta_version']} "
        f"({result['hta_python']}). gpuprobe: {result['gpuprobe_version']}.",
        "",
        "Re-run: `python3 -m venv /work/hta-venv && /work/hta-venv/bin/pip install "
        '"HolisticTraceAnalysis==0.5.0" "pandas<3"`, then `.venv/bin/python '
        "benchmarks/diagnose_vs_hta_corpus.py [--multirank DIR] [--hta-python PATH]` "
        "(`--render` this JSON to redo only the tables).",
        "",
        "Each tool runs in its own process per trace (which goes first alternates); wall time "
        "includes starting Python and importing the tool. Peak = the process's own high-water RSS "
        "(VmHWM). Busy % = union of GPU activity over the GPU span (HTA "
        "`get_temporal_breakdown`: 100 − idle %). HTA columns: **default** = "
        "`TraceAnalysis(trace_dir)` as a user runs it (ns rounding on: each event's start rounded "
        "up and end down to whole µs; last profiler step dropped); **exact** = "
        "`HTA_DISABLE_NS_ROUNDING=1`; **exact, all steps** = also `include_last_profiler_step=True`."
        " Δ = gpuprobe − HTA, in percentage points: against HTA default, and like for like "
        "(against HTA exact, all steps: same times, same steps, and the same events: where HTA "
        "drops the GPU events whose launch is not in the trace, gpuprobe is run again without "
        "them, in a process of its own not counted in its time). Idle split = host "
        "wait / kernel wait / other, % of idle time summed over streams (HTA "
        "`get_idle_time_breakdown`, exact, all steps); Δ split = the largest difference of the "
        "three. Ratios are HTA ÷ gpuprobe.",
        "",
        "| trace | kind | gpuprobe busy % | HTA busy % default / exact / exact, all steps "
        "| Δ default | Δ like for like | gpuprobe idle split % | HTA idle split % | Δ split "
        "| gpuprobe s / MiB | HTA s / MiB | time ratio | mem ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in singles:
        c = case["compare"]
        g, h = case.get("gpuprobe"), case.get("hta")
        gerr = c.get("gpuprobe_error") or ""
        gbusy = _f(c["gpuprobe_busy_pct"]) if not gerr else _refusal(gerr)
        hb = " / ".join(
            _f(c[k]) for k in ("hta_busy_pct", "hta_exact_busy_pct", "hta_exact_all_steps_busy_pct")
        )
        if c["hta_busy_pct"] is None and c["hta_errors"]:
            hb = "error"
        L.append(
            f"| {case['name'].removesuffix('.json.gz')} | {_short(case['kind'], 40)} | {gbusy} "
            f"| {hb} | {_f(c.get('delta_hta_busy_pp'))} "
            f"| {_f(c.get('delta_hta_exact_all_steps_busy_pp'))} "
            f"| {_split(c['gpuprobe_split_pct'])} "
            f"| {_split(c['hta_exact_all_steps_split_pct'] or c['hta_split_pct'])} "
            f"| {_f(c.get('delta_split_max_pp'))} "
            f"| {_perf(g)} | {_perf(h)} "
            f"| {_ratio((h or {}).get('wall_s'), (g or {}).get('wall_s'))} "
            f"| {_ratio((h or {}).get('peak_mib'), (g or {}).get('peak_mib'))} |"
        )
    t = result["totals"]
    L += [
        "",
        f"Totals over {t['cases']} runs: gpuprobe {t['gpuprobe_wall_s']:.1f} s "
        f"(CPU {t['gpuprobe_cpu_s']:.1f} s), max peak {t['gpuprobe_max_peak_mib']:.0f} MiB; "
        f"HTA {t['hta_wall_s']:.1f} s (CPU {t['hta_cpu_s']:.1f} s), max peak "
        f"{t['hta_max_peak_mib']:.0f} MiB (process tree, sampled: "
        f"{t.get('hta_max_tree_peak_mib', 0):.0f} MiB); HTA's extra runs for the exact variants "
        f"took {t['hta_variants_wall_s']:.1f} s. Time ratio of the totals: "
        f"{_ratio(t['hta_wall_s'], t['gpuprobe_wall_s'])}.",
        "",
        "Agreement (traces both tools read with a GPU busy %): "
        + ", ".join(f"{k} {v}" for k, v in result["agreement"].items())
        + ".",
    ]
    for case in multis:
        m = case["compare"]
        L += [
            "",
            f"## Per rank: {case['name']} ({case['kind']})",
            "",
            f"gpuprobe: {_perf(case.get('gpuprobe'))} (s / MiB) for the folder "
            + (
                "(one diagnose per file, one process: "
                + _short(m["gpuprobe_folder_error"] or "", 120)
                + ")"
                if m.get("gpuprobe_folder_error")
                else "(one multi-rank diagnose)"
            )
            + f"; HTA: {_perf(case.get('hta'))} (s / MiB), process tree peak "
            f"{_f((case.get('hta') or {}).get('tree_peak_mib'), 0)} MiB.",
            "",
            "| rank | gpuprobe busy % | HTA busy % default / exact / exact, all steps "
            "| HTA compute % / non-compute % | gpuprobe idle split % | HTA idle split % "
            "| HTA comm-comp overlap % |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in m["ranks"]:
            hb = " / ".join(
                _f(r[k])
                for k in ("hta_busy_pct", "hta_exact_busy_pct", "hta_exact_all_steps_busy_pct")
            )
            L.append(
                f"| {r['rank']} | {_f(r['gpuprobe_busy_pct'])} | {hb} "
                f"| {_f(r['hta_compute_pct'])} / {_f(r['hta_non_compute_pct'])} "
                f"| {_split(r['gpuprobe_split_pct'])} | {_split(r['hta_split_pct'])} "
                f"| {_f(r['hta_comm_comp_overlap_pct'])} |"
            )
        odd = [
            r
            for r in m["ranks"]
            if r["gpuprobe_split_pct"]
            and r["hta_split_pct"]
            and max(
                abs(r["gpuprobe_split_pct"][k] - (r["hta_split_pct"].get(k) or 0))
                for k in IDLE_KEYS
            )
            > DIFF_PP
        ]
        if odd:
            L += [
                "",
                "Idle split differs by more than 0.1 pp on rank "
                + ", ".join(
                    f"{r['rank']} ({(r.get('facts') or {}).get('unlaunched_before_event0', 0)} "
                    "GPU events with no launch, before trace event #0)"
                    for r in odd
                )
                + ": HTA joins a GPU event with no launch to trace event #0 and so counts its gap"
                " as host wait.",
            ]
        kb = m.get("hta_kernel_breakdown")
        if isinstance(kb, dict) and "error" not in kb:
            L += [
                "",
                "HTA kernel types (all ranks): "
                + ", ".join(f"{k} {_f(v.get('pct'), 1)} %" for k, v in kb.items())
                + ".",
            ]
        if m["hta_errors"]:
            L += ["", "HTA errors: " + "; ".join(f"{k}: {v}" for k, v in m["hta_errors"].items())]
    L += [
        "",
        f"## Differences (|Δ busy| > {DIFF_PP} pp against HTA default or like for like, or Δ "
        f"split > {DIFF_PP} pp, or a busy % from one tool only)",
        "",
        "Split into: HTA's ns rounding (default − exact), HTA dropping the last profiler step "
        "(exact − exact, all steps), and what is left (gpuprobe − HTA exact, all steps).",
        "",
    ]
    for case in singles:
        c = case["compare"]
        d = [c.get("delta_hta_busy_pp"), c.get("delta_hta_exact_all_steps_busy_pp")]
        split_diff = (c.get("delta_split_max_pp") or 0) > DIFF_PP
        gb = c.get("gpuprobe_busy_pct")
        hb = (
            c.get("hta_busy_pct")
            if c.get("hta_busy_pct") is not None
            else c.get("hta_exact_all_steps_busy_pct")
        )
        one_sided = (gb is None) != (hb is None) and not c.get("gpuprobe_error")
        if (
            not split_diff
            and not one_sided
            and not any(x is not None and abs(x) > DIFF_PP for x in d)
        ):
            continue
        if one_sided:
            who = "gpuprobe" if gb is not None else "HTA"
            why = list(case.get("why") or [])
            if gb is not None:
                why += [f"HTA {k}: {v}" for k, v in list(c["hta_errors"].items())[:1]]
            L.append(
                f"- **{case['name']}**: only {who} gives a busy %. "
                + " ".join(w.rstrip(".") + "." for w in why)
            )
            continue
        why = case.get("why") or ["(no cause found by the variants)"]
        L.append(
            f"- **{case['name']}**: Δ default {_f(d[0])} pp, Δ like for like {_f(d[1])} pp. "
            + " ".join(w.rstrip(".") + "." for w in why)
        )
    L += [
        "",
        "## HTA failures",
        "",
        "Which analysis failed (`load` = `TraceAnalysis(...)`; `exact.`, `exact_all_steps.`, "
        "`rounded_all_steps.` = the variant runs) and HTA's exception.",
        "",
    ]
    for case in cs:
        errs = case["compare"].get("hta_errors") or {}
        if errs:
            by_msg: dict[str, list[str]] = {}
            for k, v in errs.items():
                by_msg.setdefault(v, []).append(k)
            L.append(
                f"- **{case['name']}** ({case['kind']}): "
                + "; ".join(f"{', '.join(ks)}: `{_short(m, 160)}`" for m, ks in by_msg.items())
            )
    L += ["", "## gpuprobe refusals and findings", ""]
    for case in singles:
        c = case["compare"]
        if c.get("gpuprobe_error"):
            L.append(
                f"- {case['name']}: {_refusal(c['gpuprobe_error'])}: "
                f"{_short(c['gpuprobe_error'], 160)}"
            )
        elif c.get("findings"):
            fs = [f"{f['id']}={f['status']}" for f in c["findings"] if f["status"] != "pass"]
            L.append(f"- {case['name']}: " + (", ".join(fs) if fs else "all pass"))
    return "\n".join(L) + "\n"


# -- main ------------------------------------------------------------------------------------


def totals(cases_: list[dict]) -> dict:
    def s(tool: str, key: str) -> float:
        return sum((c.get(tool) or {}).get(key, 0.0) for c in cases_)

    def mx(tool: str, key: str) -> float:
        return max(((c.get(tool) or {}).get(key, 0.0) for c in cases_), default=0.0)

    return {
        "cases": len(cases_),
        "gpuprobe_wall_s": round(s("gpuprobe", "wall_s"), 2),
        "gpuprobe_cpu_s": round(s("gpuprobe", "cpu_s"), 2),
        "gpuprobe_max_peak_mib": mx("gpuprobe", "peak_mib"),
        "hta_wall_s": round(s("hta", "wall_s"), 2),
        "hta_cpu_s": round(s("hta", "cpu_s"), 2),
        "hta_max_peak_mib": mx("hta", "peak_mib"),
        "hta_max_tree_peak_mib": mx("hta", "tree_peak_mib"),
        "hta_variants_wall_s": round(s("hta_variants", "wall_s"), 2),
    }


def agreement(cases_: list[dict]) -> dict[str, Any]:
    both = [
        c["compare"]
        for c in cases_
        if not c.get("multirank")
        and c["compare"].get("gpuprobe_busy_pct") is not None
        and c["compare"].get("hta_busy_pct") is not None
    ]

    def within(key: str, pp: float) -> str:
        vals = [abs(c[key]) for c in both if c.get(key) is not None]
        return f"{sum(v <= pp for v in vals)}/{len(vals)}"

    return {
        "|Δ default| ≤ 0.1 pp": within("delta_hta_busy_pp", 0.1),
        "|Δ default| ≤ 1 pp": within("delta_hta_busy_pp", 1.0),
        "|Δ like for like| ≤ 0.1 pp": within("delta_hta_exact_all_steps_busy_pp", 0.1),
        "|Δ like for like| ≤ 1 pp": within("delta_hta_exact_all_steps_busy_pp", 1.0),
        "Δ split ≤ 1 pp": within("delta_split_max_pp", 1.0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", default=DEFAULT_HTA_PYTHON)
    ap.add_argument("--repo", default=str(ROOT), help="gpuprobe checkout to measure (its src/)")
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument(
        "--multirank",
        default=str(DEFAULT_MULTIRANK) if DEFAULT_MULTIRANK.is_dir() else "",
        help="folder with one trace per rank ('' for none)",
    )
    ap.add_argument("--only", help="only cases whose name contains one of these (comma-separated)")
    ap.add_argument("--no-variants", action="store_true", help="skip HTA's exact-variant runs")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    ap.add_argument("--out", default=str(RESULTS / NAME), help="output path without extension")
    ap.add_argument("--render", metavar="JSON", help="only re-render the markdown from a result")
    args = ap.parse_args()
    if args.render:
        result = json.loads(Path(args.render).read_text())
        for case in result["cases"]:
            finish(case)
        result["agreement"] = agreement(result["cases"])
        Path(args.out + ".md").write_text(markdown(result))
        return 0
    if not Path(args.corpus).is_dir():
        print(f"error: corpus folder {args.corpus} not found; give --corpus DIR", file=sys.stderr)
        return 2
    have_hta = Path(args.hta_python).is_file()
    if not have_hta:
        print(f"HTA python {args.hta_python} not found: measuring gpuprobe only", flush=True)
    ver = "not run"
    if have_hta:
        v = subprocess.run(
            [
                args.hta_python,
                "-c",
                "import importlib.metadata as m, sys\n"
                "for d in ('HolisticTraceAnalysis', 'traceinsight'):\n"
                "    try: print(d, m.version(d)); sys.exit()\n"
                "    except m.PackageNotFoundError: pass",
            ],
            capture_output=True,
            text=True,
        )
        ver = v.stdout.strip() or v.stderr.strip()[-200:]
    rev = subprocess.run(
        ["git", "-C", args.repo, "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="gpuprobe-hta-corpus-") as d:
        work = Path(d)
        todo = cases(args, work)
        for i, case in enumerate(todo):
            tag = f"{i:02d}"
            runs = ["gpuprobe", "hta"] if i % 2 == 0 else ["hta", "gpuprobe"]
            for who in runs:
                if who == "gpuprobe":
                    cmd, env = gpuprobe_cmd(args, case["path"])
                    case["gpuprobe"] = run_worker(cmd, env, args.timeout, work, f"{tag}g")
                elif have_hta:
                    cmd, env = hta_cmd(args, case["folder"], variants=False)
                    case["hta"] = run_worker(cmd, env, args.timeout, work, f"{tag}h")
            hres = (case.get("hta") or {}).get("result") or {}
            gres = (case.get("gpuprobe") or {}).get("result") or {}
            gpu = "temporal" in hres or gres.get("has_gpu") or "ranks" in gres
            if have_hta and not args.no_variants and gpu:
                cmd, env = hta_cmd(args, case["folder"], variants=True)
                case["hta_variants"] = run_worker(cmd, env, args.timeout, work, f"{tag}v")
            facts = case.get("facts") or {}
            if (
                gpu
                and facts.get("gpu_events_without_launch")
                and facts.get("profiler_steps", 0) >= 2
            ):
                # gpuprobe on the events HTA keeps: a run of its own (like for like)
                cmd, env = gpuprobe_cmd(args, case["path"])
                cmd.insert(2, "--hta-event-set")
                case["gpuprobe_hta_events"] = run_worker(cmd, env, args.timeout, work, f"{tag}e")
            finish(case)
            g, h = case.get("gpuprobe") or {}, case.get("hta") or {}
            print(
                f"[{i + 1}/{len(todo)}] {case['name']}: gpuprobe {g.get('wall_s')} s "
                f"{g.get('peak_mib')} MiB busy {case['compare'].get('gpuprobe_busy_pct')}; "
                f"HTA {h.get('wall_s')} s {h.get('peak_mib')} MiB busy "
                f"{case['compare'].get('hta_busy_pct')}",
                flush=True,
            )
            for k in ("path", "folder"):
                case[k] = str(case[k])
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} CPUs, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "hta_python": args.hta_python if have_hta else "absent",
        "hta_version": ver,
        "gpuprobe_version": f"{Path(args.repo).resolve().name}@{rev}",
        "corpus": args.corpus,
        "multirank": args.multirank,
        "cases": todo,
        "totals": totals(todo),
        "agreement": agreement(todo),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
