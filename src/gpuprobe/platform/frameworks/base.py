"""What every framework door shares: the :class:`FrameworkInfo` record, package-metadata helpers,
and the :class:`Backend` interface for running and timing array code on one device."""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata as md
import importlib.util
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuprobe.core.records import Record

__all__ = [
    "COPY_KINDS",
    "DTYPE_BYTES",
    "Backend",
    "FrameworkDevice",
    "FrameworkInfo",
    "dist_version",
    "event_times",
    "first_installed",
    "host_times",
    "import_failed",
    "module_dir",
    "read_constants",
]


# Element sizes in bytes of the dtypes the benchmarks use, by gpuprobe's name for them ("tfloat32"
# is float32 storage multiplied on TF32 tensor cores).
DTYPE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "tfloat32": 4,
    "bfloat16": 2,
    "float16": 2,
    "int8": 1,
}
# Copies a backend may offer through :meth:`Backend.copier`: host-to-device and device-to-host from
# pageable or pinned (page-locked) host memory, device-to-device, and a host memory copy (memcpy).
COPY_KINDS: tuple[str, ...] = (
    "h2d-pageable",
    "h2d-pinned",
    "d2h-pageable",
    "d2h-pinned",
    "d2d",
    "host",
)


@dataclass(frozen=True)
class FrameworkDevice(Record):
    """A GPU as one framework sees it (its own index, after CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str | None = None
    compute_capability: str | None = None
    uuid: str | None = None
    memory_total: int | None = None  # bytes


@dataclass(frozen=True)
class FrameworkInfo(Record):
    """One framework: installed or not, its build, the GPUs it sees or why it sees none."""

    name: str
    installed: bool = False
    version: str | None = None
    probe: Literal["static", "runtime"] = "static"
    importable: bool | None = None  # None: not tried (static probe)
    error: str | None = None  # the import error, when it fails to import
    distribution: str | None = None  # e.g. torch, cupy-cuda12x, jax-cuda12-plugin
    cuda_version: str | None = None  # the CUDA runtime it was built with / ships
    cudnn_version: str | None = None
    cpu_only_build: bool | None = None
    arch_list: tuple[str, ...] | None = None  # compiled GPU architectures: sm_80, sm_90, ...
    gpu_available: bool | None = None
    devices: tuple[FrameworkDevice, ...] = ()
    reason: str | None = None  # why it sees no GPU
    warnings: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


def dist_version(name: str) -> str | None:
    """Installed version of distribution ``name`` (no import), or None."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def first_installed(names: Iterable[str]) -> tuple[str, str] | None:
    """The first installed distribution among ``names``, with its version."""
    for name in names:
        version = dist_version(name)
        if version is not None:
            return name, version
    return None


def module_dir(module: str) -> Path | None:
    """Directory of a top-level package without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_constants(path: Path) -> dict[str, Any]:
    """Top-level ``NAME = <literal>`` assignments of a Python file, parsed, never executed."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name) and value is not None:
                try:
                    out[t.id] = ast.literal_eval(value)
                except ValueError:
                    continue
    return out


def import_failed(static: FrameworkInfo, error: BaseException | str) -> FrameworkInfo:
    """The record of a framework that is installed but does not import (or whose probe died)."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return FrameworkInfo(
        name=static.name,
        installed=static.installed,
        version=static.version,
        distribution=static.distribution,
        probe="runtime",
        importable=False,
        error=text,
    )


def host_times(
    fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
) -> list[float]:
    """Durations of ``n`` calls of a synchronous ``fn`` on the host clock, ``setup`` untimed."""
    out = []
    for _ in range(n):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# Device time, not launch gaps (issue 30: on an idle H200 a one-element add timed 16-22 µs between
# its CUDA events, triton.testing.do_bench 4 µs): an event recorded on an idle GPU fires at once,
# so its pair also times the host's launch of what follows. Before each batch of repetitions the
# device is held busy (a spin kernel) for longer than the host takes to queue the batch; the
# events and the work then run back to back, as do_bench gets by zeroing its L2-flush buffer first
# and nvbench by its blocking kernel. The hold is the last batch's queueing time per repetition,
# times the batch's size and HOLD_MARGIN, within [HOLD_MIN_S, HOLD_MAX_S]; it is never timed.
HOLD_MARGIN = 2.0
HOLD_MIN_S = 50e-6
HOLD_MAX_S = 0.05
HOLD_FIRST_PER_REP_S = 200e-6  # a guess for the first batch, before any has been queued


def event_times(
    backend: Backend,
    fn: Callable[[], Any],
    n: int,
    setup: Callable[[], Any] | None,
    new_event: Callable[[], Any],
    elapsed_s: Callable[[Any, Any], float],
) -> list[float]:
    """``n`` device durations of ``fn`` between pairs of events, queued behind a hold (above).
    ``new_event()`` makes an event with ``.record()``; ``elapsed_s(start, end)`` reads one pair."""
    per_rep = backend.queue_s_per_rep or HOLD_FIRST_PER_REP_S
    backend.hold(min(max(per_rep * n * HOLD_MARGIN, HOLD_MIN_S), HOLD_MAX_S))
    t0 = time.perf_counter()
    pairs = []
    for _ in range(n):
        if setup is not None:
            setup()
        start, end = new_event(), new_event()
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    backend.queue_s_per_rep = (time.perf_counter() - t0) / max(1, n)
    backend.synchronize()
    return [elapsed_s(s, e) for s, e in pairs]


class Backend(ABC):
    """Arrays on one device of one framework, and the device's own clock.

    ``time(fn, n)`` returns ``n`` durations in seconds of ``fn()``, each measured with the
    device's events (CUDA events on a GPU; ``perf_counter`` on the CPU, where calls are
    synchronous). Never a host clock around an asynchronous launch.
    """

    framework: str
    device: str
    # host seconds the last timed batch took to queue, per repetition (see event_times)
    queue_s_per_rep: float = 0.0

    @property
    def is_gpu(self) -> bool:
        """True when arrays live on a GPU."""
        return self.device.startswith("cuda")

    @abstractmethod
    def asarray(self, a: Any) -> Any:
        """Copy a NumPy array to this device."""

    @abstractmethod
    def to_numpy(self, x: Any) -> Any:
        """Copy an array (or scalar) from this device to a NumPy array."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all queued work on this device."""

    @abstractmethod
    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        """Run ``fn`` ``n`` times; return each run's duration in seconds on the device clock.
        ``setup`` (untimed) runs before each repetition, e.g. to flush the L2 cache."""

    def e1(self, x: Any) -> Any:
        """E1's expression ``(sin(x)**2 / cos(x)**2).sum()`` (docs/experiments.md#e1)."""
        return self.xp.sum(self.xp.sin(x) ** 2 / self.xp.cos(x) ** 2)

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b``."""
        return a @ b

    @property
    @abstractmethod
    def xp(self) -> Any:
        """The array namespace (numpy, torch, cupy, jax.numpy)."""

    def hold(self, seconds: float) -> None:  # noqa: B027 (optional: nothing to hold on the CPU)
        """Queue device work that keeps this device busy for at least ``seconds`` (a spin
        kernel), so that what is queued next waits for it (see :func:`event_times`)."""

    def release(self) -> None:  # noqa: B027 (optional hook: nothing to release on the CPU)
        """Give cached device memory back (after an out-of-memory, between workloads)."""

    def memory(self) -> dict[str, int] | None:
        """Memory this process holds on the device, in bytes, when the framework says."""
        return None

    def uuid(self) -> str | None:
        """The device's UUID (``GPU-...``, as NVML names it), when the framework says."""
        return None

    # -- what the benchmarks need; each default says "unsupported here" ---------------------------

    def free_memory(self) -> int | None:
        """Bytes free on this device for new arrays (host memory for the CPU), when known."""
        if self.is_gpu:
            return None
        try:
            import psutil

            return int(psutil.virtual_memory().available)
        except ImportError:
            return None

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """True when ``exc`` is this framework's out-of-memory error (or Python's MemoryError)."""
        text = str(exc).lower()
        return isinstance(exc, MemoryError) or any(
            s in text for s in ("out of memory", "resource_exhausted", "cannot allocate memory")
        )

    def random(self, shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> Any:
        """Uniform [0, 1) values of ``dtype`` (float32 or float64) on this device."""
        import numpy as np

        rng = np.random.default_rng(seed)
        return self.asarray(rng.random(shape, dtype=np.float64 if dtype == "float64" else "f4"))

    def randn(self, shape: tuple[int, ...], seed: int = 0) -> Any:
        """Standard normal float32 values on this device."""
        import numpy as np

        return self.asarray(np.random.default_rng(seed).standard_normal(shape, dtype="f4"))

    def cast(self, x: Any, dtype: str) -> Any:
        """``x`` converted to ``dtype`` (a name from :data:`DTYPE_BYTES`; tfloat32 is float32)."""
        return x.astype("float32" if dtype == "tfloat32" else dtype)

    def matmul_dtypes(self) -> tuple[str, ...]:
        """The dtypes this backend multiplies matrices in (names from :data:`DTYPE_BYTES`)."""
        return ("float32",)

    @contextlib.contextmanager
    def matmul_precision(self, dtype: str) -> Iterator[None]:
        """Within the block, float32 matmuls use TF32 when ``dtype`` is ``tfloat32`` (and full
        float32 otherwise)."""
        yield

    def int8_matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for int8 matrices with int32 results."""
        raise NotImplementedError(f"{self.framework} has no int8 matrix product here")

    def copier(self, kind: str, nbytes: int) -> Callable[[], Any] | None:
        """A function that copies ``nbytes`` bytes once, of ``kind`` (one of :data:`COPY_KINDS`),
        with its buffers allocated now; None when the kind makes no sense here."""
        return None

    def tiny_op(self) -> Callable[[], Any]:
        """The smallest useful operation: add 1 to a one-element array (launch overhead)."""
        x = self.asarray(_one_element())
        return lambda: x + 1

    def graph(self, fn: Callable[[], Any], k: int) -> Callable[[], Any] | None:
        """``fn`` called ``k`` times, captured once and replayed as one graph (CUDA graphs);
        None when the backend cannot capture."""
        return None

    def streams(self, n: int) -> list[Any] | None:
        """``n`` new streams (queues of work) on this device, or None when there are none."""
        return None

    @contextlib.contextmanager
    def on_stream(self, stream: Any) -> Iterator[None]:
        """Within the block, work is queued on ``stream``."""
        yield

    def cache_flusher(self) -> Callable[[], Any] | None:
        """A function that evicts the device's last-level cache (writes a buffer larger than it,
        as triton's do_bench does), to run untimed before each repetition; None on the CPU."""
        return None

    def environment(self) -> dict[str, str | int | float | None]:
        """What a benchmark result depends on besides the hardware: versions, threads, BLAS."""
        return {"framework": self.framework, "device": self.device}


def _one_element() -> Any:
    import numpy as np

    return np.ones(1, dtype=np.float32)
