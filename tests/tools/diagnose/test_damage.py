"""A valid file that carries damage the verdicts depend on: data after the trace's end, events
without "ph", every event written twice, a step around the others. Each is repaired where the
repair is certain and said (summary.damage, a line under the header), never silent: the real
H200 trace of examples/item_fixed.py read whole gives the reference verdict."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuprobe.cli as cli
from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.engine import diagnose

TRACE = Path(__file__).parents[2] / "data" / "diagnose" / "gpu_h200" / "item_fixed.json.gz"
with gzip.open(TRACE, "rt", encoding="utf-8") as _f:
    BASE: dict[str, Any] = json.load(_f)
REFERENCE = diagnose(TRACE)


def _verdict(d: Any) -> tuple[Any, ...]:
    return (
        d.headline.id if d.headline else None,
        d.summary.steps,
        d.summary.gpu_busy_fraction,
        tuple((f.id, f.status) for f in d.findings),
    )


def _duplicated(data: dict[str, Any]) -> str:
    out = copy.deepcopy(data)
    out["traceEvents"] = data["traceEvents"] + copy.deepcopy(data["traceEvents"])
    return json.dumps(out)


def _no_ph(data: dict[str, Any]) -> str:
    out = copy.deepcopy(data)
    for e in out["traceEvents"]:
        if e.get("ph") == "X":
            del e["ph"]
    return json.dumps(out)


def _around(data: dict[str, Any]) -> str:
    out = copy.deepcopy(data)
    steps = [
        e
        for e in data["traceEvents"]
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    ]
    t0 = min(e["ts"] for e in steps)
    t1 = max(e["ts"] + e["dur"] for e in steps)
    big = dict(steps[0], name="ProfilerStep#99", ts=t0 - 1, dur=t1 - t0 + 2)
    out["traceEvents"].append(big)
    return json.dumps(out)


def _two_documents(data: dict[str, Any]) -> str:
    return json.dumps(data) + "\n" + json.dumps(data)


def _trailing_text(data: dict[str, Any]) -> str:
    return json.dumps(data) + "\nprofiler done\n"


DAMAGE = {
    "duplicated": (_duplicated, "events appear twice"),
    "no_ph": (_no_ph, 'have no "ph"'),
    "around": (_around, "step #99 spans other steps whole"),
    "two_documents": (_two_documents, "a second JSON document"),
    "trailing_text": (_trailing_text, "text that is not part of the trace"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_each_damage_is_repaired_and_said(tmp_path: Path, kind: str, capsys) -> None:
    make, words = DAMAGE[kind]
    path = tmp_path / f"{kind}.json"
    path.write_text(make(BASE))
    d = diagnose(path)
    assert len(d.summary.damage) == 1 and words in d.summary.damage[0]
    # repaired: the verdict of the trace read whole (a second document is not read)
    assert _verdict(d) == _verdict(REFERENCE)
    # said under the header, and in --json
    assert cli.main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert words in " ".join(out.split())
    assert cli.main(["diagnose", str(path), "--json"]) == 0
    assert words in json.loads(capsys.readouterr().out)["summary"]["damage"][0]
    page = tmp_path / "p.html"
    assert cli.main(["diagnose", str(path), "--html", str(page)]) == 0
    assert '<p class="warn">the file: ' in page.read_text() and words.split('"')[0] in (
        page.read_text()
    )


def test_a_whole_trace_says_nothing_of_damage() -> None:
    assert REFERENCE.summary.damage == ()


def test_repeats_counted_once_keep_the_shapes_on_their_ops(tmp_path: Path) -> None:
    """The ops' recorded shapes name ops by index: after the repeats go they still name the
    same ops (the layout-copy rule reads them)."""
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.kineto import read_trace

    path = tmp_path / "dup.json"
    path.write_text(_duplicated(BASE))
    whole, twice = TraceContext(read_trace(TRACE)), TraceContext(read_trace(path))
    assert twice.op_ts.size == whole.op_ts.size and twice.gpu_ts.size == whole.gpu_ts.size

    def named(ctx: TraceContext) -> list[tuple[str, tuple[int, ...]]]:
        return [(ctx.names[int(ctx.op_name[i])], dims) for i, dims, _, _ in ctx.raw.shaped]

    assert named(twice) == named(whole)


_SHAPES = st.lists(st.sampled_from(sorted(DAMAGE)), min_size=1, max_size=3, unique=True)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kinds=_SHAPES)
def test_damage_in_any_mix_is_never_silent(tmp_path: Path, kinds: list[str]) -> None:
    """Any mix of the damages: a one-line error, or a verdict that says every damage it read;
    never a changed verdict without a word."""
    text = json.dumps(BASE)
    for k in kinds:
        make = DAMAGE[k][0]
        if k in ("two_documents", "trailing_text"):
            continue  # appended last: the rest transform the document itself
        text = make(json.loads(text))
    data = json.loads(text)
    if "two_documents" in kinds:
        text = _two_documents(data)
    elif "trailing_text" in kinds:
        text = _trailing_text(data)
    path = tmp_path / "mixed.json"
    path.write_text(text)
    try:
        d = diagnose(path)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    said = " ".join(d.summary.damage)
    for k in kinds:
        if k == "trailing_text" and "two_documents" in kinds:
            continue
        assert DAMAGE[k][1] in said, (k, said)
    assert _verdict(d) == _verdict(REFERENCE)


@pytest.mark.parametrize("where", ["reader", "analysis", "rank"])
def test_running_out_of_memory_is_one_line_naming_the_memory(
    tmp_path: Path, monkeypatch, capsys, where: str
) -> None:
    """Under a memory cap the free-memory check cannot see (ulimit -v), NumPy's or the
    reader's MemoryError is a one-line error that says memory ran out (it once said "an event
    is too large", or printed NumPy's traceback with exit 1)."""
    import gpuprobe.tools.diagnose.analysis as analysis
    import gpuprobe.tools.diagnose.kineto as kineto

    def short(*args: object, **kwargs: object) -> None:
        raise MemoryError("Unable to allocate 763 MiB")

    if where == "reader":
        monkeypatch.setattr(kineto, "_consume", short)
    else:
        monkeypatch.setattr(analysis.TraceContext, "__init__", short)
    argv = ["diagnose", str(TRACE)]
    if where == "rank":
        other = tmp_path / "other.json"
        other.write_text(_around(BASE))
        argv.append(str(other))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ran out of memory" in err and "ulimit -v" in err
    assert "too large" not in err and "Traceback" not in err
