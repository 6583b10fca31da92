"""What each NVIDIA GPU can do on paper: architecture, FP32 cores and theoretical dense peaks.

Pure lookups over data tables: no pynvml, no torch. The numbers live in CSV files under
``platform/hardware/data/`` (one per table, every row with its source; see
:mod:`gpuprobe.platform.hardware.spec_tables`), read once on first use, so that importing this
module reads nothing. Four things live here.

1. :func:`architecture` and :func:`fp32_cores_per_sm`: the compute capability (CC) mapped to an
   architecture name and to FP32 lanes per SM (``compute_capabilities.csv``), after cuda-samples
   ``Common/helper_cuda.h`` (``_ConvertSMVer2Cores`` / ``_ConvertSMVer2ArchName``), except that
   7.2 (Xavier) is listed under its architecture, Volta, and 8.9 under the full name "Ada
   Lovelace". An unknown CC gives ``None``, never the "last entry" cuda-samples falls back to.
2. :data:`PRODUCTS` (``products.csv``): one :class:`ProductSpec` per product, matched on the name
   NVML reports (most specific pattern first: the first that matches wins), each with its SM
   count, its dense peaks and where every number comes from.
3. :func:`peaks`: the table entry for a known product; for an unknown product of a known
   architecture, what can be computed from the SM count and clocks with the per-SM-per-clock
   rates in :data:`SM_RATES` (``sm_rates.csv``; and says so in ``source``); otherwise ``None``.
4. :func:`pcie_link_gbs`: a PCIe link's theoretical one-direction rate, from the per-lane rates
   of :data:`PCIE_LANE_GBS` (``pcie_lanes.csv``).

Units: TFLOP/s (TOP/s for INT8) for compute, GB/s (10^9 bytes per second) for memory bandwidth,
MHz for clocks, bits for bus widths, GB (10^9 bytes) for memory sizes, GB/s for PCIe links.

Every peak is DENSE. Datasheets since Ampere print tensor figures "with sparsity" (2:4
structured sparsity doubles them); those are halved here and the source says so. ``fp16`` and
``bf16`` are tensor-core rates with FP32 accumulate, which is what PyTorch, JAX and cuBLAS use by
default. On GeForce cards (Turing, Ampere GA10x, Ada, Blackwell GB20x) NVIDIA runs FP16/BF16/TF32
(and FP8 on Ada/Blackwell) with FP32 accumulate at half the FP16-accumulate rate; the table uses
the FP32-accumulate figure. ``fp64`` is the non-tensor (CUDA-core) FP64 rate; the FP64
tensor-core rate of GA100/GH100/GB100 parts is kept apart in :attr:`ProductSpec.fp64_tensor`.
``int8`` is the INT8 tensor rate (Turing on). TF32/BF16 exist from Ampere on, FP8 from Ada on.
FP64 of Turing/GA10x/AD10x/GB20x parts is not printed on their datasheets; it is FP32/32
(Turing) or FP32/64 (the others) per the architecture whitepapers, and the source says so.
Laptop parts share the desktop name with a suffix but not its chip or clocks, so desktop patterns
end in ``(?!.*(Laptop|Mobile|Max-Q))``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from gpuprobe.platform.hardware import spec_tables
from gpuprobe.platform.hardware.spec_tables import (
    MigProfile,
    ProductSpec,
    SmRates,
    parse_compute_capability,
)
from gpuprobe.platform.hardware.spec_tables import tables as _tables
from gpuprobe.platform.hardware.types import Peaks

__all__ = [
    "ARCHITECTURES",
    "FP32_CORES_PER_SM",
    "MEMORY_TRANSFERS_PER_CLOCK",
    "MIG_SMALLEST_PROFILES",
    "PCIE_LANE_GBS",
    "PRODUCTS",
    "RATE_LIMITED_PARTS",
    "SM_RATES",
    "MigProfile",
    "ProductSpec",
    "SmRates",
    "arch_supports",
    "architecture",
    "fp32_cores_per_sm",
    "markdown_table",
    "mig_smallest_profile",
    "parse_compute_capability",
    "pcie_link_gbs",
    "peaks",
    "spec_for",
]


# The tables, read from the CSV files on first use (module ``__getattr__``, PEP 562).
ARCHITECTURES: dict[tuple[int, int], str]  # CC -> architecture name
FP32_CORES_PER_SM: dict[tuple[int, int], int]  # CC -> FP32 lanes ("CUDA cores") per SM
SM_RATES: dict[tuple[int, int], SmRates]  # CC -> dense rates per SM per clock (see peaks())
PRODUCTS: tuple[ProductSpec, ...]  # most specific pattern first
MIG_SMALLEST_PROFILES: tuple[MigProfile, ...]
PCIE_LANE_GBS: dict[int, float]  # PCIe generation -> one lane's one-direction rate, GB/s
# Parts whose FP32/tensor rates are capped below what their SM count and clock would give
# (export-control variants): for these only the memory bandwidth is computed.
RATE_LIMITED_PARTS: re.Pattern[str]
_TABLES = frozenset(
    {"ARCHITECTURES", "FP32_CORES_PER_SM", "SM_RATES", "PRODUCTS", "MIG_SMALLEST_PROFILES",
     "PCIE_LANE_GBS", "RATE_LIMITED_PARTS"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _TABLES:
        return getattr(_tables(), name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# NVML's maximum memory clock is half the data rate per pin for HBM and GDDR alike, so bandwidth
# = 2 x clock x bus width / 8. Same formula as mixbench and triton's get_dram_gbps. Checks (MHz
# x bits -> GB/s vs datasheet): T4 5001 x 256 -> 320 (320); A100 40GB 1215 x 5120 -> 1555 (1555);
# H100 SXM 2619 x 5120 -> 3352 (3350); RTX 4090 10501 x 384 -> 1008 (1008).
MEMORY_TRANSFERS_PER_CLOCK = 2  # per NVML memory clock; see above

# --- Compute capability -> architecture and FP32 lanes per SM -----------------------------------


def architecture(compute_capability: str | None) -> str | None:
    """The architecture for a compute capability: ``"7.5"`` -> ``"Turing"``; unknown -> None."""
    cc = parse_compute_capability(compute_capability)
    return _tables().architectures.get(cc) if cc else None


def fp32_cores_per_sm(compute_capability: str | None) -> int | None:
    """FP32 lanes per SM (cuda-samples ``_ConvertSMVer2Cores``); an unknown CC gives ``None``."""
    cc = parse_compute_capability(compute_capability)
    return _tables().fp32_cores_per_sm.get(cc) if cc else None


# --- Products and peaks ------------------------------------------------------------------------


def _fp32_only(cores: int, source: str) -> SmRates:
    return SmRates(
        fp32=2 * cores, fp64=None, tf32=None, bf16=None, fp16=None, fp8=None, int8=None,
        geforce_half_rate=False, tensor_for_non_geforce=False, source=source,
    )  # fmt: skip


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def spec_for(name: str | None) -> ProductSpec | None:
    """The table entry whose pattern matches the NVML product name first, or ``None``."""
    if not name:
        return None
    for spec in _tables().products:
        if _compiled(spec.pattern).search(name):
            return spec
    return None


# --- Peaks ---------------------------------------------------------------------------------------


def _tflops(ops_per_sm_clock: int | None, sm_count: int, clock_mhz: int) -> float | None:
    if ops_per_sm_clock is None:
        return None
    return round(ops_per_sm_clock * sm_count * clock_mhz * 1e6 / 1e12, 2)


def _bandwidth_gbs(mem_clock_max_mhz: int | None, memory_bus_width: int | None) -> float | None:
    if not mem_clock_max_mhz or not memory_bus_width:
        return None
    bytes_per_s = MEMORY_TRANSFERS_PER_CLOCK * mem_clock_max_mhz * 1e6 * memory_bus_width / 8
    return round(bytes_per_s / 1e9, 1)


def peaks(
    name: str | None,
    compute_capability: str | None,
    *,
    sm_count: int | None = None,
    sm_clock_max_mhz: int | None = None,
    mem_clock_max_mhz: int | None = None,
    memory_bus_width: int | None = None,
    memory_total: int | None = None,
) -> Peaks | None:
    """Theoretical dense peaks for a GPU, from the product table or computed; ``None`` if neither.

    1. A product in :data:`PRODUCTS` matching ``name``: its datasheet figures.
    2. An unknown product of a known compute capability: FP32 (and, where :data:`SM_RATES` has
       them, FP64 and tensor rates) = SMs x rate per SM per clock x max SM clock, and bandwidth =
       2 x max memory clock x bus width / 8; ``source`` says "computed from ...". Parts whose
       rates are capped below what their SMs could do (:data:`RATE_LIMITED_PARTS`) get only the
       bandwidth.
    3. Otherwise ``None`` (shown as n/a). ``memory_total`` (bytes) is only quoted in ``source``.
    """
    spec = spec_for(name)
    if spec is not None:
        return spec.peaks()
    cc = parse_compute_capability(compute_capability)
    cores = _tables().fp32_cores_per_sm.get(cc) if cc else None
    if cc is None or cores is None:
        return None
    cuda_samples = spec_tables.sources()["cuda_samples"]
    rates = _tables().sm_rates.get(cc) or _fp32_only(cores, cuda_samples)
    bandwidth = _bandwidth_gbs(mem_clock_max_mhz, memory_bus_width)
    limited = bool(name and _tables().rate_limited_parts.search(name))
    geforce = "geforce" in (name or "").lower()
    tensor_ok = rates.tensor_for_non_geforce or geforce
    half = 2 if (geforce and rates.geforce_half_rate) else 1
    compute: dict[str, float | None] = {}
    if sm_count and sm_clock_max_mhz and not limited:

        def rate(ops: int | None, divisor: int = 1, *, is_tensor: bool = True) -> float | None:
            if ops is None or (is_tensor and not tensor_ok):
                return None
            return _tflops(ops // divisor, sm_count, sm_clock_max_mhz)

        compute = {
            "fp32": rate(2 * cores, is_tensor=False),
            "fp64": rate(rates.fp64, is_tensor=False),
            "tf32": rate(rates.tf32, half),
            "bf16": rate(rates.bf16, half),
            "fp16": rate(rates.fp16, half),
            "fp8": rate(rates.fp8, half),
            "int8": rate(rates.int8),
        }
    if not any(v is not None for v in compute.values()) and bandwidth is None:
        return None
    parts = []
    if compute:
        parts.append(
            f"computed from {sm_count} SMs x {cores} FP32 lanes/SM x 2 x {sm_clock_max_mhz} MHz "
            f"max SM clock (lanes per SM: {cuda_samples})"
        )
        if any(compute[k] is not None for k in ("fp64", "tf32", "bf16", "fp16", "fp8", "int8")):
            note = "; GeForce runs FP32-accumulate tensor math at half rate" if half == 2 else ""
            parts.append(f"FP64 and tensor rates per SM per clock from {rates.source}{note}")
        if not tensor_ok and rates.fp16 is not None:
            parts.append(
                "tensor rates not computed: professional parts of this architecture differ "
                "(the L40 runs at half the L40S rate on the same chip)"
            )
    elif limited:
        parts.append("compute rates not computed: this part's rates are capped below its SMs'")
    if bandwidth is not None:
        parts.append(
            f"bandwidth computed from 2 x {mem_clock_max_mhz} MHz max memory clock x "
            f"{memory_bus_width}-bit bus / 8 (NVML convention, as in mixbench and triton)"
        )
    if memory_total:
        parts.append(f"{memory_total / 1e9:.0f} GB memory")
    return Peaks(
        fp64=compute.get("fp64"),
        fp32=compute.get("fp32"),
        tf32=compute.get("tf32"),
        bf16=compute.get("bf16"),
        fp16=compute.get("fp16"),
        fp8=compute.get("fp8"),
        int8=compute.get("int8"),
        memory_bandwidth_gbs=bandwidth,
        product=None,
        source="; ".join(parts),
    )


# --- Markdown ------------------------------------------------------------------------------------

_COLUMNS = (
    "Product", "Arch", "CC", "SMs", "FP32 cores", "FP64", "FP32", "TF32", "BF16", "FP16", "FP8",
    "INT8", "GB/s", "Source",
)  # fmt: skip


def _cell(value: float | int | str | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("|", "\\|")


def markdown_table() -> str:
    """Every product of :data:`PRODUCTS` as a Markdown table (dense TFLOP/s, INT8 TOP/s, GB/s)."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for s in _tables().products:
        row = (
            s.product, s.architecture, s.compute_capability, s.sm_count, s.fp32_cores,
            s.fp64, s.fp32, s.tf32, s.bf16, s.fp16, s.fp8, s.int8, s.memory_bandwidth_gbs,
            s.source,
        )  # fmt: skip
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def arch_supports(arch_list: tuple[str, ...], cc: tuple[int, int]) -> bool:
    """Whether a build with ``arch_list`` (``sm_80``, ``compute_90``, ``sm_90a``) has code for
    compute capability ``cc``: machine code for the same major and a minor not above the card's,
    or PTX for an older-or-equal architecture that the driver can compile. Arch-specific targets
    (``sm_90a``, ``sm_100a``) run only on exactly that capability."""
    major, minor = cc
    for entry in arch_list:
        m = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", entry.strip())
        if not m:
            continue
        kind, emaj, emin, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if suffix == "a" and (emaj, emin) != cc:
            continue
        if suffix == "f" and (emaj != major or emin > minor):
            continue
        if kind == "sm" and emaj == major and emin <= minor:
            return True
        if kind == "compute" and (emaj, emin) <= cc and not suffix:
            return True
    return False


def mig_smallest_profile(name: str | None, memory_total: int | None) -> str | None:
    """The smallest MIG profile of the card named ``name`` with ``memory_total`` bytes, or None
    when :data:`MIG_SMALLEST_PROFILES` does not know the card (its fix then lists the card's
    profiles instead of a guess)."""
    if not name or not memory_total:
        return None
    gib = memory_total / 2**30
    for row in _tables().mig_smallest_profiles:
        if re.search(row.pattern, name) and row.memory_from_gib <= gib <= row.memory_to_gib:
            return row.profile
    return None


# --- PCIe links ----------------------------------------------------------------------------------


def pcie_link_gbs(gen: int | None, width: int | None) -> float | None:
    """Theoretical one-direction rate of a PCIe link of generation ``gen`` and ``width`` lanes in
    GB/s (:data:`PCIE_LANE_GBS` x lanes); an unknown generation or width gives ``None``.

    A lane's rate is its transfer rate x encoding efficiency / 8 bits (``pcie_lanes.csv``).
    Protocol overhead (TLP headers, flow control) is not taken off: healthy pinned host-to-device
    copies reach 60-87 % of these."""
    if gen is None or width is None or gen not in _tables().pcie_lane_gbs:
        return None
    return _tables().pcie_lane_gbs[gen] * width


if __name__ == "__main__":  # python -m gpuprobe.platform.hardware.specs: the table in docs/peaks.md
    print(markdown_table(), end="")
