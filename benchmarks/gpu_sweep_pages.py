"""The pages gpu_sweep_import.py writes from a (merged) sweep: ``docs/gpu-<slug>.md`` (each
command's real output) and ``benchmarks/results/gpu_<slug>.md`` (the figures, each beside its
anchor and goal). When several sweeps were merged, each section and figure names the sweep it came
from, and what newer sweeps did of a step whose older output stands in."""

from __future__ import annotations

import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _pythonpath import src_first
from gpu_sweep_merge import (
    BENCH_FRAMEWORKS,
    PROFILE_STEPS,
    TRACE_PAIRS,
    Merge,
    junit,
    profile_trace,
    read_json,
    read_text,
    trace_step,
)

__all__ = ["docs_page", "gpuprobe_here", "render", "results_md"]

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
WIDTH = 80
HTA_GOAL_PP = 0.1
FP64_GOAL = 0.6
SAMPLER_GOAL_PCT = 0.5
PROFILE_WHAT = {
    "profile-train": "the DataLoader in the training process (--steps 60)",
    "profile-workers": "4 DataLoader workers (--steps 60 --workers 4)",
}


# -- rendering with gpuprobe's own code --------------------------------------------------------


def _console() -> Any:
    from gpuprobe.ui.console import make_console  # the console every command prints on

    return make_console(file=io.StringIO(), width=WIDTH, color_system=None, highlight=False)


def render(kind: str, data: dict[str, Any]) -> str:
    """The terminal view of one recorded JSON, drawn by gpuprobe's renderer at 80 columns."""
    con = _console()
    if kind == "doctor":
        from gpuprobe.tools.doctor.model import DoctorReport
        from gpuprobe.tools.doctor.show import render_doctor

        render_doctor(DoctorReport.from_dict(data), con)
    elif kind in ("fleet-doctor", "fleet-bench"):
        from gpuprobe.core import render as views
        from gpuprobe.tools.fleet.model import FleetBenchReport, FleetDoctorReport

        fleet = FleetDoctorReport if kind == "fleet-doctor" else FleetBenchReport
        views.terminal(fleet.from_dict(data), con)
    elif kind == "bench":
        from gpuprobe.tools.bench.model import BenchReport
        from gpuprobe.tools.bench.show.table import render_bench

        render_bench(BenchReport.from_dict(data), con)
    else:
        from gpuprobe.tools.memory.model import FitResult, PrecisionReport
        from gpuprobe.tools.monitor.pack_model import PackReport
        from gpuprobe.tools.profile.model import ProfileReport

        cls = {
            "fit": FitResult,
            "precision": PrecisionReport,
            "pack": PackReport,
            "profile": ProfileReport,
        }[kind]
        return str(cls.from_dict(data))
    return con.file.getvalue()


def gpuprobe_here(*argv: str, cwd: Path | None = None) -> str:
    """``gpuprobe ARGV`` run here (on this checkout) at 80 columns: its output as printed. A crash
    (a traceback, exit code 1 like a finding's) stops the import rather than leave an empty block."""
    path = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # the packages this process sees
    env = src_first(SRC, path, COLUMNS=str(WIDTH), PATH="/usr/bin:/bin")
    p = subprocess.run(
        [sys.executable, "-m", "gpuprobe", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    if "Traceback (most recent call last)" in p.stderr:
        raise SystemExit(f"gpuprobe {' '.join(argv)} crashed here:\n{p.stderr.rstrip()}")
    return (p.stdout + (p.stderr if p.returncode not in (0, 1) else "")).rstrip() + "\n"


def _block(text: str | None, missing: str) -> list[str]:
    return ["```", text.rstrip(), "```", ""] if text else [f"*{missing}*", ""]


def profile_view(d: Path, step: str) -> str | None:
    """profile's own view of its recorded report, the card's paths shown from the sweep's folder
    (``/tmp/gpu-sweep/profile-train/...`` as ``profile-train/...``)."""
    raw = read_text(d / f"{step}.json")
    rep = read_json(d / f"{step}.json")
    if not raw or not rep:
        return None
    top = str(Path(rep.get("out_dir") or "/").parent).rstrip("/") + "/"
    return render("profile", json.loads(raw.replace(top, "")) if top != "/" else rep)


# -- the docs page -----------------------------------------------------------------------------


def _header(m: Merge, slug: str) -> list[str]:
    def what(mt: dict[str, Any]) -> str:
        v = mt["versions"]
        return (
            f"driver {mt['driver']}, CUDA {mt['cuda_driver_api']}; torch {v.get('torch')}, CuPy "
            f"{v.get('cupy-cuda13x') or v.get('cupy-cuda12x')}, JAX {v.get('jax')}, Triton "
            f"{v.get('triton')}"
        )

    dev = m.device
    tail = (
        " The tables are drawn by gpuprobe's own renderers from the JSON recorded there, at 80 "
        f"columns; the figures are in `benchmarks/results/gpu_{slug}.md`."
    )
    if not m.several:
        mt = m.latest.meta
        return [
            f"Everything below was printed by gpuprobe on one {dev} lent to this project "
            f"({mt['date']}; {what(mt)}), by `benchmarks/gpu_sweep.sh`." + tail
        ]
    sweeps = "; ".join(f"{sw.meta['date']} ({what(sw.meta)})" for sw in m.sweeps)
    return [
        f"Everything below was printed by gpuprobe on an {dev} lent to this project, in "
        f"{len(m.sweeps)} sweeps of `benchmarks/gpu_sweep.sh`: {sweeps}. Each step's output comes "
        "from the latest sweep that ran the step and left it; each section names its sweep, and "
        "what a newer sweep did of a step whose older output stands in." + tail
    ]


def _anchors_warm(anchors: dict[str, Any] | None) -> list[str]:
    """The launch anchor timed warm beside the flushed one, when the sweep recorded it."""
    a = (anchors or {}).get("launch") or {}
    warm = a.get("gpuprobe_warm")
    if not warm:
        return []
    return [
        f"The launch timed warm beside it (no L2 flush: what `gpuprobe bench` reports): median "
        f"{statistics.median(warm):.2f} µs over {len(warm)} rounds [{min(warm):.2f}.."
        f"{max(warm):.2f}]; warm / flushed {a.get('warm_vs_flushed')}.",
        "",
    ]


def _profile_sections(d: Path, m: Merge, slug: str, img: Path) -> list[str]:
    out = ["## gpuprobe profile: examples/train.py, unmodified", ""]
    for step in PROFILE_STEPS:
        out += [f"### {PROFILE_WHAT[step]}", "", *m.note(step)]
        out += _block(profile_view(d, step), m.why_missing(step))
        if (d / step / "timeline.jsonl").is_file():
            with tempfile.TemporaryDirectory() as t:
                shutil.copytree(d / step, Path(t) / step)
                gpuprobe_here("plot", "--out", str(img / f"{step}.png"), str(Path(t) / step))
            out += [f"![{step}](img/gpu-{slug}/{step}.png)", ""]
    a, b = (profile_trace(d, s) for s in PROFILE_STEPS)
    out += ["### The two traces compared here (`gpuprobe diagnose --compare`)", ""]
    out += m.note(*PROFILE_STEPS)
    text = None
    if a.is_file() and b.is_file():
        rel = [str(p.relative_to(d)) for p in (a, b)]
        text = gpuprobe_here("diagnose", "--compare", *rel, cwd=d)
    return out + _block(text, "not compared: a profile step left no trace")


def _profile_overhead(d: Path, m: Merge, figs: dict[str, Any]) -> list[str]:
    out = ["## What profile's start-up hook costs (benchmarks/profile_overhead.py --quick)", ""]
    out += m.note("profile-overhead")
    md = read_text(d / "profile-overhead.md")
    if not md:
        return [*out, f"*{m.why_missing('profile-overhead')}*", ""]
    body = [ln for ln in md.splitlines() if not ln.startswith("# ")]
    out += [*(body[1:] if body and not body[0].strip() else body), ""]
    f = figs.get("profile_overhead")
    if f:
        out += [f"How to read it: {f['reading']}", ""]
    return out


def _hta_misses(d: Path, rows: list[dict[str, Any]]) -> list[str]:
    """For each trace where like for like misses the goal: the comparison's own explanation."""
    why = (read_text(d / "diagnose-vs-hta.md") or "").splitlines()
    lines = [
        ln
        for r in rows
        if abs(r["delta_like_for_like_pp"] or 0.0) > HTA_GOAL_PP
        for ln in why
        if ln.startswith(f"- **{r['trace']}**:")
    ]
    if not lines:
        return []
    return [
        "Where like for like misses the goal, the comparison says why (its report):",
        "",
        *lines,
        "",
    ]


def _fleet(d: Path, m: Merge) -> list[str]:
    """doctor --cluster and bench --cluster on two Dask workers of this machine (one card)."""
    out = [
        "## gpuprobe doctor --cluster and bench --cluster (benchmarks/gpu_fleet.py)",
        "",
        "A Dask LocalCluster of two worker processes on this machine, sharing its card (as two "
        "workers of one GPU box); the commands as a user runs them, their JSON drawn here at 80 "
        "columns.",
        "",
        *m.note("fleet"),
    ]
    doc = read_json(d / "fleet-doctor.json") or {}
    if doc.get("nodes") and not any("kernels_on" in n for n in doc["nodes"]):
        out += [
            "*Recorded before the fleet doctor ran the kernel checks once per host "
            "(docs/gpu-session.md): both workers ran them at once on the one card and measured "
            "each other (`pcie-h2d-slow`, `doctor-host-busy`, one host in two rows).*",
            "",
        ]
    bench = read_json(d / "fleet-bench.json") or {}
    how = " --one-at-a-time" if bench.get("one_at_a_time") else ""
    for kind, line, rep in (
        ("doctor", "doctor --cluster", doc),
        ("bench", f"bench --cluster --backend torch{how}", bench),
    ):
        out += [f"### gpuprobe {line}", ""]
        out += _block(render(f"fleet-{kind}", rep) if rep else None, m.why_missing("fleet"))
    return out


def docs_page(d: Path, m: Merge, figs: dict[str, Any], slug: str, root: Path) -> str:
    img = root / "docs" / "img" / f"gpu-{slug}"
    img.mkdir(parents=True, exist_ok=True)
    note, why = m.note, m.why_missing
    out = [f"# gpuprobe on an {m.device}", "", *_header(m, slug), ""]
    out += ["## gpuprobe info", "", *note("info-text")]
    out += _block(read_text(d / "info.txt"), why("info-text"))
    out += ["## gpuprobe doctor", "", *note("doctor")]
    doc = read_json(d / "doctor.json")
    out += _block(render("doctor", doc) if doc else None, why("doctor"))
    out += ["## gpuprobe top (one frame, 80 columns, the card idle)", "", *note("top")]
    out += _block(read_text(d / "top.txt"), why("top"))
    out += _fleet(d, m)
    out += ["## gpuprobe bench", ""]
    for fw in BENCH_FRAMEWORKS:
        rep = read_json(d / f"bench-{fw}.json")
        out += [f"### --backend {fw}", "", *note(f"bench-{fw}")]
        out += _block(render("bench", rep) if rep else None, why(f"bench-{fw}"))
        png = d / f"bench-{fw}.png"
        if png.is_file():
            shutil.copy(png, img / png.name)
            out += [f"![bench {fw}](img/gpu-{slug}/{png.name})", ""]
    out += ["### The anchors", "", *note("anchors")]
    out += [*_block(read_text(d / "anchors.txt"), why("anchors")), *_anchors_warm(figs["anchors"])]
    for run, what in (
        ("run-train", "a training loop fed by 2 DataLoader workers"),
        ("run-starved", "the same loop with the loader in the training process"),
    ):
        out += [f"## gpuprobe run: {what}", "", *note(run)]
        if (d / run / "timeline.jsonl").is_file():
            with tempfile.TemporaryDirectory() as t:
                shutil.copytree(d / run, Path(t) / run)
                text = gpuprobe_here("plot", "--out", str(img / f"{run}.png"), str(Path(t) / run))
                text = text.replace(str(root) + "/", "")
            out += _block(text, "")
            out += [f"![{run}](img/gpu-{slug}/{run}.png)", ""]
        else:
            out += _block(None, why(run))
    out += _profile_sections(d, m, slug, img)
    out += ["## gpuprobe diagnose: the examples' traces recorded there", ""]
    for slow, fixed, rule in TRACE_PAIRS:
        trace = d / "traces" / f"{slow}.json.gz"
        out += [f"### {slow} (`{rule}`) and its fix {fixed}", ""]
        out += note(trace_step(slow), trace_step(fixed))
        out += _block(
            gpuprobe_here("diagnose", f"traces/{trace.name}", cwd=d) if trace.is_file() else None,
            why(trace_step(slow)),
        )
        out += _block(read_text(d / f"compare-{slow}.txt"), why(f"compare-{slow}"))
    out += ["### Beside Holistic Trace Analysis", ""]
    rows = figs["hta"]["traces"]
    if rows:
        col = " sweep |" if m.several else ""
        out += [
            "HTA 0.5.0 run here on the traces the card wrote (`benchmarks/diagnose_vs_hta_corpus.py`"
            "). *Default* is `TraceAnalysis` as a user runs it (event times rounded to whole µs, "
            "the last profiler step dropped); *like for like* is HTA with neither (the same "
            "events, times and steps gpuprobe reads).",
            "",
            "| trace | gpuprobe busy % | HTA default busy % | Δ default pp | Δ like for like pp |"
            + col,
            "|---|---|---|---|---|" + ("---|" if m.several else ""),
        ]
        out += [
            f"| {r['trace']} | {r['gpuprobe_busy_pct']:.2f} | "
            + ("HTA failed" if r["hta_busy_pct"] is None else f"{r['hta_busy_pct']:.2f}")
            + " | "
            + ("–" if r["delta_pp"] is None else f"{r['delta_pp']:+.2f}")
            + f" | {r['delta_like_for_like_pp']:+.3f} |"
            + (f" {(r.get('sweep_date') or '?')[:10]} |" if m.several else "")
            for r in rows
        ]
        out.append("")
        out += _hta_misses(d, rows)
    elif (d / "hta.txt").is_file():
        out += [
            "*not measured: HTA, run here (benchmarks/diagnose_vs_hta_corpus.py), gave no figure "
            "for these traces: it failed on each, or is missing from --hta-python*",
            "",
        ]
    else:
        out += [f"*{why('hta')}*", ""]
    out += ["## gpuprobe lstsq on the card (benchmarks/gpu_sweep_lstsq.py)", "", *note("scale")]
    out += _block(read_text(d / "scale.txt"), why("scale"))
    for kind in ("fit", "precision", "pack"):
        data = read_json(d / f"{kind}.json")
        out += [f"## gpuprobe {kind}", "", *note(kind)]
        out += _block(render(kind, data) if data else None, why(kind))
    out += _profile_overhead(d, m, figs)
    gt, suite = junit(d / "gpu-tests.xml"), junit(d / "suite.xml")
    out += ["## The tests on the card", ""]
    for step, name, counts in (
        ("gpu-tests", "pytest -m gpu", gt),
        ("suite", "the whole suite", suite),
    ):
        whence = m.whence(step)
        out.append(
            f"- {name}: "
            + (
                f"{counts['tests']} tests, {counts['failures']} failed, {counts['errors']} "
                f"errors, {counts['skipped']} skipped"
                if counts
                else "not recorded"
            )
            + (f", from {whence}" if counts and whence else "")
        )
    return "\n".join(out) + "\n"


# -- the figures' page -------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} %"


def _met(x: bool | None) -> str:
    return "not measured" if x is None else ("yes" if x else "NO")


def results_md(m: Merge, figs: dict[str, Any]) -> str:
    mt = m.latest.meta
    sev = m.several

    def row(*cells: str, step: str | None = None, date: str | None = None) -> str:
        when = date if date is not None else ((m.date_of(step) or "")[:10] if step else "")
        return "| " + " | ".join([*cells, when] if sev else cells) + " |"

    if sev:
        head = [
            f"# GPU figures on {m.device} ({len(m.sweeps)} sweeps, the latest {mt['date']})",
            "",
            "Each figure from the latest sweep that ran its step (benchmarks/gpu_sweep.sh), "
            "beside its anchor measured in the same call:",
            "",
            *(
                f"- {sw.label} ({sw.meta['date']}): driver {sw.meta['driver']}, "
                f"CUDA {sw.meta['cuda_driver_api']}; "
                + ", ".join(f"{k} {v}" for k, v in sorted(sw.meta["versions"].items()))
                for sw in m.sweeps
            ),
        ]
    else:
        head = [
            f"# GPU figures on {m.device} ({mt['date']})",
            "",
            f"Driver {mt['driver']}, CUDA {mt['cuda_driver_api']}; "
            + ", ".join(f"{k} {v}" for k, v in sorted(mt["versions"].items()))
            + ". Each figure beside its anchor, measured in the same call "
            "(benchmarks/gpu_sweep.sh).",
        ]
    lines = [
        *head,
        "",
        "| figure | measured | goal | met |" + (" sweep |" if sev else ""),
        "|---|---|---|---|" + ("---|" if sev else ""),
    ]
    for name, a in (figs["anchors"] or {}).items():
        if "skipped" in a:
            lines.append(row(name, f"skipped: {a['skipped']}", "", "", step="anchors"))
            continue
        lines.append(
            row(
                f"{name} ({a['unit']})",
                f"ratio {a['ratio_median']:.3f} [{a['ratio_min']:.3f}..{a['ratio_max']:.3f}]",
                a["goal"],
                "yes" if a["met"] else "NO",
                step="anchors",
            )
        )
        if a.get("gpuprobe_warm"):
            w = a["gpuprobe_warm"]
            lines.append(
                row(
                    f"{name}, warm (no L2 flush; what gpuprobe reports)",
                    f"median {statistics.median(w):.2f} µs [{min(w):.2f}..{max(w):.2f}], "
                    f"{a.get('warm_vs_flushed')} of the flushed",
                    "not judged",
                    "–",
                    step="anchors",
                )
            )
    h, f, s = figs["hta"], figs["lstsq_fp64"], figs["sampler_2hz"]
    worst = "n/a" if h["worst_like_for_like_pp"] is None else f"{h['worst_like_for_like_pp']:.3f}"
    dates = ", ".join(sorted({(r.get("sweep_date") or "?")[:10] for r in h["traces"]}))
    frac, pct = f.get("fraction"), s["percent_of_core"]
    hta = f"diagnose busy vs HTA like for like, worst of {len(h['traces'])}"
    lstsq = f"lstsq fp64 (normal, {f.get('rows')}×{f.get('cols')})"
    fp64 = "n/a" if frac is None else f"{frac:.3f} of the fp64 peak (CUDA cores)"
    sampler = "n/a" if pct is None else f"{pct:.3f} % of a core"
    lines += [
        row(hta, f"{worst} pp", f"≤ {HTA_GOAL_PP} pp", _met(h["met"]), date=dates),
        row(lstsq, fp64, f"≥ {FP64_GOAL}", _met(f["met"]), step="scale"),
        row(
            f"sampler at 2 Hz, {s['gpus_read']} GPU(s)",
            sampler,
            f"< {SAMPLER_GOAL_PCT} %",
            _met(s["met"]),
            step="overhead",
        ),
    ]
    for step, p in (figs.get("profile") or {}).items():
        if p:
            lines.append(
                row(
                    "profile " + " ".join(p["command"][1:]),
                    f"median step {p['step_ms_median']:.1f} ms: GPU busy "
                    + _pct(p["gpu_busy_pct_median_step"])
                    + ", DataLoader "
                    + _pct(p["dataloader_pct"]),
                    "a verdict",
                    f"headline {p['headline'] or 'none'}",
                    step=step,
                )
            )
    po = figs.get("profile_overhead")
    if po:
        lines.append(
            row(
                "profile hook after its window, in process",
                f"+{po['hook_ns_per_step']:,.0f} ns per step: "
                + ", ".join(
                    f"{v:.3f} % of the width-{k} step" for k, v in po["in_process_pct"].items()
                ),
                po["goal"],
                _met(po["met_in_process"]),
                step="profile-overhead",
            )
        )
        lines.append(
            row(
                "profile hook, between processes (median step ratio)",
                ", ".join(f"width {k}: {v:.3f}" for k, v in po["worst_ratio"].items())
                + f"; load average {po['load_average_before']:.1f}",
                po["goal"],
                "noise, not judged" if po["noise"] else _met(all(po["met_between"].values())),
                step="profile-overhead",
            )
        )
    bad = {k: v for k, v in m.steps.items() if v["rc"] != 0}

    def when(v: dict[str, Any]) -> str:
        return f", {v['sweep_date'][:10]}" if sev and v.get("sweep_date") else ""

    lines += [
        "",
        "Steps not at exit 0: "
        + (", ".join(f"{k} ({v['rc']}{when(v)})" for k, v in bad.items()) or "none")
        + ".",
    ]
    later = {k: v["later"] for k, v in m.steps.items() if v.get("later")}
    if later:
        lines += ["", "Older output standing in for a newer attempt that left none:", ""]
        lines += [f"- {k}: from {m.source[k].label}; {'; '.join(v)}." for k, v in later.items()]
    return "\n".join(lines) + "\n"
