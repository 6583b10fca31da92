"""The doctor's kernel checks for one framework on one device, run in a child process:
``python -m gpuprobe.tools.doctor.worker FRAMEWORK DEVICE [--quick]`` prints a :class:`WorkerResult`.

Each check computes a real result on the device and compares it with NumPy in float64 (a matmul
and E1's expression, docs/experiments.md#e1), times it with the device's own events, and, on a
GPU, times a pinned host-to-device copy while reading the card's PCIe link and clock-event reasons
through NVML.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core.records import Record
from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.platform.measurement import Measurement, rel_error
from gpuprobe.platform.timing import measure

__all__ = ["E1_HOST_BYTES", "E1_MEMORY_FRACTION", "SIZES", "WorkerResult", "e1_size", "run_checks"]

# Problem sizes (full, quick). E1 is the note's 10000x10000; matmuls are timed at a size where a
# GPU should win clearly and checked for correctness at a size whose float64 reference is cheap.
SIZES: dict[str, tuple[int, int]] = {
    "e1": (10_000, 4_096),
    "e1_check": (2_000, 1_000),
    "matmul": (4_096, 2_048),
    "matmul_check": (1_024, 512),
    "h2d_bytes": (256 * 2**20, 64 * 2**20),
}
TIME_BUDGET_S = (0.5, 0.2)  # per timed measurement (full, quick)
# Host bytes E1 holds per element of its n×n array at its peak: the float32 input and, for
# NumPy's float64 run, its float64 copy and the two temporaries NumPy keeps (sin(x)**2 and
# cos(x)**2; the ** and the / reuse their operand's buffer): 28 B, the 2.8 GB peak RSS measured
# for the note's 10000×10000; torch on the CPU: the input, its tensor and two temporaries;
# on a GPU the host keeps only the float32 input.
E1_HOST_BYTES = {"numpy": 4 + 8 + 2 * 8, "cpu": 4 + 4 + 2 * 4, "gpu": 4}
# The share of the memory this process may still take that E1 may use (gpuprobe's choice:
# room for the other checks' arrays and what the libraries allocate meanwhile).
E1_MEMORY_FRACTION = 0.6
E1_MIN_N = 500  # smaller than this, E1 times the call, not the arithmetic
LOAD_SECONDS = 0.5  # how long the card is kept busy while NVML is read under load


@dataclass(frozen=True)
class WorkerResult(Record):
    """What one framework did on one device."""

    framework: str
    device: str
    uuid: str | None = None
    error: str | None = None
    rel_errors: dict[str, float] = field(default_factory=dict)  # check -> ‖out-ref‖/‖ref‖
    measurements: tuple[Measurement, ...] = ()
    under_load: tuple[GpuSample, ...] = ()
    notes: tuple[str, ...] = ()
    # the error is the doctor's own arrays not fitting in the memory it may take, not a fault
    # of the framework
    out_of_memory: bool = False
    available_memory: int | None = None  # bytes this process could still take, before E1

    def measurement(self, name: str) -> Measurement | None:
        """The measurement called ``name`` (``e1-float32``, ``matmul-float32``, ``h2d-pinned``)."""
        return next((m for m in self.measurements if m.name == name), None)


def _nvml_index(uuid: str | None) -> tuple[Any, int | None]:
    """An open NVML session and the NVML index of the card with ``uuid``."""
    if uuid is None:
        return None, None
    try:
        from gpuprobe.platform.hardware.nvml import nvml_session

        cm = nvml_session()
        session = cm.__enter__()
    except Exception:
        return None, None
    for i in range(session.device_count()):
        if session.query("nvmlDeviceGetUUID", session.handle(i)) == uuid:
            return session, i
    return session, None


def e1_size(wanted: int, bytes_per_element: int, available: int | None) -> int:
    """E1's n: ``wanted`` (the note's 10000, or the quick size), or the largest multiple of 100
    whose n×n arrays take at most :data:`E1_MEMORY_FRACTION` of the ``available`` bytes (from
    :func:`~gpuprobe.platform.hardware.host.available_memory`: the machine's, a cgroup's or an
    address-space cap), never below :data:`E1_MIN_N`."""
    if available is None:
        return wanted
    fits = int(math.sqrt(max(available, 0) * E1_MEMORY_FRACTION / bytes_per_element)) // 100
    return max(min(wanted, fits * 100), min(wanted, E1_MIN_N))


def _out_of_memory(exc: BaseException, b: Any) -> bool:
    try:
        return bool(b.is_out_of_memory(exc))
    except Exception:
        return isinstance(exc, MemoryError)


def run_checks(
    framework: str, device: str, quick: bool = False, time_matmul: bool = True
) -> WorkerResult:
    """Run every check for ``framework`` on ``device``; errors become ``error``, not crashes.
    ``time_matmul`` times the large matmul (the CPU only needs it as a GPU's baseline)."""
    import numpy as np

    from gpuprobe.platform.frameworks.backends import make_backend

    q = 1 if quick else 0
    budget = TIME_BUDGET_S[q]
    rng = np.random.default_rng(0)
    try:
        b = make_backend(framework, device)
        uuid = b.uuid()
    except Exception as exc:
        return WorkerResult(framework, device, error=f"{type(exc).__name__}: {exc}")
    from gpuprobe.platform.hardware.host import available_memory

    free = available_memory()
    rel: dict[str, float] = {}
    ms: list[Measurement] = []
    under_load: list[GpuSample] = []
    try:
        # Correctness: device result vs NumPy float64 on the same float32 inputs.
        n = SIZES["matmul_check"][q]
        a = rng.standard_normal((n, n), dtype=np.float32)
        c = rng.standard_normal((n, n), dtype=np.float32)
        # float32 means float32: JAX's default precision multiplies float32 on TF32 tensor cores
        # (the H200 showed 239 TFLOP/s, over its 67 TFLOP/s float32 peak); torch's and CuPy's
        # defaults are full float32 already
        with b.matmul_precision("float32"):
            out = b.to_numpy(b.matmul(b.asarray(a), b.asarray(c)))
        rel["matmul-float32"] = rel_error(out, a.astype(np.float64) @ c.astype(np.float64))
        n = SIZES["e1_check"][q]
        x = rng.random((n, n), dtype=np.float32)
        out = b.to_numpy(b.e1(b.asarray(x)))
        x64 = x.astype(np.float64)
        rel["e1-float32"] = rel_error(out, (np.sin(x64) ** 2 / np.cos(x64) ** 2).sum())

        # Speed: E1 at the note's size, float32 everywhere, float64 on NumPy as the note did;
        # smaller where its arrays would not fit in the memory this process may still take
        asked = SIZES["e1"][q]
        per_element = E1_HOST_BYTES[
            "gpu" if b.is_gpu else framework if framework == "numpy" else "cpu"
        ]
        n = e1_size(asked, per_element, free)
        sized = {} if n == asked else {"asked_n": asked, "available": free}
        dtypes = ("float64", "float32") if framework == "numpy" else ("float32",)
        x32 = rng.random((n, n), dtype=np.float32)
        for dt in dtypes:
            xd = b.asarray(x32.astype(dt) if dt != "float32" else x32)

            def e1(xd: Any = xd) -> Any:
                return b.e1(xd)

            ms.append(
                measure(
                    f"e1-{dt}",
                    e1,
                    b,
                    budget_s=budget,
                    min_runs=1,
                    warmup=0 if not b.is_gpu else 1,
                    work={"bytes": float(n * n * np.dtype(dt).itemsize)},
                    metadata={"n": n, "dtype": dt, **sized},
                )
            )
            del xd
        del x32
        if not time_matmul:
            return WorkerResult(
                framework,
                device,
                uuid=uuid,
                rel_errors=rel,
                measurements=tuple(ms),
                available_memory=free,
            )
        n = SIZES["matmul"][q]
        am, cm = (
            b.asarray(rng.standard_normal((n, n), dtype=np.float32)),
            b.asarray(rng.standard_normal((n, n), dtype=np.float32)),
        )
        with b.matmul_precision("float32"):
            mm = measure(
                "matmul-float32",
                lambda: b.matmul(am, cm),
                b,
                budget_s=budget,
                min_runs=2,
                work={"flop": 2.0 * n**3},
                metadata={"n": n, "dtype": "float32"},
            )
        ms.append(mm)

        if b.is_gpu:
            session, index = _nvml_index(uuid)
            # Under load: queue about LOAD_SECONDS of matmuls, read NVML while they run.
            reps = max(1, int(LOAD_SECONDS / max(mm.median, 1e-6)))
            for _ in range(reps):
                b.matmul(am, cm)
            if session is not None and index is not None:
                under_load.append(session.sample(index))
            b.synchronize()
            nbytes = SIZES["h2d_bytes"][q]
            if hasattr(b, "pinned"):
                host, dev = b.pinned(nbytes), b.device_buffer(nbytes)  # type: ignore[attr-defined]
                h2d = measure(
                    "h2d-pinned",
                    lambda: b.copy_h2d(dev, host),  # type: ignore[attr-defined]
                    b,
                    budget_s=budget,
                    min_runs=3,
                    work={"bytes": float(nbytes)},
                    metadata={"bytes": nbytes},
                )
                ms.append(h2d)
                for _ in range(max(1, int(LOAD_SECONDS / max(h2d.median, 1e-6)))):
                    b.copy_h2d(dev, host)  # type: ignore[attr-defined]
                if session is not None and index is not None:
                    under_load.append(session.sample(index))
                b.synchronize()
                del host, dev
            b.release()
    except Exception as exc:
        msg = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        return WorkerResult(
            framework,
            device,
            uuid=uuid,
            error=msg,
            out_of_memory=_out_of_memory(exc, b),
            available_memory=free,
            rel_errors=rel,
            measurements=tuple(ms),
            under_load=tuple(under_load),
        )
    return WorkerResult(
        framework,
        device,
        uuid=uuid,
        rel_errors=rel,
        measurements=tuple(ms),
        under_load=tuple(under_load),
        available_memory=free,
    )


if __name__ == "__main__":
    from gpuprobe.platform.proc import die_with_parent

    die_with_parent()  # a helper never outlives gpuprobe
    result = run_checks(
        sys.argv[1],
        sys.argv[2],
        quick="--quick" in sys.argv[3:],
        time_matmul="--no-matmul" not in sys.argv[3:],
    )
    sys.stdout.write(json.dumps(result.to_dict()))
