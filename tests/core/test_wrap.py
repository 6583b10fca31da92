"""core.wrap: prose wrapped at 80 columns under its lead, words whole."""

from __future__ import annotations

from gpuprobe.core.wrap import hang, hang_lines


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
