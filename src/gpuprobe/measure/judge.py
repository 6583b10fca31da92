"""Judge ``gpuprobe bench``'s figures: wrong results, figures far below the hardware's peak, E8's
misleading host clock, pageable vs pinned copies, where the GPU starts to win, what a per-step
copy costs, out-of-memory sizes. Each judgement is a :class:`~gpuprobe.findings.Finding`.
E-codes: docs/experiments.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gpuprobe.findings import Evidence, Finding, Status
from gpuprobe.hardware.load import HOST_BUSY_WARN_FRACTION as HOST_BUSY_WARN_FRACTION
from gpuprobe.hardware.load import host_busy_finding
from gpuprobe.machine import Inventory
from gpuprobe.measure.measurement import SPREAD_WARN_FRACTION
from gpuprobe.measure.report import BenchResult, WorkerRun
from gpuprobe.units import seconds

__all__ = ["REL_ERROR_LIMIT", "crossover_size", "judge"]

# A precision below float32 is recommended only when it ran at least this much faster than
# float32 on the same device: gpuprobe's choice, above the run-to-run spread of a CPU matmul.
PRECISION_FASTER_RATIO = 1.2

GROUP = "bench"
# ‖C − C64‖/‖C64‖ above which a product is wrong, per dtype, for standard-normal inputs with
# n ≤ 1024. float64/float32: a few ulps × √n; TF32 (10-bit mantissa) lands near 3e-4, bfloat16
# (8-bit) near 3e-3 and int8 (symmetric per-tensor) near 1e-2 (measured here and in the doctor's
# METHOD.md); the limits leave about 10× headroom.
REL_ERROR_LIMIT: dict[str, float] = {
    "float64": 1e-12,
    "float32": 1e-5,
    "tfloat32": 5e-3,
    "bfloat16": 3e-2,
    "float16": 5e-3,
    "int8": 1e-1,
}
EXPRESSION_REL_ERROR_LIMIT = 1e-3  # float32 sum vs float64 (doctor's E1_REL_ERR_FAIL)
MATMUL_PEAK_WARN_FRACTION = 0.5  # of the spec's dense peak at n ≥ 4096; cuBLAS reaches 70-90 %
# (GH200 FP32 63.0 of 66.9 TFLOPS measured in the public mredenti/PowerCapping results)
MATMUL_PEAK_MIN_N = 4096
D2D_PEAK_WARN_FRACTION = 0.6  # of spec memory bandwidth; measured copies reach 75-89 %
# (research: T4 240/320, A100 1355/1555, A800 1727/1935 GB/s)
PINNED_LINK_WARN_FRACTION = 0.5  # of the PCIe link; healthy links reach 60-87 % (doctor)
TRANSFER_JUDGE_MIN_BYTES = 64 * 2**20  # judge copies at or above this size only
PAGEABLE_SLOW_FRACTION = 0.7  # pageable below this share of pinned: pinning pays
NAIVE_MISLEADING_RATIO = 2.0  # E8's host clock this many times below the device's: misleading
SYNC_EVERY_STEP_RATIO = 1.5  # host-every-step loop this many times slower: copy the log once


def _f(
    fid: str, status: Status, title: str, ev: Sequence[Evidence], fix: str = "", subject: str = ""
) -> Finding:
    return Finding(fid, status, title, tuple(ev), fix=fix, group=GROUP, subject=subject)


def _by_pair(
    results: Sequence[BenchResult], workload: str
) -> dict[tuple[str, str], list[BenchResult]]:
    out: dict[tuple[str, str], list[BenchResult]] = defaultdict(list)
    for r in results:
        if r.workload == workload and r.ok:
            out[(r.framework, r.device)].append(r)
    return out


def _failures(results: Sequence[BenchResult], workers: Sequence[WorkerRun]) -> list[Finding]:
    out = [
        _f(
            "bench-worker-failed",
            Status.FAIL,
            f"{w.framework} on {w.device}: {w.error}",
            [Evidence("error", w.error)],
            fix="run 'gpuprobe doctor' for this framework and device",
            subject=f"{w.framework} {w.device}",
        )
        for w in workers
        if w.error
    ]
    for r in results:
        if r.status == "error":
            out.append(
                _f(
                    "bench-point-failed",
                    Status.WARN,
                    f"{r.workload} {r.case} on {r.framework} {r.device} (size {r.size}): {r.reason}",
                    [Evidence("error", r.reason)],
                    subject=f"{r.framework} {r.device}",
                )
            )
        err = r.values.get("rel_error")
        limit = (
            REL_ERROR_LIMIT.get(r.case)
            if r.workload == "matmul"
            else EXPRESSION_REL_ERROR_LIMIT
            if r.workload == "expression"
            else None
        )
        if err is not None and limit is not None and not err <= limit:
            out.append(
                _f(
                    "bench-wrong-result",
                    Status.FAIL,
                    f"{r.workload} {r.case} on {r.framework} {r.device} (size {r.size}) is off by "
                    f"{err:.3g} against float64 (limit {limit:g})",
                    [Evidence("relative_error", err), Evidence("limit", limit)],
                    fix="run 'gpuprobe doctor'; if it repeats, the card or the library is faulty",
                    subject=f"{r.framework} {r.device}",
                )
            )
    oom = [r for r in results if r.status == "out-of-memory"]
    if oom:
        out.append(
            _f(
                "bench-out-of-memory",
                Status.INFO,
                f"{len(oom)} size(s) skipped for lack of memory: "
                + ", ".join(
                    sorted(
                        {f"{r.workload} {r.case} {r.size} ({r.framework} {r.device})" for r in oom}
                    )[:6]
                ),
                [Evidence("skipped", len(oom))],
                fix="close other programs using the device, or run on a larger card",
            )
        )
    return out


# How to compute in each precision below float32, per framework ("" where it has no such switch).
_LOWER_HOWTO: dict[str, dict[str, str]] = {
    "torch": {
        "tfloat32": "torch.set_float32_matmul_precision('high')",
        "bfloat16": "torch.autocast(device_type, dtype=torch.bfloat16)",
        "float16": "torch.autocast(device_type, dtype=torch.float16)",
        "int8": "torch.ao.quantization.quantize_dynamic(model, dtype=torch.qint8)",
    },
}


def _precision_fix(
    fw: str, dev: str, speeds: dict[str, float | None], spread: frozenset[str] = frozenset()
) -> str:
    """Recommend only a precision that was measured faster than float32 here, and only as a
    thing to confirm when its time or float32's varied too much to trust (``spread``)."""
    lower = {
        d: v
        for d, v in speeds.items()
        if d in ("tfloat32", "bfloat16", "float16", "int8")
        and v is not None
        and v >= PRECISION_FASTER_RATIO
    }
    if not lower:
        slower = ", ".join(
            f"{d} {v:.2g}×"
            for d, v in speeds.items()
            if d in ("tfloat32", "bfloat16", "float16", "int8") and v is not None
        )
        return f"keep float32 on {fw} {dev}: no lower precision ran faster here" + (
            f" ({slower} of float32's speed)" if slower else ""
        )
    best = max(lower, key=lambda d: lower[d] or 0.0)
    how = _LOWER_HOWTO.get(fw, {}).get(best) or f"compute in {best}"
    noisy = sorted(spread & {best, "float32"})
    if noisy:
        return (
            f"{best} ran {lower[best]:.2g}× float32's speed here, but the times of "
            f"{' and '.join(noisy)} varied too much to trust (interquartile range over "
            f"{SPREAD_WARN_FRACTION:.0%} of the median): re-run on an idle machine before "
            f"switching to {how}"
        )
    return (
        f"{best} ran {lower[best]:.2g}× float32's speed here; if your model tolerates its error: "
        f"{how}"
    )


def _precision(results: Sequence[BenchResult]) -> list[Finding]:
    """E4: each dtype's speed against float32 at the largest size all of them reached, and its
    error."""
    out = []
    for (fw, dev), rs in _by_pair(results, "matmul").items():
        by_dtype: dict[str, dict[int, BenchResult]] = defaultdict(dict)
        for r in rs:
            if r.size is not None:
                by_dtype[r.case][r.size] = r
        if "float32" not in by_dtype or len(by_dtype) < 2:
            continue
        common = set.intersection(*(set(v) for v in by_dtype.values()))
        if not common:
            continue
        n = max(common)
        base = by_dtype["float32"][n].values.get("tflops") or 0.0
        ev = []
        parts = []
        speeds: dict[str, float | None] = {}
        for dtype, sizes in by_dtype.items():
            r = sizes[n]
            rate = r.values.get("tflops") or 0.0
            err = next(
                (
                    x.values.get("rel_error")
                    for _, x in sorted(sizes.items(), reverse=True)
                    if x.values.get("rel_error") is not None
                ),
                None,
            )
            speed = rate / base if base else None
            speeds[dtype] = speed
            ev.append(
                Evidence(f"{dtype} speed vs float32", float(f"{speed:.3g}") if speed else None, "×")
            )
            ev.append(Evidence(f"{dtype} error", err))
            parts.append(f"{dtype} {speed:.2g}×" + (f" (err {err:.1e})" if err is not None else ""))
        out.append(
            _f(
                "bench-precision-tradeoff",
                Status.INFO,
                f"{fw} {dev}, matmul {n}×{n} against float32: " + ", ".join(parts),
                ev,
                fix=_precision_fix(
                    fw,
                    dev,
                    speeds,
                    frozenset(
                        d
                        for d, sizes in by_dtype.items()
                        if (m := sizes[n].measurement) is not None and m.too_spread
                    ),
                ),
                subject=f"{fw} {dev}",
            )
        )
    return out


def _peaks(results: Sequence[BenchResult]) -> list[Finding]:
    out = []
    for (fw, dev), rs in _by_pair(results, "matmul").items():
        best: dict[str, BenchResult] = {}
        for r in rs:
            pct = r.values.get("pct_peak")
            if pct is None or (r.size or 0) < MATMUL_PEAK_MIN_N:
                continue
            if r.case not in best or pct > (best[r.case].values["pct_peak"] or 0):
                best[r.case] = r
        low = [
            r
            for r in best.values()
            if (r.values["pct_peak"] or 0) < 100 * MATMUL_PEAK_WARN_FRACTION
        ]
        for r in low:
            out.append(
                _f(
                    "bench-matmul-below-peak",
                    Status.WARN,
                    f"{fw} {dev}: {r.case} matmul reaches {r.values['tflops']:.3g} TFLOP/s, "
                    f"{r.values['pct_peak']:.0f} % of the {r.values['peak']:g} peak",
                    [
                        Evidence("tflops", r.values["tflops"], "TFLOP/s"),
                        Evidence("peak", r.values["peak"], "TFLOP/s"),
                        Evidence("n", r.size),
                        Evidence(
                            "sm_clock_min",
                            r.conditions.sm_clock_mhz_min if r.conditions else None,
                            "MHz",
                        ),
                    ],
                    fix="look for throttling ('gpuprobe doctor'), another process on the card "
                    "('nvidia-smi'), or a power cap ('nvidia-smi -q -d POWER')",
                    subject=f"{fw} {dev}",
                )
            )
    return out


def _below(r: BenchResult, fraction: float) -> bool:
    pct = r.values.get("pct_peak")
    return pct is not None and pct < 100 * fraction


def _transfers(results: Sequence[BenchResult]) -> list[Finding]:
    out = []
    for (fw, dev), rs in _by_pair(results, "transfer").items():
        big: dict[str, BenchResult] = {}
        for r in rs:
            if (r.size or 0) >= TRANSFER_JUDGE_MIN_BYTES and (
                r.case not in big or (r.size or 0) > (big[r.case].size or 0)
            ):
                big[r.case] = r
        pin, page = big.get("h2d-pinned"), big.get("h2d-pageable")
        if (
            pin
            and page
            and (page.values["gbs"] or 0) < PAGEABLE_SLOW_FRACTION * (pin.values["gbs"] or 0)
        ):
            out.append(
                _f(
                    "bench-pageable-slow",
                    Status.INFO,
                    f"{fw} {dev}: copies from pageable memory reach {page.values['gbs']:.3g} GB/s, "
                    f"pinned {pin.values['gbs']:.3g} GB/s",
                    [
                        Evidence("pageable", page.values["gbs"], "GB/s"),
                        Evidence("pinned", pin.values["gbs"], "GB/s"),
                        Evidence("bytes", pin.size, "B"),
                    ],
                    fix="pin host buffers: DataLoader(..., pin_memory=True) and "
                    ".to(device, non_blocking=True)",
                    subject=f"{fw} {dev}",
                )
            )
        if pin and _below(pin, PINNED_LINK_WARN_FRACTION):
            out.append(
                _f(
                    "bench-pcie-slow",
                    Status.WARN,
                    f"{fw} {dev}: pinned host→device {pin.values['gbs']:.3g} GB/s, "
                    f"{pin.values['pct_peak']:.0f} % of the link's {pin.values['peak']:.3g} GB/s",
                    [
                        Evidence("pinned_h2d", pin.values["gbs"], "GB/s"),
                        Evidence("link", pin.values["peak"], "GB/s"),
                    ],
                    fix="check the PCIe link under load and the NUMA node ('nvidia-smi topo -m')",
                    subject=f"{fw} {dev}",
                )
            )
        d2d = big.get("d2d")
        if d2d and _below(d2d, D2D_PEAK_WARN_FRACTION):
            out.append(
                _f(
                    "bench-d2d-slow",
                    Status.WARN,
                    f"{fw} {dev}: device copies move {d2d.values['gbs']:.3g} GB/s (read + write), "
                    f"{d2d.values['pct_peak']:.0f} % of the memory's {d2d.values['peak']:.4g} GB/s",
                    [
                        Evidence("d2d", d2d.values["gbs"], "GB/s"),
                        Evidence("peak", d2d.values["peak"], "GB/s"),
                    ],
                    fix="look for throttled memory clocks or another process ('gpuprobe doctor')",
                    subject=f"{fw} {dev}",
                )
            )
    return out


def _naive(results: Sequence[BenchResult]) -> list[Finding]:
    out = []
    for (fw, dev), rs in _by_pair(results, "scale").items():
        right = next((r for r in rs if r.case != "naive"), None)
        naive = next((r for r in rs if r.case == "naive"), None)
        if right is None or naive is None or right.seconds is None or naive.seconds is None:
            continue
        ratio = right.seconds / naive.seconds if naive.seconds > 0 else float("inf")
        if ratio >= NAIVE_MISLEADING_RATIO:
            out.append(
                _f(
                    "bench-naive-timing-misleading",
                    Status.WARN,
                    f"{fw} {dev}: a host clock around x * 2 says {seconds(naive.seconds)}; "
                    f"the device took {seconds(right.seconds)} ({ratio:.0f}× more): "
                    "E8's mistake (docs/experiments.md#e8)",
                    [Evidence("naive", naive.seconds, "s"), Evidence("device", right.seconds, "s")],
                    fix="time GPU work with events (torch.cuda.Event(enable_timing=True)) or call "
                    "torch.cuda.synchronize() before reading the clock",
                    subject=f"{fw} {dev}",
                )
            )
    return out


def crossover_size(cpu: dict[int, float], gpu: dict[int, float]) -> int | None:
    """The smallest size from which the GPU is faster than the CPU at every larger size measured
    by both; None when it never is."""
    sizes = sorted(set(cpu) & set(gpu))
    winner = None
    for s in reversed(sizes):
        if gpu[s] < cpu[s]:
            winner = s
        else:
            break
    return winner


def _crossover(results: Sequence[BenchResult]) -> list[Finding]:
    rs = [r for r in results if r.workload == "crossover" and r.ok and r.size is not None]
    if not rs:
        return []
    gpu_rs = [r for r in rs if r.device != "cpu"]
    if not gpu_rs:
        return [
            _f(
                "bench-no-gpu-to-cross-over",
                Status.INFO,
                "no GPU here: the crossover curves show the CPU backends only, with no GPU to "
                "cross over to",
                [Evidence("cpu_backends", ", ".join(sorted({r.framework for r in rs})))],
                fix="run 'gpuprobe bench crossover' on a machine with an NVIDIA GPU",
            )
        ]
    out = []
    for kind in ("elementwise", "matmul"):
        cpu: dict[int, float] = {}
        for r in rs:
            if (
                r.device == "cpu"
                and r.case == f"{kind}-resident"
                and r.seconds is not None
                and r.size is not None
            ):
                cpu[r.size] = min(cpu.get(r.size, float("inf")), r.seconds)
        for fw, dev in sorted({(r.framework, r.device) for r in gpu_rs}):
            ev = []
            parts = []
            for mode in ("resident", "copies"):
                g = {
                    r.size: r.seconds
                    for r in gpu_rs
                    if r.framework == fw
                    and r.device == dev
                    and r.case == f"{kind}-{mode}"
                    and r.seconds is not None
                }
                if not g or not cpu:
                    continue
                at = crossover_size(cpu, g)  # type: ignore[arg-type]
                ev.append(Evidence(f"crossover {mode}", at))
                parts.append(
                    f"{mode.replace('copies', 'with copies')}: " + (f"from {at}" if at else "never")
                )
            if parts:
                unit = "n×n" if kind == "matmul" else "elements"
                out.append(
                    _f(
                        "bench-crossover",
                        Status.INFO,
                        f"{fw} {dev} beats the best CPU on {kind} ({unit}) " + "; ".join(parts),
                        ev,
                        fix="keep small work on the CPU or batch it (E9 in docs/experiments.md#e9: "
                        "batch 10240 used the GPU, 1024 did not); keep data on the device "
                        "between steps",
                        subject=f"{fw} {dev}",
                    )
                )
    return out


def _sync_multi(results: Sequence[BenchResult]) -> list[Finding]:
    out = []
    for (fw, dev), rs in _by_pair(results, "sync").items():
        every = next((r for r in rs if r.case == "host-every-step"), None)
        once = next((r for r in rs if r.case == "log-on-device"), None)
        if every and once and every.seconds and once.seconds:
            ratio = every.seconds / once.seconds
            status = Status.WARN if ratio >= SYNC_EVERY_STEP_RATIO else Status.OK
            out.append(
                _f(
                    "bench-sync-every-step",
                    status,
                    f"{fw} {dev}: reading the norm back every step costs "
                    f"{every.values['us_per_step']:.3g} µs/step vs {once.values['us_per_step']:.3g} "
                    f"with the log kept on the device ({ratio:.2f}×)",
                    [
                        Evidence("every_step", every.values["us_per_step"], "µs"),
                        Evidence("log_on_device", once.values["us_per_step"], "µs"),
                    ],
                    fix="keep per-step values on the device (torch.stack) and copy them once; "
                    "don't print or .item() inside the loop"
                    if status is Status.WARN
                    else "",
                    subject=f"{fw} {dev}",
                )
            )
    for r in results:
        if r.workload == "multi" and r.status == "skipped" and r.size is None:
            out.append(
                _f(
                    "bench-multi-skipped",
                    Status.SKIPPED,
                    f"multi on {r.framework} {r.device}: {r.reason}",
                    [],
                    subject=f"{r.framework} {r.device}",
                )
            )
        if r.workload == "multi" and r.ok and r.values.get("speedup") is not None:
            out.append(
                _f(
                    "bench-multi-overlap",
                    Status.INFO,
                    f"{r.framework} {r.device}: two {r.size}×{r.size} matmuls, {r.case} vs one after "
                    f"the other: {r.values['speedup']:.2f}× (2× at best)",
                    [Evidence("speedup", r.values["speedup"], "×"), Evidence("n", r.size)],
                    subject=f"{r.framework} {r.device}",
                )
            )
    return out


def _host_busy(workers: Sequence[WorkerRun], inv: Inventory | None) -> list[Finding]:
    cores = (inv.host.usable_cores or inv.host.logical_cores) if inv is not None else None
    out = []
    for w in workers:
        if w.device != "cpu":
            continue
        f = host_busy_finding(
            "bench-host-busy",
            f"{w.framework} cpu",
            w.others_cores,
            cores,
            effect="its CPU figures are slowed, multi-threaded ones (matmul) the most",
            fix="re-run 'gpuprobe bench' when the machine is idle (see 'gpuprobe top')",
            group=GROUP,
            subject=f"{w.framework} cpu",
        )
        if f is not None:
            out.append(f)
    return out


def judge(
    results: Sequence[BenchResult], workers: Sequence[WorkerRun], inv: Inventory | None = None
) -> list[Finding]:
    """Every finding of one run."""
    return [
        *_failures(results, workers),
        *_host_busy(workers, inv),
        *_naive(results),
        *_peaks(results),
        *_transfers(results),
        *_precision(results),
        *_crossover(results),
        *_sync_multi(results),
    ]
