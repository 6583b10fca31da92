"""Tests for gpuprobe.platform.hardware.specs: CC tables, the product table and the computed fallback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprobe.platform.hardware import specs
from gpuprobe.platform.hardware.specs import (
    PRODUCTS,
    SM_RATES,
    ProductSpec,
    architecture,
    fp32_cores_per_sm,
    markdown_table,
    parse_compute_capability,
    peaks,
    spec_for,
)
from gpuprobe.platform.hardware.types import Peaks

DOCS = Path(__file__).resolve().parents[3] / "docs" / "peaks.md"

# --- compute capability tables -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cc", "arch", "cores"),
    [
        ("3.7", "Kepler", 192),
        ("5.2", "Maxwell", 128),
        ("6.0", "Pascal", 64),
        ("6.1", "Pascal", 128),
        ("7.0", "Volta", 64),
        ("7.2", "Volta", 64),
        ("7.5", "Turing", 64),
        ("8.0", "Ampere", 64),
        ("8.6", "Ampere", 128),
        ("8.7", "Ampere", 128),
        ("8.9", "Ada Lovelace", 128),
        ("9.0", "Hopper", 128),
        ("10.0", "Blackwell", 128),
        ("10.3", "Blackwell", 128),
        ("11.0", "Blackwell", 128),
        ("12.0", "Blackwell", 128),
        ("12.1", "Blackwell", 128),
    ],
)
def test_architecture_and_cores_per_sm(cc: str, arch: str, cores: int) -> None:
    assert architecture(cc) == arch
    assert fp32_cores_per_sm(cc) == cores


@pytest.mark.parametrize("cc", ["13.7", "7.1", "2.0", "", "abc", "9.0.1", None])
def test_unknown_cc_is_none_never_a_guess(cc: str | None) -> None:
    assert architecture(cc) is None
    assert fp32_cores_per_sm(cc) is None
    assert peaks("NVIDIA Future GPU", cc, sm_count=100, sm_clock_max_mhz=2000) is None


def test_parse_compute_capability_accepts_major_only_and_spaces() -> None:
    assert parse_compute_capability(" 9 ") == (9, 0)
    assert parse_compute_capability("12.1") == (12, 1)
    assert parse_compute_capability("9.x") is None


def test_t4_has_2560_fp32_cores_not_5120() -> None:
    t4 = spec_for("Tesla T4")
    assert t4 is not None
    assert t4.sm_count == 40
    assert fp32_cores_per_sm("7.5") == 64
    assert t4.fp32_cores == 2560  # the E7 notebook (docs/experiments.md#e7) printed 128 x 40 = 5120
    p = peaks("Tesla T4", "7.5")
    assert p is not None and p.fp32 == pytest.approx(8.1, abs=0.05)
    assert p.fp16 == pytest.approx(65) and p.int8 == pytest.approx(130)
    assert p.memory_bandwidth_gbs == pytest.approx(320)
    assert p.tf32 is None and p.bf16 is None and p.fp8 is None  # Turing has none of them


# --- named products ------------------------------------------------------------------------------


def test_h200_entry() -> None:
    spec = spec_for("NVIDIA H200")
    assert spec is not None
    assert spec.product == "NVIDIA H200 SXM"
    assert spec.sm_count == 132
    assert spec.fp32_cores == 16896
    p = peaks("NVIDIA H200", "9.0")
    assert isinstance(p, Peaks)
    assert p.product == "NVIDIA H200 SXM"
    assert p.fp32 == pytest.approx(67, abs=0.5)
    assert p.bf16 == pytest.approx(989, abs=1)  # dense; the datasheet's 1979 is sparse
    assert p.fp8 == pytest.approx(1979, abs=1)
    assert p.memory_bandwidth_gbs == 4800
    assert p.source and "datasheet" in p.source


def test_a100_80gb_sxm_bandwidth_and_a100_variants_differ() -> None:
    sxm80 = peaks("NVIDIA A100-SXM4-80GB", "8.0")
    pcie40 = peaks("NVIDIA A100-PCIE-40GB", "8.0")
    pcie80 = peaks("NVIDIA A100 80GB PCIe", "8.0")
    sxm40 = peaks("NVIDIA A100-SXM4-40GB", "8.0")
    assert sxm80 is not None and pcie40 is not None and pcie80 is not None and sxm40 is not None
    assert sxm80.memory_bandwidth_gbs == pytest.approx(2039)
    assert pcie80.memory_bandwidth_gbs == pytest.approx(1935)
    assert pcie40.memory_bandwidth_gbs == pytest.approx(1555)
    assert sxm40.memory_bandwidth_gbs == pytest.approx(1555)
    assert len({sxm80.product, pcie40.product, pcie80.product, sxm40.product}) == 4
    assert sxm80.bf16 == pytest.approx(312) and sxm80.tf32 == pytest.approx(156)


def test_h100_pcie_and_sxm_are_told_apart() -> None:
    pcie = spec_for("NVIDIA H100 PCIe")
    sxm = spec_for("NVIDIA H100 80GB HBM3")
    nvl = spec_for("NVIDIA H100 NVL")
    assert pcie is not None and sxm is not None and nvl is not None
    assert (pcie.product, sxm.product, nvl.product) == (
        "NVIDIA H100 PCIe",
        "NVIDIA H100 SXM",
        "NVIDIA H100 NVL",
    )
    assert (pcie.sm_count, sxm.sm_count) == (114, 132)
    assert pcie.memory_bandwidth_gbs == 2000 and sxm.memory_bandwidth_gbs == 3350
    assert pcie.bf16 is not None and sxm.bf16 is not None and pcie.bf16 < sxm.bf16


@pytest.mark.parametrize(
    ("name", "product"),
    [
        ("Tesla V100-SXM2-16GB", "NVIDIA Tesla V100 SXM2"),
        ("Tesla V100-SXM2-32GB", "NVIDIA Tesla V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "NVIDIA Tesla V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", "NVIDIA Tesla V100S PCIe 32GB"),
        ("NVIDIA T4", "NVIDIA T4"),
        ("NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti"),
        ("NVIDIA GeForce RTX 2080", "NVIDIA GeForce RTX 2080"),
        ("NVIDIA A30", "NVIDIA A30"),
        ("NVIDIA A10", "NVIDIA A10"),
        ("NVIDIA A40", "NVIDIA A40"),
        ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"),
        ("NVIDIA RTX A5000", "NVIDIA RTX A5000"),
        ("NVIDIA RTX A6000", "NVIDIA RTX A6000"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("NVIDIA L40", "NVIDIA L40"),
        ("NVIDIA L40S", "NVIDIA L40S"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
        ("NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX 6000 Ada Generation"),
        ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
        ("NVIDIA B200", "NVIDIA B200 (HGX)"),
        ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
        (
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "NVIDIA RTX PRO 6000 Blackwell Workstation",
        ),
        (
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation",
        ),
    ],
)
def test_nvml_names_match_their_entry(name: str, product: str) -> None:
    spec = spec_for(name)
    assert spec is not None and spec.product == product


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A100",  # no memory size: which bandwidth is unknown
        "NVIDIA A10G",  # AWS variant, not the A10
        "NVIDIA GH200 480GB",  # not an H200
        "NVIDIA GB200",  # not a B200 board
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "NVIDIA GeForce RTX 5090 Laptop GPU",
        "NVIDIA GeForce RTX 3090 Ti",
        "NVIDIA GeForce RTX 2080 SUPER",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "Quadro RTX 6000",
        "NVIDIA H20",
        "",
        None,
    ],
)
def test_near_miss_names_do_not_match(name: str | None) -> None:
    assert spec_for(name) is None


# --- every table entry ---------------------------------------------------------------------------

# Datasheets sometimes round; tensor figures at a lower clock than the boost clock (Hopper).
_TENSOR_CLOCK_SLACK = 0.10  # fraction; H100 tensor figures assume 1830 vs 1980 MHz (8 %)
_CC_TENSOR_FROM = {"8.0", "8.6", "8.9", "9.0", "12.0"}


@pytest.mark.parametrize("spec", PRODUCTS, ids=lambda s: s.product)
def test_entry_has_source_and_consistent_dense_values(spec: ProductSpec) -> None:
    assert spec.source.strip()
    assert "http" in spec.source or "PB-" in spec.source
    assert re.compile(spec.pattern, re.IGNORECASE).search(spec.product)
    assert architecture(spec.compute_capability) == spec.architecture
    assert spec.fp32 is not None and spec.fp32 > 0
    assert spec.memory_bandwidth_gbs is not None and spec.memory_bandwidth_gbs > 0
    if spec.fp64 is not None:
        assert spec.fp64 <= spec.fp32 / 2 * 1.03  # H100: 34 vs 67 / 2, rounded
    if spec.bf16 is not None and spec.fp16 is not None:
        assert spec.bf16 <= 2 * spec.fp16
        assert spec.bf16 == pytest.approx(spec.fp16)
    if spec.tf32 is not None:
        assert spec.bf16 is not None
        # GeForce GA10x/AD10x/GB20x halve TF32 and FP32-accumulate BF16 alike, so the ratio holds
        # everywhere; NVIDIA's rounding differs by up to 2.2 % (HGX B200: TF32 2.2 vs BF16 4.5 PF).
        assert spec.tf32 == pytest.approx(spec.bf16 / 2, rel=0.025)
    if spec.fp8 is not None:  # FP8 is 2 x BF16; the L40S datasheet rounds 362.05 vs 733
        assert spec.bf16 is not None and spec.fp8 <= 2 * spec.bf16 * 1.025
    if spec.int8 is not None and spec.fp16 is not None:
        assert spec.int8 <= 4 * spec.fp16


@pytest.mark.parametrize("spec", PRODUCTS, ids=lambda s: s.product)
def test_precisions_exist_only_on_their_architectures(spec: ProductSpec) -> None:
    cc = parse_compute_capability(spec.compute_capability)
    assert cc is not None
    if cc < (8, 9):
        assert spec.fp8 is None
    if cc < (8, 0):
        assert spec.tf32 is None and spec.bf16 is None
    if cc < (7, 5):
        assert spec.int8 is None


@pytest.mark.parametrize(
    "spec", [s for s in PRODUCTS if s.boost_clock_mhz], ids=lambda s: s.product
)
def test_datasheet_fp32_matches_sms_times_lanes_times_clock(spec: ProductSpec) -> None:
    assert spec.fp32_cores is not None and spec.boost_clock_mhz is not None
    computed = spec.fp32_cores * 2 * spec.boost_clock_mhz * 1e6 / 1e12
    assert spec.fp32 == pytest.approx(computed, rel=0.02)


@pytest.mark.parametrize(
    "spec",
    [
        s
        for s in PRODUCTS
        if s.boost_clock_mhz
        and s.fp16
        and s.compute_capability in {"7.0", "7.5"} | _CC_TENSOR_FROM
        and s.product != "NVIDIA L40"  # datasheet tensor rates are half the L40S's on one chip
    ],
    ids=lambda s: s.product,
)
def test_datasheet_tensor_rate_is_dense(spec: ProductSpec) -> None:
    """A sparse figure left in the table would be twice what the SMs can do densely."""
    cc = parse_compute_capability(spec.compute_capability)
    assert cc is not None
    rates = SM_RATES[cc]
    assert rates.fp16 is not None and spec.boost_clock_mhz is not None and spec.fp16 is not None
    divisor = 2 if ("GeForce" in spec.product and rates.geforce_half_rate) else 1
    computed = rates.fp16 // divisor * spec.sm_count * spec.boost_clock_mhz * 1e6 / 1e12
    assert spec.fp16 <= computed * 1.02
    assert spec.fp16 >= computed * (1 - _TENSOR_CLOCK_SLACK)


def test_geforce_fp32_accumulate_is_half_of_the_professional_rate_per_sm_clock() -> None:
    rtx3090 = spec_for("NVIDIA GeForce RTX 3090")
    a6000 = spec_for("NVIDIA RTX A6000")
    assert rtx3090 is not None and a6000 is not None
    assert rtx3090.bf16 is not None and a6000.bf16 is not None
    assert rtx3090.boost_clock_mhz is not None and a6000.boost_clock_mhz is not None
    per_sm_clock_3090 = rtx3090.bf16 / (rtx3090.sm_count * rtx3090.boost_clock_mhz)
    per_sm_clock_a6000 = a6000.bf16 / (a6000.sm_count * a6000.boost_clock_mhz)
    assert per_sm_clock_3090 == pytest.approx(per_sm_clock_a6000 / 2, rel=0.01)


def test_patterns_are_unique_and_each_entry_found_by_its_own_product_name() -> None:
    assert len({s.pattern for s in PRODUCTS}) == len(PRODUCTS)
    assert len({s.product for s in PRODUCTS}) == len(PRODUCTS)
    for spec in PRODUCTS:
        assert spec_for(spec.product) is spec, spec.product


def test_spec_round_trips_through_json() -> None:
    spec = PRODUCTS[0]
    assert ProductSpec.from_dict(spec.to_dict()) == spec
    p = spec.peaks()
    assert Peaks.from_dict(p.to_dict()) == p


# --- computed fallback ---------------------------------------------------------------------------


def test_unknown_hopper_product_gets_computed_fp32_and_tensor() -> None:
    sms, clock = 120, 1900
    p = peaks("NVIDIA H150 Experimental", "9.0", sm_count=sms, sm_clock_max_mhz=clock)
    assert p is not None
    assert p.product is None
    assert p.fp32 == pytest.approx(sms * 128 * 2 * clock * 1e6 / 1e12, abs=0.01)
    assert p.fp64 == pytest.approx(p.fp32 / 2, abs=0.01)
    assert p.bf16 == pytest.approx(sms * 4096 * clock * 1e6 / 1e12, abs=0.01)
    assert p.fp8 == pytest.approx(2 * p.bf16, abs=0.02)
    assert p.memory_bandwidth_gbs is None  # no memory clock given
    assert p.source is not None and p.source.startswith("computed from")


def test_computed_bandwidth_follows_nvml_clock_convention() -> None:
    # NVML max memory clocks: T4 5001 MHz x 256 bit, A100 40GB 1215 MHz x 5120 bit.
    t4 = peaks("NVIDIA Turing Test Board", "7.5", mem_clock_max_mhz=5001, memory_bus_width=256)
    a100 = peaks("NVIDIA A100", "8.0", mem_clock_max_mhz=1215, memory_bus_width=5120)
    assert t4 is not None and t4.memory_bandwidth_gbs == pytest.approx(320.1, abs=0.05)
    assert a100 is not None and a100.memory_bandwidth_gbs == pytest.approx(1555.2, abs=0.1)
    assert t4.fp32 is None  # no SM count or clock: nothing computed, nothing guessed
    assert "bandwidth computed" in (a100.source or "")


def test_unknown_geforce_gets_half_rate_fp32_accumulate() -> None:
    # An RTX 4080 (not in the table): 76 SMs, 2505 MHz; Ada whitepaper: FP32 48.7, BF16 97.5.
    p = peaks("NVIDIA GeForce RTX 4080", "8.9", sm_count=76, sm_clock_max_mhz=2505)
    assert p is not None
    assert p.fp32 == pytest.approx(48.7, abs=0.1)
    assert p.bf16 == pytest.approx(97.5, abs=0.1)
    assert p.int8 == pytest.approx(4 * p.bf16, abs=0.1)  # INT8 is not halved on GeForce
    assert p.fp64 == pytest.approx(p.fp32 / 64, abs=0.01)


def test_unknown_professional_ada_gets_no_tensor_guess() -> None:
    p = peaks("NVIDIA L20", "8.9", sm_count=92, sm_clock_max_mhz=2520)
    assert p is not None and p.fp32 is not None
    assert p.bf16 is None and p.fp8 is None and p.int8 is None
    assert "not computed" in (p.source or "")


def test_blackwell_datacentre_unknown_gets_fp32_only() -> None:
    p = peaks("NVIDIA GB200", "10.0", sm_count=152, sm_clock_max_mhz=2062)
    assert p is not None
    assert p.fp32 == pytest.approx(152 * 256 * 2062e6 / 1e12, abs=0.01)
    assert (p.fp64, p.bf16, p.fp8) == (None, None, None)


def test_rate_limited_parts_get_bandwidth_only() -> None:
    p = peaks(
        "NVIDIA H20",
        "9.0",
        sm_count=78,
        sm_clock_max_mhz=1980,
        mem_clock_max_mhz=2619,
        memory_bus_width=6144,
    )
    assert p is not None and p.fp32 is None and p.bf16 is None
    assert p.memory_bandwidth_gbs == pytest.approx(4022.8, abs=0.1)


def test_known_cc_without_counts_or_clocks_is_none() -> None:
    assert peaks("NVIDIA Future Hopper", "9.0") is None


def test_named_product_wins_over_computation() -> None:
    p = peaks("NVIDIA H100 PCIe", "9.0", sm_count=1, sm_clock_max_mhz=1)
    assert p is not None and p.fp32 == 51 and p.product == "NVIDIA H100 PCIe"


# --- Markdown ------------------------------------------------------------------------------------


def test_markdown_table_lists_every_product() -> None:
    table = markdown_table()
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == len(PRODUCTS) + 1  # header
    for spec in PRODUCTS:
        assert f"| {spec.product} |" in table
    t4_row = next(r for r in rows if r.startswith("| NVIDIA T4 |"))
    assert "| 2560 |" in t4_row and "| n/a |" in t4_row


def test_docs_peaks_md_is_generated_from_the_table() -> None:
    assert markdown_table() in DOCS.read_text(encoding="utf-8"), (
        "docs/peaks.md is stale: replace its table with "
        "the output of python -m gpuprobe.platform.hardware.specs"
    )


def test_module_has_no_heavy_imports() -> None:
    source = Path(specs.__file__).read_text(encoding="utf-8")
    for mod in ("pynvml", "torch", "numpy"):
        assert not re.search(rf"^\s*(import|from)\s+{mod}\b", source, re.MULTILINE)


def test_mig_profiles_per_card() -> None:
    from gpuprobe.platform.hardware.specs import mig_smallest_profile

    gib = 2**30
    cases = {
        ("NVIDIA A100-SXM4-40GB", 40 * gib): "1g.5gb",
        ("NVIDIA A100-SXM4-80GB", 80 * gib): "1g.10gb",
        ("NVIDIA A30", 24 * gib): "1g.6gb",
        ("NVIDIA H100 80GB HBM3", 80 * gib): "1g.10gb",
        ("NVIDIA H100 NVL", 94 * gib): "1g.12gb",
        ("NVIDIA H200", 143771 * 2**20): "1g.18gb",
        ("NVIDIA B200", 179 * gib): "1g.23gb",
        ("Tesla T4", 15 * gib): None,  # no MIG
        ("NVIDIA GB200", 186 * gib): None,  # not in the table: the fix lists the card's profiles
    }
    assert {k: mig_smallest_profile(*k) for k in cases} == cases


def test_the_mig_fix_names_the_cards_own_profile() -> None:
    import dataclasses

    from _support import DATA
    from gpuprobe.platform.inventory import load
    from gpuprobe.tools.doctor.engine import judge

    inv = load(DATA / "h200.json")
    for name, mem, want in (
        ("NVIDIA A100-SXM4-80GB", 80 * 2**30, "-cgi 1g.10gb -C"),
        ("NVIDIA H200", 143771 * 2**20, "-cgi 1g.18gb -C"),
        ("NVIDIA GB200", 186 * 2**30, "-lgip') and create"),
    ):
        g = dataclasses.replace(inv.gpus[0], name=name, memory_total=mem, mig_mode=True)
        f = {f.id: f for f in judge(dataclasses.replace(inv, gpus=(g,)))}["gpu-mig-no-instances"]
        assert want in (f.fix or "")
        assert name == "NVIDIA H200" or "1g.18gb" not in (f.fix or "")


# --- PCIe links ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gen", "gt_per_s", "efficiency"),
    [(1, 2.5, 8 / 10), (2, 5, 8 / 10), (3, 8, 128 / 130), (4, 16, 128 / 130), (5, 32, 128 / 130),
     (6, 64, 242 / 256)],
)  # fmt: skip
def test_pcie_lane_rate_is_transfer_rate_times_encoding(
    gen: int, gt_per_s: float, efficiency: float
) -> None:
    assert specs.PCIE_LANE_GBS[gen] == pytest.approx(gt_per_s * efficiency / 8, abs=5e-4)


def test_pcie_link_gbs() -> None:
    assert specs.pcie_link_gbs(4, 16) == pytest.approx(31.5, abs=0.01)  # an A100's Gen4 x16
    assert specs.pcie_link_gbs(3, 8) == pytest.approx(7.88)
    assert specs.pcie_link_gbs(None, 16) is None and specs.pcie_link_gbs(4, None) is None
    assert specs.pcie_link_gbs(9, 16) is None  # a generation the table does not know


# --- the data files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table",
    ["compute_capabilities", "sm_rates", "products", "mig_profiles", "pcie_lanes",
     "rate_limited_parts"],
)  # fmt: skip
def test_every_row_cites_a_known_source(table: str) -> None:
    from gpuprobe.platform.hardware import spec_tables

    rows = spec_tables.rows(table)
    assert rows
    for row in rows:
        assert row["source"]
        assert "{" not in spec_tables.cited(row["source"])  # every {key} is in sources.csv


def test_cells_keep_ints_and_floats_apart() -> None:
    from gpuprobe.platform.hardware.spec_tables import flag, number

    assert number("") is None and number("7") == 7 and isinstance(number("7"), int)
    assert isinstance(number("1000.0"), float)
    assert flag("yes") is True and flag("no") is False
    with pytest.raises(ValueError):
        flag("true")
