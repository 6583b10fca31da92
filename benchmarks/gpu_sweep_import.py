"""Turn GPU sweeps (benchmarks/gpu_sweep.sh, run on a lent card) into what issue 14 keeps:

- ``benchmarks/results/gpu_<slug>.json`` and ``.md``: the device, driver, versions, date, each
  step's exit code, time and sweep, and every GPU figure beside its anchor with its goal (d2d
  copy, bf16 GEMM, launch latency, pinned host→device, diagnose busy % vs HTA, lstsq fp64 rate vs
  the peak, the sampler's cost at 2 Hz, profile's verdicts and its hook's cost), plus the test
  runs' counts;
- ``docs/gpu-<slug>.md``: "gpuprobe on an NVIDIA …", each command's real output: info, doctor,
  bench, run (a training loop and a starved one), profile (an unmodified train.py, starved and
  fed), diagnose and --compare on the traces recorded there, HTA beside it, scale, fit,
  precision, pack; charts under ``docs/img/gpu-<slug>/``;
- fixtures, each with its origin (card, driver, date): ``tests/data/<slug>.json`` (the
  ``info --json`` snapshot the fake NVML replays), ``tests/data/diagnose/gpu_<slug>/`` (the
  examples' traces and profile's two, re-gzipped with ``-9 -n``),
  ``tests/data/monitor/gpu_<slug>_*.jsonl`` (the run timelines).

The text views are drawn here from the recorded JSON by gpuprobe's own renderers at 80 columns
(doctor, bench, profile, fit, precision, pack) or by running gpuprobe here on the recorded files
(diagnose, plot, and what a lean sweep leaves here: --compare of each slow trace with its fixed
twin, HTA beside diagnose); what only the card could print (info, the anchors' table, lstsq) is
kept as the card printed it.

    python benchmarks/gpu_sweep_import.py SWEEP [SWEEP ...] [--slug h100] [--root DIR]

Each SWEEP is a sweep's folder, its .tar.gz, or the first of its parts (``sweep.tar.gz.part-aa``:
the parts beside it are joined), oldest first: a later session's partial re-run is given after
the full sweep it completes, and each step's outputs come from the latest sweep that ran it and
left them (gpu_sweep_merge.py). A step that failed or was skipped is said so where its output
would be; nothing is invented. Nothing is written into a SWEEP.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpu_sweep_merge import (
    BENCH_FRAMEWORKS,
    PROFILE_STEPS,
    TRACE_PAIRS,
    Merge,
    junit,
    junit_failures,
    load,
    merge,
    profile_trace,
    read_json,
    trace_step,
)
from gpu_sweep_pages import (
    FP64_GOAL,
    HTA_GOAL_PP,
    SAMPLER_GOAL_PCT,
    docs_page,
    gpuprobe_here,
    results_md,
)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# the hook's share of step time outside its window: benchmarks/profile_overhead.py's GOAL (issue 26)
PROFILE_HOOK_GOAL = 0.01


# -- the figures ---------------------------------------------------------------------------------


def hta_rows(d: Path, m: Merge) -> list[dict[str, Any]]:
    """Per GPU trace: gpuprobe's and HTA's busy %, their difference in points, and the sweep
    that recorded the trace."""
    res = read_json(d / "diagnose-vs-hta.json") or {}
    rows = []
    for case in res.get("cases", []):
        c = case.get("compare") or {}
        g, h = c.get("gpuprobe_busy_pct"), c.get("hta_busy_pct")
        if g is None or c.get("delta_hta_exact_all_steps_busy_pp") is None:
            continue
        name = case.get("name") or ""
        rows.append(
            {
                "trace": name,
                "gpuprobe_busy_pct": g,
                "hta_busy_pct": h,
                "delta_pp": None if h is None else round(g - h, 4),
                "delta_like_for_like_pp": c.get("delta_hta_exact_all_steps_busy_pp"),
                "sweep_date": m.date_of(trace_step(name.split(".")[0])),
            }
        )
    return rows


def _median(values: Iterable[float | None]) -> float | None:
    """The median, or None when a value is missing (nothing is filled in)."""
    got = list(values)
    known = [v for v in got if v is not None]
    return statistics.median(known) if got and len(known) == len(got) else None


def profile_figures(d: Path, m: Merge) -> dict[str, Any]:
    """Per profile step: the verdict's headline and the median step's figures, from its report."""
    out: dict[str, Any] = {}
    for step in PROFILE_STEPS:
        rep = read_json(d / f"{step}.json")
        dg = (rep or {}).get("diagnosis") or {}
        steps = [s for s in dg.get("steps") or [] if s.get("duration_us")]
        if not rep or not steps:
            out[step] = None
            continue
        summ = dg.get("summary") or {}
        busy = _median(s.get("gpu_busy_fraction") for s in steps)
        loader = _median(
            None if s.get("dataloader_us") is None else s["dataloader_us"] / s["duration_us"]
            for s in steps
        )
        whole = summ.get("gpu_busy_fraction")
        out[step] = {
            "command": rep.get("command"),
            "exit_code": rep.get("exit_code"),
            "window": rep.get("window"),
            "steps_recorded": summ.get("steps"),
            "step_ms_median": statistics.median(s["duration_us"] for s in steps) / 1e3,
            "gpu_busy_pct_median_step": None if busy is None else 100 * busy,
            "dataloader_pct": None if loader is None else 100 * loader,
            "gpu_busy_pct_whole_trace": None if whole is None else 100 * whole,
            "headline": dg.get("headline"),
            "warn": [f["id"] for f in dg.get("findings", []) if f["status"] in ("warn", "fail")],
            "sweep_date": m.date_of(step),
        }
    return out


def profile_overhead_figures(d: Path, m: Merge) -> dict[str, Any] | None:
    """profile_overhead.py's result, read for what it can say: the in-process cost per step
    against each loop's step, and whether the between-process ratios stand above the noise of
    the runs without the hook."""
    po = read_json(d / "profile-overhead.json")
    if not po or not po.get("per_call") or not po.get("step_time"):
        return None
    ns = po["per_call"]["hook_ns_per_step"]
    pct, worst, spread = {}, {}, {}
    for st in po["step_time"]:
        w, none = str(st["width"]), st["per_run_median_step_us"]["none"]
        pct[w] = 100 * ns / (st["median_step_us"]["none"] * 1e3)
        worst[w] = max(st["ratio_median"].values())
        spread[w] = (max(none) - min(none)) / statistics.median(none)
    noise = all(spread[w] >= worst[w] - 1 for w in worst)
    load_b, load_a = po["load_average"][0], (po.get("load_average_after") or [None])[0]
    reading = (
        f"the load average was {load_b:.1f} before and "
        + ("?" if load_a is None else f"{load_a:.1f}")
        + " after; the runs without the hook alone moved "
        + ", ".join(f"{100 * v:.0f} % (width {w})" for w, v in spread.items())
        + " from round to round, "
        + (
            "as much as the ratios between the runs differ from 1, so those ratios are noise "
            "here, not the hook's cost. "
            if noise
            else "less than the ratios between the runs differ from 1. "
        )
        + f"The in-process figure is the reliable one: the hook adds {ns:,.0f} ns per step, "
        + ", ".join(f"{v:.3f} % of the width-{w} step" for w, v in pct.items())
        + f" (goal: under {100 * PROFILE_HOOK_GOAL:g} %)."
    )
    return {
        "goal": po.get("goal"),
        "hook_ns_per_step": ns,
        "in_process_pct": pct,
        "met_in_process": all(v < 100 * PROFILE_HOOK_GOAL for v in pct.values()),
        "worst_ratio": worst,
        "spread_without_hook": spread,
        "met_between": po.get("met") or {},
        "noise": noise,
        "load_average_before": load_b,
        "load_average_after": load_a,
        "start_up": po.get("start_up"),
        "reading": reading,
        "sweep_date": m.date_of("profile-overhead"),
    }


def figures(d: Path, m: Merge) -> dict[str, Any]:
    """Every figure with its anchor, goal and sweep; absent ones are None."""
    anchors = read_json(d / "anchors.json") or {}
    scale = read_json(d / "scale-lstsq.json") or {}
    fp64 = scale.get("fp64_throughput") or {}
    overhead = read_json(d / "overhead.json") or {}
    at2 = next((s for s in overhead.get("sampler", []) if s.get("hz") == 2.0), None)
    hta = hta_rows(d, m)
    out: dict[str, Any] = {
        "anchors": anchors.get("anchors"),
        "anchors_sweep_date": m.date_of("anchors"),
    }
    out["hta"] = {
        "goal": f"|gpuprobe − HTA| busy ≤ {HTA_GOAL_PP} pp",
        "traces": hta,
        "worst_pp": max(
            (abs(r["delta_pp"]) for r in hta if r["delta_pp"] is not None), default=None
        ),
        # like for like: HTA exact (no ns rounding) over all steps, as gpuprobe reads them; the
        # default-HTA difference is explained per trace in diagnose-vs-hta.md
        "worst_like_for_like_pp": max(
            (abs(r["delta_like_for_like_pp"] or 0.0) for r in hta), default=None
        ),
        "met": (
            all(abs(r["delta_like_for_like_pp"] or 0.0) <= HTA_GOAL_PP for r in hta)
            if hta
            else None
        ),
    }
    # judged against the fp64 (CUDA-core) peak: benchmarks/gpu_sweep_lstsq.py's judge() says why
    goal = fp64.get("goal")  # a record from gpu_sweep_lstsq.py; a sentence in older sweeps
    frac = goal.get("fraction") if isinstance(goal, dict) else None
    if frac is None:
        frac = (fp64.get("fractions") or {}).get("useful_vs_fp64")
    out["lstsq_fp64"] = {
        "goal": f"useful fp64 rate ≥ {FP64_GOAL} of the peak",
        **{k: fp64.get(k) for k in ("rows", "cols", "solve_s", "useful_tflops", "executed_tflops")},
        "peaks_tflops": fp64.get("peaks_tflops"),
        "fractions": fp64.get("fractions"),
        "ceilings": fp64.get("ceilings"),
        "fraction": frac,
        "met": None if frac is None else frac >= FP64_GOAL,
        "rel_error_vs_truth": fp64.get("rel_error_vs_truth"),
        "accuracy_phase": {k: v for k, v in scale.items() if k != "fp64_throughput"} or None,
        "sweep_date": m.date_of("scale"),
    }
    out["sampler_2hz"] = {
        "goal": f"< {SAMPLER_GOAL_PCT} % of one core at 2 Hz with a GPU",
        "percent_of_core": at2.get("sampler_cpu_percent_of_core") if at2 else None,
        "process_check_percent": at2.get("process_cpu_percent_of_core") if at2 else None,
        "gpus_read": at2.get("gpus") if at2 else None,
        "met": None if not at2 else at2["sampler_cpu_percent_of_core"] < SAMPLER_GOAL_PCT,
        "all": overhead.get("sampler"),
        "sweep_date": m.date_of("overhead"),
    }
    out["profile"] = profile_figures(d, m)
    out["profile_overhead"] = profile_overhead_figures(d, m)
    return out


def bench_headlines(d: Path, m: Merge) -> list[dict[str, Any]]:
    """The best point per framework, device, workload and case of every bench step."""
    rows = []
    for fw in BENCH_FRAMEWORKS:
        rep = read_json(d / f"bench-{fw}.json") or {}
        best: dict[tuple[str, str, str], dict[str, Any]] = {}
        for r in rep.get("results", []):
            if r.get("status") != "ok":
                continue
            v = r.get("values") or {}
            key = next(
                (k for k in ("tflops", "gbs", "us", "speedup") if v.get(k) is not None), None
            )
            if key is None:
                continue
            k = (r["device"], r["workload"], r["case"])
            if k not in best or (v[key] > best[k]["value"]) == (key != "us"):
                best[k] = {
                    "framework": fw,
                    "device": r["device"],
                    "workload": r["workload"],
                    "case": r["case"],
                    "size": r.get("size"),
                    "unit": key,
                    "value": v[key],
                    "pct_peak": v.get("pct_peak"),
                    "sweep_date": m.date_of(f"bench-{fw}"),
                }
        rows += sorted(best.values(), key=lambda x: (x["device"], x["workload"], x["case"]))
    return rows


# -- the fixtures ----------------------------------------------------------------------------------


def slug_of(device: str | None) -> str:
    found = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", device or "")
    return found.group(1).lower() if found else "gpu"


def origin_line(mt: dict[str, Any]) -> str:
    return (
        f"recorded on {mt['device']} (driver {mt['driver']}, CUDA {mt['cuda_driver_api']}) on "
        f"{mt['date']} by benchmarks/gpu_sweep.sh"
    )


def _gz(src: Path, dst: Path) -> None:
    with gzip.open(src, "rb") as f:
        raw = f.read()
    dst.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))


def keep_fixtures(d: Path, m: Merge, slug: str, root: Path) -> list[Path]:
    """The card's snapshot, traces and timelines into tests/data/, each with the origin of the
    sweep it came from."""
    written = []
    info = read_json(d / "info.json")
    if info and info.get("gpus"):
        info["origin"] = origin_line(m.source["info"].meta) + " (gpuprobe info --json)"
        p = root / "tests" / "data" / f"{slug}.json"
        p.write_text(json.dumps(info, indent=1) + "\n")
        written.append(p)
    tdir = root / "tests" / "data" / "diagnose" / f"gpu_{slug}"
    rows: list[tuple[Path, str, str]] = []  # (kept file, what, step)
    for t in sorted((d / "traces").glob("*.json.gz")):
        name = t.name.split(".")[0]
        what = next(
            (
                f"examples/{name}.py, {'slow' if name == s else 'fixed'}: {rule}"
                for s, f_, rule in TRACE_PAIRS
                if name in (s, f_)
            ),
            f"examples/{name}.py",
        )
        rows.append((t, what, trace_step(name)))
    for step in PROFILE_STEPS:
        t = profile_trace(d, step)
        if t.is_file():
            cmd = " ".join((read_json(d / f"{step}.json") or {}).get("command") or [step])
            rows.append((t, f"`gpuprobe profile -- {cmd}`", step))
    if rows:
        tdir.mkdir(parents=True, exist_ok=True)
        whence = {m.source[s].meta["date"] for _t, _w, s in rows}
        one = len(whence) == 1
        mt = m.source[rows[0][2]].meta
        head = f"# Traces {origin_line(mt)}"
        if not one:
            head = f"# Traces recorded on {mt['device']} by benchmarks/gpu_sweep.sh, in "
            head += f"{len(whence)} sweeps"
        lines = [head, ""]
        lines += ["| file | what | bytes |" + ("" if one else " recorded |")]
        lines += ["|---|---|---|" + ("" if one else "---|")]
        for t, what, step in rows:
            dst = tdir / t.name
            _gz(t, dst)
            sm = m.source[step].meta
            when = (
                ""
                if one
                else f" {sm['date']} (driver {sm['driver']}, CUDA {sm['cuda_driver_api']}) |"
            )
            lines.append(f"| `{t.name}` | {what} | {dst.stat().st_size} |" + when)
            written.append(dst)
        (tdir / "ORIGIN.md").write_text("\n".join(lines) + "\n")
        written.append(tdir / "ORIGIN.md")
    runs = [r for r in ("run-train", "run-starved") if (d / r / "timeline.jsonl").is_file()]
    for run in runs:
        dst = root / "tests" / "data" / "monitor" / f"gpu_{slug}_{run.split('-')[1]}.jsonl"
        dst.write_bytes((d / run / "timeline.jsonl").read_bytes())
        written.append(dst)
    if runs:
        whence = {m.source[r].meta["date"] for r in runs}
        tail = (
            f"{origin_line(m.source[runs[0]].meta)}."
            if len(whence) == 1
            else "; ".join(f"{r.split('-')[1]} {origin_line(m.source[r].meta)}" for r in runs) + "."
        )
        o = root / "tests" / "data" / "monitor" / f"gpu_{slug}_ORIGIN.md"
        o.write_text(
            f"# gpu_{slug}_train.jsonl, gpu_{slug}_starved.jsonl\n\n`gpuprobe run --hz 5` around "
            "examples/loader_workers.py (train) and examples/loader_single_process.py "
            f"(starved), 300 steps each, {tail}\n"
        )
        written.append(o)
    return written


# -- what a lean sweep leaves here ---------------------------------------------------------------


def profile_traces(d: Path) -> None:
    """Each profile step's trace (the first its report names) as ``profile-traces/
    profile_train.json.gz``: the name it is kept and compared under."""
    for step in PROFILE_STEPS:
        rep = read_json(d / f"{step}.json") or {}
        names = [Path(t).name for t in rep.get("traces") or []]
        src = d / step / "traces" / names[0] if names else None
        if src is not None and src.is_file():
            profile_trace(d, step).parent.mkdir(exist_ok=True)
            shutil.copyfile(src, profile_trace(d, step))


def finish_here(d: Path, hta_python: str | None) -> list[str]:
    """What a lean sweep (``gpu_sweep.sh --lean``) leaves to this machine, run on the card's
    recordings: each slow trace compared with its fixed twin, and HTA beside diagnose."""
    done = []
    for slow, fixed, _rule in TRACE_PAIRS:
        out = d / f"compare-{slow}.txt"
        a, b = d / "traces" / f"{slow}.json.gz", d / "traces" / f"{fixed}.json.gz"
        if not out.is_file() and a.is_file() and b.is_file():
            out.write_text(
                gpuprobe_here(
                    "diagnose", "--compare", f"traces/{a.name}", f"traces/{b.name}", cwd=d
                )
            )
            done.append(out.name)
    if not (d / "diagnose-vs-hta.json").is_file() and any((d / "traces").glob("*.json.gz")):
        argv = [sys.executable, str(ROOT / "benchmarks" / "diagnose_vs_hta_corpus.py")]
        argv += ["--corpus", str(d / "traces"), "--multirank", "", "--timeout", "300"]
        argv += ["--out", str(d / "diagnose-vs-hta")]
        if hta_python:
            argv += ["--hta-python", hta_python]
        p = subprocess.run(argv, capture_output=True, text=True)
        (d / "hta.txt").write_text(p.stdout + p.stderr)
        done.append("diagnose-vs-hta.json" if p.returncode == 0 else f"hta (exit {p.returncode})")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "sweeps",
        type=Path,
        nargs="+",
        metavar="SWEEP",
        help="a sweep's folder, .tar.gz or first part; several: oldest first, merged step by step",
    )
    ap.add_argument("--slug", help="name of the card in the files written (default: from it)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to write into")
    ap.add_argument(
        "--hta-python",
        help="a python with HTA, for the comparison a lean sweep leaves here "
        "(default: diagnose_vs_hta_corpus.py's)",
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, str(SRC))  # gpuprobe's renderers, from this checkout
    with tempfile.TemporaryDirectory() as work:
        sweeps = load(args.sweeps, Path(work))
        m = merge(sweeps, Path(work) / "merged")
        d = m.dir
        if not m.device:
            where = sweeps[0].path if len(sweeps) == 1 else "none of the sweeps"
            raise SystemExit(f"gpu_sweep_import: {where} has no GPU in info.json: nothing to keep")
        slug = args.slug or slug_of(m.device)
        profile_traces(d)
        for name in finish_here(d, args.hta_python):
            print(f"ran here on the card's recordings: {name}")
        figs = figures(d, m)
        doc = {
            **m.latest.meta,
            "device": m.device,
            "sweeps": [{"source": sw.source, **sw.meta} for sw in m.sweeps],
            "steps": m.steps,
            "figures": figs,
            "bench": bench_headlines(d, m),
            "gpu_tests": junit(d / "gpu-tests.xml"),
            "gpu_test_failures": junit_failures(d / "gpu-tests.xml"),
            "suite": junit(d / "suite.xml"),
            "suite_failures": junit_failures(d / "suite.xml"),
        }
        res = args.root / "benchmarks" / "results" / f"gpu_{slug}"
        res.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        res.with_suffix(".md").write_text(results_md(m, figs))
        page = args.root / "docs" / f"gpu-{slug}.md"
        page.write_text(docs_page(d, m, figs, slug, args.root))
        kept = keep_fixtures(d, m, slug, args.root)
    for p in [res.with_suffix(".json"), res.with_suffix(".md"), page, *kept]:
        print(f"wrote {p.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
