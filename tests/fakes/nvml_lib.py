"""A fake ``libnvidia-ml.so.1`` under the REAL ``pynvml`` (nvidia-ml-py).

The real binding is used unchanged: its ctypes wrappers, its structs (and their versions), its
``NVMLError_*`` mapping. Only the shared library is replaced: :func:`install` makes
``pynvml.CDLL("libnvidia-ml.so.1")`` return a :class:`FakeNvmlLibrary`, whose attributes are the C
entry points. Each entry point is a Python function that checks its arguments the way the C ABI
would receive them (a device handle, ``byref`` of an ``unsigned int``, a struct of the right size
and version, a buffer and its length) and fills them from an inventory snapshot (the
``gpuprobe info --json`` format, ``tests/data/*.json``), then returns an ``nvmlReturn_t``.

So a wrong function name is ``NVMLError_FunctionNotFound`` (a field goes missing and the replay
test fails), wrong arguments or a struct whose layout differs from nvml.h is recorded in
:attr:`FakeNvmlLibrary.violations` (the fixture fails the test on it), and a struct with the wrong
version gets ``NVML_ERROR_ARGUMENT_VERSION_MISMATCH`` as from a real driver.

Layouts below are nvml.h's (R535–R580), written out independently of pynvml's classes so that the
two are compared, not copied. A field that is ``null`` in the snapshot answers
``NVML_ERROR_NOT_SUPPORTED`` as a card without it would.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# nvmlReturn_t (nvml.h)
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NOT_FOUND = 6
ERROR_INSUFFICIENT_SIZE = 7
ERROR_ARGUMENT_VERSION_MISMATCH = 25

# Errors a real driver returns, by pynvml class name -> nvmlReturn_t (nvml.h).
DRIVER_ERRORS: dict[str, int] = {
    "GpuIsLost": 15,
    "NotSupported": 3,
    "NoPermission": 4,
    "Unknown": 999,
    "Timeout": 10,
    "FunctionNotFound": 13,
    "InsufficientSize": 7,
}

_HANDLE_BASE = 0x1000  # fake device handles: base + 16*gpu (+ 1 + mig index for MIG devices)


# -- nvml.h layouts -------------------------------------------------------------------------------
class _Memory(ctypes.Structure):  # nvmlMemory_t
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _MemoryV2(ctypes.Structure):  # nvmlMemory_v2_t
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


MEMORY_V2_VERSION = ctypes.sizeof(_MemoryV2) | (2 << 24)  # NVML_STRUCT_VERSION(Memory, 2)


class _Utilization(ctypes.Structure):  # nvmlUtilization_t
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _PciInfo(ctypes.Structure):  # nvmlPciInfo_t (the _v3 entry point)
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class _ProcessInfoV1(ctypes.Structure):  # nvmlProcessInfo_v1_t: nvmlDeviceGet*RunningProcesses
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):  # nvmlProcessInfo_v2_t = nvmlProcessInfo_t (_v2, _v3)
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class _ProcessUtilizationSample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("timeStamp", ctypes.c_ulonglong),
        ("smUtil", ctypes.c_uint),
        ("memUtil", ctypes.c_uint),
        ("encUtil", ctypes.c_uint),
        ("decUtil", ctypes.c_uint),
    ]


# nvmlClocksEventReason* bits (nvml.h)
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}

NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE as unsigned long long


def _layout(cls: type[ctypes.Structure]) -> list[tuple[int, int]]:
    return [(getattr(cls, n).offset, getattr(cls, n).size) for n, *_ in cls._fields_]


class Violation(AssertionError):
    """The binding called the library in a way the C ABI would not accept."""


class FakeNvmlLibrary:
    """The NVML C library, answering from ``snapshot``.

    ``missing``: entry points this "driver" lacks (``AttributeError`` -> FunctionNotFound).
    ``errors``: entry point -> nvmlReturn_t it returns instead of answering.
    ``init_error``: nvmlReturn_t for ``nvmlInitWithFlags``.
    """

    def __init__(
        self,
        snapshot: Mapping[str, Any],
        *,
        missing: Iterable[str] = (),
        errors: Mapping[str, int] | None = None,
        init_error: int | None = None,
        utilization_samples: Mapping[int, list[tuple[int, int]]] | None = None,
        pcie_kbs: tuple[int, int] | None = None,
        clock_mask: int | None = None,
        energy_mj: Mapping[int, Iterable[int]] | None = None,
    ) -> None:
        self.gpus: list[dict[str, Any]] = list(snapshot.get("gpus", []))
        self.driver: dict[str, Any] = dict(snapshot.get("driver") or {})
        self.missing = set(missing)
        self.errors = dict(errors or {})
        self.init_error = init_error
        self.violations: list[str] = []
        self.calls: list[str] = []
        self.utilization_samples = dict(utilization_samples or {})
        self.pcie_kbs = pcie_kbs
        self.clock_mask = clock_mask
        # GPU index -> the total-energy counter's readings in turn (the last one repeats); a GPU
        # not named has no counter (NVML_ERROR_NOT_SUPPORTED, as on cards older than Volta)
        self.energy_mj = {i: list(v) for i, v in (energy_mj or {}).items()}
        self._table: dict[str, Callable[..., int]] = {
            name[len("_c_") :]: getattr(self, name) for name in dir(self) if name.startswith("_c_")
        }

    # -- the symbol table ---------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        table = self.__dict__.get("_table", {})
        if name.startswith("__") or "_table" not in self.__dict__:
            raise AttributeError(name)
        if name not in table and name not in self.missing:
            # Not an NVML entry point this fake knows: a misspelt name, or one gpuprobe started
            # to use without a fake for it. Either way the test must say so.
            self.violations.append(f"{name}: no such entry point in the fake NVML library")
        if name in self.missing or name not in table:
            raise AttributeError(name)
        impl = table[name]

        def entry(*args: Any) -> int:
            self.calls.append(name)
            if name in self.errors:
                return self.errors[name]
            try:
                return impl(*args)
            except Violation as exc:
                self.violations.append(f"{name}: {exc}")
                return ERROR_INVALID_ARGUMENT

        entry.__name__ = name
        return entry

    # -- argument checks ----------------------------------------------------------------------
    def _out(self, arg: Any, ctype: type) -> Any:
        """``byref(x)`` with ``x`` of ``ctype`` (same size and kind): returns ``x``."""
        obj = getattr(arg, "_obj", None)
        if type(arg).__name__ != "CArgObject" or obj is None:
            raise Violation(f"expected byref({ctype.__name__}), got {type(arg).__name__}")
        if issubclass(ctype, ctypes.Structure):
            if not isinstance(obj, ctypes.Structure) or _layout(type(obj)) != _layout(ctype):
                raise Violation(
                    f"struct {type(obj).__name__} ({ctypes.sizeof(obj)} B) does not have the "
                    f"layout of {ctype.__name__} ({ctypes.sizeof(ctype)} B)"
                )
        elif type(obj) is not ctype and not (
            isinstance(obj, ctypes._SimpleCData)  # type: ignore[attr-defined]
            and ctypes.sizeof(obj) == ctypes.sizeof(ctype)
            and type(obj)._type_ == ctype._type_  # type: ignore[attr-defined]
        ):
            raise Violation(f"expected byref({ctype.__name__}), got byref({type(obj).__name__})")
        return obj

    def _uint(self, arg: Any, ctype: type = ctypes.c_uint) -> int:
        if not isinstance(arg, ctypes._SimpleCData) or ctypes.sizeof(arg) != ctypes.sizeof(ctype):  # type: ignore[attr-defined]
            raise Violation(f"expected {ctype.__name__} by value, got {type(arg).__name__}")
        return int(arg.value)

    def _handle(self, arg: Any) -> tuple[int, int | None]:
        """(gpu index, MIG index or None) of a device handle passed by value."""
        if not isinstance(arg, ctypes._Pointer) or "nvmlDevice" not in type(arg).__name__:  # type: ignore[attr-defined]
            raise Violation(f"expected an nvmlDevice_t handle, got {type(arg).__name__}")
        addr = ctypes.cast(arg, ctypes.c_void_p).value or 0
        gpu, rest = divmod(addr - _HANDLE_BASE, 16)
        if addr < _HANDLE_BASE or not 0 <= gpu < len(self.gpus):
            raise Violation(f"handle {addr:#x} was never handed out")
        return gpu, (rest - 1 if rest else None)

    def _gpu(self, arg: Any) -> dict[str, Any]:
        gpu, mig = self._handle(arg)
        return self.gpus[gpu] if mig is None else self.gpus[gpu]["mig_instances"][mig]

    def _text(self, buf: Any, size: Any, value: str | None) -> int:
        if not isinstance(buf, ctypes.Array) or buf._type_ is not ctypes.c_char:
            raise Violation(f"expected a char buffer, got {type(buf).__name__}")
        n = self._uint(size)
        if n != len(buf):
            raise Violation(f"length {n} given for a buffer of {len(buf)}")
        if value is None:
            return ERROR_NOT_SUPPORTED
        data = value.encode()
        if len(data) + 1 > n:
            return ERROR_INSUFFICIENT_SIZE
        buf.value = data
        return SUCCESS

    @staticmethod
    def _set(obj: Any, value: Any) -> int:
        if value is None:
            return ERROR_NOT_SUPPORTED
        obj.value = value
        return SUCCESS

    @staticmethod
    def _set_handle(out: Any, addr: int) -> None:
        ctypes.cast(ctypes.pointer(out), ctypes.POINTER(ctypes.c_void_p))[0] = addr

    # -- system -------------------------------------------------------------------------------
    def _c_nvmlInitWithFlags(self, flags: Any) -> int:
        if not isinstance(flags, int):  # pynvml passes a Python int (unsigned int flags)
            raise Violation("nvmlInitWithFlags takes unsigned int flags")
        return self.init_error or SUCCESS

    def _c_nvmlShutdown(self) -> int:
        return SUCCESS

    def _c_nvmlErrorString(self, code: Any) -> bytes:  # pynvml sets restype = c_char_p
        return f"NVML error {int(code)}".encode()

    def _c_nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        return self._text(buf, size, self.driver.get("driver_version"))

    def _c_nvmlSystemGetNVMLVersion(self, buf: Any, size: Any) -> int:
        return self._text(buf, size, self.driver.get("nvml_version"))

    def _cuda(self, out: Any) -> int:
        obj = self._out(out, ctypes.c_int)
        v = self.driver.get("cuda_driver_version")
        if v is None:
            return ERROR_NOT_SUPPORTED
        major, minor = v.split(".")
        obj.value = int(major) * 1000 + int(minor) * 10
        return SUCCESS

    def _c_nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        return self._cuda(out)

    def _c_nvmlSystemGetCudaDriverVersion_v2(self, out: Any) -> int:
        return self._cuda(out)

    def _c_nvmlDeviceGetCount_v2(self, out: Any) -> int:
        self._out(out, ctypes.c_uint).value = len(self.gpus)
        return SUCCESS

    def _c_nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        i = self._uint(index)
        obj = getattr(out, "_obj", None)
        if not isinstance(obj, ctypes._Pointer):  # type: ignore[attr-defined]
            raise Violation("expected byref(nvmlDevice_t)")
        if i >= len(self.gpus):
            return ERROR_INVALID_ARGUMENT
        self._set_handle(obj, _HANDLE_BASE + 16 * i)
        return SUCCESS

    # -- one device ---------------------------------------------------------------------------
    def _c_nvmlDeviceGetName(self, h: Any, buf: Any, size: Any) -> int:
        return self._text(buf, size, self._gpu(h)["name"])

    def _c_nvmlDeviceGetUUID(self, h: Any, buf: Any, size: Any) -> int:
        return self._text(buf, size, self._gpu(h)["uuid"])

    def _c_nvmlDeviceGetPciInfo_v3(self, h: Any, out: Any) -> int:
        obj = self._out(out, _PciInfo)
        bus = self._gpu(h).get("pci_bus_id")
        if bus is None:
            return ERROR_NOT_SUPPORTED
        obj.busId = ("0000" + bus).upper().encode()  # NVML: 00000000:18:00.0
        obj.busIdLegacy = bus.upper().encode()
        return SUCCESS

    def _c_nvmlDeviceGetCudaComputeCapability(self, h: Any, major: Any, minor: Any) -> int:
        a, b = self._out(major, ctypes.c_int), self._out(minor, ctypes.c_int)
        cc = self._gpu(h).get("compute_capability")
        if cc is None:
            return ERROR_NOT_SUPPORTED
        a.value, b.value = (int(x) for x in cc.split("."))
        return SUCCESS

    def _uint_field(self, h: Any, out: Any, value: Any) -> int:
        obj = self._out(out, ctypes.c_uint)
        return self._set(obj, value)

    def _c_nvmlDeviceGetNumGpuCores(self, h: Any, out: Any) -> int:
        return self._uint_field(h, out, self._gpu(h).get("fp32_cores"))

    def _c_nvmlDeviceGetMemoryBusWidth(self, h: Any, out: Any) -> int:
        return self._uint_field(h, out, self._gpu(h).get("memory_bus_width"))

    def _clock(self, h: Any, kind: Any, out: Any, which: str) -> int:
        k = self._uint(kind)
        if k not in (1, 2):  # NVML_CLOCK_SM, NVML_CLOCK_MEM
            raise Violation(f"clock type {k} is not SM (1) or MEM (2)")
        field = ("sm" if k == 1 else "mem") + which
        return self._uint_field(h, out, self._gpu(h).get(field))

    def _c_nvmlDeviceGetClockInfo(self, h: Any, kind: Any, out: Any) -> int:
        return self._clock(h, kind, out, "_clock_mhz")

    def _c_nvmlDeviceGetMaxClockInfo(self, h: Any, kind: Any, out: Any) -> int:
        return self._clock(h, kind, out, "_clock_max_mhz")

    def _pcie(self, h: Any, out: Any, key: str) -> int:
        return self._uint_field(h, out, (self._gpu(h).get("pcie") or {}).get(key))

    def _c_nvmlDeviceGetCurrPcieLinkGeneration(self, h: Any, out: Any) -> int:
        return self._pcie(h, out, "gen_current")

    def _c_nvmlDeviceGetMaxPcieLinkGeneration(self, h: Any, out: Any) -> int:
        return self._pcie(h, out, "gen_max")

    def _c_nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: Any, out: Any) -> int:
        return self._pcie(h, out, "gen_max_gpu")

    def _c_nvmlDeviceGetCurrPcieLinkWidth(self, h: Any, out: Any) -> int:
        return self._pcie(h, out, "width_current")

    def _c_nvmlDeviceGetMaxPcieLinkWidth(self, h: Any, out: Any) -> int:
        return self._pcie(h, out, "width_max")

    def _milliwatts(self, h: Any, out: Any, key: str) -> int:
        w = self._gpu(h).get(key)
        return self._uint_field(h, out, None if w is None else round(w * 1000))

    def _c_nvmlDeviceGetPowerUsage(self, h: Any, out: Any) -> int:
        return self._milliwatts(h, out, "power_draw_w")

    def _c_nvmlDeviceGetTotalEnergyConsumption(self, h: Any, out: Any) -> int:
        obj = self._out(out, ctypes.c_ulonglong)
        gpu, mig = self._handle(h)
        script = self.energy_mj.get(gpu) if mig is None else None
        if not script:
            return ERROR_NOT_SUPPORTED
        obj.value = script.pop(0) if len(script) > 1 else script[0]
        return SUCCESS

    def _c_nvmlDeviceGetEnforcedPowerLimit(self, h: Any, out: Any) -> int:
        return self._milliwatts(h, out, "power_limit_w")

    def _c_nvmlDeviceGetPowerManagementLimit(self, h: Any, out: Any) -> int:
        return self._milliwatts(h, out, "power_limit_w")

    def _c_nvmlDeviceGetTemperature(self, h: Any, sensor: Any, out: Any) -> int:
        if self._uint(sensor) != 0:  # NVML_TEMPERATURE_GPU
            raise Violation("only NVML_TEMPERATURE_GPU (0) exists")
        return self._uint_field(h, out, self._gpu(h).get("temperature_c"))

    def _c_nvmlDeviceGetUtilizationRates(self, h: Any, out: Any) -> int:
        obj = self._out(out, _Utilization)
        g = self._gpu(h)
        if g.get("utilization_gpu") is None:
            return ERROR_NOT_SUPPORTED
        obj.gpu, obj.memory = g["utilization_gpu"], g.get("utilization_memory") or 0
        return SUCCESS

    def _c_nvmlDeviceGetPersistenceMode(self, h: Any, out: Any) -> int:
        v = self._gpu(h).get("persistence_mode")
        return self._uint_field(h, out, None if v is None else int(v))

    def _c_nvmlDeviceGetEccMode(self, h: Any, cur: Any, pending: Any) -> int:
        a, b = self._out(cur, ctypes.c_uint), self._out(pending, ctypes.c_uint)
        v = self._gpu(h).get("ecc_mode")
        if v is None:
            return ERROR_NOT_SUPPORTED
        a.value = b.value = int(v)
        return SUCCESS

    def _c_nvmlDeviceGetTotalEccErrors(self, h: Any, kind: Any, counter: Any, out: Any) -> int:
        if (self._uint(kind), self._uint(counter)) != (1, 0):  # UNCORRECTED, VOLATILE_ECC
            raise Violation("gpuprobe reads only uncorrected volatile counts")
        obj = self._out(out, ctypes.c_ulonglong)
        return self._set(obj, self._gpu(h).get("ecc_uncorrected_volatile"))

    def _c_nvmlDeviceGetRetiredPages(self, h: Any, cause: Any, count: Any, pages: Any) -> int:
        c = self._uint(cause)
        n = self._out(count, ctypes.c_uint)
        total = self._gpu(h).get("retired_pages")
        if total is None:
            return ERROR_NOT_SUPPORTED
        mine = total if c == 1 else 0  # all recorded pages are double-bit ones
        if pages is None:
            n.value = mine
            return ERROR_INSUFFICIENT_SIZE if mine else SUCCESS
        if n.value < mine:
            return ERROR_INSUFFICIENT_SIZE
        for i in range(mine):
            pages[i] = 0x1000 * (i + 1)
        n.value = mine
        return SUCCESS

    def _c_nvmlDeviceGetRetiredPagesPendingStatus(self, h: Any, out: Any) -> int:
        v = self._gpu(h).get("retired_pages_pending")
        return self._uint_field(h, out, None if v is None else int(v))

    def _c_nvmlDeviceGetRemappedRows(self, h: Any, *outs: Any) -> int:
        if len(outs) != 4:
            raise Violation("nvmlDeviceGetRemappedRows takes four unsigned int pointers")
        objs = [self._out(o, ctypes.c_uint) for o in outs]
        g = self._gpu(h)
        keys = ("correctable", "uncorrectable", "pending", "failure")
        vals = [g.get(f"remapped_rows_{k}") for k in keys]
        if vals[0] is None:
            return ERROR_NOT_SUPPORTED
        for o, v in zip(objs, vals, strict=True):
            o.value = int(v or 0)
        return SUCCESS

    def _c_nvmlDeviceGetMigMode(self, h: Any, cur: Any, pending: Any) -> int:
        a, b = self._out(cur, ctypes.c_uint), self._out(pending, ctypes.c_uint)
        v = self._gpu(h).get("mig_mode")
        if v is None:
            return ERROR_NOT_SUPPORTED
        a.value = b.value = int(v)
        return SUCCESS

    def _c_nvmlDeviceGetMaxMigDeviceCount(self, h: Any, out: Any) -> int:
        return self._uint_field(h, out, 7 if self._gpu(h).get("mig_mode") is not None else None)

    def _c_nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, index: Any, out: Any) -> int:
        gpu, mig = self._handle(h)
        if mig is not None:
            raise Violation("a MIG handle has no MIG devices")
        i = self._uint(index)
        obj = getattr(out, "_obj", None)
        if not isinstance(obj, ctypes._Pointer):  # type: ignore[attr-defined]
            raise Violation("expected byref(nvmlDevice_t)")
        if i >= len(self.gpus[gpu].get("mig_instances") or []):
            return ERROR_NOT_FOUND
        self._set_handle(obj, _HANDLE_BASE + 16 * gpu + 1 + i)
        return SUCCESS

    def _c_nvmlDeviceGetGpuInstanceId(self, h: Any, out: Any) -> int:
        return self._uint_field(h, out, self._gpu(h).get("gpu_instance_id"))

    def _c_nvmlDeviceGetComputeInstanceId(self, h: Any, out: Any) -> int:
        return self._uint_field(h, out, self._gpu(h).get("compute_instance_id"))

    def _memory(self, h: Any) -> tuple[int, int, int, int] | None:
        g = self._gpu(h)
        if g.get("memory_total") is None:
            return None
        total = int(g["memory_total"])
        reserved = int(g.get("memory_reserved") or 0)
        used = int(g.get("memory_used") or 0)
        free = int(g["memory_free"]) if g.get("memory_free") is not None else total - used
        return total, reserved, used, free

    def _c_nvmlDeviceGetMemoryInfo(self, h: Any, out: Any) -> int:
        obj = self._out(out, _Memory)
        m = self._memory(h)
        if m is None:
            return ERROR_NOT_SUPPORTED
        total, reserved, used, free = m
        obj.total, obj.used, obj.free = total, used + reserved, free  # v1: used includes reserve
        return SUCCESS

    def _c_nvmlDeviceGetMemoryInfo_v2(self, h: Any, out: Any) -> int:
        obj = self._out(out, _MemoryV2)
        if obj.version != MEMORY_V2_VERSION:
            return ERROR_ARGUMENT_VERSION_MISMATCH
        if self._gpu(h).get("memory_reserved") is None:  # an R5xx driver without the v2 split
            return ERROR_NOT_SUPPORTED
        m = self._memory(h)
        assert m is not None
        obj.total, obj.reserved, obj.used, obj.free = m
        return SUCCESS

    def _processes(self, h: Any, count: Any, infos: Any, kind: str, layout: type) -> int:
        n = self._out(count, ctypes.c_uint)
        procs = [p for p in self._gpu(h).get("processes") or [] if p["kind"] == kind]
        if infos is None:
            n.value = len(procs)
            return ERROR_INSUFFICIENT_SIZE if procs else SUCCESS
        if not isinstance(infos, ctypes.Array) or not issubclass(infos._type_, ctypes.Structure):
            raise Violation(f"expected an array of process structs, got {type(infos).__name__}")
        if n.value < len(procs):
            n.value = len(procs)
            return ERROR_INSUFFICIENT_SIZE
        # The driver writes its own layout at its own stride, whatever the binding allocated: a
        # binding whose struct differs reads garbage after the first entry (nvidia-ml-py
        # 12.535.77 on non-R535 drivers). The buffer must hold that many of the driver's.
        room = ctypes.sizeof(infos)
        if room < len(procs) * ctypes.sizeof(layout):
            raise Violation("process buffer smaller than count entries of the driver's struct")
        out = (layout * len(procs)).from_address(ctypes.addressof(infos))
        for slot, p in zip(out, procs, strict=False):
            slot.pid = p["pid"]
            used = p.get("used_memory")
            slot.usedGpuMemory = NOT_AVAILABLE_ULL if used is None else used
            if layout is _ProcessInfoV2:
                slot.gpuInstanceId = slot.computeInstanceId = 0xFFFFFFFF
        n.value = len(procs)
        return SUCCESS

    def _c_nvmlDeviceGetComputeRunningProcesses_v3(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "compute", _ProcessInfoV2)

    def _c_nvmlDeviceGetGraphicsRunningProcesses_v3(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "graphics", _ProcessInfoV2)

    def _c_nvmlDeviceGetComputeRunningProcesses_v2(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "compute", _ProcessInfoV2)

    def _c_nvmlDeviceGetGraphicsRunningProcesses_v2(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "graphics", _ProcessInfoV2)

    def _c_nvmlDeviceGetComputeRunningProcesses(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "compute", _ProcessInfoV1)

    def _c_nvmlDeviceGetGraphicsRunningProcesses(self, h: Any, c: Any, i: Any) -> int:
        return self._processes(h, c, i, "graphics", _ProcessInfoV1)

    def _reasons(self, h: Any, out: Any) -> int:
        obj = self._out(out, ctypes.c_ulonglong)
        if self.clock_mask is not None:
            obj.value = self.clock_mask
            return SUCCESS
        names = self._gpu(h).get("clock_event_reasons")
        if names is None:
            return ERROR_NOT_SUPPORTED
        obj.value = sum(REASON_BITS[r] for r in names if r in REASON_BITS)
        return SUCCESS

    def _c_nvmlDeviceGetCurrentClocksEventReasons(self, h: Any, out: Any) -> int:
        return self._reasons(h, out)

    def _c_nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any, out: Any) -> int:
        return self._reasons(h, out)

    def _c_nvmlDeviceGetPcieThroughput(self, h: Any, counter: Any, out: Any) -> int:
        c = self._uint(counter)
        if c not in (0, 1):  # NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES
            raise Violation(f"PCIe counter {c} is neither TX (0) nor RX (1)")
        obj = self._out(out, ctypes.c_uint)
        self._gpu(h)
        if self.pcie_kbs is None:
            return ERROR_NOT_SUPPORTED
        obj.value = self.pcie_kbs[c]  # KB/s (nvml.h: "in KB/s")
        return SUCCESS

    def _c_nvmlDeviceGetProcessUtilization(self, h: Any, buf: Any, count: Any, since: Any) -> int:
        gpu, _ = self._handle(h)
        n = self._out(count, ctypes.c_uint)
        self._uint(since, ctypes.c_ulonglong)
        samples = self.utilization_samples.get(gpu)
        if samples is None:
            return ERROR_NOT_FOUND  # no samples since that time
        if buf is None:
            n.value = len(samples)
            return ERROR_INSUFFICIENT_SIZE
        if not isinstance(buf, ctypes.Array) or _layout(buf._type_) != _layout(
            _ProcessUtilizationSample
        ):
            raise Violation("expected an array of nvmlProcessUtilizationSample_t")
        for slot, (pid, sm) in zip(buf, samples, strict=False):
            slot.pid, slot.smUtil, slot.timeStamp = pid, sm, 1
        n.value = min(len(samples), len(buf))
        return SUCCESS


# -- installing it under a real pynvml ------------------------------------------------------------
def load_pynvml(folder: str | Path | None = None) -> types.ModuleType:
    """A fresh copy of the real ``pynvml`` module: the installed one, or the ``pynvml.py`` in
    ``folder`` (a ``pip install --target`` of another nvidia-ml-py)."""
    if folder is None:
        spec = importlib.util.find_spec("pynvml")
    else:
        spec = importlib.util.spec_from_file_location("pynvml", Path(folder) / "pynvml.py")
    assert spec is not None and spec.loader is not None, "nvidia-ml-py is not installed"
    mod = importlib.util.module_from_spec(spec)
    # pynvml adds its NVMLError_* classes to sys.modules[__name__]: let that be this copy.
    before = sys.modules.get("pynvml")
    sys.modules["pynvml"] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        if before is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = before
    return mod


# folder (None: the installed copy) -> (its one loaded copy, its namespace as loaded)
_LOADED: dict[str | None, tuple[types.ModuleType, dict[str, Any]]] = {}


def as_loaded_pynvml(folder: str | Path | None = None) -> types.ModuleType:
    """The copy of ``pynvml`` loaded for ``folder`` once per test run, its namespace put back as
    it was loaded (every name rebound since, by a test or by :func:`attach`, is undone; the
    function-pointer cache is emptied and the library lock is new), so each test sees it as
    fresh from :func:`load_pynvml`.

    Not a new copy per test: ctypes keeps every structure class a copy defines, and the array
    types made of them, in its own caches for the life of the process, so a copy never goes
    away. One per test kept ~4,200 objects each alive (1.5 M after test_nvml_failures.py), and
    every later ``gc.collect()`` walked them all: ``fit`` collects twice a trial, and its tests
    took minutes instead of seconds."""
    key = None if folder is None else str(folder)
    if key not in _LOADED:
        mod = load_pynvml(folder)
        _LOADED[key] = (mod, dict(mod.__dict__))
    mod, names = _LOADED[key]
    mod.__dict__.clear()
    mod.__dict__.update(names)
    mod._nvmlGetFunctionPointer_cache.clear()
    mod.libLoadLock = threading.Lock()
    return mod


def pynvml_version(mod: types.ModuleType) -> str:
    """The nvidia-ml-py version of a loaded copy (from its dist-info beside it)."""
    here = Path(mod.__file__ or "").parent
    for info in here.glob("nvidia_ml_py-*.dist-info"):
        return info.name[len("nvidia_ml_py-") : -len(".dist-info")]
    return "unknown"


def attach(mod: types.ModuleType, lib: FakeNvmlLibrary) -> None:
    """Make ``mod.nvmlInit()`` load ``lib`` where it would load libnvidia-ml.so.1."""
    mod.nvmlLib = None
    mod._nvmlGetFunctionPointer_cache.clear()
    mod._nvmlLib_refcount = 0

    def cdll(name: str, *a: Any, **k: Any) -> FakeNvmlLibrary:
        if "nvidia-ml" not in name and "nvml" not in name:
            raise OSError(f"{name}: not the NVML library")
        return lib

    mod.CDLL = cdll


def install_into_sys_modules(mod: types.ModuleType) -> None:
    sys.modules["pynvml"] = mod
