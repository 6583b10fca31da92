"""Copies from 4 KB to 1 GB: host→device and device→host from pageable and from pinned
(page-locked) host memory, and device→device; on a machine without a GPU, a host memory copy
(memcpy), so that the workload still says what memory can move.

GB/s = bytes moved / median time. Host↔device copies count the buffer once. Device→device and
host copies count the read **and** the write (2 × buffer), the convention of CUDA's
bandwidthTest and of STREAM's copy (nvbandwidth reports buffer/time and its maintainer notes the
real traffic is twice that, NVIDIA/nvbandwidth#48). Small copies are repeated between one pair of
events (as nvbandwidth does) so that each timed repetition moves at least 16 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, fits, guard, point, skipped, timed
from gpuprobe.tools.bench.workloads.base import (
    BenchContext,
    Plot,
    Roofline,
    SizeSeries,
    Workload,
    by_pair,
    finding,
)

__all__ = [
    "D2D_PEAK_WARN_FRACTION",
    "DRAM_BYTES",
    "GPU_KINDS",
    "PAGEABLE_SLOW_FRACTION",
    "PINNED_LINK_WARN_FRACTION",
    "SIZES",
    "TRANSFER_JUDGE_MIN_BYTES",
    "WORKLOAD",
    "copies",
    "run",
]

KB = 1024
SIZES = (
    tuple(4 * KB * 4**i for i in range(11)),  # 4 KB … 4 GB; capped by MAX_BYTES below
    (4 * KB, 64 * KB, 1024 * KB, 16 * 1024 * KB, 64 * 1024 * KB),
)
MAX_BYTES = 2**30  # 1 GiB, the top size
GPU_KINDS = ("h2d-pageable", "h2d-pinned", "d2h-pageable", "d2h-pinned", "d2d")
CPU_KINDS = ("host",)
MIN_BYTES_PER_REP = 16 * 2**20  # small copies are repeated until a repetition moves this much
MAX_INNER = 256  # at most this many copies between two events
D2D_PEAK_WARN_FRACTION = 0.6  # of spec memory bandwidth; measured copies reach 75-89 %
# (research: T4 240/320, A100 1355/1555, A800 1727/1935 GB/s)
PINNED_LINK_WARN_FRACTION = 0.5  # of the PCIe link; healthy links reach 60-87 % (doctor)
TRANSFER_JUDGE_MIN_BYTES = 64 * 2**20  # judge copies at or above this size only
PAGEABLE_SLOW_FRACTION = 0.7  # pageable below this share of pinned: pinning pays
# Copies at least this large stream from DRAM (past any CPU's last-level cache): only they set the
# roofline's measured memory roof.
DRAM_BYTES = 64 * 2**20


def moved_bytes(kind: str, nbytes: int) -> int:
    """Bytes of memory traffic one copy of ``nbytes`` makes (read + write within one memory)."""
    return 2 * nbytes if kind in ("d2d", "host") else nbytes


def _one(b: Backend, s: Settings, kind: str, nbytes: int) -> BenchResult:
    copy = b.copier(kind, nbytes)
    if copy is None:
        raise NotImplementedError(f"{b.framework} offers no {kind} copy")
    inner = max(1, min(MAX_INNER, MIN_BYTES_PER_REP // nbytes))
    moved = moved_bytes(kind, nbytes)
    m = timed(
        b,
        f"copy-{kind}",
        copy,
        s,
        min_runs=3,
        inner=inner,
        work={"bytes": float(moved)},
        metadata={"bytes": nbytes, "kind": kind, "copies_per_rep": inner},
    )
    return point(
        b,
        "transfer",
        kind,
        nbytes,
        "bytes",
        m,
        {"gbs": moved / m.median / 1e9},
    )


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Each kind of copy over the sizes, smallest first."""
    sizes = [n for n in s.pick("transfer", *SIZES) if n <= MAX_BYTES]
    for kind in GPU_KINDS if b.is_gpu else CPU_KINDS:
        if b.copier(kind, 4 * KB) is None:
            yield skipped(
                b, "transfer", kind, None, "bytes", f"skipped: {b.framework} offers no {kind} copy"
            )
            continue
        for nbytes in sizes:
            why = fits(b, 2 * nbytes if kind == "d2d" else nbytes)
            if why:
                yield skipped(b, "transfer", kind, nbytes, "bytes", why)
                continue
            yield guard(b, "transfer", kind, nbytes, "bytes", _one, b, s, kind, nbytes)
        b.release()


def _below(r: BenchResult, fraction: float) -> bool:
    pct = r.values.get("pct_peak")
    return pct is not None and pct < 100 * fraction


@rule("bench-pageable-slow", "bench-pcie-slow", "bench-d2d-slow")
def copies(ctx: BenchContext) -> list[Finding]:
    """The largest copies of each kind: pageable against pinned, pinned against the PCIe link,
    device copies against the memory's bandwidth."""
    out = []
    for (fw, dev), rs in by_pair(ctx.results, WORKLOAD.name).items():
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
                finding(
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
                finding(
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
                finding(
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


def _peak(r: BenchResult, g: Gpu) -> float | None:
    """The PCIe link's bandwidth for host↔device copies, the memory's for the rest (GB/s)."""
    from gpuprobe.platform.hardware.specs import pcie_link_gbs

    if r.case.startswith(("h2d", "d2h")):
        return pcie_link_gbs(g.pcie.gen_max, g.pcie.width_max)
    return g.peaks.memory_bandwidth_gbs if g.peaks is not None else None


WORKLOAD = Workload(
    name="transfer",
    title="transfer: GB/s = bytes / median time; d2d and host copies count read + write (2 × size)",
    run=run,
    peak=_peak,
    checks=(copies,),
    plot=Plot(
        series=(
            SizeSeries(
                value="gbs",
                title="bandwidth vs size",
                xlabel="bytes per copy",
                ylabel="GB/s (d2d and host: read + write)",
                empty="transfer",
            ),
        ),
        roofline=Roofline(measured_memory_roof=lambda r: (r.size or 0) >= DRAM_BYTES),
    ),
)
