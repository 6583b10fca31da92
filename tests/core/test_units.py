"""The one set of formatters (gpuprobe.core.units)."""

from __future__ import annotations

import pytest

from gpuprobe.core import units


@pytest.mark.parametrize(
    ("b", "text"),
    [
        (None, "n/a"),
        (512, "512 B"),
        (1536, "1.5 KiB"),
        (37.4 * 2**20, "37.4 MiB"),
        (1.5 * 2**30, "1.50 GiB"),
        (2 * 2**40, "2.00 TiB"),
        (-3 * 2**20, "-3 MiB"),
        (1000 * 2**10, "1000 KiB"),
        (1023 * 2**20, "1023 MiB"),
        (999.4 * 2**10, "999 KiB"),
    ],
)
def test_size_picks_the_unit_that_fits(b: float | None, text: str) -> None:
    assert units.size(b) == text


@pytest.mark.parametrize(
    ("s", "text"),
    [(None, "n/a"), (1.5e-5, "15.0 µs"), (0.0123, "12.3 ms"), (2.5, "2.5 s"), (0.25, "250 ms")],
)
def test_seconds(s: float | None, text: str) -> None:
    assert units.seconds(s) == text


@pytest.mark.parametrize(
    ("v", "digits", "text"),
    [
        (3266.4, 0, "3266"),
        (0.031, 0, "0.031"),
        (0.04, 1, "0.04"),
        (1.84, 1, "1.8"),
        (0.0, 1, "0.0"),
        (-0.048, 1, "-0.048"),
        (0.6, 0, "1"),
    ],
)
def test_figure_never_shows_a_value_that_is_not_zero_as_0(v: float, digits: int, text: str) -> None:
    assert units.figure(v, digits) == text


@pytest.mark.parametrize(
    ("v", "unit", "text"),
    [
        (2.5e10, "B/s", "25.0 GB/s"),
        (6.1e13, "FLOP/s", "61.0 TFLOP/s"),
        (989.5e12, "FLOP/s", "990 TFLOP/s"),
        (1.234e9, "B/s", "1.23 GB/s"),
        (12.0, "B/s", "12.0 B/s"),
        (None, "B/s", "n/a"),
    ],
)
def test_rate_has_si_prefix_and_significant_figures(v: float | None, unit: str, text: str) -> None:
    assert units.rate(v, unit) == text


def test_gib() -> None:
    assert units.gib(3 * 2**30) == "3.00 GiB"
    assert units.gib(3 * 2**30, 1, unit=False) == "3.0"
    assert units.gib_value(1.234 * 2**30) == 1.23
    assert units.gib(None) == units.NA and units.gib_value(None) is None


def test_a_speed_ratio_below_one_is_slower_and_said_the_right_way_round() -> None:
    """Issue 27: "0.93× slower" read as faster; a ratio below 1 is a percentage slower, a large
    one is turned round ("2.50× slower", never "0.40× slower")."""
    from gpuprobe.core.units import speed_change

    assert speed_change(0.93) == "7 % slower"
    assert speed_change(1 / 0.93) == "8 % faster"
    assert speed_change(1.12) == "12 % faster"
    assert speed_change(0.4) == "2.50× slower"
    assert speed_change(1 / 1.81) == "1.81× slower"  # as a table's 1.81× slowdown reads
    assert speed_change(0.7) == "30 % slower"
    assert speed_change(3.0) == "3.00× faster"
    assert speed_change(1.002) == "as fast"
    assert speed_change(0.0) == "n/a"
    assert speed_change(float("nan")) == "n/a"
