"""``diagnose --html``: the zoomable timeline (inline data and script, nothing fetched), the
Perfetto note, the pages of a job's ranks and of one process's cycles, and the script at work in
a real headless browser (zoom at the pointer, pan, reset, labels that fit)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from gpuprobe import cli
from gpuprobe.tools.diagnose.show import timeline

DATA = Path(__file__).parent.parent.parent / "data" / "diagnose"
V100 = DATA / "kineto_r50_nw0_a.pt.trace.json.gz"  # ResNet50 on a V100, 1.2 MB gzipped
DLRM8 = DATA / "dlrm8"  # 8 ranks of DLRM; rank 7 straggles
CYCLES = DATA / "cycles_r50_nw0"  # two profiler cycles of one ResNet50 run
PAGE_MAX_BYTES = 300_000  # the V100 page: 122 kB here (1.2 MB as SVG boxes with their titles)
URL = re.compile(r"""\b(?:src|href)\s*=\s*["']?([^"' >]*)""")


def _page(tmp_path: Path, *argv: str) -> str:
    out = tmp_path / "page.html"
    assert cli.main(["diagnose", *argv, "--html", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _data(page: str) -> list[dict]:
    blocks = re.findall(r'<script type="application/json" class="gp-tl-data">(.*?)</script>', page)
    return [json.loads(b) for b in blocks]


def _self_contained(page: str) -> None:
    # one inline script, no stylesheet, script or image from elsewhere; the one link is
    # Perfetto's UI, for the whole trace
    assert set(URL.findall(page)) == {"https://ui.perfetto.dev"}
    assert page.count("<script>") == 1 and "<script src" not in page
    assert "Open trace file" in page


def test_single_trace_page_carries_its_step_as_data(tmp_path):
    page = _page(tmp_path, str(V100))
    _self_contained(page)
    assert str(V100.resolve()) in page  # the file to open in Perfetto
    assert len(page.encode()) < PAGE_MAX_BYTES
    (data,) = _data(page)
    labels = [r["label"] for r in data["rows"]]
    assert labels[0].startswith("CPU ops (thread ") and labels[-1] == "GPU 0 idle, by cause"
    assert "DataLoader" in labels and "CUDA runtime" in labels
    for row in data["rows"]:
        boxes = row["b"]
        assert len(boxes) % 4 == 0
        starts = boxes[0::4]
        assert starts == sorted(starts)  # drawn left to right
        assert all(0 <= n < len(data["names"]) for n in boxes[2::4])
        assert all(0 <= c < len(data["colors"]) for c in boxes[3::4])
        assert "note" not in row  # no row of this step is thinned
    # ProfilerStep#9 (176,468 µs) and the GPU work it launched, which ends 14.6 ms after it
    assert data["span"] == 191_049
    gpu = next(r for r in data["rows"] if r["label"] == "GPU 0 stream 7")["b"]
    ends = [s + d for s, d in zip(gpu[0::4], gpu[1::4], strict=True)]
    assert min(ends) >= 0 and max(gpu[0::4]) <= data["span"] and max(ends) == 191_049


def test_a_crowded_row_keeps_its_longest_boxes_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline, "MAX_BOXES_PER_ROW", 50)
    (data,) = _data(_page(tmp_path, str(V100)))
    thinned = [r for r in data["rows"] if "note" in r]
    assert thinned and all(len(r["b"]) == 4 * 50 for r in thinned)
    assert all(r["note"].startswith("the 50 longest of ") for r in thinned)


def test_a_name_cannot_end_the_script():
    rows = timeline._Rows(10.0)
    rows.add(
        "x</script>", np.array([11.0, 10.5]), np.array([2.0, 0.25]), ["</script>", "b"], "#000"
    )
    text = rows.json(5.0)
    assert "<" not in text
    data = json.loads(text)
    assert data["rows"] == [{"label": "x</script>", "b": [0.5, 0.25, 0, 0, 1, 2, 1, 0]}]
    assert data["names"] == ["b", "</script>"] and data["span"] == 5


def test_ranks_folder_page(tmp_path, capsys):
    page = _page(tmp_path, str(DLRM8))
    assert "page written to" in capsys.readouterr().out
    _self_contained(page)
    assert "gpuprobe diagnose: 8 ranks" in page and "straggler" in page
    # the per-rank table: every rank with its trace file; rank 7 marked
    for f in sorted(DLRM8.glob("*.json.gz")):
        assert f"<code>{f.name}</code>" in page
    assert "<td><b>7</b> ⚑ straggler</td>" in page
    assert "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t" in page  # the collectives waited on
    # the straggler's timeline beside the median rank's, of the same step
    heads = re.findall(r"<h3>(rank \d+, [^<]*)</h3>", page)
    assert heads == [
        "rank 7, the straggler: Timeline of ProfilerStep#10 (12,509 µs)",
        "rank 5, the median rank: Timeline of ProfilerStep#10 (17,797 µs)",
    ]
    assert len(_data(page)) == 2
    assert page.count("worker7_step_12") >= 2 and page.count("worker5_step_12") >= 2


def test_ranks_folder_page_of_a_chosen_step_and_json(tmp_path, capsys):
    out = tmp_path / "r.html"
    argv = ["diagnose", str(DLRM8), "--json", "--html", str(out), "--html-step", "10"]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "ranks"  # stdout stays JSON
    assert len(re.findall(r"<h3>[^<]*Timeline of ProfilerStep#10 ", out.read_text())) == 2


def test_cycles_folder_page(tmp_path):
    page = _page(tmp_path, str(CYCLES))
    _self_contained(page)
    assert "2 profiler cycles of one process" in page and "warm-up" in page
    assert "<h3>Findings of cycle 2</h3>" in page
    assert re.search(
        r"<h3>cycle 2 \(steady\), diagnosed in full: Timeline of ProfilerStep#\d+", page
    )
    (data,) = _data(page)
    assert any(r["label"].startswith("GPU 0 stream") for r in data["rows"])
    assert sorted(CYCLES.glob("*.json.gz"))[1].name in page


# ---------------------------------------------------------------------------------------------
# The script at work in a real browser
# ---------------------------------------------------------------------------------------------

# Zooms, pans and resets the first timeline the way a person would (wheel, drag, keys, buttons),
# measuring what is drawn; the results go on <body data-probe> for --dump-dom.
PROBE = """
(function () {
  var el = document.querySelector(".gp-tl"), host = el.querySelector(".gp-tl-svg"), out = {};
  function view() { return el.getAttribute("data-view").split(" ").map(Number); }
  var r = host.firstChild.getBoundingClientRect(), ux = r.width / 960;
  var cx = Math.round(r.left + (150 + 200) * ux), cy = Math.round(r.top + 30 * ux);
  out.at = ((cx - r.left) / ux - 150) / 800;  // where the pointer is, as a share of the axis
  function wheel(dy, x) {
    var e = new WheelEvent("wheel", {deltaY: dy, clientX: x, clientY: cy, bubbles: true,
      cancelable: true});
    host.dispatchEvent(e);
    return e.defaultPrevented;
  }
  function ptr(type, x) {
    host.dispatchEvent(new PointerEvent(type, {button: 0, clientX: x, clientY: cy, pointerId: 1,
      bubbles: true}));
  }
  out.start = view();
  out.prevented = wheel(-1000, cx);
  out.zoomed = view();
  out.over_labels = wheel(-1000, r.left + 20 * ux);
  out.after_labels = view();
  ptr("pointerdown", cx); ptr("pointermove", cx + 100 * ux); ptr("pointerup", cx + 100 * ux);
  out.dragged = view();
  host.dispatchEvent(new KeyboardEvent("keydown", {key: "+", bubbles: true}));
  out.key_plus = view();
  el.querySelector('[data-z="reset"]').click();
  out.button_reset = view();
  wheel(-1000, cx); wheel(-1000, cx);
  var bad = 0, n = 0, j, bl = host.querySelectorAll("text.b");
  for (j = 0; j < bl.length; j++) {
    var box = bl[j].previousSibling.getBBox(), t = bl[j].getBBox(); n++;
    if (t.x + t.width > Math.min(box.x + box.width, 800) + 0.5) bad++;
  }
  out.box_labels = [n, bad];
  var ticks = host.querySelectorAll("svg > text[text-anchor]"), meet = 0;
  for (j = 1; j < ticks.length; j++) {
    if (ticks[j - 1].getBBox().x + ticks[j - 1].getBBox().width > ticks[j].getBBox().x) meet++;
  }
  out.ticks = [ticks.length, meet];
  var rows = host.querySelectorAll("text.r"), wide = 0;
  for (j = 0; j < rows.length; j++) { var b = rows[j].getBBox(); if (b.x + b.width > 150) wide++; }
  out.row_labels = [rows.length, wide];
  host.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
  out.reset = view();
  document.body.setAttribute("data-probe", JSON.stringify(out));
})();
"""


def _probe(page: str, tmp_path: Path, chromium: str) -> dict:
    html = tmp_path / "probe.html"
    html.write_text(page.replace("</body>", f"<script>{PROBE}</script></body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                "--virtual-time-budget=5000",
                "--dump-dom",
                html.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert m is not None, "the timeline's script did not run: " + dom.stderr[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_the_timeline_zooms_pans_and_resets_in_a_browser(tmp_path, chromium):
    page = _page(tmp_path, str(DLRM8))
    span = _data(page)[0]["span"]
    out = _probe(page, tmp_path, chromium)
    assert out["start"] == [0, span]
    # the wheel zooms in by e^2 around the pointer, about a quarter into the axis: the time
    # under the pointer stays under it
    a, b = out["zoomed"]
    assert out["prevented"] and b - a == pytest.approx(span / 7.389, rel=1e-3)
    assert out["at"] == pytest.approx(0.25, abs=0.01)
    assert (out["at"] * span - a) / (b - a) == pytest.approx(out["at"], abs=1e-4)
    assert not out["over_labels"] and out["after_labels"] == out["zoomed"]  # the page scrolls
    # dragging 100 px to the right shows what was 100/800 of the view earlier
    assert out["dragged"][0] == pytest.approx(a - (b - a) / 8, abs=0.02)
    assert out["key_plus"][1] - out["key_plus"][0] == pytest.approx((b - a) / 1.5, rel=1e-3)
    assert out["button_reset"] == [0, span] and out["reset"] == [0, span]
    # zoomed in, names are written in the boxes wide enough, never past them
    n, bad = out["box_labels"]
    assert n > 0 and bad == 0
    assert out["ticks"][0] >= 4 and out["ticks"][1] == 0  # tick labels never meet
    assert out["row_labels"][0] == 8 and out["row_labels"][1] == 0  # fit their column


def test_the_script_parses_with_node():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the browser test runs the script instead")
    r = subprocess.run(
        [node, "--check"], input=timeline.TIMELINE_JS, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr


def test_a_page_that_cannot_be_written_whole_leaves_the_old_one(tmp_path, monkeypatch, capsys):
    """A full disk while the page is written (here: the sync before the rename fails with
    ENOSPC): the page already there is left as it was, no temporary file stays beside it, and the
    command says so in one line (exit 2). A device such as /dev/stdout is still written to."""
    import errno
    import os

    out = tmp_path / "page.html"
    out.write_text("the page of yesterday")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert cli.main(["diagnose", str(V100), "--html", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write" in err[0] and "No space left" in err[0], err
    assert out.read_text() == "the page of yesterday"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
    monkeypatch.undo()
    from gpuprobe.tools.diagnose.show.html import write_page

    assert write_page(os.devnull, "<p>to a device</p>") == os.devnull
