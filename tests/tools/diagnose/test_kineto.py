"""The streaming reader: formats, chunk boundaries, bad input, and a fuzz test over damage."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuprobe.tools.diagnose.jsonstream as jsonstream
from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder


def _small() -> dict:
    b = KinetoBuilder()
    for n in range(3):
        with b.step(n):
            b.dataloader(50.0)
            for _ in range(4):
                b.launch("k", kernel_us=5.0, op="aten::add")
            b.memcpy(nbytes=4096, gpu_us=3.0)
            b.memory(1e6, 2e6)
            b.item()
    return b.to_dict()


SMALL = json.dumps(_small(), indent=1)


def test_plain_gzip_and_array_forms_read_the_same(tmp_path):
    plain = tmp_path / "t.json"
    plain.write_text(SMALL)
    gz = tmp_path / "t.json.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(SMALL)
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(_small()["traceEvents"]))
    a, b, c = read_trace(plain), read_trace(gz), read_trace(arr)
    assert a.events == b.events == c.events == len(_small()["traceEvents"])
    assert len(a.gpu_ts) == len(b.gpu_ts) == len(c.gpu_ts) == 3 * (4 + 2)
    assert a.steps == b.steps == c.steps and len(a.steps) == 3
    assert a.header["deviceProperties"][0]["name"] == "NVIDIA H200"
    assert a.header["traceName"] == "synthetic"  # a key after traceEvents is kept too


def test_tiny_chunks_cross_every_boundary(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(SMALL)
    whole = read_trace(path)
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 7)
    chunked = read_trace(path)
    assert chunked.events == whole.events
    assert list(chunked.gpu_ts) == list(whole.gpu_ts)
    assert list(chunked.op_name) == list(whole.op_name)
    assert chunked.header == whole.header


def test_malformed_events_are_skipped_and_counted(tmp_path):
    d = _small()
    d["traceEvents"] += [
        {"ph": "X", "cat": "kernel", "name": "bad", "ts": "soon", "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "neg", "ts": 1.0, "dur": -5},
        {"ph": "X", "cat": "cpu_op", "name": ["not", "hashable"], "ts": 1.0, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 1, "args": {"device": 10**30}},
        [1, 2, 3],
        "event",
    ]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(d))
    t = read_trace(path)
    assert t.skipped == 6
    assert len(t.gpu_ts) == len(t.gpu_dev) == len(t.gpu_stream) == 3 * 6  # columns stay aligned


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("hello world", "not JSON"),
        ("<html></html>", "not JSON"),
        ('{"traceEvents": [', "truncated"),
        ('{"traceEvents": [{"ph": "X", "na', "truncated"),
        ('{"traceEvents": [], "x": 1}', "no events"),
        ('{"schemaVersion": 1}', "no 'traceEvents'"),
        ("42", "not a Kineto trace"),
        (
            '{"traceEvents": [{"ph": "X", "cat": "foo", "name": "a", "ts": 1, "dur": 1}]}',
            "not a PyTorch profiler",
        ),
        ('{"traceEvents": [{"ph": "X"},, ]}', "not valid JSON"),
        ('{"traceEvents": [' + "[" * 100_000, "nested too deeply|truncated"),
        ("{" * 10, "not valid JSON"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        diagnose(path)


def test_missing_and_directory_and_binary(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        diagnose(tmp_path / "nope.json")
    with pytest.raises(InputError, match="directory"):
        diagnose(tmp_path)
    binary = tmp_path / "b.json"
    binary.write_bytes(b'{"traceEvents": [\xff\xfe\x00]}')
    with pytest.raises(InputError, match="UTF-8"):
        diagnose(binary)


def test_damaged_gzip(tmp_path):
    data = gzip.compress(SMALL.encode())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"gzip|truncated"):
        diagnose(cut)
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(InputError):
        diagnose(bad)


_DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, len(SMALL))),
    st.tuples(st.just("delete"), st.integers(0, len(SMALL)), st.integers(1, 200)),
    st.tuples(st.just("insert"), st.integers(0, len(SMALL)), st.text(min_size=1, max_size=20)),
    st.tuples(
        st.just("replace"),
        st.integers(0, len(SMALL) - 1),
        st.sampled_from(list('{}[],:"0-.eE \nabc\\')),
    ),
)


def _damage(text: str, ops: list[tuple]) -> str:
    for op in ops:
        if op[0] == "truncate":
            text = text[: op[1]]
        elif op[0] == "delete":
            text = text[: op[1]] + text[op[1] + op[2] :]
        elif op[0] == "insert":
            text = text[: op[1]] + op[2] + text[op[1] :]
        elif op[1] < len(text):
            text = text[: op[1]] + op[2] + text[op[1] + 1 :]
    return text


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_DAMAGE, min_size=1, max_size=4), gz=st.booleans())
def test_fuzz_damaged_traces_never_traceback(tmp_path, ops, gz):
    text = _damage(SMALL, ops)
    path = tmp_path / ("f.json.gz" if gz else "f.json")
    data = text.encode("utf-8", "surrogatepass")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        d = diagnose(path)
    except InputError as exc:
        assert exc.message and "\n" not in exc.message
    else:
        assert d.findings and d.summary.events > 0
        json.dumps(d.to_dict())


def test_a_chunk_that_ends_inside_true_false_or_null_reads_on(tmp_path, monkeypatch):
    """A chunk cut inside a literal ("fa|lse") is read on, not refused: the C scanner rejects
    the literal's first character, which once made a valid 61 MB trace 'not valid JSON'."""
    ev = (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": %d, '
        '"dur": 1, "args": {"a": true, "b": false, "c": null, "d": [true, false, null]}}'
    )
    text = '{"traceEvents": [' + ", ".join(ev % i for i in range(5)) + '], "x": false}'
    path = tmp_path / "t.json"
    path.write_text(text)
    whole = read_trace(path)
    assert whole.events == 5 and whole.header["x"] is False
    for size in range(1, 40):  # every cut, inside each literal too
        monkeypatch.setattr(jsonstream, "CHUNK_BYTES", size)
        chunked = read_trace(path)
        assert chunked.events == 5 and list(chunked.op_ts) == list(whole.op_ts), size
        assert chunked.header == whole.header


def test_progress_reports_bytes_read(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(SMALL)
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 1000)
    seen: list[tuple[int, int]] = []
    read_trace(path, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 3
    assert all(total == path.stat().st_size for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1][0] == path.stat().st_size
