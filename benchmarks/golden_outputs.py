"""Golden outputs: record what every gpuprobe command and result type prints, to prove that a
refactor (modules moved, nothing meant to change) leaves every output byte-identical.

    .venv/bin/python benchmarks/golden_outputs.py --src /tmp/base/src --out /tmp/golden_before
    .venv/bin/python benchmarks/golden_outputs.py --src src --out /tmp/golden_after
    .venv/bin/python benchmarks/golden_outputs.py --compare /tmp/golden_before /tmp/golden_after

Each case (CASES) is a subprocess, ``python -m gpuprobe ...`` or ``python -c SNIPPET`` (a snippet
uses only names in ``gpuprobe.__all__``, and the few internals in INTERNALS: update those after
modules move), with ``--src`` first on PYTHONPATH, ``COLUMNS=80``, output piped (NO_COLOR unset),
``TZ=UTC``, ``PYTHONHASHSEED=0`` (set order breaks some ties) and HOME, TMPDIR and copies of the
inputs (tests/data, benchmarks/results, /work/shared/traces) in the fixed folder WORK, whose paths
are printed. A case's file holds its exit code, stdout, stderr and the files it wrote (PNG as
sha256). No GPU is needed: GPU snapshots reach the code through ``--from SNAPSHOT`` and through the
real nvidia-ml-py over the tests' fake NVML library (tests/fakes/nvml_lib.py), installed by a
sitecustomize when GOLDEN_FAKE_NVML names a snapshot (as tests/hardware/test_nvml_failures.py
does). Timing runs on a fake clock: with GOLDEN_FAKE_CLOCK=S ``time.perf_counter`` advances S s
per call (bench's workers too); the fit and precision snippets advance their own in the step.
Left out, not deterministic here: doctor, top, run, export, pack and ``scale lstsq`` on this
machine (a recorded ScaleResult and PackReport are rendered instead).

NORMALISE is all that is normalised, each entry only in the cases that name it: the "now" of live
snapshots, free host memory, other processes' CPU load, and durations measured live (trace
read/analyse time, doctor's judging time, lstsq's times and CPU use).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

# The only gpuprobe internals used (by snippets): update these after modules move.
INTERNALS = {
    "PackReport": "gpuprobe.tools.monitor.pack_model:PackReport",
    "pack_judge": "gpuprobe.tools.monitor.rules.pack:judge",
    "ScaleResult": "gpuprobe.tools.scale.model:ScaleResult",
}
FAKE_NVML = "fakes.nvml_lib"  # the tests' fake NVML library, a module under tests/

N = r"-?[0-9][0-9.e+-]*"
LSTSQ_KEYS = ("wall_s", "compute_s", "setup_s", "solve_s", "reference_s", "cpu_per_worker")
NORMALISE: dict[str, list[tuple[str, str]]] = {  # name -> (pattern, replacement), re.M
    "NOW": [(r'("created": ")[0-9T:.+-]+Z?"', r'\1<now>"')],
    "FREE_MEMORY": [
        (rf'("?(?:memory|host)_available"?[:=] ?){N}', r"\1<live>"),
        (r'("name": "host_available",\s*"value": )\d+', r"\1<live>"),
        (r"[0-9.]+ GiB (is )?available", r"<live> GiB \1available"),
    ],
    "OTHERS_LOAD": [(rf'("?others_cores"?[:=] ?){N}', r"\1<live>")],
    "READ_TIME": [
        (r"read [0-9.]+ s, analysed [0-9.]+ s", "read <live> s, analysed <live> s"),
        (r"(read and analysed \d+ traces? in )[0-9.]+ s", r"\1<live> s"),
        (rf'("?(?:read_seconds|analyse_seconds)"?[:=] ?|"seconds": |, seconds=){N}', r"\1<live>"),
    ],
    "DOCTOR_TIME": [
        (rf'("?elapsed_s"?[:=] ?){N}', r"\1<live>"),
        (r"(\] in )[0-9.]+ s", r"\1<live> s"),
    ],
    "LSTSQ_TIME": [  # every duration gpuprobe.lstsq prints is measured live
        (rf'("?(?:{"|".join(LSTSQ_KEYS)})"?[:=] ?){N}', r"\1<live>"),
        (r"\b[0-9]+\.[0-9]+ s\b", "<live> s"),
        (r"CPU used [0-9.]+ core", "CPU used <live> core"),
    ],
}

WORK = Path("/tmp/gpuprobe-golden")
FAKE_CLOCK = "GOLDEN_FAKE_CLOCK=10"  # s per call: dwarfs real CPU time in the host-load checks

SITECUSTOMIZE = f"""
import json, os, sys
if os.environ.get("GOLDEN_FAKE_NVML"):
    sys.path.insert(0, os.environ["GOLDEN_TESTS"])
    import {FAKE_NVML} as _fake
    with open(os.environ["GOLDEN_FAKE_NVML"]) as f:
        _snap = json.load(f)
    for _g in _snap.get("gpus") or []:
        for _p in _g.get("processes") or []:
            _p["pid"] = 99_999_999  # above any pid_max: no live process lends it a name
    _mod = _fake.load_pynvml()
    _fake.attach(_mod, _fake.FakeNvmlLibrary(_snap))
    sys.modules["pynvml"] = _mod
    del sys.path[0]
if os.environ.get("GOLDEN_FAKE_CLOCK"):
    import itertools, time
    _ticks, _step = itertools.count(1), float(os.environ["GOLDEN_FAKE_CLOCK"])
    time.perf_counter = lambda: next(_ticks) * _step
"""

PRELUDE = f"""
import dataclasses, importlib, json, sys, time, types
from pathlib import Path
import gpuprobe
WORK = Path({str(WORK)!r})
INTERNALS = {INTERNALS!r}
def internal(name):
    module, _, attr = INTERNALS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
def show(label, r):
    print(f"== {{label}} repr", repr(r), f"== {{label}} str", str(r), sep="\\n")
    if hasattr(r, "_repr_html_"):
        print(f"== {{label}} _repr_html_", r._repr_html_(), sep="\\n")
    if hasattr(r, "to_dict"):
        print(f"== {{label}} to_dict", json.dumps(r.to_dict(), indent=1, default=str), sep="\\n")
"""

SNIPPETS: dict[str, str] = {
    "api_snapshots": """
for name in ("h200", "t4", "rtx5090_torch_cu124"):
    inv = gpuprobe.Inventory.from_dict(json.loads((WORK / f"in/data/{name}.json").read_text()))
    show(f"Inventory {name}", inv)
    rep = gpuprobe.doctor(inventory=inv)
    show(f"DoctorReport {name}", rep)
    print("exit_code", rep.exit_code, [f.id for f in rep.findings])
""",
    "api_diagnose": """
t = WORK / "in/traces"
r50, r50w0 = t / "kineto_r50_nw4_a.pt.trace.json.gz", t / "kineto_r50_nw0_a.pt.trace.json.gz"
for path in (r50, t / "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"):
    d = gpuprobe.diagnose(path)
    show(f"Diagnosis {path.name}", d)
    print("round trip", gpuprobe.Diagnosis.from_dict(json.loads(json.dumps(d.to_dict()))) == d)
show("Diagnosis steps 6..8", gpuprobe.diagnose(r50, steps="6..8"))
show("Comparison", gpuprobe.compare(r50w0, r50))
show("MultiRankDiagnosis", gpuprobe.diagnose_ranks(WORK / "in/data/diagnose/hta_sampled"))
""",
    "api_monitor": """
for name in ("healthy", "e9_starved", "throttled"):
    d = WORK / f"in/monitor/{name}"
    rec = gpuprobe.Recording(d, types.SimpleNamespace(samples=60))
    rec.done = True
    show(f"Recording {name}", rec)
    s = rec.summary
    show(f"RunResult {name}", gpuprobe.RunResult(
        exit_code=s.exit_code or 0, out_dir=d, timeline=d / "timeline.jsonl",
        duration_s=s.duration_s, samples=s.samples, sampler_cpu_s=s.sampler_cpu_s, signals=(),
        summary=s, files=(d / "timeline.jsonl",)))
""",
    "api_bench": """
r = gpuprobe.bench(["launch", "scale", "matmul", "crossover", "sync"], ["numpy"], quick=True,
                   save=False, isolate=False)
show("BenchReport", r)
print("round trip", gpuprobe.BenchReport.from_dict(json.loads(json.dumps(r.to_dict()))) == r)
""",
    "api_fit": """
clock = [1000.0]
time.perf_counter = lambda: clock[0]
def step(b):
    if b > 300:
        raise MemoryError(f"Unable to allocate {b * 4} MiB for an array with shape ({b}, 2**20)")
    clock[0] += 50.0 + 0.5 * b
show("FitResult", gpuprobe.fit(step, range(1, 1025), repeats=2, device="cpu"))
show("FitResult no curve", gpuprobe.fit(step, [8, 64, 512], repeats=1, curve=False))
""",
    "api_precision": """
import torch
clock = [1000.0]
time.perf_counter = lambda: clock[0]
COST = {torch.float32: 40.0, torch.bfloat16: 25.0, torch.float16: 30.0}
class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 16)
    def forward(self, x):
        y = self.l2(torch.relu(self.l1(x)))
        clock[0] += 20.0 if "quantized" in type(self.l1).__module__ else COST.get(y.dtype, 35.0)
        return y
torch.manual_seed(0)
show("PrecisionReport", gpuprobe.precision_sweep(Mlp(), torch.randn(32, 64), budget_s=200.0))
""",
    "api_explain_oom": """
import torch
msg = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
       "of which 1.25 GiB is free. Process 4242 has 77.80 GiB memory in use. Of the allocated "
       "memory 70.01 GiB is allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but "
       "unallocated. If reserved but unallocated memory is large try setting "
       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
show("OomReport torch", gpuprobe.explain_oom(torch.OutOfMemoryError(msg)))
show("OomReport numpy", gpuprobe.explain_oom(MemoryError(
    "Unable to allocate 8.00 GiB for an array with shape (1073741824,) and data type float64")))
""",
    "api_lstsq": """
import numpy as np
rng = np.random.default_rng(0)
A = rng.standard_normal((400, 6))
b = A @ np.arange(6.0) + 0.01 * rng.standard_normal(400)
for method in ("auto", "normal", "tsqr"):
    x, rep = gpuprobe.lstsq(A, b, method=method, reference="numpy")
    show(f"LstsqReport {method}", rep)
    print("x", np.array2string(x, precision=10))
""",
    "recorded_scale": """
data = json.loads((WORK / "in/lstsq_scaling.json").read_text())
for key in ("well_conditioned", "e6"):
    show(f"ScaleResult {key}", internal("ScaleResult").from_dict(data[key]))
""",
    "recorded_pack": """
PackReport, judge = internal("PackReport"), internal("pack_judge")
def level(n, wall, rate, util=None):
    copies = [dict(index=i, wall_s=wall, exit_code=0, cpu_s=4.0, rate=rate) for i in range(n)]
    return dict(n=n, copies=copies, wall_s=wall + 0.5, mean_copy_s=wall, throughput=n * rate,
                slowdown=wall / 10, samples=8, cpu_percent=80.0 * n, gpu_util_percent=util)
cpu = dict(command=["python", "train.py"], unit="rate (--rate, summed)", recommended=2, cores=2,
           levels=[level(1, 10.0, 5.0), level(2, 11.0, 4.6), level(4, 21.0, 2.4)],
           load_average=[0.5, 0.4, 0.3], rate_regex="([0-9.]+) it/s",
           sharing={"driver_note": "NVMLError_LibraryNotFound: NVML Shared Library Not Found"})
gpu = dict(cpu, unit="jobs/h", rate_regex=None, recommended=3, cores=32,
           levels=[level(1, 10.0, 360.0, 31.0), level(3, 12.0, 300.0, 88.0)],
           sharing={"gpus": 1, "gpu_names": ["NVIDIA H200"], "mig_capable": [0]})
for name, d in (("cpu", cpu), ("gpu", gpu)):
    r = PackReport.from_dict(d)
    show(f"PackReport {name}", dataclasses.replace(r, findings=tuple(judge(r))))
""",
}

TRACES = {  # /work/shared/traces (see its MANIFEST.tsv): placeholder -> file
    "r50": "kineto_r50_nw4_a.pt.trace.json.gz",  # V100 ResNet-50, DataLoader workers
    "r50w0": "kineto_r50_nw0_a.pt.trace.json.gz",  # the same without workers
    "r50jan": "kineto_r50_nw0_2021jan.pt.trace.json.gz",  # a bare JSON array
    "rtx2080": "param_resnet_kineto.json.gz",
    "a100": "hta_negative_queue_length_values_check__rank0.json.gz",  # CUDA graphs
    "gp100": "hta_with_gpu_user_annotation__step_based_trace_2543932.json.gz",
    "cpu_only": "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "mi250": "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "mtia": "hta_mtia_inference_trace__mtia_inference_rank_0.json.gz",  # not a GPU
    "before": "kineto_docs_before_fix_trace.json.gz",
    "after": "kineto_docs_after_fix_trace.json.gz",
    "dlrm0": "param_dlrm_worker0_step_12.1694128201545.pt.trace.json.gz",
    "dlrm3": "param_dlrm_worker3_step_12.1694128201557.pt.trace.json.gz",
    "et": "hta_execution_trace__benchmark_simple_add_et.json.gz",  # not Kineto
    "memtl": "hta_memory_analysis__memory_timeline.raw.gz",  # not Kineto
}
PLACES = {k: f"{WORK}/in/traces/{v}" for k, v in TRACES.items()} | {
    "d": f"{WORK}/in/data/diagnose",  # tests/data/diagnose
    "data": f"{WORK}/in/data",  # tests/data
    "mon": f"{WORK}/in/monitor",  # tests/data/monitor/NAME.jsonl as NAME/timeline.jsonl
    "in": f"{WORK}/in",
    "out": f"{WORK}/out",
    "tf": f"{WORK}/in/data/diagnose/tracelens_h100_timesformer_step6.json.gz",
    "evsync": f"{WORK}/in/data/diagnose/hta_critical_path__cuda_event_sync_multi_stream__"
    "event_sync_trace.json.gz",
    "hta_diff": f"{WORK}/in/data/diagnose/hta_trace_diff_control_step1012.json.gz "
    f"{WORK}/in/data/diagnose/hta_trace_diff_test_step1012.json.gz",
    "bench": "bench launch scale matmul crossover sync --backend numpy --quick --no-save",
    "clock": FAKE_CLOCK,
    "nvml_h200": f"GOLDEN_FAKE_NVML={WORK}/in/data/h200.json",
}
# name | arguments of `gpuprobe` (-c NAME: a snippet) | normalisations | environment
CASES = """
help | --help
version | --version
help_scale_lstsq | scale lstsq --help
info_live | info | NOW FREE_MEMORY
info_live_json | info --json | NOW FREE_MEMORY
info_fake_nvml_h200_runtime_json | info --json | NOW FREE_MEMORY | {nvml_h200}
diagnose_r50_json | diagnose --json {r50} | READ_TIME
diagnose_r50_kernels | diagnose --kernels {r50} | READ_TIME
diagnose_r50_verbose | diagnose -v {r50} | READ_TIME
diagnose_r50_steps | diagnose --steps 6..8 {r50} | READ_TIME
diagnose_r50_html | diagnose --html {out}/r50.html {r50} | READ_TIME
diagnose_r50_html_step | diagnose --html {out}/s7.html --html-step 7 --steps 5..9 {r50} | READ_TIME
diagnose_a100_json | diagnose --json {a100} | READ_TIME
diagnose_gp100_kernels | diagnose --kernels {gp100} | READ_TIME
diagnose_cpu_only_json | diagnose --json {cpu_only} | READ_TIME
diagnose_timesformer | diagnose {tf} | READ_TIME
diagnose_timesformer_kernels_json | diagnose --kernels --json {tf} | READ_TIME
diagnose_vllm_graphs | diagnose {d}/tracelens_vllm_decode_graph_capture.json.gz | READ_TIME
diagnose_two_events | diagnose {d}/hta_large_integer_trace__rank-70.pt.trace.json.gz | READ_TIME
diagnose_event_sync | diagnose {evsync} | READ_TIME
compare_r50 | diagnose --compare {r50w0} {r50} | READ_TIME
compare_r50_kernels | diagnose --compare {r50w0} {r50} --kernels | READ_TIME
compare_r50_json | diagnose --json --compare {r50w0} {r50} | READ_TIME
compare_docs | diagnose --compare {before} {after} | READ_TIME
compare_hta_diff_kernels | diagnose --kernels --compare {hta_diff} | READ_TIME
ranks_dlrm8 | diagnose {d}/dlrm8 | READ_TIME
ranks_dlrm8_json | diagnose --json {d}/dlrm8 | READ_TIME
ranks_dlrm8_kernels | diagnose --kernels {d}/dlrm8 | READ_TIME
ranks_hta_sampled_verbose | diagnose -v {d}/hta_sampled | READ_TIME
ranks_two_files | diagnose {dlrm0} {dlrm3} | READ_TIME
plot_throttled_png | plot --out {out}/throttled.png {mon}/throttled
bench_fake_clock | {bench} | OTHERS_LOAD | {clock}
bench_fake_clock_json | {bench} --json | NOW OTHERS_LOAD | {clock}
precision_fake_clock | precision --device cpu --dtypes fp32,bf16,int8 | OTHERS_LOAD | {clock}
api_snapshots | -c api_snapshots | DOCTOR_TIME
api_diagnose | -c api_diagnose | READ_TIME
api_monitor | -c api_monitor
api_bench | -c api_bench | NOW OTHERS_LOAD | {clock}
api_fit | -c api_fit | OTHERS_LOAD
api_precision | -c api_precision | OTHERS_LOAD
api_explain_oom | -c api_explain_oom | FREE_MEMORY
api_explain_oom_fake_nvml | -c api_explain_oom | FREE_MEMORY | {nvml_h200}
api_lstsq | -c api_lstsq | LSTSQ_TIME
recorded_scale | -c recorded_scale
recorded_pack | -c recorded_pack
bad_missing_trace | diagnose {in}/nosuch.json
bad_not_kineto | diagnose {et}
bad_not_kineto_events | diagnose {memtl}
bad_not_json | diagnose {in}/garbage.json
bad_no_trace | diagnose
bad_steps | diagnose --steps x..y {r50}
bad_compare_one | diagnose --compare {r50}
bad_html_folder | diagnose --html {out}/x.html {d}/dlrm8
bad_info_from_missing | info --from {in}/nosuch.json
bad_doctor_from_empty | doctor --from ''
bad_doctor_from_garbage | doctor --from {in}/garbage.json
bad_plot_missing | plot {in}/nosuch
bad_plot_out | plot --out {out}/x.txt {mon}/healthy
bad_bench_budget | bench --budget 100
bad_bench_plot | bench --plot x.txt
bad_bench_workload | bench nosuch
bad_command | frobnicate
bad_option | info --bogus
bad_run_no_command | run
bad_run_hz | run --hz 100 -- true
bad_run_missing_command | run --out {out}/run -- {in}/nosuch
bad_top_interval | top --interval 0
bad_export_port | export --port -1
bad_fit_max | fit --max 0
bad_fit_memory_limit | fit --memory-limit 1XB
bad_pack_zero | pack -n 0 -- true
bad_pack_rate | pack --rate '(' -- true
bad_precision_dtypes | precision --dtypes fp99
bad_scale_no_target | scale
bad_scale_workers | scale lstsq --workers 99
"""
COMMANDS = "info doctor bench run top plot export diagnose scale fit pack precision"
CASES += "".join(f"help_{c} | {c} --help\n" for c in COMMANDS.split())
CASES += "".join(f"diagnose_{k} | diagnose {{{k}}} | READ_TIME\n" for k in list(TRACES)[:9])
for s in ("h200", "t4", "rtx5090_torch_cu124"):
    for j, sfx in (("", ""), (" --json", "_json")):
        CASES += f"info_from_{s}{sfx} | info --from {{data}}/{s}.json{j}\n"
        CASES += f"doctor_from_{s}{sfx} | doctor --from {{data}}/{s}.json{j} | DOCTOR_TIME\n"
        CASES += (
            f"info_fake_nvml_{s}{sfx} | info --frameworks static{j} | NOW FREE_MEMORY"
            f" | GOLDEN_FAKE_NVML={{data}}/{s}.json\n"
        )
for m in ("healthy", "e9_starved", "throttled"):
    CASES += f"plot_{m} | plot {{mon}}/{m}\n"
    CASES += f"plot_{m}_json_html | plot --json --out {{out}}/{m}.html {{mon}}/{m}/timeline.jsonl\n"


class Case(NamedTuple):
    name: str
    args: list[str]  # after `python -m gpuprobe`, or ["-c", snippet name]
    norm: tuple[str, ...]
    env: dict[str, str]


def build_cases() -> list[Case]:
    cases = []
    for line in CASES.strip().splitlines():
        name, args, norm, env = ([c.strip() for c in line.split(" | ")] + ["", ""])[:4]
        env_vars = dict(kv.split("=", 1) for kv in env.format(**PLACES).split())
        cases.append(Case(name, shlex.split(args.format(**PLACES)), tuple(norm.split()), env_vars))
    assert len({c.name for c in cases}) == len(cases), "case names must be unique"
    return sorted(cases, key=lambda c: c.name)


def prepare(repo: Path, traces: Path) -> None:
    """WORK from scratch: home, tmp, out, the sitecustomize, and copies of every input."""
    shutil.rmtree(WORK, ignore_errors=True)
    for sub in ("home", "tmp", "out", "site", "in/traces", "in/monitor"):
        (WORK / sub).mkdir(parents=True)
    (WORK / "site/sitecustomize.py").write_text(SITECUSTOMIZE)
    data = repo / "tests/data"
    shutil.copytree(data, WORK / "in/data", ignore=shutil.ignore_patterns("*.py", "nist"))
    for name in TRACES.values():
        shutil.copy(traces / name, WORK / "in/traces" / name)
    for tl in sorted((data / "monitor").glob("*.jsonl")):
        (WORK / "in/monitor" / tl.stem).mkdir()
        shutil.copy(tl, WORK / "in/monitor" / tl.stem / "timeline.jsonl")
    shutil.copy(repo / "benchmarks/results/lstsq_scaling.json", WORK / "in")
    (WORK / "in/garbage.json").write_text("garbage\n")


def environment(case: Case, src: Path, repo: Path) -> dict[str, str]:
    """The whole environment of a case: nothing is inherited but PATH."""
    home, path = WORK / "home", os.environ.get("PATH", "/usr/bin:/bin")
    env = dict(PATH=path, HOME=str(home), TMPDIR=str(WORK / "tmp"), TZ="UTC", COLUMNS="80")
    env |= dict(LANG="C.UTF-8", LC_ALL="C.UTF-8", PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    env |= dict(PYTHONPATH=f"{src}{os.pathsep}{WORK / 'site'}", MPLBACKEND="Agg")
    env |= dict(GPUPROBE_DATA_DIR=str(home / "gpuprobe"), MPLCONFIGDIR=str(home / "mpl"))
    return env | dict(GOLDEN_TESTS=str(repo / "tests"), **case.env)


def run_case(case: Case, python: str, src: Path, repo: Path, out: Path) -> tuple[str, int]:
    """Run one case and write its file; returns (name, exit code), -1 when it timed out."""
    env = environment(case, src, repo)
    if case.args[0] == "-c":
        argv, shown = [python, "-c", PRELUDE + SNIPPETS[case.args[1]]], f"snippet {case.args[1]}"
    else:
        argv, shown = [python, "-m", "gpuprobe", *case.args], "gpuprobe " + shlex.join(case.args)
    try:
        p = subprocess.run(argv, cwd=WORK, env=env, capture_output=True, timeout=300)
        code, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr = -1, exc.stdout or b"", (exc.stderr or b"") + b"\n<timed out>"
    parts = [(k, v.decode(errors="replace")) for k, v in (("stdout", stdout), ("stderr", stderr))]
    written = [Path(a) for a in case.args if a.startswith(f"{WORK}/out/")]
    if case.args[0] == "plot" and not written and case.args[-1].startswith(str(WORK)):
        written = [Path(case.args[-1]) / f"report.{x}" for x in ("html", "png")]  # beside it
    for f in written:
        label = f"file {f.relative_to(WORK)}"
        if not f.exists():
            parts.append((label, "<not written>"))
        elif f.is_dir():
            parts.append((label, "folder: " + " ".join(sorted(p.name for p in f.iterdir()))))
        elif f.suffix == ".png":
            blob = f.read_bytes()
            parts.append((label, f"{len(blob)} bytes, sha256 {hashlib.sha256(blob).hexdigest()}"))
        else:
            parts.append((label, f.read_text(encoding="utf-8", errors="replace")))
    applied = []
    for i, (label, text) in enumerate(parts):
        for name in case.norm:
            total = 0
            for pattern, repl in NORMALISE[name]:
                text, n = re.subn(pattern, repl, text, flags=re.M)
                total += n
            if total:
                applied.append(f"{name} x{total} in {label}")
        parts[i] = (label, text)
    env_text = " ".join(f"{k}={v}" for k, v in sorted(case.env.items())) or "-"
    head = f"case: {case.name}\ncommand: {shown}\nenv: {env_text}\nexit code: {code}\n"
    head += f"normalised: {'; '.join(applied) or 'nothing'}\n"
    body = "".join(f"\n===== {label} =====\n{text}" for label, text in parts)
    (out / f"{case.name}.txt").write_text(head + body, encoding="utf-8")
    return case.name, code


def compare(a: Path, b: Path, lines: int = 40) -> int:
    """Print which cases differ, with the first lines of each one's unified diff; 1 if any."""
    names = sorted({p.name for p in a.glob("*.txt")} | {p.name for p in b.glob("*.txt")})
    differ = []
    for name in names:
        ta, tb = (
            (d / name).read_text("utf-8") if (d / name).exists() else "<missing>" for d in (a, b)
        )
        if ta != tb:
            differ.append(name)
            diff = difflib.unified_diff(
                ta.splitlines(), tb.splitlines(), f"{a}/{name}", f"{b}/{name}", "", "", 2
            )
            for i, line in enumerate(diff):
                print(line[:300] if i < lines else "... (diff cut)")
                if i == lines:
                    break
    print(
        f"{len(differ)} of {len(names)} cases differ: {', '.join(differ)}"
        if differ
        else f"all {len(names)} cases identical"
    )
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--src", type=Path, help="the src folder of the checkout to test")
    ap.add_argument("--out", type=Path, help="the folder to write, one file per case")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"))
    here = Path(__file__).resolve().parents[1]
    ap.add_argument("--repo", type=Path, default=here, help="inputs and venv (default: here)")
    ap.add_argument("--traces", type=Path, default=Path("/work/shared/traces"))
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--only", metavar="REGEX", help="only the cases whose name matches")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not (args.src and args.out):
        ap.error("give --src DIR --out DIR, or --compare DIR_A DIR_B")
    repo, t0 = args.repo.resolve(), time.perf_counter()
    python = str(repo / ".venv/bin/python")
    python = python if Path(python).exists() else sys.executable
    prepare(repo, args.traces)
    probe = Case("probe", [], (), {})
    cmd = [python, "-c", "import gpuprobe; print(gpuprobe.__file__)"]
    found = subprocess.run(
        cmd, env=environment(probe, args.src.resolve(), repo), text=True, capture_output=True
    ).stdout.strip()
    if not found.startswith(str(args.src.resolve())):
        sys.exit(f"gpuprobe is imported from {found or 'nowhere'}, not from {args.src}")
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.txt"):  # a case file from an earlier run
        old.unlink()
    cases = [c for c in build_cases() if not args.only or re.search(args.only, c.name)]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = pool.map(lambda c: run_case(c, python, args.src.resolve(), repo, args.out), cases)
        stuck = [name for name, code in runs if code < 0]
    took = time.perf_counter() - t0
    print(f"{len(cases)} cases of {args.src} into {args.out} with {python}: {took:.0f} s")
    if stuck:
        print(f"timed out: {', '.join(stuck)}")
    return 1 if stuck else 0


if __name__ == "__main__":
    sys.exit(main())
