"""The reader's fast paths (issue 42) read what the event-by-event reading read: times decoded
as floats by msgspec (an integer past a float's range decoded as written), categories counted a
batch at a time (one event that is not an object, or whose category is a list, counted and
skipped as before), in the fast gear, in batches cut small, and all through the exact gear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuprobe.tools.diagnose.jsonstream as jsonstream
from gpuprobe.tools.diagnose.kineto import RawTrace, read_trace
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

HUGE = "1" + "0" * 400  # an integer past a float's range (1e308), under Python's 4300 digits
_COLUMNS = ("op_ts", "op_dur", "op_name", "rt_ts", "rt_corr", "gpu_ts", "gpu_dur", "gpu_bytes")


def _base() -> dict[str, Any]:
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            for _ in range(3):
                b.launch("k", kernel_us=5.0, op="aten::add")
    return b.to_dict()


def _odd_events() -> list[str]:
    """Events in the JSON text as written (times as integers, strings, booleans, huge)."""
    k = '"pid": 0, "tid": 7, "args": {"device": 0, "stream": 7, "correlation": 3'
    return [
        '{"ph": "X", "cat": "kernel", "name": "int", "ts": 1700000000000001, "dur": 3, ' + k + "}}",
        '{"ph": "X", "cat": "kernel", "name": "2^53+1", "ts": 9007199254740993, "dur": 1, '
        + k
        + ', "bytes": 4096}}',
        '{"ph": "X", "cat": "cpu_op", "name": "str", "ts": "12.5", "dur": true, "tid": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "huge", "ts": ' + HUGE + ', "dur": 1, "tid": 1}',
        '{"ph": "i", "name": "[memory]", "ts": ' + HUGE + ', "args": {"Device Type": 1, '
        '"Device Id": 0, "Total Allocated": 1000, "Total Reserved": 2048}}',
        "5",
        '"text"',
        '{"ph": "X", "cat": ["a", "list"], "name": "listcat", "ts": 1, "dur": 1}',
        '{"ph": "X", "cat": {"an": "object"}, "name": "objcat", "ts": 1, "dur": 1}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1, '
        '"tid": 1, "args": {"correlation": "17"}}',
        '{"ph": "s", "cat": "cpu_to_cuda", "id": 1, "ts": 3}',
        # a name that looks like an event boundary, escaped and not, and one past ASCII
        '{"ph": "X", "cat": "cpu_op", "name": "q\\"}, {[\\u00e9 }, {", "ts": 5, "dur": 1, '
        '"tid": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "é中🙂", "ts": 6, "dur": 1, "tid": 1}',
    ]


def _write(tmp_path: Path) -> Path:
    d = _base()
    text = json.dumps(d, indent=1)
    at = text.index('"traceEvents": [') + len('"traceEvents": [')
    odd = ",\n".join(_odd_events())
    path = tmp_path / "odd.json"
    path.write_text(text[:at] + "\n" + odd + ",\n" + text[at:])
    return path


def _same(a: RawTrace, b: RawTrace) -> None:
    assert (a.events, a.skipped, a.names, a.threads) == (b.events, b.skipped, b.names, b.threads)
    assert list(a.categories.items()) == list(b.categories.items())  # first-seen order too
    assert a.memory_peak == b.memory_peak and a.legacy_launches == b.legacy_launches
    assert a.time_base == b.time_base
    for col in _COLUMNS:
        assert list(getattr(a, col)) == list(getattr(b, col)), col


def test_odd_values_read_as_before(tmp_path: Path) -> None:
    """Integers are their nearest float; a numeric string and a boolean are times as before; a
    time past a float's range skips its complete event, yet a [memory] instant carrying one is
    still read; a non-object event and one with a list or object category are skipped."""
    tr = read_trace(_write(tmp_path))
    assert tr.time_base == 1700000000000001.0  # the first kept time, an integer, exact
    gpu = dict(zip((tr.names[i] for i in tr.gpu_name), tr.gpu_ts, strict=True))
    assert gpu["2^53+1"] + tr.time_base == float(9007199254740993)  # rounded as float() does
    assert tr.gpu_bytes[1] == 4096.0
    ops = [tr.names[i] for i in tr.op_name]
    assert "str" in ops and "huge" not in ops
    assert tr.op_dur[ops.index("str")] == 1.0  # "dur": true, as float(True)
    assert tr.memory_peak == {(1, 0): (1000.0, 2048.0)}
    assert tr.legacy_launches == 1
    assert tr.rt_corr[0] == 17  # a correlation written as a string
    assert "objcat" not in tr.names and "listcat" not in tr.names
    assert 'q"}, {[é }, {' in ops and "é中🙂" in ops
    assert tr.categories["kernel"] == 2 + 9 and None in tr.categories
    # the huge time, the two non-objects, the list and object categories: skipped and counted
    assert tr.skipped == 5


@pytest.mark.parametrize("chunk", [200, 1000, 1 << 20])
def test_every_gear_and_cut_reads_the_same(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """The same columns from batches cut every few events (an event split across chunks), and
    from the exact gear alone (every batch refused by both decoders)."""
    path = _write(tmp_path)
    whole = read_trace(path)
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    _same(read_trace(path), whole)

    def refuse(data: object) -> None:
        raise jsonstream.msgspec.ValidationError("refused")

    refusing = type("D", (), {"decode": staticmethod(refuse)})
    monkeypatch.setattr(jsonstream, "_BATCH", refusing)
    monkeypatch.setattr(jsonstream, "_BATCH_LOOSE", refusing)
    _same(read_trace(path), whole)


def test_a_huge_time_keeps_its_batch_in_the_fast_gear(tmp_path: Path, monkeypatch) -> None:
    """A batch the float decoder refuses for a huge time is decoded as written (LooseEvent),
    not handed event by event to the exact gear."""
    path = _write(tmp_path)
    scanned: list[int] = []
    value = jsonstream.Scanner.value

    def counting(self: jsonstream.Scanner, what: str) -> Any:
        scanned.append(1)
        return value(self, what)

    monkeypatch.setattr(jsonstream.Scanner, "value", counting)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(_base(), indent=1))
    read_trace(plain)
    usual = len(scanned)  # the header's keys and values, the array's last event
    scanned.clear()
    assert read_trace(path).memory_events == 1
    assert len(scanned) == usual
