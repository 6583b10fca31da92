"""Read GPU sweeps (benchmarks/gpu_sweep.sh) and merge several of one card, step by step.

A later session re-runs only some steps (``gpu_session.sh ... ONLY``), and a step can be cut by
the deadline or by the card going back. So each step's outputs come from the latest sweep in which
the step ran (a row in its ``steps.tsv`` with an exit code, not ``skip``) and left its output (the
step's first file, written last, is not empty); an older sweep's output stands in for a newer
attempt that left none, and the pages say so. Nothing is filled in: a step no sweep ran to the
end is said missing, with what each sweep did.

The merged folder has the layout of one sweep, so that what reads a sweep reads it; outputs
derived here from other steps' (``--compare`` of a trace pair, HTA beside diagnose) are taken from
a sweep only when all their inputs came from that sweep, and are otherwise made again here.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "TRACE_PAIRS",
    "Merge",
    "Sweep",
    "junit",
    "junit_failures",
    "load",
    "merge",
    "profile_trace",
    "trace_step",
]

TRACE_PAIRS = (
    ("item_every_step", "item_fixed", "sync"),
    ("pageable_copies", "pinned_copies", "pageable-copies"),
    ("fp32_matmul", "tf32_matmul", "no-tensor-cores"),
    ("python_loop_mask", "vectorized_mask", "python-loop"),
    ("loader_single_process", "loader_workers", "input-bound"),
)
# the loader pair's traces are written by the run steps around them (gpu_sweep.sh)
TRACE_STEP = {"loader_single_process": "run-starved", "loader_workers": "run-train"}
PROFILE_STEPS = ("profile-train", "profile-workers")
BENCH_FRAMEWORKS = ("torch", "cupy", "jax", "numpy")


def profile_trace(d: Path, step: str) -> Path:
    """Where a profile step's trace is kept in the merged folder, under the name it is compared
    and kept as a fixture under (``profile-traces/profile_train.json.gz``)."""
    return d / "profile-traces" / f"{step.replace('-', '_')}.json.gz"


def trace_step(name: str) -> str:
    """The step that writes ``traces/NAME.json.gz``."""
    return TRACE_STEP.get(name, f"trace-{name}")


def _outputs() -> dict[str, tuple[str, ...]]:
    """Each step's outputs in the sweep's folder; the first is written last (its being there and
    not empty says the step left its output)."""
    out: dict[str, tuple[str, ...]] = {
        "info": ("info.json",),
        "info-text": ("info.txt",),
        "suite": ("suite.xml", "suite.txt"),
        "gpu-tests": ("gpu-tests.xml", "gpu-tests.txt"),
        "anchors": ("anchors.json", "anchors.txt"),
        "doctor": ("doctor.json",),
        "top": ("top.txt",),
        "top-json": ("top.jsonl",),
        "fleet": ("fleet-bench.json", "fleet-doctor.json", "fleet.txt"),  # the bench's JSON last
        "scale": ("scale-lstsq.json", "scale.txt"),
        "overhead": ("overhead.json", "overhead.txt"),
        "profile-overhead": (
            "profile-overhead.json",
            "profile-overhead.txt",
            "profile-overhead.md",
        ),
    }
    out |= {k: (f"{k}.json",) for k in ("fit", "precision", "pack")}
    out |= {f"bench-{fw}": (f"bench-{fw}.json", f"bench-{fw}.png") for fw in BENCH_FRAMEWORKS}
    for slow, fixed, _rule in TRACE_PAIRS:
        for name in (slow, fixed):
            out.setdefault(trace_step(name), ())
            out[trace_step(name)] += (f"traces/{name}.json.gz",)
    for run in ("run-starved", "run-train"):  # the summary is printed at the end
        out[run] = (f"{run}.json", f"{run}/", *out[run])
    out |= {p: (f"{p}.json", f"{p}/") for p in PROFILE_STEPS}
    return out


STEP_OUTPUTS = _outputs()


def _derived() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Outputs made from other steps' outputs (by the sweep, or here for a lean one): name ->
    (outputs, the steps whose outputs they read)."""
    traces = tuple(trace_step(n) for pair in TRACE_PAIRS for n in pair[:2])
    out = {"hta": (("diagnose-vs-hta.json", "diagnose-vs-hta.md", "hta.txt"), traces)}
    for slow, fixed, _rule in TRACE_PAIRS:
        out[f"compare-{slow}"] = ((f"compare-{slow}.txt",), (trace_step(slow), trace_step(fixed)))
    return out


DERIVED = _derived()


# -- one sweep ---------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


def read_text(path: Path) -> str | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    return text if text.strip() else None


def open_sweep(src: Path, work: Path) -> Path:
    """The sweep's folder: ``src`` itself (only read), or unpacked into ``work`` from its tar (or
    its joined parts)."""
    if src.is_dir():
        return src.resolve()
    if not src.is_file():
        raise SystemExit(f"gpu_sweep_import: {src} is neither a sweep folder nor its tar")
    work.mkdir(parents=True)
    tar = src
    if ".part-" in src.name:
        tar = work / "sweep.tar.gz"
        with tar.open("wb") as out:
            for part in sorted(src.parent.glob(src.name.rsplit("-", 1)[0] + "-*")):
                out.write(part.read_bytes())
    try:
        with tarfile.open(tar) as t:
            t.extractall(work, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        why = str(exc).splitlines()[0].rstrip(":")
        raise SystemExit(
            f"gpu_sweep_import: {src} is not a readable sweep tar ({why}): give the sweep's folder, "
            "its .tar.gz, or the first of its parts"
        ) from None
    found = [p.parent for p in work.glob("*/steps.tsv")]
    if not found:
        raise SystemExit(f"gpu_sweep_import: no steps.tsv in {src}")
    return found[0].resolve()


def read_steps(d: Path) -> dict[str, dict[str, Any]]:
    """steps.tsv as {name: {"rc": int | "skip", "s": seconds}}."""
    out: dict[str, dict[str, Any]] = {}
    try:
        lines = (d / "steps.tsv").read_text().splitlines()
    except OSError:
        raise SystemExit(f"gpu_sweep_import: no steps.tsv in {d}") from None
    for line in lines:
        name, rc, secs = line.split("\t")
        out[name] = {"rc": rc if rc == "skip" else int(rc), "s": int(secs)}
    return out


def pip_versions(d: Path) -> dict[str, str]:
    want = ("torch", "cupy-cuda13x", "cupy-cuda12x", "jax", "jaxlib", "triton", "nvidia-ml-py")
    want += ("numpy", "dask", "distributed", "dask-cuda", "traceinsight", "pandas")
    out = {}
    for line in (read_text(d / "pip-list.txt") or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].lower() in want:
            out[parts[0].lower()] = parts[1]
    return out


def meta(d: Path) -> dict[str, Any]:
    """Device, driver, CUDA, versions and date, from the sweep's own records."""
    info = read_json(d / "info.json") or {}
    gpus = info.get("gpus") or []
    g0 = gpus[0] if gpus else {}
    driver = info.get("driver") or {}
    machine = (read_text(d / "machine.txt") or "").splitlines()
    return {
        "device": g0.get("name"),
        "gpus": len(gpus),
        "memory_total_bytes": g0.get("memory_total"),
        "driver": driver.get("driver_version"),
        "cuda_driver_api": driver.get("cuda_driver_version"),
        "date": machine[0] if machine else info.get("created"),
        "kernel": machine[1] if len(machine) > 1 else None,
        "versions": pip_versions(d),
        "gpuprobe_version": info.get("gpuprobe_version"),
    }


def junit(path: Path) -> dict[str, int] | None:
    """Counts of a pytest JUnit XML: tests, failures, errors, skipped."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root)
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def junit_failures(path: Path) -> list[str]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    bad = []
    for case in root.iter("testcase"):
        for tag in ("failure", "error"):
            el = case.find(tag)
            if el is not None:
                msg = (el.get("message") or "").splitlines()[0][:160] if el.get("message") else ""
                bad.append(f"{case.get('classname')}::{case.get('name')}: {msg}")
    return bad


def _has_output(d: Path, rel: str) -> bool:
    p = d / rel
    if p.is_dir():
        return any(q.is_file() and q.stat().st_size for q in p.rglob("*"))
    return p.is_file() and p.stat().st_size > 0


@dataclass(frozen=True, eq=False)  # one object per sweep: hashed by identity
class Sweep:
    """One sweep: its folder (only read), its rows and its own records."""

    path: Path
    source: str  # as given: the tar's or the folder's name
    rows: dict[str, dict[str, Any]]
    meta: dict[str, Any]
    label: str = ""  # "the sweep of 2026-11-25", set by load() once all are known

    def ran(self, step: str) -> bool:
        """The step ran to an exit code here and left its output."""
        row = self.rows.get(step)
        if row is None or row["rc"] == "skip":
            return False
        outs = STEP_OUTPUTS.get(step) or DERIVED.get(step, ((),))[0]
        return not outs or _has_output(self.path, outs[0])

    def attempt(self, step: str) -> str | None:
        """What this sweep did of a step that left no output, in words; None when it never
        started it."""
        row = self.rows.get(step)
        outs = STEP_OUTPUTS.get(step) or DERIVED.get(step, ((),))[0]
        if row is None:
            if outs and self._started(step, self.path / outs[0]):
                return (
                    f"{self.label} had started it and not finished it when the card was given "
                    "back: its output is empty"
                )
            return None
        if row["rc"] == "skip":
            return f"{self.label} skipped it at its deadline"
        how = "was cut by its timeout" if row["rc"] in (124, 137) else f"exited {row['rc']}"
        return f"in {self.label} it {how} after {row['s']} s with no output"

    def _started(self, step: str, out: Path) -> bool:
        """Whether the sweep started ``step`` (it has no row: it did not end). gpu_sweep.sh names
        each step it starts in started.txt; in a sweep without it, a step's output file exists
        from the moment the script reached the step's line, even a step --only left out, so it
        was started only if it was made after the last row was written (steps run one after
        the other)."""
        started = self.path / "started.txt"
        if started.is_file():
            return step in started.read_text().split()
        if not out.exists():
            return False
        return out.stat().st_mtime_ns >= (self.path / "steps.tsv").stat().st_mtime_ns

    @property
    def short(self) -> str:
        """``2026-11-25 (driver 580.159.04)``."""
        d = self.meta["driver"]
        return self.label.removeprefix("the sweep of ") + (f" (driver {d})" if d else "")


def load(sources: list[Path], work: Path) -> list[Sweep]:
    """The sweeps as given, oldest first; refused in one line when they are of different cards
    or out of order."""
    sweeps = []
    for i, src in enumerate(sources):
        d = open_sweep(src, work / f"in-{i}")
        sweeps.append(Sweep(d, src.name, read_steps(d), meta(d)))
    devices = {s.meta["device"] for s in sweeps if s.meta["device"]}
    if len(devices) > 1:
        raise SystemExit(
            "gpu_sweep_import: the sweeps are of different cards ("
            + ", ".join(sorted(devices))
            + "): merge only sweeps of one card"
        )
    dates = [s.meta["date"] or "" for s in sweeps]
    if all(dates) and dates != sorted(dates):
        raise SystemExit(
            "gpu_sweep_import: give the sweeps oldest first (their dates: " + ", ".join(dates) + ")"
        )
    days = [d[:10] for d in dates]
    labels = [d[:10] if days.count(d[:10]) == 1 else d[:16] + "Z" for d in dates]
    return [
        Sweep(s.path, s.source, s.rows, s.meta, f"the sweep of {lab or s.source}")
        for s, lab in zip(sweeps, labels, strict=True)
    ]


# -- several -----------------------------------------------------------------------------------


def _order(sweeps: list[Sweep]) -> list[str]:
    """Every step of every sweep, each newer one placed after the step it followed."""
    order: list[str] = []
    for sw in sweeps:
        prev = None
        for name in sw.rows:
            if name not in order:
                order.insert(order.index(prev) + 1 if prev in order else len(order), name)
            prev = name
    return order


@dataclass
class Merge:
    """The merged folder ``dir``, and for each step the sweep its outputs came from."""

    dir: Path
    sweeps: list[Sweep]
    source: dict[str, Sweep] = field(default_factory=dict)  # step -> the sweep used
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # rows, with provenance

    @property
    def several(self) -> bool:
        return len(self.sweeps) > 1

    @property
    def device(self) -> str | None:
        """The card's name (one card in all the sweeps: load() checks)."""
        return next((sw.meta["device"] for sw in reversed(self.sweeps) if sw.meta["device"]), None)

    @property
    def latest(self) -> Sweep:
        return self.sweeps[-1]

    def later(self, step: str) -> list[str]:
        """What the sweeps after the one used did of the step, in words."""
        used = self.source.get(step)
        after = self.sweeps[self.sweeps.index(used) + 1 :] if used else self.sweeps
        return [a for sw in after if (a := sw.attempt(step))]

    def note(self, *steps: str) -> list[str]:
        """The page's line under a section: which sweep its steps came from, and what newer
        sweeps did of them; nothing when only one sweep was read."""
        if not self.several:
            return []
        used = {s: self.source[s] for s in steps if s in self.source}
        if not used:
            return []
        whence = {sw.short for sw in used.values()}
        if len(whence) == 1:
            text = f"From the sweep of {whence.pop()}"
        else:
            text = "From " + "; ".join(f"{s}: the sweep of {sw.short}" for s, sw in used.items())
        later = [f"{s}: {a}" if len(steps) > 1 else a for s in used for a in self.later(s)]
        return [f"*{text}" + "".join(f"; {a}" for a in later) + ".*", ""]

    def why_missing(self, step: str) -> str:
        """Why a step's output is not on the page: what each sweep did of it."""
        if not self.several:
            s = self.latest.rows.get(step)
            if s is None and self.latest.attempt(step) is None:
                return f"not recorded: the sweep did not run step {step}"
            if s is None:
                return (
                    f"not recorded: the sweep had not finished step {step} when the card was "
                    "given back"
                )
            if s["rc"] == "skip":
                return f"not recorded: step {step} was skipped at the sweep's deadline"
            return f"not recorded: step {step} exited {s['rc']} after {s['s']} s (see sweep.log)"
        did = [a for sw in self.sweeps if (a := sw.attempt(step))]
        return f"not recorded: step {step}: " + (
            "; ".join(did) if did else "run in none of the sweeps"
        )

    def whence(self, step: str) -> str:
        """``the sweep of 2026-11-25 (driver 580.159.04)`` when several were read, else ""."""
        sw = self.source.get(step)
        return f"the sweep of {sw.short}" if sw and self.several else ""

    def date_of(self, step: str) -> str | None:
        sw = self.source.get(step)
        return sw.meta["date"] if sw else None


def _copy(src: Path, dst: Path, rels: tuple[str, ...]) -> None:
    for rel in rels:
        a, b = src / rel.rstrip("/"), dst / rel.rstrip("/")
        if a.is_dir():
            shutil.copytree(a, b, dirs_exist_ok=True)
        elif a.is_file():
            b.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(a, b)


def merge(sweeps: list[Sweep], out: Path) -> Merge:
    """Each step's outputs from the latest sweep that ran it and left them, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    m = Merge(out, sweeps)
    for step in STEP_OUTPUTS:
        sw = next((s for s in reversed(sweeps) if s.ran(step)), None)
        if sw is not None:
            m.source[step] = sw
            _copy(sw.path, out, STEP_OUTPUTS[step])
    for step, (outs, inputs) in DERIVED.items():
        whence = {m.source[i] for i in inputs if i in m.source}
        sw = whence.pop() if len(whence) == 1 else None
        if sw is not None and all((sw.path / o).is_file() for o in outs):
            m.source[step] = sw  # the same inputs: what that sweep (or its import) made stands
            _copy(sw.path, out, outs)
    for name in _order(sweeps):
        if name in DERIVED and name not in m.source:
            continue  # its inputs came from several sweeps: made again here
        used = m.source.get(name)
        if used is None and name not in STEP_OUTPUTS:  # outputs not read here (tar, plot-*, ...)
            used = next(
                (
                    s
                    for s in reversed(sweeps)
                    if s.rows.get(name, {}).get("rc") not in (None, "skip")
                ),
                None,
            )
        # a step no sweep ran to the end: the latest row says how far it got
        sw = (
            used
            if used and name in used.rows
            else next(s for s in reversed(sweeps) if name in s.rows)
        )
        row = {**sw.rows[name], "sweep_date": sw.meta["date"]}
        if m.several and name in m.source and (later := m.later(name)):
            row["later"] = later
        m.steps[name] = row
    return m
