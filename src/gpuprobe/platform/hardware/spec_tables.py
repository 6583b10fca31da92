"""Read the GPU spec tables shipped as CSV files in ``platform/hardware/data/`` into records.

The tables are data, kept apart from the code that looks things up in them
(:mod:`gpuprobe.platform.hardware.specs`). Each table is one CSV file with a header row; each
row carries a ``source`` cell and most a free-text ``note`` that says how a figure was derived.
A ``source`` cell is a template: ``{key}`` stands for the full citation of that key in
``sources.csv`` (title and address), so that a citation is written once and a row can add the
column or page it read, e.g. ``{a100_ds}, A100 80GB SXM column; {sparse_halved}``.

Why CSV: the tables are flat, a row reads as one line, a spreadsheet or a diff shows a changed
number in place, and the standard library reads it on every supported Python (3.10 has no
``tomllib``). Cells are text: an empty cell is ``None`` (the part lacks the unit or no source
states the figure); a number with a ``.`` is a float and one without an int, so ``7`` and
``7.0`` stay apart as they are in the records; ``yes``/``no`` are booleans.

:func:`tables` turns the rows into the records :mod:`~gpuprobe.platform.hardware.specs` looks
things up in (:class:`ProductSpec`, :class:`SmRates`, :class:`MigProfile`). Files are read once,
lazily, with :mod:`importlib.resources`, so that they are found inside a wheel or a zip as well
as in a checkout.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from gpuprobe.core.records import Record
from gpuprobe.platform.hardware.types import Peaks

__all__ = [
    "MigProfile",
    "ProductSpec",
    "Row",
    "SmRates",
    "Tables",
    "cited",
    "flag",
    "number",
    "parse_compute_capability",
    "rows",
    "sources",
    "tables",
]

Row = dict[str, str]
_DATA = "data"  # the folder of CSV files beside this module


@cache
def rows(table: str) -> tuple[Row, ...]:
    """The rows of ``data/<table>.csv`` as ``{column: text}``, in file order; a row with an empty
    ``source`` cell is refused."""
    path = resources.files("gpuprobe.platform.hardware") / _DATA / f"{table}.csv"
    text = path.read_text(encoding="utf-8")
    table_rows = tuple(csv.DictReader(io.StringIO(text, newline="")))
    for i, row in enumerate(table_rows, start=2):  # line 1 is the header
        if "source" in row and not row["source"]:
            raise ValueError(f"{table}.csv line {i}: a row without a source")
    return table_rows


@cache
def sources() -> dict[str, str]:
    """Source key -> full citation, from ``data/sources.csv``."""
    return {row["key"]: row["citation"] for row in rows("sources")}


def cited(template: str) -> str:
    """A ``source`` cell with each ``{key}`` replaced by its citation (a missing key raises)."""
    return template.format_map(sources())


def number(text: str) -> int | float | None:
    """``""`` -> ``None``; ``"7"`` -> ``7``; ``"7.0"`` -> ``7.0``."""
    if not text:
        return None
    return float(text) if "." in text else int(text)


def flag(text: str) -> bool:
    """``"yes"`` -> ``True``, ``"no"`` -> ``False``; anything else is an error in the table."""
    if text not in ("yes", "no"):
        raise ValueError(f"expected yes or no, got {text!r}")
    return text == "yes"


# --- The rows as records ---------------------------------------------------------------------

_CC_RE = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*$")


def parse_compute_capability(compute_capability: str | None) -> tuple[int, int] | None:
    """``"9.0"`` -> ``(9, 0)``; ``"9"`` -> ``(9, 0)``; anything that is not a CC -> ``None``."""
    if compute_capability is None:
        return None
    m = _CC_RE.match(str(compute_capability))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


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


@dataclass(frozen=True, kw_only=True)
class ProductSpec(Record):
    """One product: how NVML names it and its dense peaks, each with a source.

    ``pattern`` is a case-insensitive regular expression searched in the NVML name.
    Compute in TFLOP/s (TOP/s for INT8), bandwidth in GB/s, memory in GB, clock in MHz.
    Built with keywords only, so that every number in ``products.csv`` reads with its name; a
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
        cc = parse_compute_capability(self.compute_capability)
        per_sm = tables().fp32_cores_per_sm.get(cc) if cc else None
        return None if per_sm is None else self.sm_count * per_sm

    def peaks(self) -> Peaks:
        """The entry as a :class:`~gpuprobe.platform.hardware.types.Peaks` record."""
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


@dataclass(frozen=True, kw_only=True)
class MigProfile:
    """The smallest MIG profile of the cards whose NVML name matches ``pattern`` (case-sensitive)
    and whose memory is ``memory_from_gib`` to ``memory_to_gib`` GiB (the 40 GB and 80 GB A100
    share a name stem); ``nvidia-smi mig -lgip`` lists them on the card."""

    pattern: str
    memory_from_gib: float
    memory_to_gib: float
    profile: str


@dataclass(frozen=True)
class Tables:
    """Every table, as :mod:`gpuprobe.platform.hardware.specs` publishes them."""

    architectures: dict[tuple[int, int], str]
    fp32_cores_per_sm: dict[tuple[int, int], int]
    sm_rates: dict[tuple[int, int], SmRates]
    products: tuple[ProductSpec, ...]
    mig_smallest_profiles: tuple[MigProfile, ...]
    pcie_lane_gbs: dict[int, float]
    rate_limited_parts: re.Pattern[str]


_RATES = ("fp32", "fp64", "tf32", "bf16", "fp16", "fp8", "int8")
_PRODUCT_NUMBERS = ("sm_count", "boost_clock_mhz", "memory_gb", "fp64", "fp64_tensor", "fp32",
                    "tf32", "bf16", "fp16", "fp8", "int8", "memory_bandwidth_gbs")  # fmt: skip


def _numbers(row: Row, columns: Iterable[str]) -> dict[str, Any]:
    return {c: number(row[c]) for c in columns}


def _cc(text: str) -> tuple[int, int]:
    cc = parse_compute_capability(text)
    if cc is None:
        raise ValueError(f"not a compute capability in the spec tables: {text!r}")
    return cc


@cache
def tables() -> Tables:
    """Every table, read from its CSV file once."""
    ccs = rows("compute_capabilities")
    return Tables(
        architectures={_cc(r["compute_capability"]): r["architecture"] for r in ccs},
        fp32_cores_per_sm={_cc(r["compute_capability"]): int(r["fp32_cores_per_sm"]) for r in ccs},
        sm_rates={
            _cc(r["compute_capability"]): SmRates(
                **_numbers(r, _RATES), geforce_half_rate=flag(r["geforce_half_rate"]),
                tensor_for_non_geforce=flag(r["tensor_for_non_geforce"]), source=cited(r["source"]),
            )
            for r in rows("sm_rates")
        },
        products=tuple(
            ProductSpec(
                pattern=r["pattern"], product=r["product"], architecture=r["architecture"],
                chip=r["chip"], compute_capability=r["compute_capability"],
                **_numbers(r, _PRODUCT_NUMBERS), source=cited(r["source"]),
            )
            for r in rows("products")
        ),
        mig_smallest_profiles=tuple(
            MigProfile(pattern=r["pattern"], profile=r["profile"],
                       **_numbers(r, ("memory_from_gib", "memory_to_gib")))
            for r in rows("mig_profiles")
        ),
        pcie_lane_gbs={int(r["generation"]): float(r["lane_gbs"]) for r in rows("pcie_lanes")},
        rate_limited_parts=re.compile(
            "|".join(r["pattern"] for r in rows("rate_limited_parts")), re.IGNORECASE
        ),
    )  # fmt: skip
