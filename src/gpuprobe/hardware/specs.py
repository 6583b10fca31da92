"""What each NVIDIA GPU can do on paper: architecture, FP32 cores and theoretical dense peaks.

Pure data and lookups: no pynvml, no torch. Four things live here.

1. :func:`architecture` and :func:`fp32_cores_per_sm`: the compute capability (CC) mapped to an
   architecture name and to FP32 lanes per SM, after cuda-samples ``Common/helper_cuda.h``
   (``_ConvertSMVer2Cores`` / ``_ConvertSMVer2ArchName``). An unknown CC gives ``None``, never the
   "last entry" cuda-samples falls back to.
2. :data:`PRODUCTS`: one :class:`ProductSpec` per product, matched on the name NVML reports
   (most specific pattern first), each with its SM count, its dense peaks and where every number
   comes from.
3. :func:`peaks`: the table entry for a known product; for an unknown product of a known
   architecture, what can be computed from the SM count and clocks with the per-SM-per-clock
   rates in :data:`SM_RATES` (and says so in ``source``); otherwise ``None``.
4. :func:`pcie_link_gbs`: a PCIe link's theoretical one-direction rate, from the per-lane rates
   of :data:`PCIE_LANE_GBS`.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuprobe._data import Record
from gpuprobe.hardware.types import Peaks

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

# --- Sources (titles and addresses of the documents every number below comes from) -------------

CUDA_SAMPLES = (
    "NVIDIA cuda-samples Common/helper_cuda.h, _ConvertSMVer2Cores and _ConvertSMVer2ArchName "
    "(https://github.com/NVIDIA/cuda-samples/blob/master/Common/helper_cuda.h)"
)
VOLTA_WP = (
    "NVIDIA Tesla V100 GPU Architecture whitepaper, WP-08608-001 "
    "(https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf)"
)
V100_DS = (
    "NVIDIA Tesla V100 GPU Accelerator datasheet "
    "(https://images.nvidia.com/content/technologies/volta/pdf/"
    "volta-v100-datasheet-update-us-1165301-r5.pdf)"
)
TURING_WP = (
    "NVIDIA Turing GPU Architecture whitepaper, WP-09183-001, Appendix A "
    "(https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
    "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf)"
)
T4_DS = (
    "NVIDIA T4 Tensor Core GPU datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf)"
)
AMPERE_WP = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (https://images.nvidia.com/aem-dam/"
    "en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf)"
)
A100_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
)
A30_DS = (
    "NVIDIA A30 Tensor Core GPU datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "data-center/products/a30-gpu/pdf/a30-datasheet.pdf)"
)
GA102_WP = (
    "NVIDIA Ampere GA102 GPU Architecture whitepaper v2, Appendix A "
    "(https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)"
)
A10_DS = (
    "NVIDIA A10 Tensor Core GPU datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf)"
)
A40_DS = (
    "NVIDIA A40 datasheet "
    "(https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf)"
)
RTX_A6000_DS = (
    "NVIDIA RTX A6000 datasheet (https://www.nvidia.com/en-us/design-visualization/rtx-a6000/)"
)
RTX_A5000_DS = (
    "NVIDIA RTX A5000 datasheet (https://www.nvidia.com/en-us/design-visualization/rtx-a5000/)"
)
ADA_WP = (
    "NVIDIA Ada GPU Architecture whitepaper, Appendix A "
    "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)"
)
L4_DS = "NVIDIA L4 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/l4/)"
L40_DS = (
    "NVIDIA L40 GPU datasheet "
    "(https://images.nvidia.com/content/Solutions/data-center/vgpu-L40-datasheet.pdf)"
)
L40S_DS = "NVIDIA L40S GPU datasheet (https://www.nvidia.com/en-us/data-center/l40s/)"
RTX_6000_ADA_DS = (
    "NVIDIA RTX 6000 Ada Generation datasheet "
    "(https://www.nvidia.com/en-us/design-visualization/rtx-6000/)"
)
HOPPER_WP = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper "
    "(https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)"
)
H100_DS = (
    "NVIDIA H100 Tensor Core GPU datasheet "
    "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
)
H100_PCIE_PB = "NVIDIA H100 PCIe GPU product brief, PB-11133-001"
H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)"
HGX_B200_DS = (
    "NVIDIA HGX B200 specifications, per-GPU column (https://www.nvidia.com/en-us/data-center/hgx/)"
)
RTX_BLACKWELL_WP = (
    "NVIDIA RTX Blackwell GPU Architecture whitepaper, Appendix A (https://images.nvidia.com/"
    "aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf)"
)
RTX_PRO_6000_DS = (
    "NVIDIA RTX PRO 6000 Blackwell datasheet (https://www.nvidia.com/en-us/products/workstations/"
    "professional-desktop-gpus/rtx-pro-6000/)"
)
SPARSE_HALVED = "tensor figures halved from the datasheet's 'with sparsity' values"

# --- Compute capability -> architecture and FP32 lanes per SM -----------------------------------

# Architecture names per CC; cuda-samples _ConvertSMVer2ArchName, except that 7.2 (Xavier) is
# listed under its architecture, Volta, and 8.9 under the full name "Ada Lovelace".
ARCHITECTURES: dict[tuple[int, int], str] = {
    (3, 0): "Kepler",
    (3, 2): "Kepler",
    (3, 5): "Kepler",
    (3, 7): "Kepler",
    (5, 0): "Maxwell",
    (5, 2): "Maxwell",
    (5, 3): "Maxwell",
    (6, 0): "Pascal",
    (6, 1): "Pascal",
    (6, 2): "Pascal",
    (7, 0): "Volta",
    (7, 2): "Volta",  # Xavier (Jetson AGX Xavier)
    (7, 5): "Turing",
    (8, 0): "Ampere",  # GA100
    (8, 6): "Ampere",  # GA10x
    (8, 7): "Ampere",  # Orin
    (8, 9): "Ada Lovelace",
    (9, 0): "Hopper",
    (10, 0): "Blackwell",  # B200, GB200
    (10, 1): "Blackwell",  # Thor before CUDA 13 renamed it 11.0
    (10, 3): "Blackwell",  # B300, GB300
    (11, 0): "Blackwell",  # Thor
    (12, 0): "Blackwell",  # GB20x: RTX 50xx, RTX PRO Blackwell
    (12, 1): "Blackwell",  # GB10 (DGX Spark)
}

# FP32 lanes ("CUDA cores") per SM; cuda-samples helper_cuda.h _ConvertSMVer2Cores, verbatim.
FP32_CORES_PER_SM: dict[tuple[int, int], int] = {
    (3, 0): 192,
    (3, 2): 192,
    (3, 5): 192,
    (3, 7): 192,
    (5, 0): 128,
    (5, 2): 128,
    (5, 3): 128,
    (6, 0): 64,
    (6, 1): 128,
    (6, 2): 128,
    (7, 0): 64,
    (7, 2): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (10, 1): 128,
    (10, 3): 128,
    (11, 0): 128,
    (12, 0): 128,
    (12, 1): 128,
}

_CC_RE = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*$")


def parse_compute_capability(compute_capability: str | None) -> tuple[int, int] | None:
    """``"9.0"`` -> ``(9, 0)``; ``"9"`` -> ``(9, 0)``; anything that is not a CC -> ``None``."""
    if compute_capability is None:
        return None
    m = _CC_RE.match(str(compute_capability))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


def architecture(compute_capability: str | None) -> str | None:
    """The architecture for a compute capability: ``"7.5"`` -> ``"Turing"``; unknown -> None."""
    cc = parse_compute_capability(compute_capability)
    return ARCHITECTURES.get(cc) if cc else None


def fp32_cores_per_sm(compute_capability: str | None) -> int | None:
    """FP32 lanes per SM (cuda-samples ``_ConvertSMVer2Cores``); an unknown CC gives ``None``."""
    cc = parse_compute_capability(compute_capability)
    return FP32_CORES_PER_SM.get(cc) if cc else None


# --- Per-SM, per-clock dense rates --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SmRates(Record):
    """Dense operations per SM per clock (an FMA counts 2) for one compute capability.

    ``None`` means the architecture lacks the unit or no public document lets us state the rate.
    ``fp16``/``bf16``/``tf32``/``fp8`` are tensor-core rates with FP32 accumulate at full rate
    (data-centre and professional parts). ``geforce_half_rate``: GeForce parts run those four at
    half this rate (INT8 and FP64 are unaffected). ``tensor_for_non_geforce``: False where
    professional parts of the architecture do not all run at the full rate (the L40 runs at half
    the L40S rate on the same AD102), so only GeForce tensor rates are computed for unknown parts.
    Built with keywords only, so that every rate reads with its name.
    """

    fp32: int
    fp64: int | None
    tf32: int | None
    bf16: int | None
    fp16: int | None
    fp8: int | None
    int8: int | None
    geforce_half_rate: bool
    tensor_for_non_geforce: bool
    source: str


def _fp32_only(cores: int, source: str) -> SmRates:
    return SmRates(
        fp32=2 * cores, fp64=None, tf32=None, bf16=None, fp16=None, fp8=None, int8=None,
        geforce_half_rate=False, tensor_for_non_geforce=False, source=source,
    )  # fmt: skip


# GV100: 64 FP32 + 32 FP64 lanes and 8 tensor cores x 64 FP16 FMA per SM per clock.
# Check: V100 SXM2 80 SMs x 1024 x 1.53 GHz = 125.3 TFLOPS (datasheet 125).
VOLTA_GV100_RATES = SmRates(
    fp32=128, fp64=64, tf32=None, bf16=None, fp16=1024, fp8=None, int8=None,
    geforce_half_rate=False, tensor_for_non_geforce=True,
    source=VOLTA_WP,
)  # fmt: skip
# TU10x: 64 FP32 lanes, 2 FP64 units (FP64 = FP32/32) and 8 tensor cores x 64 FP16 FMA per SM;
# INT8 twice FP16. Check: T4 40 SMs x 1024 x 1.59 GHz = 65.1 TFLOPS (datasheet 65).
TURING_RATES = SmRates(
    fp32=128, fp64=4, tf32=None, bf16=None, fp16=1024, fp8=None, int8=2048,
    geforce_half_rate=True, tensor_for_non_geforce=True,
    source=TURING_WP,
)  # fmt: skip
# GA100: 64 FP32 + 32 FP64 lanes; 4 tensor cores: 1024 dense FP16 FMA per SM per clock.
# Check: A100 108 SMs x 2048 x 1.41 GHz = 311.9 TFLOPS (datasheet 312).
AMPERE_GA100_RATES = SmRates(
    fp32=128, fp64=64, tf32=1024, bf16=2048, fp16=2048, fp8=None, int8=4096,
    geforce_half_rate=False, tensor_for_non_geforce=True,
    source=AMPERE_WP,
)  # fmt: skip
# GA10x: 128 FP32 lanes, 2 FP64 units (FP64 = FP32/64); 4 tensor cores: 512 dense FP16 FMA.
# Check: RTX A6000 84 SMs x 1024 x 1.80 GHz = 154.8 TFLOPS (whitepaper 154.8).
AMPERE_GA10X_RATES = SmRates(
    fp32=256, fp64=4, tf32=512, bf16=1024, fp16=1024, fp8=None, int8=2048,
    geforce_half_rate=True, tensor_for_non_geforce=False,
    source=GA102_WP,
)  # fmt: skip
# AD10x: as GA10x plus FP8 at twice FP16. Check: L40S 142 SMs x 1024 x 2.52 GHz = 366 TFLOPS
# (datasheet 362, i.e. ~2.49 GHz); L4 58 x 1024 x 2.04 GHz = 121.2 (datasheet 121).
ADA_RATES = SmRates(
    fp32=256, fp64=4, tf32=512, bf16=1024, fp16=1024, fp8=2048, int8=2048,
    geforce_half_rate=True, tensor_for_non_geforce=False,
    source=ADA_WP,
)  # fmt: skip
# GH100: 128 FP32 + 64 FP64 lanes; 4 tensor cores: 2048 dense FP16 FMA per SM per clock.
# NVIDIA's tensor figures for the H100 SXM (989.4 TFLOPS = 132 x 4096 x 1.83 GHz) assume a
# lower clock than the 1.98 GHz max SM clock behind its FP32 figure (66.9 = 132 x 256 x 1.98), so
# tensor rates computed at the max SM clock overstate NVIDIA's figures by about 8 %.
HOPPER_RATES = SmRates(
    fp32=256, fp64=128, tf32=2048, bf16=4096, fp16=4096, fp8=8192, int8=8192,
    geforce_half_rate=False, tensor_for_non_geforce=True,
    source=f"{HOPPER_WP} (at the max SM clock these run ~8 % above NVIDIA's H100 tensor figures, "
           "which assume 1830 MHz)",
)  # fmt: skip
# GB20x: same SM tensor throughput per clock as AD10x (RTX 5090 170 SMs x 1024 x 2.407 GHz = 419
# TFLOPS FP16-accumulate, whitepaper 419); INT8 rate not stated with confidence -> None.
BLACKWELL_GB20X_RATES = SmRates(
    fp32=256, fp64=4, tf32=512, bf16=1024, fp16=1024, fp8=2048, int8=None,
    geforce_half_rate=True, tensor_for_non_geforce=False,
    source=RTX_BLACKWELL_WP,
)  # fmt: skip

# Compute capability -> rates. CCs not listed (Kepler..Pascal, Xavier 7.2, Orin 8.7, data-centre
# Blackwell 10.x, Thor 11.0, GB10 12.1) get FP32 only: NVIDIA publishes no per-SM FP64/tensor
# rates for them that we could check, and B300 (10.3) cut FP64 to ~1.25 TFLOPS, so 10.x differ.
SM_RATES: dict[tuple[int, int], SmRates] = {
    (7, 0): VOLTA_GV100_RATES,
    (7, 5): TURING_RATES,
    (8, 0): AMPERE_GA100_RATES,
    (8, 6): AMPERE_GA10X_RATES,
    (8, 9): ADA_RATES,
    (9, 0): HOPPER_RATES,
    (12, 0): BLACKWELL_GB20X_RATES,
}

# NVML's maximum memory clock is half the data rate per pin for HBM and GDDR alike, so bandwidth
# = 2 x clock x bus width / 8. Same formula as mixbench and triton's get_dram_gbps. Checks (MHz
# x bits -> GB/s vs datasheet): T4 5001 x 256 -> 320 (320); A100 40GB 1215 x 5120 -> 1555 (1555);
# H100 SXM 2619 x 5120 -> 3352 (3350); RTX 4090 10501 x 384 -> 1008 (1008).
MEMORY_TRANSFERS_PER_CLOCK = 2  # per NVML memory clock; see above

# Parts whose FP32/tensor rates are capped below what their SM count and clock would give
# (export-control variants): H20 (GH100, BF16 ~148 TFLOPS dense) and RTX 5090 D (AI TOPS capped).
# For these only the memory bandwidth is computed.
RATE_LIMITED_PARTS = re.compile(r"\bH20\b|RTX 5090 D", re.IGNORECASE)


# --- The product table ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProductSpec(Record):
    """One product: how NVML names it and its dense peaks, each with a source.

    ``pattern`` is a case-insensitive regular expression searched in the NVML name.
    Compute in TFLOP/s (TOP/s for INT8), bandwidth in GB/s, memory in GB, clock in MHz.
    Built with keywords only, so that every number in :data:`PRODUCTS` reads with its name; a
    tensor peak left out is ``None`` (the part lacks the unit, or no source states the rate).
    """

    pattern: str
    product: str
    architecture: str
    chip: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: int | None
    memory_gb: float | None
    fp64: float | None
    fp64_tensor: float | None = None
    fp32: float | None
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None
    memory_bandwidth_gbs: float | None
    source: str

    @property
    def fp32_cores(self) -> int | None:
        """SMs times FP32 lanes per SM: 2560 for a T4."""
        per_sm = fp32_cores_per_sm(self.compute_capability)
        return None if per_sm is None else self.sm_count * per_sm

    def peaks(self) -> Peaks:
        """The entry as a :class:`~gpuprobe.hardware.types.Peaks` record."""
        return Peaks(
            fp64=self.fp64,
            fp32=self.fp32,
            tf32=self.tf32,
            bf16=self.bf16,
            fp16=self.fp16,
            fp8=self.fp8,
            int8=self.int8,
            memory_bandwidth_gbs=self.memory_bandwidth_gbs,
            product=self.product,
            source=self.source,
        )


def _a100(*, form: str, memory_gb: int, memory_bandwidth_gbs: float) -> ProductSpec:
    """An A100 board: the four share their compute peaks and differ in memory bandwidth.

    NVML writes "A100-SXM4-80GB", "A100-PCIE-40GB" and "A100 80GB PCIe": form and size in
    either order.
    """
    size = rf"{memory_gb}\s?GB"
    label = "SXM" if form == "SXM" else "PCIe"
    return ProductSpec(
        pattern=rf"A100.*({form}.*{size}|{size}.*{form})",
        product=f"NVIDIA A100 {memory_gb}GB {label}",
        architecture="Ampere", chip="GA100", compute_capability="8.0", sm_count=108,
        boost_clock_mhz=1410, memory_gb=memory_gb,
        fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156, bf16=312, fp16=312, int8=624,
        memory_bandwidth_gbs=memory_bandwidth_gbs,
        source=f"{A100_DS}, A100 {memory_gb}GB {label} column; {SPARSE_HALVED}; "
               f"SM count {AMPERE_WP}",
    )  # fmt: skip


def _rtx_pro_6000_blackwell(
    *, suffix: str, edition: str, boost_clock_mhz: int, fp32: float, ai_tops: float
) -> ProductSpec:
    """An RTX PRO 6000 Blackwell edition from its datasheet FP32 and "AI TOPS" (FP4, sparse).

    Dense FP8 = AI TOPS / 4 (FP4 -> FP8 and sparse -> dense each halve), FP16/BF16 = FP8 / 2,
    TF32 = FP16 / 2, with FP32 accumulate at full rate as on the earlier professional cards
    (RTX A6000, RTX 6000 Ada); FP64 = FP32/64 per the RTX Blackwell whitepaper. INT8 is left
    unknown.
    """
    fp8 = ai_tops / 4
    return ProductSpec(
        pattern=r"RTX PRO 6000 Blackwell" + suffix,
        product=f"NVIDIA RTX PRO 6000 Blackwell {edition}",
        architecture="Blackwell", chip="GB202", compute_capability="12.0", sm_count=188,
        boost_clock_mhz=boost_clock_mhz, memory_gb=96,
        fp64=round(fp32 / 64, 2), fp32=fp32, tf32=round(fp8 / 4, 1), bf16=round(fp8 / 2, 1),
        fp16=round(fp8 / 2, 1), fp8=round(fp8, 1), memory_bandwidth_gbs=1792,
        source=f"{RTX_PRO_6000_DS}, {edition} Edition: FP32 {fp32:g} TFLOPS, AI {ai_tops:g} "
               f"TOPS (FP4 sparse) -> FP8 {fp8:g}, FP16/BF16 {fp8 / 2:g}, TF32 {fp8 / 4:g} "
               "dense, FP32 accumulate at full rate as on earlier professional cards; "
               "FP64 = FP32/64",
    )  # fmt: skip


# Laptop parts share the desktop name with a suffix but not its chip or clocks.
_NOT_MOBILE = r"(?!.*(Laptop|Mobile|Max-Q))"

# Most specific first: the first pattern that matches wins. FP64 of Turing/GA10x/AD10x/GB20x
# parts is not printed on their datasheets; it is FP32/32 (Turing) or FP32/64 (the others) per
# the architecture whitepapers (2 FP64 units per SM) and the source says so.
PRODUCTS: tuple[ProductSpec, ...] = (
    # --- Volta (CC 7.0): datasheet "Tensor Performance" is FP16 mixed precision, dense. ---
    ProductSpec(
        pattern=r"V100S", product="NVIDIA Tesla V100S PCIe 32GB",
        architecture="Volta", chip="GV100", compute_capability="7.0", sm_count=80,
        boost_clock_mhz=1601, memory_gb=32,
        fp64=8.2, fp32=16.4, fp16=130, memory_bandwidth_gbs=1134,
        source=f"{V100_DS}, V100S PCIe column; SM count {VOLTA_WP}",
    ),
    ProductSpec(
        pattern=r"V100.*SXM2", product="NVIDIA Tesla V100 SXM2",
        architecture="Volta", chip="GV100", compute_capability="7.0", sm_count=80,
        boost_clock_mhz=1530, memory_gb=None,
        fp64=7.8, fp32=15.7, fp16=125, memory_bandwidth_gbs=900,
        source=f"{V100_DS}, V100 SXM2 (NVLink) column; 16 and 32 GB share the peaks; "
               f"SM count {VOLTA_WP}",
    ),
    ProductSpec(
        pattern=r"V100.*PCIE", product="NVIDIA Tesla V100 PCIe",
        architecture="Volta", chip="GV100", compute_capability="7.0", sm_count=80,
        boost_clock_mhz=1380, memory_gb=None,
        fp64=7, fp32=14, fp16=112, memory_bandwidth_gbs=900,
        source=f"{V100_DS}, V100 PCIe column; SM count {VOLTA_WP}",
    ),
    # --- Turing (CC 7.5) ---
    ProductSpec(
        pattern=r"\bT4\b", product="NVIDIA T4",
        architecture="Turing", chip="TU104", compute_capability="7.5", sm_count=40,
        boost_clock_mhz=1590, memory_gb=16,
        fp64=0.25, fp32=8.1, fp16=65, int8=130, memory_bandwidth_gbs=320,
        source=f"{T4_DS} (FP32 8.1, mixed-precision FP16/FP32 65, INT8 130, 320 GB/s); "
               f"FP64 = FP32/32 and 40 SMs from {TURING_WP}",
    ),
    ProductSpec(
        pattern=r"RTX 2080 Ti" + _NOT_MOBILE, product="NVIDIA GeForce RTX 2080 Ti",
        architecture="Turing", chip="TU102", compute_capability="7.5", sm_count=68,
        boost_clock_mhz=1545, memory_gb=11,
        fp64=0.42, fp32=13.4, fp16=53.8, int8=215.2, memory_bandwidth_gbs=616,
        source=f"{TURING_WP}, RTX 2080 Ti reference-clock column (1545 MHz; the Founders Edition "
               "runs 1635 MHz): FP16 with FP32 accumulate 53.8 (107.6 with FP16 accumulate); "
               "FP64 = FP32/32",
    ),
    ProductSpec(
        pattern=r"RTX 2080(?! Ti| SUPER)" + _NOT_MOBILE, product="NVIDIA GeForce RTX 2080",
        architecture="Turing", chip="TU104", compute_capability="7.5", sm_count=46,
        boost_clock_mhz=1710, memory_gb=8,
        fp64=0.32, fp32=10.1, fp16=40.3, int8=161.1, memory_bandwidth_gbs=448,
        source=f"{TURING_WP}, RTX 2080 reference-clock column (1710 MHz): FP16 with FP32 "
               "accumulate 40.3 (80.5 with FP16 accumulate); FP64 = FP32/32",
    ),
    # --- Ampere GA100 (CC 8.0): TF32/BF16/FP16/INT8 halved from the datasheet's sparse values. ---
    _a100(form="SXM", memory_gb=80, memory_bandwidth_gbs=2039),
    _a100(form="PCIE", memory_gb=80, memory_bandwidth_gbs=1935),
    _a100(form="SXM", memory_gb=40, memory_bandwidth_gbs=1555),
    _a100(form="PCIE", memory_gb=40, memory_bandwidth_gbs=1555),
    ProductSpec(
        pattern=r"\bA30\b", product="NVIDIA A30",
        architecture="Ampere", chip="GA100", compute_capability="8.0", sm_count=56,
        boost_clock_mhz=1440, memory_gb=24,
        fp64=5.2, fp64_tensor=10.3, fp32=10.3, tf32=82, bf16=165, fp16=165, int8=330,
        memory_bandwidth_gbs=933,
        source=f"{A30_DS}; {SPARSE_HALVED}; 56 SMs = 3584 FP32 cores / 64",
    ),
    # --- Ampere GA10x (CC 8.6) ---
    ProductSpec(
        pattern=r"\bA10\b", product="NVIDIA A10",
        architecture="Ampere", chip="GA102", compute_capability="8.6", sm_count=72,
        boost_clock_mhz=1695, memory_gb=24,
        fp64=0.49, fp32=31.2, tf32=62.5, bf16=125, fp16=125, int8=250, memory_bandwidth_gbs=600,
        source=f"{A10_DS}; {SPARSE_HALVED}; FP64 = FP32/64 per {GA102_WP}",
    ),
    ProductSpec(
        pattern=r"\bA40\b", product="NVIDIA A40",
        architecture="Ampere", chip="GA102", compute_capability="8.6", sm_count=84,
        boost_clock_mhz=1740, memory_gb=48,
        fp64=0.58, fp32=37.4, tf32=74.8, bf16=149.7, fp16=149.7, int8=299.3,
        memory_bandwidth_gbs=696,
        source=f"{A40_DS} (dense figures as printed before the sparse ones); "
               f"FP64 = FP32/64 per {GA102_WP}",
    ),
    ProductSpec(
        pattern=r"RTX A6000" + _NOT_MOBILE, product="NVIDIA RTX A6000",
        architecture="Ampere", chip="GA102", compute_capability="8.6", sm_count=84,
        boost_clock_mhz=1800, memory_gb=48,
        fp64=0.6, fp32=38.7, tf32=77.4, bf16=154.8, fp16=154.8, int8=309.7,
        memory_bandwidth_gbs=768,
        source=f"{GA102_WP}, RTX A6000 column (FP32-accumulate tensor rates at full rate on this "
               f"professional card), agreeing with {RTX_A6000_DS} (Tensor 309.7 TFLOPS sparse); "
               "FP64 = FP32/64",
    ),
    ProductSpec(
        pattern=r"RTX A5000" + _NOT_MOBILE, product="NVIDIA RTX A5000",
        architecture="Ampere", chip="GA102", compute_capability="8.6", sm_count=64,
        boost_clock_mhz=1695, memory_gb=24,
        fp64=0.43, fp32=27.8, tf32=55.6, bf16=111.1, fp16=111.1, int8=222.2,
        memory_bandwidth_gbs=768,
        source=f"{RTX_A5000_DS} (FP32 27.8, Tensor 222.2 TFLOPS sparse -> 111.1 dense FP16); "
               f"TF32 = FP16/2, INT8 = 2 x FP16 and FP64 = FP32/64 per {GA102_WP}",
    ),
    ProductSpec(
        pattern=r"RTX 3090(?! Ti)" + _NOT_MOBILE, product="NVIDIA GeForce RTX 3090",
        architecture="Ampere", chip="GA102", compute_capability="8.6", sm_count=82,
        boost_clock_mhz=1695, memory_gb=24,
        fp64=0.56, fp32=35.6, tf32=35.6, bf16=71, fp16=71, int8=284, memory_bandwidth_gbs=936,
        source=f"{GA102_WP}, RTX 3090 column: FP16/BF16 with FP32 accumulate 71 (142 with FP16 "
               "accumulate), TF32 35.6, INT8 284; FP64 = FP32/64",
    ),
    # --- Ada Lovelace (CC 8.9) ---
    ProductSpec(
        pattern=r"\bL40S\b", product="NVIDIA L40S",
        architecture="Ada Lovelace", chip="AD102", compute_capability="8.9", sm_count=142,
        boost_clock_mhz=2520, memory_gb=48,
        fp64=1.43, fp32=91.6, tf32=183, bf16=362.05, fp16=362.05, fp8=733, int8=733,
        memory_bandwidth_gbs=864,
        source=f"{L40S_DS} (dense figures as printed before the sparse ones); "
               f"FP64 = FP32/64 per {ADA_WP}",
    ),
    # The L40's datasheet tensor figures are half the L40S's on the same chip and clocks.
    ProductSpec(
        pattern=r"\bL40\b(?!S)", product="NVIDIA L40",
        architecture="Ada Lovelace", chip="AD102", compute_capability="8.9", sm_count=142,
        boost_clock_mhz=2490, memory_gb=48,
        fp64=1.41, fp32=90.5, tf32=90.5, bf16=181.05, fp16=181.05, fp8=362, int8=362,
        memory_bandwidth_gbs=864,
        source=f"{L40_DS} (dense figures as printed before the sparse ones); "
               f"FP64 = FP32/64 per {ADA_WP}",
    ),
    ProductSpec(
        pattern=r"\bL4\b", product="NVIDIA L4",
        architecture="Ada Lovelace", chip="AD104", compute_capability="8.9", sm_count=58,
        boost_clock_mhz=2040, memory_gb=24,
        fp64=0.47, fp32=30.3, tf32=60, bf16=121, fp16=121, fp8=242.5, int8=242.5,
        memory_bandwidth_gbs=300,
        source=f"{L4_DS}; {SPARSE_HALVED} (TF32 120, FP16/BF16 242, FP8/INT8 485); "
               f"58 SMs = 7424 FP32 cores / 128; FP64 = FP32/64 per {ADA_WP}",
    ),
    ProductSpec(
        pattern=r"RTX 6000 Ada" + _NOT_MOBILE, product="NVIDIA RTX 6000 Ada Generation",
        architecture="Ada Lovelace", chip="AD102", compute_capability="8.9", sm_count=142,
        boost_clock_mhz=2505, memory_gb=48,
        fp64=1.42, fp32=91.1, tf32=182.1, bf16=364.2, fp16=364.2, fp8=728.5, int8=728.5,
        memory_bandwidth_gbs=960,
        source=f"{RTX_6000_ADA_DS} (FP32 91.1, Tensor 1457 TFLOPS = FP8 sparse -> 728.5 dense); "
               f"FP16/BF16 = FP8/2, TF32 = FP8/4, FP64 = FP32/64 per {ADA_WP}",
    ),
    # FP8 with FP32 accumulate: the whitepaper's 660.6 is the FP16-accumulate figure; GeForce
    # runs FP32 accumulate at half rate, 330.3 (as waredb.com lists). Unsure; see the report.
    ProductSpec(
        pattern=r"RTX 4090(?! D)" + _NOT_MOBILE, product="NVIDIA GeForce RTX 4090",
        architecture="Ada Lovelace", chip="AD102", compute_capability="8.9", sm_count=128,
        boost_clock_mhz=2520, memory_gb=24,
        fp64=1.29, fp32=82.6, tf32=82.6, bf16=165.2, fp16=165.2, fp8=330.3, int8=660.6,
        memory_bandwidth_gbs=1008,
        source=f"{ADA_WP}, RTX 4090 column: FP16/BF16 with FP32 accumulate 165.2 (330.3 with FP16 "
               "accumulate), TF32 82.6, INT8 660.6; FP8 with FP32 accumulate taken as half the "
               "FP16-accumulate 660.6; FP64 = FP32/64",
    ),
    # --- Hopper (CC 9.0): datasheet tensor figures are sparse; halved. ---
    ProductSpec(
        pattern=r"\bH200\b.*NVL", product="NVIDIA H200 NVL",
        architecture="Hopper", chip="GH100", compute_capability="9.0", sm_count=132,
        boost_clock_mhz=None, memory_gb=141,
        fp64=30, fp64_tensor=60, fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5,
        int8=1670.5, memory_bandwidth_gbs=4800,
        source=f"{H200_DS}, H200 NVL column; {SPARSE_HALVED}",
    ),
    ProductSpec(
        pattern=r"\bH200\b", product="NVIDIA H200 SXM",
        architecture="Hopper", chip="GH100", compute_capability="9.0", sm_count=132,
        boost_clock_mhz=1980, memory_gb=141,
        fp64=34, fp64_tensor=67, fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979, int8=1979,
        memory_bandwidth_gbs=4800,
        source=f"{H200_DS}, H200 SXM column; {SPARSE_HALVED}; SM count {HOPPER_WP}",
    ),
    ProductSpec(
        pattern=r"\bH100\b.*NVL", product="NVIDIA H100 NVL",
        architecture="Hopper", chip="GH100", compute_capability="9.0", sm_count=132,
        boost_clock_mhz=None, memory_gb=94,
        fp64=30, fp64_tensor=60, fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5,
        int8=1670.5, memory_bandwidth_gbs=3900,
        source=f"{H100_DS}, H100 NVL column (per GPU; an early version printed the figures for a "
               f"pair of cards); {SPARSE_HALVED}",
    ),
    ProductSpec(
        pattern=r"\bH100\b.*PCIE", product="NVIDIA H100 PCIe",
        architecture="Hopper", chip="GH100", compute_capability="9.0", sm_count=114,
        boost_clock_mhz=1755, memory_gb=80,
        fp64=26, fp64_tensor=51, fp32=51, tf32=378, bf16=756.5, fp16=756.5, fp8=1513, int8=1513,
        memory_bandwidth_gbs=2000,
        source=f"{H100_DS}, H100 PCIe column, and {H100_PCIE_PB}; {SPARSE_HALVED}; "
               f"114 SMs per {HOPPER_WP}",
    ),
    ProductSpec(
        pattern=r"\bH100\b.*(SXM|HBM3)", product="NVIDIA H100 SXM",
        architecture="Hopper", chip="GH100", compute_capability="9.0", sm_count=132,
        boost_clock_mhz=1980, memory_gb=80,
        fp64=34, fp64_tensor=67, fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979, int8=1979,
        memory_bandwidth_gbs=3350,
        source=f"{H100_DS}, H100 SXM column; {SPARSE_HALVED}; SM count {HOPPER_WP}",
    ),
    # --- Blackwell ---
    # The HGX B200 table has been revised: an earlier version gave 8 TB/s per GPU and a later
    # one (Glenn Lockwood's notes cite it) FP64 40 / FP32 80; we use the figures NVIDIA's HGX
    # page gives per GPU (FP64 37, FP32 75, 7.7 TB/s), the lower and more recent.
    ProductSpec(
        pattern=r"\bB200\b", product="NVIDIA B200 (HGX)",
        architecture="Blackwell", chip="GB100", compute_capability="10.0", sm_count=148,
        boost_clock_mhz=None, memory_gb=180,
        fp64=37, fp64_tensor=37, fp32=75, tf32=1100, bf16=2250, fp16=2250, fp8=4500, int8=4500,
        memory_bandwidth_gbs=7700,
        source=f"{HGX_B200_DS}: FP64 37, FP32 75, TF32 2.2 / FP16 4.5 / FP8 9 / INT8 9 P(FL)OPS "
               "sparse (halved here), 7.7 TB/s; 148 SMs as CUDA reports them",
    ),
    # INT8 left None: not stated with confidence for GB20x.
    ProductSpec(
        pattern=r"RTX 5090(?! D)" + _NOT_MOBILE, product="NVIDIA GeForce RTX 5090",
        architecture="Blackwell", chip="GB202", compute_capability="12.0", sm_count=170,
        boost_clock_mhz=2407, memory_gb=32,
        fp64=1.64, fp32=104.8, tf32=104.8, bf16=209.5, fp16=209.5, fp8=419,
        memory_bandwidth_gbs=1792,
        source=f"{RTX_BLACKWELL_WP}, RTX 5090 column: FP16/BF16 with FP32 accumulate 209.5 (419 "
               "with FP16 accumulate), TF32 104.8, FP8 with FP32 accumulate 419 (838 with FP16 "
               "accumulate); FP64 = FP32/64",
    ),
    _rtx_pro_6000_blackwell(
        suffix=r".*Max-Q", edition="Max-Q Workstation", boost_clock_mhz=2288, fp32=110,
        ai_tops=3511,
    ),
    _rtx_pro_6000_blackwell(
        suffix=r"(?!.*(Max-Q|Server))", edition="Workstation", boost_clock_mhz=2617, fp32=125,
        ai_tops=4000,
    ),
)  # fmt: skip


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def spec_for(name: str | None) -> ProductSpec | None:
    """The table entry whose pattern matches the NVML product name first, or ``None``."""
    if not name:
        return None
    for spec in PRODUCTS:
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
    cores = FP32_CORES_PER_SM.get(cc) if cc else None
    if cc is None or cores is None:
        return None
    rates = SM_RATES.get(cc) or _fp32_only(cores, CUDA_SAMPLES)
    bandwidth = _bandwidth_gbs(mem_clock_max_mhz, memory_bus_width)
    limited = bool(name and RATE_LIMITED_PARTS.search(name))
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
            f"max SM clock (lanes per SM: {CUDA_SAMPLES})"
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
    for s in PRODUCTS:
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


# The smallest MIG GPU-instance profile of each MIG-capable product (``nvidia-smi mig -lgip``
# lists them on the card). Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), one table per product. Matched on
# the NVML name and the memory size (the 40 GB and 80 GB A100 share a name stem). A card not
# listed gets the command that lists its profiles instead of a guess.


@dataclass(frozen=True, kw_only=True)
class MigProfile:
    """The smallest MIG profile of the cards whose NVML name matches ``pattern`` and whose
    memory is ``memory_from_gib`` to ``memory_to_gib`` GiB."""

    pattern: str
    memory_from_gib: float
    memory_to_gib: float
    profile: str


MIG_SMALLEST_PROFILES: tuple[MigProfile, ...] = (
    MigProfile(pattern=r"A30\b", memory_from_gib=20, memory_to_gib=26, profile="1g.6gb"),
    MigProfile(pattern=r"A100", memory_from_gib=35, memory_to_gib=45, profile="1g.5gb"),
    MigProfile(pattern=r"A100", memory_from_gib=70, memory_to_gib=85, profile="1g.10gb"),
    # H100 SXM5 / PCIe 80 GB
    MigProfile(pattern=r"H100", memory_from_gib=70, memory_to_gib=85, profile="1g.10gb"),
    # H100 NVL 94 GB, H100 96 GB
    MigProfile(pattern=r"H100", memory_from_gib=88, memory_to_gib=100, profile="1g.12gb"),
    # H200 SXM and NVL 141 GB
    MigProfile(pattern=r"H200", memory_from_gib=130, memory_to_gib=150, profile="1g.18gb"),
    # B200 180 GB
    MigProfile(pattern=r"\bB200", memory_from_gib=170, memory_to_gib=190, profile="1g.23gb"),
)


def mig_smallest_profile(name: str | None, memory_total: int | None) -> str | None:
    """The smallest MIG profile of the card named ``name`` with ``memory_total`` bytes, or None
    when this table does not know the card."""
    if not name or not memory_total:
        return None
    gib = memory_total / 2**30
    for row in MIG_SMALLEST_PROFILES:
        if re.search(row.pattern, name) and row.memory_from_gib <= gib <= row.memory_to_gib:
            return row.profile
    return None


# --- PCIe links ----------------------------------------------------------------------------------

# One lane's rate in one direction after line encoding, GB/s (10^9 bytes per second): transfer
# rate x encoding efficiency / 8 bits, from the PCI-SIG PCI Express Base Specification of each
# generation (the revision in brackets). Protocol overhead (TLP headers, flow control) is not
# taken off: healthy pinned host-to-device copies reach 60-87 % of these.
PCIE_LANE_GBS: dict[int, float] = {
    1: 0.25,  # 2.5 GT/s x 8b/10b encoding / 8 (Base Specification 1.0a)
    2: 0.5,  # 5.0 GT/s x 8b/10b / 8 (2.0)
    3: 0.985,  # 8.0 GT/s x 128b/130b / 8 (3.0)
    4: 1.969,  # 16 GT/s x 128b/130b / 8 (4.0)
    5: 3.938,  # 32 GT/s x 128b/130b / 8 (5.0)
    6: 7.563,  # 64 GT/s PAM4 x 242/256 (FLIT mode: 242 of each 256 bytes carry data) / 8 (6.0)
}


def pcie_link_gbs(gen: int | None, width: int | None) -> float | None:
    """Theoretical one-direction rate of a PCIe link of generation ``gen`` and ``width`` lanes in
    GB/s (:data:`PCIE_LANE_GBS` x lanes); an unknown generation or width gives ``None``."""
    if gen is None or width is None or gen not in PCIE_LANE_GBS:
        return None
    return PCIE_LANE_GBS[gen] * width


if __name__ == "__main__":  # python -m gpuprobe.hardware.specs: the table in docs/peaks.md
    print(markdown_table(), end="")
