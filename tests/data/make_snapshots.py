"""Write the inventory snapshots the tests replay (the ``gpuprobe info --json`` format).

No GPU machine was available when these were made, so they are *synthesised*: each value comes
from the card's datasheet, the reference notes (E7: a T4 on GCP with CUDA 12.x) or what NVML
reports for that product, and every file says so in its ``origin``. Issue 8 replaces
``h200.json`` with a recording from a real H200. Run: ``python tests/data/make_snapshots.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from gpuprobe.platform.frameworks.base import FrameworkDevice, FrameworkInfo  # noqa: E402
from gpuprobe.platform.hardware.types import (  # noqa: E402
    Blas,
    CudaDevice,
    CudaView,
    Driver,
    Gpu,
    GpuProcess,
    Host,
    PciDevice,
    Pcie,
)
from gpuprobe.platform.inventory import Inventory, enrich_gpu  # noqa: E402

HERE = Path(__file__).resolve().parent
MIB = 2**20
TORCH_CU124_ARCHS = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
TORCH_CU130_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


def _absent(name: str) -> FrameworkInfo:
    return FrameworkInfo(name=name, installed=False)


def _write(name: str, inv: Inventory) -> None:
    (HERE / name).write_text(inv.to_json() + "\n")
    print(f"wrote {name}")


def t4() -> Inventory:
    """E7's card: a Tesla T4 on a GCP n1-standard-4, driver 550, torch 2.5.1+cu124."""
    uuid = "GPU-5f6c1b2e-8d3a-4c1e-9b7f-2a4d6e8f0a1b"
    gpu = Gpu(
        index=0,
        uuid=uuid,
        pci_bus_id="0000:00:04.0",
        name="Tesla T4",
        compute_capability="7.5",
        memory_total=15360 * MIB,
        memory_used=255 * MIB,
        memory_free=15105 * MIB,
        fp32_cores=2560,
        sm_clock_mhz=300,
        sm_clock_max_mhz=1590,
        mem_clock_mhz=405,
        mem_clock_max_mhz=5001,
        memory_bus_width=256,
        pcie=Pcie(gen_current=1, gen_max=3, gen_max_gpu=3, width_current=16, width_max=16),
        power_draw_w=9.6,
        power_limit_w=70.0,
        temperature_c=37,
        utilization_gpu=0,
        persistence_mode=False,
        ecc_mode=True,
        ecc_uncorrected_volatile=0,
        retired_pages=0,
        retired_pages_pending=False,
        mig_mode=None,
        clock_event_reasons=("gpu_idle",),
    )
    cuda = CudaView(
        status="ok",
        driver_version="12.4",
        devices=(
            CudaDevice(
                ordinal=0,
                uuid=uuid,
                pci_bus_id="0000:00:04.0",
                name="Tesla T4",
                compute_capability="7.5",
                sm_count=40,
                memory_total=15828320256,
                memory_bus_width=256,
                l2_cache_bytes=4 * MIB,
            ),
        ),
    )
    torch = FrameworkInfo(
        name="torch",
        installed=True,
        version="2.5.1+cu124",
        probe="runtime",
        importable=True,
        distribution="torch",
        cuda_version="12.4",
        cudnn_version="9.1.0",
        cpu_only_build=False,
        arch_list=TORCH_CU124_ARCHS,
        gpu_available=True,
        devices=(FrameworkDevice(0, "Tesla T4", "7.5", uuid, 15828320256),),
    )
    return Inventory(
        host=Host(
            hostname="t4-vm",
            cpu_model="Intel(R) Xeon(R) CPU @ 2.20GHz",
            machine="x86_64",
            physical_cores=2,
            logical_cores=4,
            usable_cores=4,
            simd=("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"),
            memory_total=15 * 2**30,
            memory_available=13 * 2**30,
            os="Ubuntu 22.04.4 LTS (Linux 6.5.0-1020-gcp)",
            python="CPython 3.10.12",
            numpy="1.26.4",
            blas=Blas("openblas", "0.3.23.dev", 4, "SkylakeX"),
        ),
        driver=Driver(
            status="ok",
            driver_version="550.54.15",
            cuda_driver_version="12.4",
            nvml_version="12.550.54.15",
        ),
        gpus=(enrich_gpu(gpu, cuda),),
        pci_nvidia=(PciDevice("0000:00:04.0", "0x10de", "0x1eb8", "0x030200", "nvidia"),),
        cuda=cuda,
        cuda_all=cuda,
        frameworks=(torch, _absent("cupy"), _absent("jax"), _absent("numba")),
        created="2026-11-21T00:00:00+00:00",
        origin="synthesised by tests/data/make_snapshots.py from the T4 datasheet and E7's "
        "GCP n1-standard-4 (not recorded on a card)",
    )


def h200() -> Inventory:
    """The lent H200 as its KINDS page describes it: torch 2.11+cu130, CuPy, JAX."""
    uuid = "GPU-0b9d8c7a-6e5f-4a3b-2c1d-0e9f8a7b6c5d"
    gpu = Gpu(
        index=0,
        uuid=uuid,
        pci_bus_id="0000:18:00.0",
        name="NVIDIA H200",
        compute_capability="9.0",
        memory_total=143771 * MIB,
        memory_used=612 * MIB,
        memory_free=143159 * MIB,
        fp32_cores=16896,
        sm_clock_mhz=345,
        sm_clock_max_mhz=1980,
        mem_clock_mhz=3201,
        mem_clock_max_mhz=3201,
        memory_bus_width=6144,
        pcie=Pcie(gen_current=5, gen_max=5, gen_max_gpu=5, width_current=16, width_max=16),
        power_draw_w=76.3,
        power_limit_w=700.0,
        temperature_c=29,
        utilization_gpu=0,
        persistence_mode=True,
        ecc_mode=True,
        ecc_uncorrected_volatile=0,
        retired_pages=None,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        mig_mode=False,
        clock_event_reasons=("gpu_idle",),
    )
    cuda = CudaView(
        status="ok",
        driver_version="13.0",
        devices=(
            CudaDevice(
                ordinal=0,
                uuid=uuid,
                pci_bus_id="0000:18:00.0",
                name="NVIDIA H200",
                compute_capability="9.0",
                sm_count=132,
                memory_total=150754820096,
                memory_bus_width=6144,
                l2_cache_bytes=60 * MIB,
            ),
        ),
    )
    dev = (FrameworkDevice(0, "NVIDIA H200", "9.0", uuid, 150754820096),)
    return Inventory(
        host=Host(
            hostname="h200",
            cpu_model="Intel(R) Xeon(R) Platinum 8480+",
            machine="x86_64",
            physical_cores=16,
            logical_cores=16,
            usable_cores=16,
            simd=(
                "sse4_2",
                "avx",
                "avx2",
                "fma",
                "avx512f",
                "avx512bw",
                "avx512vl",
                "avx512_vnni",
                "avx512_bf16",
                "avx512_fp16",
                "amx_tile",
                "amx_bf16",
                "amx_int8",
            ),
            memory_total=128 * 2**30,
            memory_available=120 * 2**30,
            os="Ubuntu 24.04 LTS (Linux 6.8.0)",
            python="CPython 3.12.3",
            numpy="2.2.6",
            blas=Blas("openblas", "0.3.29", 16, "SapphireRapids"),
        ),
        driver=Driver(
            status="ok",
            driver_version="580.95.05",
            cuda_driver_version="13.0",
            nvml_version="13.580.95.05",
        ),
        gpus=(enrich_gpu(gpu, cuda),),
        pci_nvidia=(PciDevice("0000:18:00.0", "0x10de", "0x2335", "0x030200", "nvidia"),),
        cuda=cuda,
        cuda_all=cuda,
        frameworks=(
            FrameworkInfo(
                name="torch",
                installed=True,
                version="2.11.0+cu130",
                probe="runtime",
                importable=True,
                distribution="torch",
                cuda_version="13.0",
                cudnn_version="9.13.0",
                cpu_only_build=False,
                arch_list=TORCH_CU130_ARCHS,
                gpu_available=True,
                devices=dev,
            ),
            FrameworkInfo(
                name="cupy",
                installed=True,
                version="13.6.0",
                probe="runtime",
                importable=True,
                distribution="cupy-cuda13x",
                cuda_version="13.0",
                cpu_only_build=False,
                gpu_available=True,
                devices=dev,
                extra={"kernels": "compiled at run time by NVRTC"},
            ),
            FrameworkInfo(
                name="jax",
                installed=True,
                version="0.7.2",
                probe="runtime",
                importable=True,
                distribution="jax",
                cuda_version="13.x",
                cpu_only_build=False,
                gpu_available=True,
                devices=(FrameworkDevice(0, "NVIDIA H200", "9.0"),),
            ),
            _absent("numba"),
        ),
        created="2026-11-21T00:00:00+00:00",
        origin="synthesised by tests/data/make_snapshots.py from the H200 datasheet and the "
        "device tool's H200 page (not yet recorded on the card: issue 8)",
    )


def rtx5090_old_torch() -> Inventory:
    """A Blackwell desktop card (sm_120) with torch 2.5.1+cu124, which has no sm_120 kernels."""
    uuid = "GPU-7a1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    gpu = Gpu(
        index=0,
        uuid=uuid,
        pci_bus_id="0000:01:00.0",
        name="NVIDIA GeForce RTX 5090",
        compute_capability="12.0",
        memory_total=32607 * MIB,
        memory_used=1024 * MIB,
        memory_free=31583 * MIB,
        fp32_cores=21760,
        sm_clock_mhz=600,
        sm_clock_max_mhz=3090,
        mem_clock_mhz=810,
        mem_clock_max_mhz=14001,
        memory_bus_width=512,
        pcie=Pcie(gen_current=1, gen_max=5, gen_max_gpu=5, width_current=16, width_max=16),
        power_draw_w=31.2,
        power_limit_w=575.0,
        temperature_c=34,
        utilization_gpu=2,
        persistence_mode=False,
        ecc_mode=False,
        mig_mode=None,
        processes=(GpuProcess(pid=2101, name="Xorg", used_memory=412 * MIB, kind="graphics"),),
        clock_event_reasons=("gpu_idle",),
    )
    cuda = CudaView(
        status="ok",
        driver_version="12.8",
        devices=(
            CudaDevice(
                ordinal=0,
                uuid=uuid,
                pci_bus_id="0000:01:00.0",
                name="NVIDIA GeForce RTX 5090",
                compute_capability="12.0",
                sm_count=170,
                memory_total=34190917632,
                memory_bus_width=512,
                l2_cache_bytes=96 * MIB,
            ),
        ),
    )
    return Inventory(
        host=Host(
            hostname="workstation",
            cpu_model="AMD Ryzen 9 9950X 16-Core Processor",
            machine="x86_64",
            physical_cores=16,
            logical_cores=32,
            usable_cores=32,
            simd=(
                "sse4_2",
                "avx",
                "avx2",
                "fma",
                "avx512f",
                "avx512bw",
                "avx512vl",
                "avx512_vnni",
                "avx512_bf16",
            ),
            memory_total=64 * 2**30,
            memory_available=50 * 2**30,
            os="Ubuntu 24.04.1 LTS (Linux 6.8.0-45-generic)",
            python="CPython 3.11.9",
            numpy="1.26.4",
            blas=Blas("openblas", "0.3.23.dev", 32, "Zen"),
        ),
        driver=Driver(
            status="ok",
            driver_version="570.86.16",
            cuda_driver_version="12.8",
            nvml_version="12.570.86.16",
        ),
        gpus=(enrich_gpu(gpu, cuda),),
        pci_nvidia=(PciDevice("0000:01:00.0", "0x10de", "0x2b85", "0x030000", "nvidia"),),
        cuda=cuda,
        cuda_all=cuda,
        frameworks=(
            FrameworkInfo(
                name="torch",
                installed=True,
                version="2.5.1+cu124",
                probe="runtime",
                importable=True,
                distribution="torch",
                cuda_version="12.4",
                cudnn_version="9.1.0",
                cpu_only_build=False,
                arch_list=TORCH_CU124_ARCHS,
                gpu_available=True,
                devices=(FrameworkDevice(0, "NVIDIA GeForce RTX 5090", "12.0", uuid, 34190917632),),
                warnings=(
                    "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not "
                    "compatible with the current PyTorch installation. The current "
                    "PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 "
                    "sm_80 sm_86 sm_90.",
                ),
            ),
            _absent("cupy"),
            _absent("jax"),
            _absent("numba"),
        ),
        created="2026-11-21T00:00:00+00:00",
        origin="synthesised by tests/data/make_snapshots.py from the RTX 5090 datasheet and "
        "PyTorch issue reports of sm_120 on torch 2.5 (not recorded on a card)",
    )


if __name__ == "__main__":
    _write("t4.json", t4())
    _write("h200.json", h200())
    _write("rtx5090_torch_cu124.json", rtx5090_old_torch())
