"""The reader against hostile files (issue 28): huge numbers and strings, absurd times, files
that are not files, and the two gears (msgspec batches, the exact scanner) reading the same."""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
from array import array
from pathlib import Path

import pytest

import gpuprobe.tools.diagnose.jsonstream as jsonstream
from gpuprobe.cli import main
from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.kineto import MAX_TIME_US, READER_MIB_PER_MILLION_EVENTS, read_trace
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

BIG = "7" * 5000  # more digits than Python converts to an int (4300)


def _trace(steps: int = 3) -> dict:
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            for _ in range(4):
                b.launch("k", kernel_us=5.0, op="aten::add")
    return b.to_dict()


def _kernel(ts: str, dur: str = "1", extra: str = "") -> str:
    return (
        f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts}, '
        f'"dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": 1{extra}}}}}'
    )


def test_thousands_of_digits_are_skipped_like_any_bad_value(tmp_path: Path) -> None:
    """In an event's time: skipped and counted; in an argument the reader ignores: kept; in the
    header: an infinite value, dropped where the header is read (deviceProperties)."""
    d = _trace()
    text = json.dumps(d)
    head = f'{{"bigHeader": {BIG}, "deviceProperties": [{{"id": 0, "smCount": -{BIG}}}], '
    events = ", ".join(
        [_kernel(BIG), _kernel("1", "-" + BIG), _kernel("5", extra=f', "registers": {BIG}')]
    )
    text = head + text[1:].replace('"traceEvents": [', f'"traceEvents": [{events}, ', 1)
    path = tmp_path / "big.json"
    path.write_text(text)
    whole = read_trace(path)
    assert whole.skipped == 2
    assert len(whole.gpu_ts) == 3 * 4 + 1  # the third kernel kept
    assert whole.header["bigHeader"] == float("inf")
    assert "smCount" not in whole.device_properties[0]


def test_a_huge_string_is_refused_after_reading_a_bounded_part(tmp_path, monkeypatch) -> None:
    """A 40 MiB event name (a 40 kB .gz): one line, after reading about MAX_VALUE_BYTES."""
    path = tmp_path / "huge.json.gz"
    name = b"a" * (40 << 20)
    path.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "' + name + b'"}]}', 1))
    held: list[int] = []
    real = jsonstream.Source.fill

    def counting(self: jsonstream.Source, want: int) -> bool:
        got = real(self, want)
        held.append(len(self.buf))
        return got

    monkeypatch.setattr(jsonstream.Source, "fill", counting)
    with pytest.raises(InputError, match=r"byte 17 is longer than 16 MiB") as err:
        read_trace(path)
    assert "\n" not in str(err.value)
    assert max(held) <= jsonstream.MAX_VALUE_BYTES + 2 * jsonstream.CHUNK_BYTES


def test_a_long_string_is_scanned_a_logarithmic_number_of_times(tmp_path, monkeypatch) -> None:
    """A value longer than many chunks: the window doubles, so the text decoded (and handed to
    the scanner) stays within a few times the value's length; re-scanning after each chunk
    decoded 1 + 2 + ... + 256 chunks (~33k of them) for this one."""
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 4096)
    decoded: list[int] = []
    real = jsonstream.Scanner._decode

    def counting(self: jsonstream.Scanner) -> None:
        real(self)
        decoded.append(len(self.buf))

    monkeypatch.setattr(jsonstream.Scanner, "_decode", counting)
    d = _trace()
    d["traceEvents"].insert(5, {"ph": "X", "cat": "cpu_op", "name": "x" * (1 << 20), "ts": 1})
    path = tmp_path / "long.json"
    path.write_text(json.dumps(d))
    t = read_trace(path)
    assert t.events == len(d["traceEvents"])
    assert len(decoded) <= 16
    assert sum(decoded) <= 4 * len(path.read_bytes())


@pytest.mark.parametrize("bad", ["1e308", "-1e308", "NaN", "Infinity", "-Infinity", "1e17"])
def test_absurd_times_are_skipped_and_json_stays_strict(tmp_path: Path, capsys, bad: str) -> None:
    d = _trace(2)
    text = json.dumps(d)
    evs = [
        _kernel(bad),
        _kernel("1", bad),
        f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#9", "ts": {bad}, "dur": 1}}',
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": {bad}, "dur": 1}}',
    ]
    text = text.replace('"traceEvents": [', '"traceEvents": [' + ", ".join(evs) + ", ", 1)
    path = tmp_path / "t.json"
    path.write_text(text)
    t = read_trace(path)
    assert t.skipped == 4
    assert [s[0] for s in t.steps] == [0, 1]
    assert max(abs(x) for x in [*t.gpu_ts, *t.gpu_dur, *t.op_ts]) < MAX_TIME_US
    assert main(["diagnose", "--json", str(path)]) == 0
    json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 steps (0..1)" in out and "inf" not in out and "e+" not in out


def test_kept_events_cost_the_stated_bytes_each(tmp_path: Path) -> None:
    """The 28 M-kernel expansion, scaled down: kernels are kept as columns within the stated
    ceiling per million events (streamed in, never held as text or dicts)."""
    path = tmp_path / "kernels.json.gz"
    n = 20_000
    with gzip.open(path, "wt") as fh:
        fh.write('{"traceEvents": [')
        fh.write(
            ",".join(
                _kernel(f"{1_700_000_000 + i}.5", extra=f', "grid": [{i}, 1, 1]') for i in range(n)
            )
        )
        fh.write("]}")
    t = read_trace(path)
    assert len(t.gpu_ts) == n and len(t.names) == 1
    kept = sum(sys.getsizeof(v) for v in vars(t).values() if isinstance(v, array))
    assert kept / n <= READER_MIB_PER_MILLION_EVENTS * (1 << 20) / 1e6


def test_a_fifo_socket_or_device_is_refused_at_once(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    sock_path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        for path, kind in ((fifo, "FIFO"), (sock_path, "socket"), ("/dev/zero", "character")):
            assert main(["diagnose", str(path)]) == 2
            err = capsys.readouterr().err.strip()
            assert kind in err and "not a trace file" in err and "\n" not in err


def test_a_folder_names_every_file_it_skips(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    b = KinetoBuilder()
    with b.step(0):
        b.launch("k", kernel_us=5.0, op="aten::add")
    b.write(str(folder / "good.json"))
    os.mkfifo(folder / "pipe.json")
    (folder / "gone.json.gz").symlink_to(tmp_path / "nowhere.json")
    code = main(["diagnose", str(folder)])
    err = capsys.readouterr().err
    assert code in (0, 1)
    line = [x for x in err.splitlines() if x.startswith("skipped")]
    assert line == [
        "skipped 2 of the folder's files: gone.json.gz (a dangling link); "
        "pipe.json (a FIFO (named pipe))"
    ]
    (folder / "good.json").unlink()
    assert main(["diagnose", str(folder)]) == 2
    assert "no readable trace files" in capsys.readouterr().err


def test_both_gears_read_the_same(tmp_path, monkeypatch) -> None:
    """The batches msgspec decodes and the exact scanner's events make the same columns: a
    trace read whole, with cuts that fall inside strings and args, and all through the exact
    gear (every batch refused)."""
    d = _trace(4)
    d["traceEvents"].insert(3, {"ph": "X", "cat": "cpu_op", "name": 'a}, {"b', "ts": 2, "dur": 1})
    d["traceEvents"].insert(4, {"ph": "i", "name": "[memory]", "args": {"x": [{"a": 1}, {"b": 2}]}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps(d, indent=1))
    fast = read_trace(path)
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 300)
    cut = read_trace(path)

    def refuse(data: object) -> None:
        raise jsonstream.msgspec.ValidationError("refused")

    refusing = type("D", (), {"decode": staticmethod(refuse)})
    monkeypatch.setattr(jsonstream, "_BATCH", refusing)
    monkeypatch.setattr(jsonstream, "_BATCH_LOOSE", refusing)  # the batch's second try
    exact = read_trace(path)
    for t in (cut, exact):
        assert t.events == fast.events and t.skipped == fast.skipped
        assert t.names == fast.names and t.header == fast.header
        for col in ("op_ts", "op_name", "rt_corr", "gpu_ts", "gpu_stream", "gpu_corr"):
            assert list(getattr(t, col)) == list(getattr(fast, col)), col
