"""The one set of formatters: bytes, durations and rates as people read them.

Every number gpuprobe shows goes through here, so that one quantity reads the same in the terminal,
the HTML report, a finding's title and a chart: bytes in binary units (KiB, MiB, GiB: what
``nvidia-smi`` and PyTorch's allocator print), durations in the unit that fits (µs, ms, s), rates
with SI prefixes (GB/s, TFLOP/s: what the data sheets print). A missing value is :data:`NA`.

This module is at the bottom of the layers: judges use it for titles, ``report/`` for tables.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "NA",
    "count",
    "figure",
    "gib",
    "gib_value",
    "joules",
    "parse_size",
    "rate",
    "seconds",
    "size",
    "speed_change",
]

NA = "n/a"  # a value that was not measured or is not supported (nvitop's NA)
KIB = 2**10
MIB = 2**20
GIB = 2**30
_BINARY = (("TiB", 2**40), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))
_SI = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def gib(b: float | None, digits: int = 2, *, unit: bool = True) -> str:
    """Bytes as GiB with ``digits`` decimals; ``unit=False`` gives the number alone (for
    ``3.0/24.0 GiB``)."""
    if b is None:
        return NA
    return f"{b / GIB:.{digits}f}" + (" GiB" if unit else "")


def gib_value(b: float | None, digits: int = 2) -> float | None:
    """Bytes as a GiB number rounded to ``digits`` decimals, for a finding's evidence."""
    return None if b is None else round(b / GIB, digits)


def size(b: float | None) -> str:
    """Bytes in the binary unit that reads best: ``512 B``, ``1.5 KiB``, ``37.4 MiB``,
    ``1.50 GiB``, ``2.00 TiB`` (three significant figures; GiB and TiB with two decimals)."""
    if b is None:
        return NA
    for name, scale in _BINARY:
        if abs(b) >= scale:
            value = b / scale
            if scale >= GIB:
                return f"{value:.2f} {name}"
            # three significant figures, but 1000-1023 of a unit as a whole number, not 1e+03
            return f"{value:.0f} {name}" if abs(value) >= 999.5 else f"{value:.3g} {name}"
    return f"{b:.0f} B"


def seconds(s: float | None) -> str:
    """A duration in the unit that fits: ``15.0 µs``, ``12.3 ms``, ``2.50 s``."""
    if s is None:
        return NA
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def figure(v: float, digits: int = 0) -> str:
    """``v`` with ``digits`` decimals, or two significant figures where those would show a
    value that is not zero as 0 (``figure(3266.4)`` is ``3266``, ``figure(0.031)`` is
    ``0.031``, ``figure(0.04, 1)`` is ``0.04``, not ``0.0``)."""
    text = f"{v:.{digits}f}"
    if v != 0 and float(text) == 0:
        return f"{v:.2g}"
    return text


def count(v: float | None) -> str:
    """A quantity without a unit prefix (samples/s, items/s): ``12,345`` from 100 up, three
    significant figures below (``42.5``, ``0.123``)."""
    if v is None:
        return NA
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


# From this ratio of speeds on (or its inverse down), a change reads as "1.81× slower" rather than
# a percentage ("45 % slower" beside a table's 1.81× slowdown, or "150 % faster", is read wrongly
# as often as right). gpuprobe's choice.
SPEED_TIMES_FROM = 1.5


def speed_change(ratio: float) -> str:
    """A ratio of speeds (new / old throughput, or old / new time) in words that match it:
    ``0.93`` -> ``7 % slower``, ``1.12`` -> ``12 % faster``, ``0.4`` -> ``2.50× slower``,
    ``3.0`` -> ``3.00× faster``, ``1.002`` -> ``as fast``. Never "0.93× slower": a ratio below 1
    is turned round before it is called slower."""
    if not 0 < ratio < math.inf:
        return NA
    if ratio >= SPEED_TIMES_FROM:
        return f"{ratio:.2f}× faster"
    if ratio <= 1 / SPEED_TIMES_FROM:
        return f"{1 / ratio:.2f}× slower"
    pct = round(100 * (ratio - 1))
    if pct == 0:
        return "as fast"
    return f"{pct} % faster" if pct > 0 else f"{-pct} % slower"


def rate(value: float | None, unit: str, digits: int = 3) -> str:
    """A rate with an SI prefix: ``rate(2.5e10, "B/s")`` is ``25.0 GB/s``,
    ``rate(6.1e13, "FLOP/s")`` is ``61.0 TFLOP/s``; ``digits`` significant figures."""
    if value is None:
        return NA
    for prefix, scale in _SI:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def _sig(v: float, digits: int) -> str:
    """``v`` with ``digits`` significant figures, keeping trailing zeros (``25.0``, not ``25``)."""
    if v == 0:
        return "0"
    whole = len(str(int(abs(v)))) if abs(v) >= 1 else 1
    return f"{v:.{max(digits - whole, 0)}f}"


# The units parse_size reads: decimal (kB, MB, ...) and binary (KiB, MiB, ...; K, M, G, T too)
_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_UNITS.update({"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 2**10})
_UNITS.update({"M": 2**20, "G": 2**30, "T": 2**40})


def parse_size(text: str) -> int:
    """``"2GiB"`` -> 2147483648, ``"512 MiB"``, ``"1.5G"`` (binary), ``"800MB"`` (decimal),
    ``"1,000 bytes"``. Raises ValueError on anything else."""
    m = re.fullmatch(r"\s*([\d,]*\.?\d+)\s*([a-zA-Z]*)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a size like 2GiB or 512MiB")
    unit = m.group(2).upper().removesuffix("YTES").removesuffix("YTE")
    unit = "B" if unit == "B" else unit
    if unit not in _UNITS:
        raise ValueError(f"{text!r}: unknown unit {m.group(2)!r} (use B, KiB, MiB, GiB, MB, GB)")
    return int(float(m.group(1).replace(",", "")) * _UNITS[unit])


def joules(j: float | None, missing: str = NA) -> str:
    """Energy in the unit that fits, three significant figures: ``250 J``, ``3.13 kJ``."""
    if j is None:
        return missing
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(j) >= scale:
            return f"{j / scale:.3g} {unit}"
    return f"{j:.3g} J"
