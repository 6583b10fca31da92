"""The one door to NVML (``nvidia-ml-py``): the only module that imports ``pynvml``.

Everything NVML does not support on a card becomes ``None`` (shown as ``n/a``) and the rest still
works, as nvitop's ``NA`` does. The library is loaded lazily and shut down when the session ends.

Units: bytes, MHz, watts, degrees Celsius, percent. Each reader names the ``nvidia-smi`` query that
shows the same value.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Literal, TypeVar

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.platform.hardware.types import (
    Driver,
    DriverStatus,
    Gpu,
    GpuProcess,
    GpuSample,
    MigInstance,
    Pcie,
    decode_clock_event_reasons,
)

__all__ = [
    "LOST_GPU_FIX",
    "PROCESS_NAME_CALL",
    "NvmlSession",
    "NvmlUnavailable",
    "lost_gpu_finding",
    "lost_gpu_fix",
    "nvml_session",
    "read_driver",
]

T = TypeVar("T")

# pynvml exception class name -> our driver status, and the fix a person needs.
_INIT_ERRORS: dict[str, DriverStatus] = {
    "NVMLError_LibraryNotFound": "no-library",
    "NVMLError_DriverNotLoaded": "not-loaded",
    "NVMLError_LibRmVersionMismatch": "version-mismatch",
    "NVMLError_NoPermission": "no-permission",
}


# What a person does when NVML says NVML_ERROR_GPU_IS_LOST (nvml.h: "the GPU has fallen off the
# bus or has otherwise become inaccessible"); Xid 79 is the kernel's record of it (NVIDIA Xid
# errors document, https://docs.nvidia.com/deploy/xid-errors/).
LOST_GPU_FIX = (
    "check 'sudo dmesg | grep -i xid' (Xid 79: fallen off the bus; also power, cooling, riser "
    "seating), then reset the GPU ('sudo nvidia-smi -r -i INDEX' with nothing running on it) or "
    "reboot; if it recurs, have the card and its slot checked"
)


def lost_gpu_fix(index: int | None) -> str:
    """:data:`LOST_GPU_FIX` for GPU ``index`` (NVML's index, as ``nvidia-smi -i`` takes)."""
    return LOST_GPU_FIX if index is None else LOST_GPU_FIX.replace("INDEX", str(index))


def lost_gpu_finding(subject: str, error: str | None, index: int | None = None) -> Finding:
    """NVML_ERROR_GPU_IS_LOST: the card has fallen off the bus (the kernel logs Xid 79)."""
    return Finding(
        "gpu-lost",
        Status.FAIL,
        f"{subject}: NVML says the GPU is lost (fallen off the bus or otherwise inaccessible); "
        "nothing can run on it until it is reset",
        (Evidence("nvml_error", error),),
        fix=lost_gpu_fix(index),
        group="gpu",
        subject=subject,
    )


class _ProcessInfoV1(ctypes.Structure):
    """nvml.h ``nvmlProcessInfo_v1_t``: what ``nvmlDevice*RunningProcesses`` (no suffix) fills."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):
    """nvml.h ``nvmlProcessInfo_v2_t``: what the ``_v2`` entry points fill."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


_NVML_SUCCESS = 0
_NVML_ERROR_INSUFFICIENT_SIZE = 7
_NOT_AVAILABLE = 2**63  # NVML's "not available" sentinel for process memory (WDDM) and above

# Answers that stay true for the whole session, so a call that got one is not made again: the
# entry point is absent from this driver or binding (nvitop remembers these the same way, in
# libnvml's UNKNOWN_FUNCTIONS), or this card does not support the query (a property of the card
# and its mode; MIG mode changes only with a GPU reset).
_SESSION_ANSWERS = frozenset(
    {"NVMLError_FunctionNotFound", "NVMLLibraryMismatchError", "NVMLError_NotSupported"}
)
# Arguments after the handle that name *what* to read (clock type, sensor, counter, ECC kind, a
# struct version such as nvmlMemory_v2) fit in 32 bits and are part of what is remembered; a
# call with a larger one (a µs timestamp) is not remembered.
_SELECTOR_MAX = 1 << 32
PROCESS_NAME_CALL = "psutil.Process.name"  # the per-process name lookup, tallied beside NVML


class NvmlUnavailable(Exception):
    """NVML could not be initialised; ``status`` says why (no library, driver not loaded, ...)."""

    def __init__(self, status: DriverStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _pynvml() -> Any:
    """Import pynvml (from ``nvidia-ml-py``); tests replace ``sys.modules['pynvml']``."""
    try:
        import pynvml
    except ImportError as exc:  # the package itself is missing
        raise NvmlUnavailable("no-library", f"nvidia-ml-py is not installed: {exc}") from exc
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(code: int | None) -> str | None:
    """12040 -> "12.4" (nvmlSystemGetCudaDriverVersion's encoding: 1000*major + 10*minor)."""
    if not code:
        return None
    return f"{code // 1000}.{(code % 1000) // 10}"


class NvmlSession:
    """An initialised NVML. Use :func:`nvml_session`; every getter returns ``None`` when the card
    or driver does not support it."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self._handles: dict[int, Any] = {}
        self._handle_index: dict[int, int] = {}  # id(handle) -> GPU index, for handles held
        # entry point -> [calls, wall s, CPU s of the calling thread]: what each kind of call
        # costs, for the sampler's own accounting (perf_counter and thread_time around each)
        self._costs: dict[str, list[float]] = {}
        self._costs_lock = threading.Lock()
        # (entry point, GPU index, selectors) -> the error that answers it for the session;
        # (C symbol,) -> a process-list entry point this driver lacks
        self._settled: dict[tuple[Any, ...], str] = {}
        self._names: dict[int, dict[int, str | None]] = {}  # GPU -> PID -> name, as last listed
        # GPU index -> pynvml error class name of the error that made it unreadable
        self.device_errors: dict[int, str] = {}
        self.lost_any = False  # some call answered NVML_ERROR_GPU_IS_LOST
        self._errors: tuple[type[BaseException], ...] = tuple(
            e
            for e in (
                getattr(lib, "NVMLError", None),
                # nvidia-ml-py 12.560+: an unversioned call the library lacks
                getattr(lib, "NVMLLibraryMismatchError", None),
            )
            if isinstance(e, type)
        )

    # -- plumbing -------------------------------------------------------------------------------
    def query(self, fn_name: str, *args: Any, default: T | None = None) -> Any:
        """Call ``pynvml.<fn_name>(*args)``; on any NVML error (or a function this driver or
        binding lacks) return ``default``. A device call with no handle (the GPU could not be
        opened) returns ``default`` without calling. A lost GPU is remembered in
        :attr:`device_errors`. A call answered "no such function" or "not supported" is
        answered ``default`` from then on without calling again (see ``_SESSION_ANSWERS``)."""
        fn: Callable[..., Any] | None = getattr(self.lib, fn_name, None)
        if fn is None or (fn_name.startswith("nvmlDevice") and args and args[0] is None):
            return default
        key = self._settle_key(fn_name, args)
        if key is not None and key in self._settled:
            return default
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args)
        except self._errors as exc:
            name = type(exc).__name__
            if name == "NVMLError_GpuIsLost":
                self.lost_any = True
                if args:
                    self._mark_lost(args[0])
            elif name in _SESSION_ANSWERS and key is not None:
                self._settled[key] = name
            return default
        except (AttributeError, TypeError, ValueError, OSError):  # binding/driver skew
            return default
        finally:
            self._tally(fn_name, w0, c0)

    def _settle_key(self, fn_name: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """What a lasting answer is remembered under: the call, the GPU index of its handle and
        its other arguments (they pick the clock, the sensor, or the struct version and so the
        C symbol); None (not remembered) for a handle this session does not hold for its life
        (a MIG device's) or an argument that varies call to call (a timestamp)."""
        if not args:
            return (fn_name, None)
        index = self._handle_index.get(id(args[0]))
        if index is None or self._handles.get(index) is not args[0]:
            return None
        rest = args[1:]
        if not all(isinstance(a, int) and 0 <= a < _SELECTOR_MAX for a in rest):
            return None
        return (fn_name, index, *rest)

    def _tally(self, name: str, w0: float, c0: float) -> None:
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        with self._costs_lock:
            cost = self._costs.get(name)
            if cost is None:
                self._costs[name] = [1, wall, cpu]
            else:
                cost[0] += 1
                cost[1] += wall
                cost[2] += cpu

    def call_costs(self) -> dict[str, dict[str, float]]:
        """What each kind of call has cost so far, costliest CPU first: ``{entry point:
        {"calls": n, "wall_ms": ..., "cpu_ms": ...}}``. Calls are pynvml's (a list read through
        pynvml is two C calls, count then fill); CPU is the calling thread's. The process lists
        are tallied under the C symbol tried, the name lookups under :data:`PROCESS_NAME_CALL`;
        calls answered from a lasting answer (see ``_SESSION_ANSWERS``) are not made or counted."""
        with self._costs_lock:
            items = [(k, list(v)) for k, v in self._costs.items()]
        return {
            k: {"calls": int(n), "wall_ms": round(1000 * w, 3), "cpu_ms": round(1000 * c, 3)}
            for k, (n, w, c) in sorted(items, key=lambda kv: -kv[1][2])
        }

    def _mark_lost(self, handle: Any) -> None:
        self.lost_any = True
        for index, h in self._handles.items():
            if h is handle:
                self.device_errors[index] = "NVMLError_GpuIsLost"

    def handle(self, index: int) -> Any:
        """The NVML handle of GPU ``index`` (cached: fetching handles per tick is costly), or
        ``None`` when NVML cannot open it (its error is kept in :attr:`device_errors`: a GPU that
        fell off the bus answers NVML_ERROR_GPU_IS_LOST here)."""
        if index not in self._handles:
            try:
                h = self.lib.nvmlDeviceGetHandleByIndex(index)
            except self._errors as exc:
                self.device_errors[index] = type(exc).__name__
                self.lost_any |= self.lost(index)
                return None
            except (AttributeError, TypeError, ValueError, OSError) as exc:
                self.device_errors[index] = type(exc).__name__
                return None
            self._handles[index] = h
            self._handle_index[id(h)] = index
        return self._handles[index]

    def lost(self, index: int) -> bool:
        """True once NVML has said GPU ``index`` is lost."""
        return self.device_errors.get(index) == "NVMLError_GpuIsLost"

    def device_count(self) -> int:
        """Number of GPUs NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""
        return int(self.query("nvmlDeviceGetCount", default=0) or 0)

    # -- the driver -----------------------------------------------------------------------------
    def driver(self) -> Driver:
        """Driver version (``nvidia-smi --query-gpu=driver_version``), the newest CUDA it supports
        and the NVML version."""
        cuda = self.query("nvmlSystemGetCudaDriverVersion_v2") or self.query(
            "nvmlSystemGetCudaDriverVersion"
        )
        version = self.query("nvmlSystemGetDriverVersion")
        nvml = self.query("nvmlSystemGetNVMLVersion")
        return Driver(
            status="ok",
            driver_version=_text(version) if version is not None else None,
            cuda_driver_version=_cuda_version(cuda),
            nvml_version=_text(nvml) if nvml is not None else None,
        )

    # -- one GPU, read once ---------------------------------------------------------------------
    def gpu(self, index: int) -> Gpu:
        """Everything NVML knows about GPU ``index`` that does not change second to second, plus
        the current clocks, power, temperature and processes. Peaks and SM counts are added by
        :mod:`gpuprobe.platform.inventory` from the CUDA driver and the spec tables."""
        lib, h, q = self.lib, self.handle(index), self.query
        lost_before = self.lost_any
        if h is None or self.lost(index):
            return Gpu(index=index, nvml_error=self.device_errors.get(index, "unknown"))
        pci = q("nvmlDeviceGetPciInfo", h)
        if self.lost(index):  # fell off the bus between the handle and the first read
            return Gpu(index=index, nvml_error=self.device_errors[index])
        used, free, reserved, total = self._memory(h)
        cc = q("nvmlDeviceGetCudaComputeCapability", h)
        ecc = q("nvmlDeviceGetEccMode", h)
        mig = q("nvmlDeviceGetMigMode", h)
        remap = q("nvmlDeviceGetRemappedRows", h)
        power = q("nvmlDeviceGetPowerUsage", h)
        limit = q("nvmlDeviceGetEnforcedPowerLimit", h) or q("nvmlDeviceGetPowerManagementLimit", h)
        util = q("nvmlDeviceGetUtilizationRates", h)
        persistence = q("nvmlDeviceGetPersistenceMode", h)
        retired = self._retired_pages(h)
        pending = q("nvmlDeviceGetRetiredPagesPendingStatus", h)
        cores = q("nvmlDeviceGetNumGpuCores", h)
        uuid = q("nvmlDeviceGetUUID", h)
        name = q("nvmlDeviceGetName", h)
        return Gpu(
            index=index,
            uuid=_text(uuid) if uuid is not None else None,
            pci_bus_id=_normalise_bus_id(_text(pci.busId)) if pci is not None else None,
            name=_text(name) if name is not None else None,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
            memory_total=total,
            memory_used=used,
            memory_free=free,
            memory_reserved=reserved,
            fp32_cores=int(cores) if cores else None,
            sm_clock_mhz=q("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_SM),
            sm_clock_max_mhz=q("nvmlDeviceGetMaxClockInfo", h, lib.NVML_CLOCK_SM),
            mem_clock_mhz=q("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_MEM),
            mem_clock_max_mhz=q("nvmlDeviceGetMaxClockInfo", h, lib.NVML_CLOCK_MEM),
            memory_bus_width=q("nvmlDeviceGetMemoryBusWidth", h),
            pcie=self.pcie(index),
            power_draw_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit else None,
            temperature_c=q("nvmlDeviceGetTemperature", h, lib.NVML_TEMPERATURE_GPU),
            utilization_gpu=int(util.gpu) if util is not None else None,
            persistence_mode=bool(persistence) if persistence is not None else None,
            ecc_mode=bool(ecc[0]) if ecc is not None else None,
            ecc_uncorrected_volatile=q(
                "nvmlDeviceGetTotalEccErrors",
                h,
                lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                lib.NVML_VOLATILE_ECC,
            ),
            retired_pages=retired,
            retired_pages_pending=bool(pending) if pending is not None else None,
            remapped_rows_correctable=int(remap[0]) if remap is not None else None,
            remapped_rows_uncorrectable=int(remap[1]) if remap is not None else None,
            remapped_rows_pending=bool(remap[2]) if remap is not None else None,
            remapped_rows_failure=bool(remap[3]) if remap is not None else None,
            mig_mode=bool(mig[0]) if mig is not None else None,
            mig_instances=self.mig_instances(index) if mig is not None and mig[0] else (),
            processes=self.processes(index),
            clock_event_reasons=decode_clock_event_reasons(self._clock_event_mask(h)),
            nvml_error=self._lost_during(index, lost_before),
        )

    def _lost_during(self, index: int, lost_before: bool) -> str | None:
        """GPU ``index``'s error, counting a 'GPU is lost' answered by any handle read for it
        (a MIG device's included) since ``lost_before`` was taken."""
        if self.lost_any and not lost_before:
            self.device_errors[index] = "NVMLError_GpuIsLost"
        return self.device_errors.get(index)

    def pcie(self, index: int) -> Pcie:
        """PCIe link (``nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.max,...``).
        Links train down at idle: read it under load before judging."""
        h, q = self.handle(index), self.query
        return Pcie(
            gen_current=q("nvmlDeviceGetCurrPcieLinkGeneration", h),
            gen_max=q("nvmlDeviceGetMaxPcieLinkGeneration", h),
            gen_max_gpu=q("nvmlDeviceGetGpuMaxPcieLinkGeneration", h),
            width_current=q("nvmlDeviceGetCurrPcieLinkWidth", h),
            width_max=q("nvmlDeviceGetMaxPcieLinkWidth", h),
        )

    def processes(self, index: int) -> tuple[GpuProcess, ...]:
        """Compute and graphics processes on GPU ``index`` with their memory
        (``nvidia-smi --query-compute-apps=pid,used_memory``). PIDs are the host's: inside a
        container without ``--pid=host`` they may not resolve to a name."""
        h = self.handle(index)
        found: dict[int, GpuProcess] = {}
        kinds: tuple[tuple[str, Literal["compute", "graphics"]], ...] = (
            ("Compute", "compute"),
            ("Graphics", "graphics"),
        )
        known = self._names.get(index, {})
        names: dict[int, str | None] = {}
        for fn, kind in kinds:
            for pid, used in self._running_processes(h, fn):
                if pid in found:
                    continue
                if pid not in names:
                    names[pid] = known[pid] if pid in known else self._name(pid)
                found[pid] = GpuProcess(pid=pid, name=names[pid], used_memory=used, kind=kind)
        # a name is looked up once while its PID stays on this GPU's list (a PID that left the
        # list and came back, perhaps reused by another process, is looked up again)
        self._names[index] = names
        return tuple(found.values())

    def _name(self, pid: int) -> str | None:
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            return _process_name(pid)
        finally:
            self._tally(PROCESS_NAME_CALL, w0, c0)

    def _running_processes(self, h: Any, kind: str) -> list[tuple[int, int | None]]:
        """(pid, bytes or None) of ``nvmlDeviceGet{kind}RunningProcesses``: the ``_v3`` entry
        point through pynvml, then ``_v2`` and the unsuffixed v1 on drivers that lack it (as
        nvitop does; R450–R510 drivers have no ``_v3``). Empty when NVML cannot say."""
        if h is None:
            return []
        attempts: list[tuple[str, Callable[[], list[tuple[int, int | None]]]]] = []
        v3_name = f"nvmlDeviceGet{kind}RunningProcesses_v3"
        v3 = getattr(self.lib, v3_name, None)
        if v3 is not None and (v3_name,) not in self._settled:
            attempts.append(
                (
                    v3_name,
                    lambda: [(int(p.pid), _bytes_or_none(p.usedGpuMemory)) for p in v3(h) or []],
                )
            )
        for suffix, layout in (("_v2", _ProcessInfoV2), ("", _ProcessInfoV1)):
            symbol = f"nvmlDeviceGet{kind}RunningProcesses{suffix}"
            if (symbol,) not in self._settled:
                attempts.append((symbol, functools.partial(self._raw_processes, h, symbol, layout)))
        for symbol, attempt in attempts:
            w0, c0 = time.perf_counter(), time.thread_time()
            try:
                return attempt()
            except self._errors as exc:
                if type(exc).__name__ == "NVMLError_GpuIsLost":
                    self._mark_lost(h)
                if type(exc).__name__ != "NVMLError_FunctionNotFound":
                    return []  # only a missing entry point is worth the older one
                self._settled[(symbol,)] = "NVMLError_FunctionNotFound"  # not tried again
            except (AttributeError, TypeError, ValueError, OSError):
                return []
            finally:
                self._tally(symbol, w0, c0)
        return []

    def _raw_processes(
        self, h: Any, symbol: str, layout: type[ctypes.Structure]
    ) -> list[tuple[int, int | None]]:
        """Call an NVML process-list entry point the binding has no wrapper for, with the struct
        nvml.h gives it (the two-call pattern: ask the count, then fill)."""
        lib = self.lib
        fn = lib._nvmlGetFunctionPointer(symbol)
        count = ctypes.c_uint(0)
        ret = fn(h, ctypes.byref(count), None)
        if ret == _NVML_SUCCESS:
            return []
        if ret != _NVML_ERROR_INSUFFICIENT_SIZE:
            raise lib.NVMLError(ret)
        count.value = count.value * 2 + 5  # room for processes started since (pynvml does this)
        infos = (layout * count.value)()
        ret = fn(h, ctypes.byref(count), infos)
        if ret != _NVML_SUCCESS:
            raise lib.NVMLError(ret)
        return [
            (int(infos[i].pid), _bytes_or_none(infos[i].usedGpuMemory)) for i in range(count.value)
        ]

    def mig_instances(self, index: int) -> tuple[MigInstance, ...]:
        """MIG devices carved from GPU ``index`` (``nvidia-smi -L``)."""
        h, q = self.handle(index), self.query
        count = q("nvmlDeviceGetMaxMigDeviceCount", h, default=0) or 0
        out = []
        for i in range(int(count)):
            m = q("nvmlDeviceGetMigDeviceHandleByIndex", h, i)
            if m is None:
                continue
            mem = q("nvmlDeviceGetMemoryInfo", m)
            uuid = q("nvmlDeviceGetUUID", m)
            name = q("nvmlDeviceGetName", m)
            out.append(
                MigInstance(
                    index=i,
                    uuid=_text(uuid) if uuid is not None else None,
                    name=_text(name) if name is not None else None,
                    memory_total=int(mem.total) if mem is not None else None,
                    gpu_instance_id=q("nvmlDeviceGetGpuInstanceId", m),
                    compute_instance_id=q("nvmlDeviceGetComputeInstanceId", m),
                )
            )
        return tuple(out)

    # -- changing state, for monitors -----------------------------------------------------------
    def sample(self, index: int, *, pcie_throughput: bool = False) -> GpuSample:
        """One cheap reading of GPU ``index``'s changing state
        (``nvidia-smi dmon -s pucm``). ``pcie_throughput`` adds rx/tx KB/s, which costs 20 ms per
        counter (NVML measures over a 20 ms window)."""
        lib, h, q = self.lib, self.handle(index), self.query
        lost_before = self.lost_any
        util = q("nvmlDeviceGetUtilizationRates", h)
        used = self._memory(h)[0]
        power = q("nvmlDeviceGetPowerUsage", h)
        rx = tx = None
        if pcie_throughput:
            rx = q("nvmlDeviceGetPcieThroughput", h, lib.NVML_PCIE_UTIL_RX_BYTES)
            tx = q("nvmlDeviceGetPcieThroughput", h, lib.NVML_PCIE_UTIL_TX_BYTES)
        sample = GpuSample(
            index=index,
            time=time.time(),
            utilization_gpu=int(util.gpu) if util is not None else None,
            utilization_memory=int(util.memory) if util is not None else None,
            memory_used=used,
            power_w=power / 1000.0 if power is not None else None,
            temperature_c=q("nvmlDeviceGetTemperature", h, lib.NVML_TEMPERATURE_GPU),
            sm_clock_mhz=q("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_SM),
            mem_clock_mhz=q("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_MEM),
            clock_event_reasons=decode_clock_event_reasons(self._clock_event_mask(h)),
            pcie_gen=q("nvmlDeviceGetCurrPcieLinkGeneration", h),
            pcie_width=q("nvmlDeviceGetCurrPcieLinkWidth", h),
            pcie_rx_kbs=rx,
            pcie_tx_kbs=tx,
            energy_mj=q("nvmlDeviceGetTotalEnergyConsumption", h),
        )
        self._lost_during(index, lost_before)
        return sample

    def process_utilization(self, index: int, since_us: int) -> dict[int, int]:
        """SM utilization % per PID over the samples newer than ``since_us`` (host µs
        timestamp), from ``nvmlDeviceGetProcessUtilization``: the mean of each PID's samples
        (the driver takes one every 1/6 s to 1 s); values over 100 (an NVML bug) are dropped."""
        lost_before = self.lost_any
        samples = self.query("nvmlDeviceGetProcessUtilization", self.handle(index), since_us)
        self._lost_during(index, lost_before)
        seen: dict[int, list[int]] = {}
        for s in samples or []:
            sm = int(getattr(s, "smUtil", 0))
            if 0 <= sm <= 100:
                seen.setdefault(int(s.pid), []).append(sm)
        return {pid: round(sum(v) / len(v)) for pid, v in seen.items()}

    # -- helpers --------------------------------------------------------------------------------
    def _memory(self, h: Any) -> tuple[int | None, int | None, int | None, int | None]:
        """(used, free, reserved, total) bytes. ``nvmlDeviceGetMemoryInfo_v2`` (R510+) separates
        the driver's reserve from "used"; v1's "used" includes it, and reserve is then None."""
        version = getattr(self.lib, "nvmlMemory_v2", None)
        mem = None
        if version is not None:
            mem = self.query("nvmlDeviceGetMemoryInfo", h, version)
        if mem is not None:
            return int(mem.used), int(mem.free), int(mem.reserved), int(mem.total)
        mem = self.query("nvmlDeviceGetMemoryInfo", h)
        if mem is None:
            return None, None, None, None
        return int(mem.used), int(mem.free), None, int(mem.total)

    def _clock_event_mask(self, h: Any) -> int | None:
        mask = self.query("nvmlDeviceGetCurrentClocksEventReasons", h)
        if mask is None:
            mask = self.query("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return int(mask) if mask is not None else None

    def _retired_pages(self, h: Any) -> int | None:
        lib = self.lib
        total = None
        for cause in (
            getattr(lib, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
            getattr(lib, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
        ):
            pages = self.query("nvmlDeviceGetRetiredPages", h, cause)
            if pages is not None:
                total = (total or 0) + len(pages)
        return total


def _bytes_or_none(used: Any) -> int | None:
    """Process memory in bytes; NVML's "not available" (WDDM) sentinel, or None, as None."""
    if used is None:
        return None
    used = int(used)
    return used if 0 <= used < _NOT_AVAILABLE else None


def _normalise_bus_id(bus_id: str) -> str:
    """NVML gives ``00000000:17:00.0``; sysfs and the CUDA driver use ``0000:17:00.0``."""
    bus_id = bus_id.strip().lower()
    domain, sep, rest = bus_id.partition(":")
    if sep and len(domain) == 8:
        return f"{domain[-4:]}:{rest}"
    return bus_id


def _process_name(pid: int) -> str | None:
    try:
        import psutil

        return str(psutil.Process(pid).name())
    except Exception:  # gone, or another PID namespace
        return None


@contextmanager
def nvml_session() -> Iterator[NvmlSession]:
    """Initialise NVML for the block; raises :class:`NvmlUnavailable` with the reason when it
    cannot (``nvidia-smi`` would say "couldn't communicate with the NVIDIA driver")."""
    lib = _pynvml()
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        status = _INIT_ERRORS.get(type(exc).__name__, "error")
        raise NvmlUnavailable(status, f"{type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise NvmlUnavailable("no-library", str(exc)) from exc
    try:
        yield NvmlSession(lib)
    finally:
        with suppress(Exception):
            lib.nvmlShutdown()


def read_driver() -> tuple[Driver, list[Gpu]]:
    """The driver and every GPU NVML sees, or a :class:`Driver` whose status says why not."""
    try:
        with nvml_session() as s:
            driver = s.driver()
            gpus = [s.gpu(i) for i in range(s.device_count())]
            lost = s.lost_any
    except NvmlUnavailable as exc:
        return Driver(status=exc.status, error=str(exc)), []
    except Exception as exc:  # an NVML error outside every guard: say so, never a traceback
        if type(exc).__module__ != "pynvml" and not type(exc).__name__.startswith("NVML"):
            raise
        return Driver(status="error", error=f"{type(exc).__name__}: {exc}"), []
    if lost and gpus and not any(g.lost for g in gpus):  # a system call answered "GPU is lost"
        driver = dataclasses.replace(
            driver, error="NVMLError_GpuIsLost: NVML answered 'GPU is lost' to a driver query"
        )
    if not gpus:
        return Driver(
            status="error" if lost else "no-gpu",
            error="NVMLError_GpuIsLost: NVML answered 'GPU is lost' while counting the GPUs"
            if lost
            else "NVML works but sees no GPU",
            driver_version=driver.driver_version,
            cuda_driver_version=driver.cuda_driver_version,
            nvml_version=driver.nvml_version,
        ), []
    return driver, gpus
