"""GPU traces for the rule tests, built to the Kineto schema (there is no GPU on CI).

Each scenario is a function ``(path) -> path`` that writes a trace. To test a rule on a real
recording instead, put ``<scenario>.json.gz`` (recorded by the matching script in examples/ on a
GPU machine) in tests/data/diagnose/ or in the folder named by ``GPUPROBE_TRACE_DIR``:
:func:`trace_path` prefers a recorded file over the synthetic one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

DATA = Path(__file__).resolve().parents[2] / "data" / "diagnose"

GEMM_FP32 = "ampere_sgemm_128x64_nn"
GEMM_TF32 = "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1"
SMALL = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def healthy(path: str, steps: int = 5) -> str:
    """Big kernels back to back, pinned async copies, no syncs: nothing to report."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            b.memcpy(nbytes=8 << 20, gpu_us=300.0, pinned=True)
            for _ in range(20):
                b.launch(
                    GEMM_TF32,
                    kernel_us=400.0,
                    op="aten::mm",
                    op_args={
                        "Input type": ["float", "float"],
                        "Input Dims": [[512, 512], [512, 512]],
                    },
                )
        b.cpu(5.0)
    b.write(path)
    return path


def launch_bound(path: str, steps: int = 5) -> str:
    """200 kernels of 2 µs per step, each behind a 6 µs launch inside an 8 µs op (E9)."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            for _ in range(200):
                b.launch(SMALL, kernel_us=2.0, launch_us=6.0, op="aten::add")
    b.write(path)
    return path


def sync_every_step(path: str, steps: int = 5) -> str:
    """Work, then loss.item(), then 2 ms of host work before the next launch (E5)."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            for _ in range(10):
                b.launch(GEMM_TF32, kernel_us=200.0, op="aten::mm")
            b.item()
            b.cpu(2000.0)
    b.write(path)
    return path


def pageable(path: str, steps: int = 5) -> str:
    """A 50 MB host-to-device copy from pageable memory each step (E10)."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            b.memcpy(nbytes=50_000_000, gpu_us=6000.0, pinned=False)
            for _ in range(10):
                b.launch(GEMM_TF32, kernel_us=500.0, op="aten::mm")
    b.write(path)
    return path


def fp32_gemm(path: str, steps: int = 5, kernel: str = GEMM_FP32) -> str:
    """FP32 sgemm dominates on a compute 9.0 card (E4)."""
    b = KinetoBuilder(compute_major=9)
    for n in range(steps):
        with b.step(n):
            for _ in range(8):
                b.launch(
                    kernel,
                    kernel_us=900.0,
                    op="aten::mm",
                    op_args={"Input type": ["float", "float"]},
                )
                b.launch(SMALL, kernel_us=30.0, op="aten::add")
    b.write(path)
    return path


def tf32_gemm(path: str, steps: int = 5) -> str:
    """The fixed twin of :func:`fp32_gemm`: the same GEMMs with TF32 kernels."""
    return fp32_gemm(path, steps, kernel=GEMM_TF32)


def peak_memory(path: str, steps: int = 3, share: float = 0.95) -> str:
    """The caching allocator reserves ``share`` of a 80 GB card."""
    cap = 80_000_000_000
    b = KinetoBuilder(total_memory=cap)
    for n in range(steps):
        with b.step(n):
            b.memory(allocated=0.8 * share * cap, reserved=share * cap)
            for _ in range(5):
                b.launch(GEMM_TF32, kernel_us=1000.0, op="aten::mm")
    b.write(path)
    return path


def input_bound(path: str, steps: int = 5) -> str:
    """A single-process DataLoader takes 3 ms of a ~5 ms step (the step ends with a sync)."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            b.dataloader(3000.0, single_process=True)
            for _ in range(4):
                b.launch(GEMM_TF32, kernel_us=500.0, op="aten::mm")
            b.sync()
    b.write(path)
    return path


def contiguous(path: str, steps: int = 4) -> str:
    """x.permute(0, 2, 1).contiguous() on a 64 MB tensor each step: a 300 µs copy kernel."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            with b.op("aten::permute"):
                pass
            with (
                b.op(
                    "aten::contiguous",
                    **{
                        "Input Dims": [[64, 1024, 256]],
                        "Input Strides": [[262144, 1, 1024]],
                        "Input type": ["float"],
                    },
                ),
                b.op("aten::clone"),
            ):
                b.launch(
                    "void at::native::elementwise_kernel<copy>", kernel_us=300.0, op="aten::copy_"
                )
            for _ in range(4):
                b.launch(GEMM_TF32, kernel_us=250.0, op="aten::mm")
    b.write(path)
    return path


def multi_stream(path: str, steps: int = 6, devices: int = 1) -> str:
    """Compute and copy streams on ``devices`` GPUs with mixed gaps: for the HTA comparison."""
    b = KinetoBuilder(devices=devices)
    for n in range(steps):
        with b.step(n):
            b.dataloader(400.0 + 100 * (n % 3))
            for d in range(devices):
                b.memcpy(nbytes=4 << 20, gpu_us=120.0, pinned=True, stream=9, device=d)
                for k in range(30):
                    b.launch(
                        SMALL if k % 3 else GEMM_TF32,
                        kernel_us=4.0 if k % 3 else 150.0,
                        launch_us=5.0,
                        op="aten::mm",
                        device=d,
                    )
                    if k % 10 == 0:
                        b.cpu(60.0)  # Python between ops: host-wait gaps
                b.memset(nbytes=1 << 20, gpu_us=10.0, device=d)
            b.sync("cudaDeviceSynchronize")
            b.cpu(150.0)
    b.write(path)
    return path


MINGPT_STEPS_MS = (1684.0, 1557.0, 381.0, 70.0, 88.0)  # an unmodified minGPT run (issue 39)


def unsteady(path: str, steps_ms: tuple[float, ...] = MINGPT_STEPS_MS, extra: int = -1) -> str:
    """Steps of ``steps_ms`` (an unmodified minGPT run under gpuprobe profile by default: 1684,
    1557, 381, 70 and 88 ms): in each, host work that queues nothing (untraced Python), then 20
    GEMMs of 2.5 ms and a sync, so the same work in every step, the slow ones slower on the
    host; step index ``extra`` (0-based, -1 none) launches 100 GEMMs instead (other work)."""
    b = KinetoBuilder()
    for i, ms in enumerate(steps_ms):
        kernels = 100 if i == extra else 20
        with b.step(i + 1):
            b.cpu(ms * 1e3 - kernels * 2500.0)
            for _ in range(kernels):
                b.launch(GEMM_TF32, kernel_us=2500.0, op="aten::mm")
            b.sync()
    b.write(path)
    return path


SCENARIOS: dict[str, Callable[..., str]] = {
    "healthy": healthy,
    "launch_bound": launch_bound,
    "sync_every_step": sync_every_step,
    "pageable": pageable,
    "fp32_gemm": fp32_gemm,
    "tf32_gemm": tf32_gemm,
    "peak_memory": peak_memory,
    "input_bound": input_bound,
    "contiguous": contiguous,
    "multi_stream": multi_stream,
    "unsteady": unsteady,
}


def trace_path(name: str, tmp: Path) -> str:
    """A recorded trace for ``name`` if one is on disk, else a synthetic one written in ``tmp``."""
    for folder in (os.environ.get("GPUPROBE_TRACE_DIR"), DATA):
        if folder and (Path(folder) / f"{name}.json.gz").is_file():
            return str(Path(folder) / f"{name}.json.gz")
    return SCENARIOS[name](str(tmp / f"{name}.json.gz"))
