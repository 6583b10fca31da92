"""The records ``gpuprobe bench`` produces: one :class:`BenchResult` per workload, case, backend,
device and size; the :class:`BenchReport` that holds them with the machine's
:class:`Environment`, the findings and, with ``--compare``, the :class:`BenchComparison` with the last
run on this machine.

Units: seconds for times, GB/s (10^9 bytes per second) for bandwidth, TFLOP/s (TOP/s for int8)
for compute, bytes for sizes of copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, status_counts
from gpuprobe.core.records import Record
from gpuprobe.platform.measurement import Measurement

__all__ = [
    "OUTLIER_RATIO",
    "BenchComparison",
    "BenchReport",
    "BenchResult",
    "Change",
    "Conditions",
    "Environment",
    "ResultStatus",
    "WorkerRun",
]

ResultStatus = Literal["ok", "skipped", "out-of-memory", "error"]


@dataclass(frozen=True)
class Conditions(Record):
    """What NVML read on the card while a result was measured (sampled every 0.1 s)."""

    samples: int = 0
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_max: int | None = None
    mem_clock_mhz_max: int | None = None
    temperature_c_max: int | None = None
    power_w_max: float | None = None
    clock_event_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchResult(Record):
    """One measured point: ``workload`` (``matmul``), ``case`` (``bfloat16``, ``h2d-pinned``),
    on ``framework`` and ``device``, at ``size`` (in ``size_unit``: ``n`` for an n×n matrix,
    ``elements``, ``bytes``, ``steps``).

    ``values`` holds the derived figures: ``gbs`` (GB/s), ``tflops`` (TFLOP/s at the median),
    ``rel_error`` (‖out − ref‖/‖ref‖ against float64), ``pct_peak`` (% of the hardware's peak,
    added by the runner), ``note_s`` (the source note's own figure), and workload-specific ones.
    """

    workload: str
    case: str
    framework: str
    device: str
    size: int | None = None
    size_unit: str = ""
    status: ResultStatus = "ok"
    reason: str | None = None
    measurement: Measurement | None = None
    values: dict[str, float | None] = field(default_factory=dict)
    conditions: Conditions | None = None

    @property
    def ok(self) -> bool:
        """True when the point was measured."""
        return self.status == "ok" and self.measurement is not None

    @property
    def key(self) -> str:
        """What identifies this point across runs: ``matmul/float32/torch/cuda:0/4096``."""
        return f"{self.workload}/{self.case}/{self.framework}/{self.device}/{self.size}"

    @property
    def seconds(self) -> float | None:
        """The median time in seconds."""
        return self.measurement.median if self.measurement else None

    @property
    def tflops_unit(self) -> str:
        """The unit of ``values["tflops"]``: ``TOP/s`` for integer products, else ``TFLOP/s``."""
        return "TOP/s" if self.case == "int8" else "TFLOP/s"

    def headline(self) -> tuple[str, float, str, bool] | None:
        """(metric, value, unit, higher is better): TFLOP/s, else GB/s, else the median time."""
        if not self.ok or self.measurement is None:
            return None
        for name, unit in (("tflops", self.tflops_unit), ("gbs", "GB/s")):
            v = self.values.get(name)
            if v is not None:
                return name, float(v), unit, True
        return "seconds", self.measurement.median, "s", False


@dataclass(frozen=True)
class WorkerRun(Record):
    """One framework on one device, run in its own process: what it ran on and how it ended."""

    framework: str
    device: str
    environment: dict[str, str | int | float | None] = field(default_factory=dict)
    error: str | None = None
    elapsed_s: float | None = None
    # CPU cores other processes kept busy while this worker ran (host busy time less the worker's
    # own): a loaded host slows CPU figures, multi-threaded ones most
    others_cores: float | None = None


@dataclass(frozen=True)
class Environment(Record):
    """What results depend on besides the code: the machine, its cards, driver and frameworks.
    Runs on the same ``hostname`` are compared; the rest says what changed between them."""

    hostname: str | None = None
    cpu: str | None = None
    gpus: tuple[str, ...] = ()  # "NVIDIA H200 GPU-0f3c…"
    driver: str | None = None
    cuda_driver: str | None = None
    frameworks: dict[str, str] = field(default_factory=dict)  # name -> version
    blas: str | None = None
    threads: int | None = None

    def changes_from(self, old: Environment) -> tuple[str, ...]:
        """What differs from ``old``, one line per change: ``driver: 550.54 → 560.28``."""
        out = []
        if old.gpus != self.gpus:
            out.append(f"card: {', '.join(old.gpus) or 'none'} → {', '.join(self.gpus) or 'none'}")
        for label, a, b in (
            ("driver", old.driver, self.driver),
            ("CUDA (driver)", old.cuda_driver, self.cuda_driver),
            ("cpu", old.cpu, self.cpu),
            ("BLAS", old.blas, self.blas),
            ("threads", old.threads, self.threads),
        ):
            if label in ("BLAS", "threads") and (a is None or b is None):
                continue  # numpy was not benchmarked in one of the runs: unknown, not changed
            if a != b:
                out.append(
                    f"{label}: {a if a is not None else 'n/a'} → {b if b is not None else 'n/a'}"
                )
        # a framework's version is known only where it was benchmarked: one that a run left out
        # (--backend) is not "not installed"
        for name in sorted(set(old.frameworks) & set(self.frameworks)):
            a, b = old.frameworks[name], self.frameworks[name]
            if a != b:
                out.append(f"{name}: {a} → {b}")
        return tuple(out)


# A headline figure that moved by this factor or more either way is an outlier: no tuning or
# upgrade moves one point 10×; a cold first run, another job on the card, clocks stuck low or
# a broken driver does (gpuprobe's choice: an order of magnitude). It is neither better nor worse.
OUTLIER_RATIO = 10.0


@dataclass(frozen=True)
class Change(Record):
    """One result's headline figure, last run vs this run (``ratio`` = new / old)."""

    key: str
    metric: str
    unit: str
    old: float
    new: float
    ratio: float
    better: bool | None = None  # None when within the noise band, or an outlier
    # moved by OUTLIER_RATIO× or more: a measurement problem (a cold run, another job,
    # a broken driver), not a change to call better or worse
    outlier: bool = False


@dataclass(frozen=True)
class BenchComparison(Record):
    """This run against the previous one on the same machine."""

    previous_run: int | None = None
    previous_created: str | None = None
    environment_changes: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()
    note: str | None = None  # e.g. "no earlier run on this machine"


@dataclass(frozen=True)
class BenchReport(Record):
    """Everything one ``gpuprobe bench`` measured, judged, and (with compare) set against the
    previous run on this machine."""

    workloads: tuple[str, ...] = ()
    quick: bool = False
    results: tuple[BenchResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    workers: tuple[WorkerRun, ...] = ()
    environment: Environment = field(default_factory=Environment)
    comparison: BenchComparison | None = None
    created: str = ""
    elapsed_s: float | None = None
    run_id: int | None = None  # row in the local history, when saved
    history_note: str | None = None  # why the history could not be saved or read, if so

    @property
    def exit_code(self) -> int:
        """0 unless a finding failed (a wrong result, a crashed worker): then 1."""
        return 1 if any(f.failed for f in self.findings) else 0

    def select(
        self,
        workload: str | None = None,
        case: str | None = None,
        framework: str | None = None,
        device: str | None = None,
        *,
        ok: bool = False,
    ) -> list[BenchResult]:
        """The results matching every given field (``ok``: measured ones only)."""
        return [
            r
            for r in self.results
            if (workload is None or r.workload == workload)
            and (case is None or r.case == case)
            and (framework is None or r.framework == framework)
            and (device is None or r.device == device)
            and (not ok or r.ok)
        ]

    def finding(self, finding_id: str) -> Finding | None:
        """The first finding with ``finding_id``."""
        return next((f for f in self.findings if f.id == finding_id), None)

    def plot(self, path: str | Path | None = None) -> Any:
        """The charts (crossover, bandwidth vs size, roofline: those with results) as a
        matplotlib figure, which Jupyter shows inline; with ``path``, written there in the format
        its suffix names (.png, .svg, .pdf, .jpg) and the path returned."""
        return render.plot(self, path)

    def __repr__(self) -> str:
        pairs = sorted({f"{w.framework} {w.device}" for w in self.workers})
        measured = sum(r.ok for r in self.results)
        return render.one_line(
            "BenchReport",
            f"{', '.join(self.workloads)} on {', '.join(pairs) or 'nothing'}: "
            f"{measured}/{len(self.results)} measured, {self.elapsed_s or 0:.1f} s; "
            f"findings: {status_counts(self.findings)}",
        )

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
