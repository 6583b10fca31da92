"""The zoomable timeline of one step for the ``--html`` pages: the data as inline JSON and a small
inline script that draws it as SVG (nothing is fetched; the page works offline from ``file://``).

Rows: the step's top-level CPU ops and DataLoader spans, the CUDA runtime calls (syncs in red),
the GPU activities per device and stream (kernels, memcpy, memset) and the GPU's idle gaps by cause.
The mouse wheel zooms around the pointer, a drag pans, a double-click or "reset" shows the whole
step again (keys: + - 0 and the arrows). A box's name is written inside it once it is wide enough
for a few characters (else only in its tooltip); row labels longer than the label column are cut
with "…" and shown whole in their tooltip; the time ticks are spaced so their labels never meet.
Times in µs from the step's start.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY, GPU_KIND_MEMSET

__all__ = [
    "MAX_BOXES_PER_ROW",
    "TIMELINE_CSS",
    "TIMELINE_JS",
    "legend_html",
    "perfetto_note",
    "timeline_data",
    "timeline_html",
]

# longest boxes kept per timeline row: the page of the largest trace in /work/shared/traces
# (hta_df_index_resolver, 2.9 MB gzipped) stays under 1 MB with it
MAX_BOXES_PER_ROW = 10_000
COLORS = {
    "op": "#7f8c8d",
    "loader": "#e67e22",
    "launch": "#95a5a6",
    "sync": "#c0392b",
    "kernel": "#2e86c1",
    "memcpy": "#d68910",
    "pageable": "#a04000",
    "memset": "#8e44ad",
}
# the GPU's idle time, by cause (IDLE_CAUSES)
IDLE_COLORS = {
    "startup": "#5d6d7e",
    "input": "#e67e22",
    "sync": "#c0392b",
    "untraced": "#ec7063",
    "host": "#7d3c98",
    "launch": "#f1c40f",
    "short": "#48c9b0",
    "other": "#bdc3c7",
}


class _Rows:
    """The rows being built: a label and its boxes (start, duration, name, colour) each."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.rows: list[dict[str, object]] = []
        self.names: dict[str, int] = {}
        self.colors: dict[str, int] = {}
        self.used: set[str] = set()

    def _index(self, table: dict[str, int], key: str) -> int:
        return table.setdefault(key, len(table))

    def add(
        self,
        label: str,
        ts: np.ndarray,
        dur: np.ndarray,
        labels: Iterable[str],
        color: str | np.ndarray,
    ) -> None:
        names = list(labels)
        colors = np.full(ts.size, color, dtype=object) if isinstance(color, str) else color
        row: dict[str, object] = {"label": label}
        if ts.size > MAX_BOXES_PER_ROW:
            row["note"] = f"the {MAX_BOXES_PER_ROW:,} longest of {ts.size:,} boxes"
            keep = np.sort(np.argsort(-dur, kind="stable")[:MAX_BOXES_PER_ROW])
            ts, dur, colors = ts[keep], dur[keep], colors[keep]
            names = [names[i] for i in keep]
        order = np.argsort(ts, kind="stable")
        flat: list[str] = []
        for i in order:
            flat += [
                _num(float(ts[i]) - self.t0),
                _num(float(dur[i])),
                str(self._index(self.names, names[i])),
                str(self._index(self.colors, str(colors[i]))),
            ]
        row["b"] = "[" + ",".join(flat) + "]"
        self.rows.append(row)

    def json(self, span: float) -> str:
        """The JSON the script draws, safe inside ``<script>`` (no ``</script>`` or ``<!--``)."""
        body = ",".join(
            "{"
            + "".join(f"{json.dumps(k)}:{json.dumps(v)}," for k, v in r.items() if k != "b")
            + f'"b":{r["b"]}}}'
            for r in self.rows
        )
        data = (
            f'{{"span":{_num(span)},"names":{json.dumps(list(self.names))},'
            f'"colors":{json.dumps(list(self.colors))},"rows":[{body}]}}'
        )
        return data.replace("<", "\\u003c")


def _num(x: float) -> str:
    """µs with two decimals, without trailing zeros (``12.5``, ``3``)."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("", "-0") else s


def timeline_data(ctx: TraceContext, i: int) -> tuple[str, set[str]]:
    """Step ``i`` of ``ctx`` as the JSON the script draws, and the legend keys it uses."""
    st = ctx.steps[i]
    gsel = ctx.gpu_step == i
    t0 = st.start
    t1 = max(st.end, float(ctx.gpu_end[gsel].max()) if gsel.any() else st.end)
    rows = _Rows(t0)
    names = ctx.names

    # Host: top-level ops of the busiest thread, and DataLoader spans.
    top = ctx.op_top & (ctx.op_ts >= t0) & (ctx.op_ts <= t1)
    if top.any():
        tids, counts = np.unique(ctx.op_tid[top], return_counts=True)
        tid = tids[np.argmax(counts)]
        m = top & (ctx.op_tid == tid)
        rows.used.add("op")
        rows.add(
            f"CPU ops (thread {ctx.raw.threads[tid]})",
            ctx.op_ts[m],
            ctx.op_dur[m],
            (names[n] for n in ctx.op_name[m]),
            COLORS["op"],
        )
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, names) & (ctx.ann_ts >= t0) & (ctx.ann_ts <= t1)
    if dl.any():
        rows.used.add("loader")
        rows.add(
            "DataLoader",
            ctx.ann_ts[dl],
            ctx.ann_dur[dl],
            (names[n] for n in ctx.ann_name[dl]),
            COLORS["loader"],
        )
    rt = (ctx.rt_ts >= t0) & (ctx.rt_ts <= t1)
    if rt.any():
        rows.used.add("launch")
        if ctx.sync_mask[rt].any():
            rows.used.add("sync")
        rows.add(
            "CUDA runtime",
            ctx.rt_ts[rt],
            ctx.rt_dur[rt],
            (names[n] for n in ctx.rt_name[rt]),
            np.where(ctx.sync_mask[rt], COLORS["sync"], COLORS["launch"]),
        )
    # GPU: one row per (device, stream), then the idle gaps of each device.
    win = (ctx.gpu_end >= t0) & (ctx.gpu_ts <= t1)
    pageable = P.PAGEABLE_COPY.mask(ctx.gpu_name, names)
    for d in ctx.devices:
        dm = win & (ctx.gpu_dev == d)
        for s in sorted(int(x) for x in np.unique(ctx.gpu_stream[dm])):
            m = dm & (ctx.gpu_stream == s)
            kind = ctx.gpu_kind[m]
            copy = kind == GPU_KIND_MEMCPY
            colors = np.where(
                kind == GPU_KIND_KERNEL,
                COLORS["kernel"],
                np.where(copy, np.where(pageable[m], COLORS["pageable"], COLORS["memcpy"]), "x"),
            )
            colors = np.where(colors == "x", COLORS["memset"], colors)
            rows.used.update(
                k
                for k, present in (
                    ("kernel", (kind == GPU_KIND_KERNEL).any()),
                    ("memcpy", (copy & ~pageable[m]).any()),
                    ("pageable", (copy & pageable[m]).any()),
                    ("memset", (kind == GPU_KIND_MEMSET).any()),
                )
                if present
            )
            rows.add(
                f"GPU {d} stream {s}",
                ctx.gpu_ts[m],
                ctx.gpu_dur[m],
                (names[n] for n in ctx.gpu_name[m]),
                colors,
            )
        starts, durs, causes = [], [], []
        for cause, (cs, ce) in ctx.idle_by_cause.get(d, {}).items():
            lo, hi = np.clip(cs, t0, t1), np.clip(ce, t0, t1)
            keep = hi > lo
            if keep.any():
                rows.used.add("idle: " + cause)
                starts.append(lo[keep])
                durs.append((hi - lo)[keep])
                causes += [cause] * int(keep.sum())
        ts = np.concatenate(starts) if starts else np.zeros(0)
        rows.add(
            f"GPU {d} idle, by cause",
            ts,
            np.concatenate(durs) if durs else np.zeros(0),
            (f"idle ({c})" for c in causes),
            np.array([IDLE_COLORS[c] for c in causes], dtype=object),
        )
    return rows.json(max(t1 - t0, 1e-3)), rows.used


def legend_html(used: set[str]) -> str:
    """The colour keys the timeline uses, as spans."""
    colors = {**COLORS, **{"idle: " + k: c for k, c in IDLE_COLORS.items()}}
    return " ".join(
        f'<span style="background:{c};color:#fff;padding:1px 5px;white-space:nowrap">{k}</span>'
        for k, c in colors.items()
        if k in used
    )


def timeline_html(data: str, title: str) -> str:
    """One timeline's block: its controls, the SVG the script draws, and its data."""
    return (
        f'<div class="gp-tl" role="figure" aria-label="{html.escape(title)}">'
        '<div class="gp-tl-bar"><button type="button" data-z="in" title="zoom in (+)">+</button>'
        '<button type="button" data-z="out" title="zoom out (-)">−</button>'
        '<button type="button" data-z="reset" title="the whole step (0, double-click)">reset'
        '</button> <span class="gp-tl-view"></span> <span class="note">wheel: zoom at the '
        "pointer · drag: pan · double-click: reset · hover a box for its name</span></div>"
        '<div class="gp-tl-svg" tabindex="0"></div>'
        "<noscript><p class=note>The timeline is drawn by the page's inline script: allow "
        "JavaScript for this file, or open the trace in Perfetto (below).</p></noscript>"
        f'<script type="application/json" class="gp-tl-data">{data}</script></div>'
    )


def perfetto_note(paths: Iterable[str]) -> str:
    """How to open the traces in Perfetto's UI for the full view (every event, every step)."""
    files = "".join(f"<li><code>{html.escape(os.path.abspath(p))}</code></li>" for p in paths)
    return (
        "<p class=note><b>The full trace:</b> the timeline above draws one step (the whole "
        f"trace when it has no steps), at most {MAX_BOXES_PER_ROW:,} boxes a row. For every "
        'event of the whole trace, open <a href="https://ui.perfetto.dev">ui.perfetto.dev</a>, choose '
        "<i>Open trace file</i> and pick the file (.json or .json.gz; Perfetto reads it in the "
        f"browser, nothing is uploaded):</p><ul class=note>{files}</ul>"
    )


TIMELINE_CSS = """
.gp-tl { margin: 0.5em 0 1em; }
.gp-tl-svg { cursor: grab; touch-action: none; }
.gp-tl-svg:focus { outline: 1px dotted #888; }
.gp-tl-bar button { min-width: 2em; }
.gp-tl-svg text.b { font-family: monospace; font-size: 10px; pointer-events: none; }
"""

# Drawn again on every change of view: only the boxes in view, at least MINPX wide; a box that
# falls in pixels its row already painted in its colour is skipped (zoom in to see it).
TIMELINE_JS = r"""
(function () {
  "use strict";
  var L = 150, W = 800, R = 22, FULL = L + W + 10, MINPX = 0.6, CHAR = 6;
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }
  function cut(s, n) { return s.length <= n ? s : s.slice(0, Math.max(n - 1, 0)) + "\u2026"; }
  function ink(c) {
    var n = parseInt(c.slice(1), 16);
    return 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255) > 150 ? "#000" : "#fff";
  }
  function nice(x) {
    var p = Math.pow(10, Math.floor(Math.log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function unitOf(step) { return step >= 1e6 ? [1e6, " s"] : step >= 1e3 ? [1e3, " ms"] : [1, " \u00b5s"]; }
  function tick(t, step) {
    var u = unitOf(step), s = step / u[0];
    var digits = s >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(s) - 1e-9));
    return (t / u[0]).toFixed(digits) + u[1];
  }
  function Timeline(el) {
    var data = JSON.parse(el.querySelector(".gp-tl-data").textContent);
    var host = el.querySelector(".gp-tl-svg"), info = el.querySelector(".gp-tl-view");
    var span = data.span, rows = data.rows, v0 = 0, v1 = span, drag = null, fitted = [];
    var minSpan = Math.min(span, Math.max(span * 1e-6, 0.05));
    var H = R * rows.length, AXIS = H + 16;
    function setView(a, b) {
      var w = Math.max(b - a, minSpan);
      if (w >= span) { a = 0; w = span; }
      a = Math.min(Math.max(a, 0), span - w);
      v0 = a; v1 = a + w;
      draw();
    }
    function draw() {
      var k = W / (v1 - v0), out = [], r, i;
      out.push('<svg viewBox="0 0 ' + FULL + " " + (AXIS + 8) + '" width="100%" style="max-width:' +
        (FULL * 1.6) + 'px" font-family="sans-serif" font-size="12">');
      for (r = 0; r < rows.length; r++) {
        var label = rows[r].label, note = rows[r].note;
        var shown = fitted[r] !== undefined ? fitted[r] : note ? cut(label, 60) + " *" : label;
        var full = note ? label + ": " + note + " (every box in Perfetto)" : label;
        out.push('<rect x="0" y="' + r * R + '" width="' + (L + W) + '" height="' + R +
          '" fill="' + (r % 2 ? "#f4f6f7" : "#ffffff") + '"/><text class="r" x="4" y="' +
          (r * R + 15) + '">' + esc(shown) + "<title>" + esc(full) + "</title></text>");
      }
      var step = nice((v1 - v0) * 100 / W), first = Math.ceil(v0 / step);
      for (i = first; i * step <= v1 + step * 1e-9; i++) {
        var x = L + (i * step - v0) * k;
        var anchor = x < L + 40 ? "start" : x > L + W - 40 ? "end" : "middle";
        out.push('<line x1="' + x.toFixed(1) + '" y1="0" x2="' + x.toFixed(1) + '" y2="' + H +
          '" stroke="#ccc" stroke-width="0.5"/><text x="' + x.toFixed(1) + '" y="' + AXIS +
          '" text-anchor="' + anchor + '">' + tick(i * step, step) + "</text>");
      }
      out.push('<svg x="' + L + '" y="0" width="' + W + '" height="' + H + '">');
      var drawn = 0;
      for (r = 0; r < rows.length; r++) {
        var b = rows[r].b, y = r * R, end = -1, lastColor = -1;
        for (i = 0; i < b.length; i += 4) {
          var t = b[i], d = b[i + 1];
          if (t + d < v0 || t > v1) continue;
          var bx = (t - v0) * k, bw = Math.max(d * k, MINPX), c = b[i + 3];
          if (bx + bw <= end + 0.25 && c === lastColor && bw < 2) continue;
          end = Math.max(end, bx + bw); lastColor = c; drawn++;
          var name = data.names[b[i + 2]], color = data.colors[c];
          out.push('<rect x="' + bx.toFixed(2) + '" y="' + (y + 3) + '" width="' + bw.toFixed(2) +
            '" height="' + (R - 6) + '" fill="' + color + '"><title>' + esc(name) + ": " +
            d.toFixed(1) + " \u00b5s at +" + t.toFixed(1) + " \u00b5s</title></rect>");
          var left = Math.max(bx, 0), room = Math.min(bx + bw, W) - left;
          var chars = Math.floor((room - 6) / CHAR);
          if (chars >= 3) {
            out.push('<text class="b" x="' + (left + 3).toFixed(1) + '" y="' + (y + 15) +
              '" fill="' + ink(color) + '">' + esc(cut(name.replace(/^void /, ""), chars)) +
              "</text>");
          }
        }
      }
      out.push("</svg></svg>");
      host.innerHTML = out.join("");
      if (fitted.length === 0) fit();
      el.setAttribute("data-view", v0.toFixed(2) + " " + v1.toFixed(2));
      el.setAttribute("data-boxes", String(drawn));
      info.textContent = v0 === 0 && v1 === span ? "all of it" :
        tick(v0, nice((v1 - v0) / 10)) + " \u2013 " + tick(v1, nice((v1 - v0) / 10)) +
        " of " + tick(span, nice(span / 10));
    }
    // each row label cut with "…" until it fits the label column (measured once, on first draw)
    function fit() {
      var texts = host.querySelectorAll("text.r");
      for (var j = 0; j < texts.length; j++) {
        var node = texts[j].firstChild, s = node.nodeValue, star = rows[j].note ? " *" : "";
        var base = star ? s.slice(0, -2) : s, n = base.length;
        while (n > 1 && texts[j].getComputedTextLength() > L - 8) {
          n--;
          node.nodeValue = cut(base, n) + star;
        }
        fitted[j] = node.nodeValue;
      }
    }
    function unitsPerPx() { var r = host.firstChild.getBoundingClientRect(); return FULL / r.width; }
    function timeAt(clientX) {
      var r = host.firstChild.getBoundingClientRect();
      return v0 + ((clientX - r.left) * FULL / r.width - L) * (v1 - v0) / W;
    }
    function zoom(f, t) {
      if (t === undefined) t = (v0 + v1) / 2;
      setView(t - (t - v0) / f, t + (v1 - t) / f);
    }
    host.addEventListener("wheel", function (e) {
      var t = timeAt(e.clientX);
      if (t < v0 || t > v1) return;  // over the labels: the page scrolls
      e.preventDefault();
      var px = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
      zoom(Math.exp(-px * 0.002), t);
    }, {passive: false});
    host.addEventListener("pointerdown", function (e) {
      if (e.button !== 0) return;
      drag = {x: e.clientX, a: v0, b: v1, upp: unitsPerPx()};
      if (host.setPointerCapture) host.setPointerCapture(e.pointerId);
      host.style.cursor = "grabbing";
    });
    host.addEventListener("pointermove", function (e) {
      if (!drag || e.clientX === drag.x) return;
      var dt = (e.clientX - drag.x) * drag.upp * (drag.b - drag.a) / W;
      setView(drag.a - dt, drag.b - dt);
    });
    function stop() { drag = null; host.style.cursor = ""; }
    host.addEventListener("pointerup", stop);
    host.addEventListener("pointercancel", stop);
    host.addEventListener("dblclick", function () { setView(0, span); });
    host.addEventListener("keydown", function (e) {
      var w = v1 - v0;
      if (e.key === "+" || e.key === "=") zoom(1.5);
      else if (e.key === "-" || e.key === "_") zoom(1 / 1.5);
      else if (e.key === "0") setView(0, span);
      else if (e.key === "ArrowLeft") setView(v0 - w / 10, v1 - w / 10);
      else if (e.key === "ArrowRight") setView(v0 + w / 10, v1 + w / 10);
      else return;
      e.preventDefault();
    });
    el.querySelector(".gp-tl-bar").addEventListener("click", function (e) {
      var z = e.target.getAttribute && e.target.getAttribute("data-z");
      if (z === "in") zoom(1.5);
      else if (z === "out") zoom(1 / 1.5);
      else if (z === "reset") setView(0, span);
    });
    el.gpTimeline = {zoom: zoom, setView: setView, view: function () { return [v0, v1]; }};
    draw();
  }
  var all = document.querySelectorAll(".gp-tl");
  for (var i = 0; i < all.length; i++) Timeline(all[i]);
})();
"""
