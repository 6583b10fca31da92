"""Performance rules: a real kernel on every visible GPU through each framework, checked against
NumPy in float64 and timed against the CPU; under that load, the PCIe link, clock-event reasons
and pinned host-to-device bandwidth. On a machine with no GPU, the CPU measured on E1.
E-codes: docs/experiments.md. The kernels are run by :mod:`gpuprobe.tools.doctor.engine`; these
rules judge their results (:attr:`DoctorContext.workers`).
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.core.units import seconds, size
from gpuprobe.platform.frameworks import FRAMEWORKS
from gpuprobe.platform.hardware.specs import pcie_link_gbs
from gpuprobe.platform.hardware.types import Gpu, GpuSample
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.model import DoctorContext
from gpuprobe.tools.doctor.worker import E1_HOST_BYTES, WorkerResult

__all__ = [
    "E1_NOTE",
    "E1_REL_ERR_FAIL",
    "MATMUL_REL_ERR_FAIL",
    "UNDER_LOAD_IDS",
    "judge_cpu",
    "judge_gpus",
]

GROUP = "performance"

# Relative error ‖out−ref‖/‖ref‖ against float64 above which a float32 result is wrong. TF32
# matmuls land near 3e-4 and bf16 near 1e-2 (the device tool's METHOD.md); above 1e-2 is a bug.
MATMUL_REL_ERR_FAIL = 1e-2
E1_REL_ERR_FAIL = 1e-3  # a float32 sum of 10^6-10^8 positive terms stays far below this
GPU_SPEEDUP_WARN = 1.0  # a GPU not faster than the CPU on E1 or a 4096³ matmul is broken
# A "float32" matmul faster than this many times the card's float32 peak did not run in float32:
# tensor cores (TF32, bf16 passes) did the work. The H200 measured JAX's default at 239 TFLOP/s
# against its 67 TFLOP/s float32 peak; torch and CuPy (full float32) at 51 TFLOP/s, 0.77 of it.
FP32_PEAK_OVERSHOOT = 1.05
FULL_FP32 = {
    "torch": "torch.set_float32_matmul_precision('highest')",
    "jax": "jax.config.update('jax_default_matmul_precision', 'highest')",
    "cupy": "CUPY_TF32=0 (CuPy's default)",
}
PINNED_H2D_WARN_FRACTION = 0.5  # of the link's theoretical rate; healthy links reach 60-87 %
# (public measurements: T4 9.7/15.8 GB/s; A100 25/31.5, nvbandwidth README and issue #42;
# H800 ~55/63 GB/s, SM copies 35 H2D / 53 D2H in NVIDIA/nvbandwidth#24)
THROTTLE_WARN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)  # a power cap under full load is normal (sw_power_cap): shown as info
# E1 as the note measured it (docs/experiments.md#e1: GCP n1-standard-4 with a T4).
E1_NOTE = {"numpy float64": 4.12, "torch cpu float32": 0.738, "torch cuda float32": 0.0189}
E1_NOTE_N = 10_000  # the note's n: E1 sums over an n×n array


# The frameworks a kernel check runs through: NumPy (the CPU baseline) and every GPU framework.
_KERNEL_FRAMEWORKS = ("numpy", *FRAMEWORKS)
# What a GPU's link and clocks did under load: the same card seen through two frameworks gives
# the same finding twice, and judge_gpus keeps the first.
UNDER_LOAD_IDS: tuple[str, ...] = ("pcie-link-downgraded", "gpu-throttled", "gpu-power-capped")
# What belongs to the card, not to the framework that measured it: said once per GPU (the H200's
# doctor printed its pinned host-to-device rate twice, from torch and from CuPy).
ONCE_PER_GPU_IDS: tuple[str, ...] = (*UNDER_LOAD_IDS, "pcie-h2d", "pcie-h2d-slow")


def _ids(*suffixes: str) -> tuple[str, ...]:
    return tuple(f"{fw}-{s}" for fw in _KERNEL_FRAMEWORKS for s in suffixes)


def _kernels_ran(ctx: DoctorContext) -> bool:
    return ctx.workers is not None


def _ev_time(name: str, seconds: float | None) -> Evidence:
    return Evidence(name, round(seconds * 1e3, 3) if seconds is not None else None, "ms")


def _correctness(r: WorkerResult, subject: str) -> list[Finding]:
    out = []
    for check, limit in (("matmul-float32", MATMUL_REL_ERR_FAIL), ("e1-float32", E1_REL_ERR_FAIL)):
        err = r.rel_errors.get(check)
        if err is not None and not err <= limit:
            out.append(
                Finding(
                    f"{r.framework}-wrong-result",
                    Status.FAIL,
                    f"{subject}: {check} differs from NumPy float64 by {err:.3g} (limit {limit:g})",
                    (Evidence("relative_error", err), Evidence("limit", limit)),
                    fix="run 'gpuprobe doctor' again; if it repeats, the card or driver is faulty "
                    "(check ECC with 'nvidia-smi -q -d ECC')",
                    group=GROUP,
                    subject=subject,
                )
            )
    return out


def _note_text(n: object, meta: dict[str, object] | None = None) -> str:
    """How this run's E1 compares with the note's: the same size, or says it differs (and why:
    ``--quick``, or the memory this machine had free, ``meta``'s ``asked_n`` and ``available``)."""
    if n == E1_NOTE_N:
        return " (the note: NumPy 4.12 s, torch CPU 738 ms on a 4-vCPU VM)"
    meta = meta or {}
    free = meta.get("available")
    if isinstance(n, int) and n > 0 and "asked_n" in meta and isinstance(free, int):
        return (
            f" (sized to the memory free here, {size(free)}: the note's {E1_NOTE_N}×{E1_NOTE_N} "
            f"would need {size(E1_NOTE_N**2 * E1_HOST_BYTES['numpy'])}; not comparable with the "
            "note's NumPy 4.12 s and torch CPU 738 ms)"
        )
    if isinstance(n, int) and n > 0:
        ratio = (E1_NOTE_N / n) ** 2
        return (
            f" (not comparable with the note's NumPy 4.12 s and torch CPU 738 ms: those were "
            f"{E1_NOTE_N}×{E1_NOTE_N}, {ratio:.3g}× this run's work; run without --quick for "
            "the note's size)"
        )
    return ""


@rule(*_ids("cpu-failed", "wrong-result"), "cpu-e1", applies=_kernels_ran)
def judge_cpu(ctx: DoctorContext) -> list[Finding]:
    """The CPU baseline: E1 on NumPy (float64, as the note) and torch CPU (float32)."""
    results = ctx.workers or ()
    out: list[Finding] = []
    ev: list[Evidence] = []
    parts = []
    sizes: list[object] = []
    for r in results:
        if r.device != "cpu":
            continue
        if r.error and r.out_of_memory:  # the doctor's own arrays did not fit: numpy is fine
            out.append(
                Finding(
                    "cpu-e1",
                    Status.SKIPPED,
                    f"E1 on {r.framework} not measured: the doctor's own arrays did not fit in the "
                    f"memory this process may take ({r.error})",
                    (Evidence("error", r.error), Evidence("available", r.available_memory, "B")),
                    fix="free memory (other processes: see 'gpuprobe top'), or run "
                    "'gpuprobe doctor --quick' (smaller arrays)",
                    group=GROUP,
                    subject="cpu",
                )
            )
            continue
        if r.error:
            out.append(
                Finding(
                    f"{r.framework}-cpu-failed",
                    Status.FAIL,
                    f"{r.framework} on the CPU failed: {r.error}",
                    (Evidence("error", r.error),),
                    group=GROUP,
                )
            )
            continue
        out.extend(_correctness(r, f"{r.framework} cpu"))
        for m in r.measurements:
            if not m.name.startswith("e1-"):
                continue
            label = f"{r.framework} {'cpu ' if r.framework != 'numpy' else ''}{m.metadata['dtype']}"
            ev.append(_ev_time(f"e1 {label}", m.median))
            n_here = m.metadata.get("n")
            if sizes and n_here != sizes[0]:  # a worker that sized its own E1 smaller
                parts.append(f"{label} {seconds(m.median)} at {n_here}×{n_here}")
            else:
                parts.append(f"{label} {seconds(m.median)}")
            sizes.append(n_here)
            note = E1_NOTE.get(label)
            if note is not None and m.metadata.get("n") == E1_NOTE_N:
                ev.append(_ev_time(f"note: {label}", note))
    if parts:
        first = next((m for r in results for m in r.measurements if m.name.startswith("e1-")), None)
        n = first.metadata.get("n") if first is not None else None
        out.append(
            Finding(
                "cpu-e1",
                Status.INFO,
                f"CPU on E1 (sin²/cos² summed over {n}×{n}): "
                + ", ".join(parts)
                + _note_text(n, dict(first.metadata) if first is not None else None),
                (*ev, Evidence("experiment", "docs/experiments.md#e1")),
                group=GROUP,
                subject="cpu",
            )
        )
    return out


def _best_cpu(results: tuple[WorkerResult, ...], name: str) -> float | None:
    times = [
        m.median
        for r in results
        if r.device == "cpu" and not r.error
        for m in r.measurements
        if m.name == name
    ]
    return min(times) if times else None


def _gpu_for(r: WorkerResult, inv: Inventory) -> Gpu | None:
    """The card a worker ran on, by UUID; a framework that names none (JAX) on a machine of one
    GPU ran on that one."""
    if r.uuid is None and len(inv.gpus) == 1 and r.device.startswith("cuda"):
        return inv.gpus[0]
    return next((g for g in inv.gpus if g.uuid and g.uuid == r.uuid), None)


def _under_load(g: Gpu, samples: tuple[GpuSample, ...]) -> list[Finding]:
    subject = g.label
    out: list[Finding] = []
    if not samples:
        return out
    gen = max((s.pcie_gen for s in samples if s.pcie_gen is not None), default=None)
    width = max((s.pcie_width for s in samples if s.pcie_width is not None), default=None)
    max_gen, max_width = g.pcie.gen_max, g.pcie.width_max
    known = None not in (gen, width, max_gen, max_width)
    if known and (gen < max_gen or width < max_width):  # type: ignore[operator]
        out.append(
            Finding(
                "pcie-link-downgraded",
                Status.WARN,
                f"{g.label}: under load the PCIe link runs at gen {gen} x{width}, below its "
                f"maximum gen {max_gen} x{max_width}",
                (
                    Evidence("gen_under_load", gen),
                    Evidence("width_under_load", width),
                    Evidence("gen_max", max_gen),
                    Evidence("width_max", max_width),
                    Evidence("link_gbs_now", pcie_link_gbs(gen, width), "GB/s"),
                    Evidence("link_gbs_max", pcie_link_gbs(max_gen, max_width), "GB/s"),
                ),
                fix="reseat the card in an x16 slot wired to the CPU, check BIOS PCIe settings "
                "and risers; 'nvidia-smi -q -d PCIE' shows the link",
                group=GROUP,
                subject=subject,
            )
        )
    reasons = sorted({r for s in samples for r in (s.clock_event_reasons or ())})
    bad = [r for r in reasons if r in THROTTLE_WARN_REASONS]
    if bad:
        out.append(
            Finding(
                "gpu-throttled",
                Status.WARN,
                f"{g.label}: clocks held down under load by {', '.join(bad)}",
                (
                    Evidence("reasons", ", ".join(reasons)),
                    Evidence("sm_clock", max((s.sm_clock_mhz or 0) for s in samples), "MHz"),
                    Evidence("sm_clock_max", g.sm_clock_max_mhz, "MHz"),
                    Evidence("temperature", max((s.temperature_c or 0) for s in samples), "°C"),
                ),
                fix="improve cooling/airflow, check the power supply and cables; "
                "'nvidia-smi -q -d PERFORMANCE' shows the reasons",
                group=GROUP,
                subject=subject,
            )
        )
    elif "sw_power_cap" in reasons:
        out.append(
            Finding(
                "gpu-power-capped",
                Status.INFO,
                f"{g.label}: under full load the clocks follow the power limit ({g.power_limit_w} W)",
                (
                    Evidence("reasons", ", ".join(reasons)),
                    Evidence("power_limit", g.power_limit_w, "W"),
                ),
                group=GROUP,
                subject=subject,
            )
        )
    return out


@rule(
    *_ids(
        "kernel-failed",
        "wrong-result",
        "gpu-not-faster",
        "gpu-kernels-ok",
        "float32-on-tensor-cores",
    ),
    "pcie-h2d-slow",
    "pcie-h2d",
    *UNDER_LOAD_IDS,
    applies=_kernels_ran,
)
def judge_gpus(ctx: DoctorContext) -> list[Finding]:
    """Findings for each framework on each GPU, in the order the kernels ran. A GPU's link, its
    clocks under load and its host-to-device rate (:data:`ONCE_PER_GPU_IDS`) are reported once, by
    the first framework that saw them, however many frameworks ran on it."""
    workers = ctx.workers or ()
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for r in workers:
        if r.device == "cpu":
            continue
        for f in _judge_gpu(r, workers, ctx.inventory):
            if f.id in ONCE_PER_GPU_IDS:
                if (f.id, f.subject) in seen:
                    continue
                seen.add((f.id, f.subject))
            out.append(f)
    return out


def _not_float32(r: WorkerResult, g: Gpu, tflops: float, subject: str) -> list[Finding]:
    """A float32 matmul above the card's float32 peak: tensor cores did it, in less precision."""
    peak = g.peaks.fp32 if g.peaks else None
    if not peak or tflops <= FP32_PEAK_OVERSHOOT * peak:
        return []
    return [
        Finding(
            f"{r.framework}-float32-on-tensor-cores",
            Status.INFO,
            f"{subject}: a float32 matmul ran at {tflops:.1f} TFLOP/s, {tflops / peak:.1f}× "
            f"the card's float32 peak ({peak:g} TFLOP/s): {r.framework} multiplied it on tensor "
            "cores (TF32: about 3 significant digits), not in float32",
            (
                Evidence("matmul_float32_rate", round(tflops, 2), "TFLOP/s"),
                Evidence("fp32_peak", peak, "TFLOP/s"),
                Evidence("tf32_peak", g.peaks.tf32 if g.peaks else None, "TFLOP/s"),
            ),
            fix=f"for full float32: {FULL_FP32.get(r.framework, 'ask for the highest precision')}",
            group=GROUP,
            subject=subject,
        )
    ]


def _judge_gpu(r: WorkerResult, cpu: tuple[WorkerResult, ...], inv: Inventory) -> list[Finding]:
    """Findings for one framework on one GPU."""
    g = _gpu_for(r, inv)
    subject = f"{r.framework} {r.device}" + (f" ({g.name})" if g and g.name else "")
    if r.error:
        hint = (
            "the build lacks kernels for this card: see the framework's arch finding"
            if "no kernel image" in r.error
            else "see the error"
        )
        return [
            Finding(
                f"{r.framework}-kernel-failed",
                Status.FAIL,
                f"{subject}: a kernel failed: {r.error}",
                (Evidence("error", r.error),),
                fix=hint,
                group=GROUP,
                subject=subject,
            )
        ]
    out = _correctness(r, subject)
    ev: list[Evidence] = []
    notes: list[Finding] = []
    slow = []
    for name in ("e1-float32", "matmul-float32"):
        m = r.measurement(name)
        cpu_t = _best_cpu(cpu, name)
        if m is None:
            continue
        ev.append(_ev_time(f"{name} gpu", m.median))
        if cpu_t is not None:
            ev.append(_ev_time(f"{name} cpu", cpu_t))
            speedup = cpu_t / m.median if m.median > 0 else float("inf")
            ev.append(Evidence(f"{name} speedup", round(speedup, 1), "×"))
            if speedup <= GPU_SPEEDUP_WARN:
                slow.append(f"{name} {speedup:.2f}×")
        if m.flops:
            ev.append(Evidence(f"{name} rate", round(m.flops / 1e12, 2), "TFLOP/s"))
            if name == "matmul-float32" and g is not None:
                notes = _not_float32(r, g, m.flops / 1e12, subject)
    if slow:
        out.append(
            Finding(
                f"{r.framework}-gpu-not-faster",
                Status.WARN,
                f"{subject}: the GPU is not faster than the CPU on problems that should favour it "
                f"({', '.join(slow)})",
                tuple(ev),
                fix="look for throttling, a downgraded PCIe link or another process on the card "
                "(findings above); run 'gpuprobe bench' for detail",
                group=GROUP,
                subject=subject,
            )
        )
    elif ev and not out:
        out.append(
            Finding(
                f"{r.framework}-gpu-kernels-ok",
                Status.OK,
                f"{subject}: matmul and E1 (docs/experiments.md#e1) correct and faster than the "
                "CPU",
                tuple(ev),
                group=GROUP,
                subject=subject,
            )
        )
    out += notes
    h2d = r.measurement("h2d-pinned")
    if g is not None and h2d is not None and h2d.bytes_per_s:
        gbs = h2d.bytes_per_s / 1e9
        link = pcie_link_gbs(g.pcie.gen_max, g.pcie.width_max)
        ev_h = (
            Evidence("pinned_h2d", round(gbs, 2), "GB/s"),
            Evidence("link_max", link, "GB/s"),
            Evidence("bytes", h2d.work.get("bytes"), "B"),
        )
        if link and gbs < PINNED_H2D_WARN_FRACTION * link:
            out.append(
                Finding(
                    "pcie-h2d-slow",
                    Status.WARN,
                    f"{g.label}: pinned host-to-device copies reach {gbs:.1f} GB/s, "
                    f"{gbs / link:.0%} of the link's {link:.1f} GB/s",
                    ev_h,
                    fix="check the link (gen/width under load), NUMA placement ('nvidia-smi "
                    "topo -m'; run on the GPU's CPU socket) and other traffic",
                    group=GROUP,
                    subject=g.label,
                )
            )
        else:
            out.append(
                Finding(
                    "pcie-h2d",
                    Status.OK,
                    f"{g.label}: pinned host-to-device {gbs:.1f} GB/s"
                    + (f" ({gbs / link:.0%} of the link's {link:.1f} GB/s)" if link else ""),
                    ev_h,
                    group=GROUP,
                    subject=g.label,
                )
            )
    if g is not None:
        out.extend(_under_load(g, r.under_load))
    return out
