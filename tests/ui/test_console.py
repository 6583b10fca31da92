"""ui.console: every view's lines of text wrap under their lead, and a pipe gets no trailing
spaces."""

from __future__ import annotations

import io

from rich.table import Table
from rich.text import Text

from gpuprobe.ui.console import make_console


def _print(*objects: object, width: int = 40, **kw: object) -> list[str]:
    buf = io.StringIO()
    con = make_console(file=buf, width=width, color_system=None, force_terminal=False)
    con.print(*objects, **kw)
    return buf.getvalue().splitlines()


def test_a_line_without_a_marker_hangs_two_columns_in() -> None:
    lines = _print("gpuprobe bench on a machine with " + "many words " * 6)
    assert len(lines) == 3
    assert lines[0].startswith("gpuprobe bench")
    assert all(line.startswith("  ") and line[2] != " " for line in lines[1:])
    assert max(map(len, lines)) <= 40


def test_a_label_keeps_its_text_in_one_column() -> None:
    lines = _print(Text.assemble(("Biggest gain: ", "bold"), "input-bound, " + "idle " * 12))
    assert lines[0].startswith("Biggest gain: input-bound,")
    assert all(line.startswith(" " * 14) and line[14] != " " for line in lines[1:])
    indented = _print("  - first item " + "word " * 12)
    assert all(line.startswith(" " * 4) and line[4] != " " for line in indented[1:])


def test_each_line_of_a_multiline_string_hangs_on_its_own() -> None:
    lines = _print("short\n" + "note: " + "long words " * 6 + "\n[dim]dim[/dim]")
    assert lines[0] == "short" and lines[-1] == "dim"
    assert lines[1].startswith("note: ") and lines[2].startswith(" " * 6)


def test_a_word_longer_than_the_hang_is_not_cut() -> None:
    path = "/" + "p" * 38  # fits the line at the margin, not two columns in
    lines = _print(f"header {path} tail")
    assert [line.strip() for line in lines].count(path) == 1  # whole, on a line of its own


def test_no_trailing_spaces_in_a_pipe_and_tables_as_rich_draws_them() -> None:
    t = Table(title="a title much shorter than the table is wide")
    for name in ("first column", "second column", "third"):
        t.add_column(name)
    t.add_row("1", "2", "3")
    lines = _print(t, width=80)
    assert lines and all(line == line.rstrip() for line in lines)
    assert any("first column" in line for line in lines)
    # markup and explicit layout options pass through to rich unchanged
    assert _print("[bold]x[/bold]") == ["x"]
    assert _print("y" * 50, no_wrap=True, crop=True) == ["y" * 40]


def test_a_table_title_wraps_under_its_lead_above_the_table() -> None:
    t = Table(title="GPU time per step (ms): idle split by cause, each instant once")
    t.add_column("step")
    t.add_row("1")
    lines = _print(t, width=50)
    assert lines[0].startswith("GPU time per step (ms): idle")
    assert lines[1].startswith(" " * 24) and lines[1].strip()  # under the label's text
    assert any("step" in line for line in lines[2:])


def test_a_unit_never_starts_a_line_without_its_number() -> None:
    from gpuprobe.ui.console import Hanging

    gpu = "  GPU 0 (NVIDIA H200): busy 93 % mean, memory peak 3.0/24.0 GiB, power max 650 W"
    assert [x.strip() for x in _print(gpu, width=62)[1:]] == ["3.0/24.0 GiB, power max 650 W"]
    lines = _print(
        Hanging(Text("  [info] ", "bold"), "the optimizer step takes 1 % of it"), width=36
    )
    assert lines == ["  [info] the optimizer step takes", "         1 % of it"]
    ev = Hanging(" " * 8, Text("rank 3  last_at=3/3 collectives  wait 120 µs", style="dim"))
    assert _print(ev, width=36) == [
        "        rank 3",
        "        last_at=3/3 collectives",
        "        wait 120 µs",
    ]


def test_a_legend_hangs_under_the_text_after_its_sign_label() -> None:
    legend = Text("#: occurrence of that kernel in the step on every rank; last: the rank", "dim")
    lines = _print(legend, width=40)
    assert lines[0].startswith("#: occurrence") and len(lines) == 2
    assert lines[1].startswith("   ") and lines[1][3] != " "


def test_text_in_a_folding_column_hangs_and_keeps_its_units() -> None:
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    t.add_column(justify="right")
    t.add_row("copies", "Pageable copies take only 4 µs per step", "1.0")
    assert [line.rstrip() for line in _print(t, width=40)] == [
        "copies  Pageable copies take only    1.0",
        "          4 µs per step",
    ]
    # the caller's table is left as it was
    assert t.columns[1]._cells == ["Pageable copies take only 4 µs per step"]


def _table_text(
    rows: list[tuple[str, ...]], names: tuple[str, ...] = ("case", "rate", "notes")
) -> str:
    import io

    from rich.table import Table

    from gpuprobe.ui.console import make_console

    t = Table()
    for name in names:
        t.add_column(name, overflow="fold", justify="right" if name in ("size", "rate") else "left")
    for row in rows:
        t.add_row(*row)
    buf = io.StringIO()
    make_console(file=buf, width=80).print(t)
    return buf.getvalue()


def test_a_table_at_80_columns_wraps_at_spaces_never_inside_a_word() -> None:
    """Issue 41: `elementwise-reside`/`nt` in bench's table (rich narrowed a column of names as
    far as the column of prose beside it), `torch.versio`/`n.cuda`, `docs/experiments`/`.md#e5`."""
    rows = [  # bench crossover's table, as it came out
        ("torch cpu", "elementwise-resident", "1000", "0.855 GFLOP/s", ""),
        ("torch cpu", "matmul-resident", "128", "157 GFLOP/s", "not trustworthy: the runs never agreed"),
    ]  # fmt: skip
    text = _table_text(rows, ("backend", "case", "size", "rate", "notes"))
    assert max(len(line) for line in text.splitlines()) <= 80
    for word in ("elementwise-resident", "0.855 GFLOP/s", "not trustworthy:"):
        assert any(word in line for line in text.splitlines()), text


def test_a_table_whose_words_cannot_all_fit_folds_the_prose_not_the_names() -> None:
    long_note = "see " + "docs/a-very-long-path/" * 3 + "experiments.md#e5 for the rest"
    rows = [("numpy cpu", "elementwise-resident", "1000", "1.98 GFLOP/s", long_note)]
    text = _table_text(rows, ("backend", "case", "size", "rate", "notes"))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "elementwise-resident" in text and "1.98 GFLOP/s" in text


def test_a_word_too_long_for_its_cells_hang_goes_whole_under_the_cells_start() -> None:
    """`info`'s framework table at 80 columns: `(torch.version.cuda` was cut after
    `torch.versio` (its cell had room for the word, not for the word and the hang)."""
    rows = [
        ("torch", "2.13.0+cpu", "n/a", "n/a", "none (CPU-only)",
         "none: CPU-only build (torch.version.cuda is None)"),
        ("cupy", "not installed", "", "", "", ""),
    ]  # fmt: skip
    text = _table_text(rows, ("framework", "version", "CUDA", "cuDNN", "compiled for", "sees"))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("(torch.version.cuda" in line for line in lines), text
