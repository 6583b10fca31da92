"""core.wrap: prose wrapped at 80 columns under its lead, words whole."""

from __future__ import annotations

from gpuprobe.core.wrap import hang, hang_lines, key_value_lines, lead_width


def test_continuations_hang_under_the_text_after_the_lead() -> None:
    fix = "         fix: DataLoader(..., num_workers=4, pin_memory=True, persistent_workers=True)"
    assert hang(fix) == [
        "         fix: DataLoader(..., num_workers=4, pin_memory=True,",
        "              persistent_workers=True)",
    ]
    status = "  [info] fp16 is slower here: 0.16x fp32's throughput (1.48 s a forward pass, 231 ms)"
    out = hang(status)
    assert out[0].startswith("  [info] fp16") and out[1].startswith(" " * 9 + "231")
    bullet = "          - " + "word " * 30
    assert all(line.startswith(" " * 12) for line in hang(bullet)[1:])
    assert max(len(line) for line in hang(bullet)) <= 80


def test_a_line_that_fits_and_a_long_word_stay_as_they_are() -> None:
    assert hang("  short") == ["  short"]
    path = "  files: /" + "a" * 100
    assert hang(path) == [path]  # nothing to break at: one word after the lead
    assert hang_lines(["x " * 50], None) == ["x " * 50]
    # no marker: continuations hang two columns under the indent, not at the margin
    wrapped = hang_lines(["x " * 50], 40)
    assert [len(line) for line in wrapped] == [39, 39, 23]
    assert all(line.startswith("  x") for line in wrapped[1:])


def test_a_unit_never_starts_a_line_without_its_number() -> None:
    # "1" ends the first line at 36 columns as words fall; "%" would start the next alone
    line = "  [info] the optimizer step takes 1 % of the step time"
    assert hang(line, 36) == [
        "  [info] the optimizer step takes",
        "         1 % of the step time",
    ]
    gpu = "  GPU 0 (NVIDIA H200): busy 93 % mean, memory peak 3.0/24.0 GiB, power max 650 W"
    assert [x.strip() for x in hang(gpu, 62)[1:]] == ["3.0/24.0 GiB, power max 650 W"]
    assert [x.strip() for x in hang(gpu, 78)[1:]] == ["650 W"]
    # a count's noun is a unit too, with its punctuation
    ev = "  - straggler: rank 3, last_at=3/3 collectives, wait 120 µs"
    assert hang(ev, 36) == [
        "  - straggler: rank 3,",
        "    last_at=3/3 collectives, wait",
        "    120 µs",
    ]
    # a number and its unit longer than a line together break as words do
    assert hang("x " + "9" * 30 + " GiB", 32) == ["x " + "9" * 30, "  GiB"]


def test_key_value_rows_keep_a_unit_with_its_number() -> None:
    rows = [("host", "2 cores, 7.6 GiB memory, swap 0 B, RSS peak 1.9 GiB of the command")]
    assert key_value_lines([*rows, ("GPU 0", "x")], 40) == [
        "host   2 cores, 7.6 GiB memory, swap",
        "       0 B, RSS peak 1.9 GiB of the",
        "       command",
        "GPU 0  x",
    ]
    assert key_value_lines(rows, 55)[1] == "      1.9 GiB of the command"


def test_a_short_label_of_signs_is_a_marker() -> None:
    legend = "#: occurrence of that kernel in the step on every rank; last: the rank"
    out = hang(legend, 40)
    assert out[0].startswith("#: occurrence") and len(out) == 2
    assert out[1].startswith("   ") and out[1][3] != " "
    assert lead_width("*: straggler", 40) == 3 and lead_width("a#: b", 40) == 0


def test_a_word_that_is_no_unit_leaves_the_number_with_the_word_before_it() -> None:
    # "13.0 sees" would part CUDA from its version; "1 GPU(s)" is a count and stays together
    line = "  [ok] torch 2.11.0+cu130 built with CUDA 13.0 sees 1 GPU(s)"
    assert hang(line, 48) == [
        "  [ok] torch 2.11.0+cu130 built with CUDA 13.0",
        "       sees 1 GPU(s)",
    ]
    assert hang(line, 57) == [
        "  [ok] torch 2.11.0+cu130 built with CUDA 13.0 sees",
        "       1 GPU(s)",
    ]
    assert hang("  - from the T4 datasheet and E7's GCP n1-standard-4", 18)[:2] == [
        "  - from the T4",
        "    datasheet and",
    ]
