"""``gpuprobe scale lstsq`` end to end: text, --json, --plot, bad usage."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import gpuprobe.cli as cli

pytest.importorskip("distributed")

SMALL = ["--rows", "2000", "--cols", "10", "--workers", "1,2", "--chunk-rows", "250", "--threads"]


@pytest.fixture(autouse=True)
def only_scale(monkeypatch):
    """Register only this command (others are built on other branches)."""
    monkeypatch.setattr(cli, "COMMANDS", ("scale",))


def test_text_and_plot(capsys, tmp_path):
    out = tmp_path / "s.png"
    rc = cli.main(["scale", "lstsq", *SMALL, "--plot", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "numpy.linalg.lstsq" in text and "efficiency" in text
    assert text.count("normal ") >= 2 and "tsqr" in text
    assert out.read_bytes().startswith(b"\x89PNG")


def test_json(capsys):
    rc = cli.main(["scale", "lstsq", *SMALL, "--method", "normal", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [r["workers"] for r in data["results"]] == [1, 2]
    assert all(r["error_vs_numpy"] <= 1e-12 for r in data["results"])
    assert data["baselines"][0]["name"] == "numpy.linalg.lstsq"
    assert data["exit_code"] == rc == 0 and data["verdict"] in ("ok", "info", "warn")


def test_input_file(capsys, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 5))
    np.save(tmp_path / "p.npy", np.column_stack([a, a @ np.ones(5)]))
    rc = cli.main(
        [
            "scale",
            "lstsq",
            "--input",
            str(tmp_path / "p.npy"),
            "--workers",
            "1,2",
            "--threads",
            "--method",
            "tsqr",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["rows"] == 1000 and data["cols"] == 5
    assert data["results"][0]["residual_norm"] < 1e-10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "x.npy", "--rows", "5"], "leave out --rows"),
        (["--target", "y"], "give --input too"),
        (["--plot", "out.gif"], "give a file ending in .png, .svg, .pdf"),
        (["--input", "missing.npy", "--threads"], "no such file"),
        (["--workers", "1,x"], "comma-separated"),
        (["--method", "qr"], "methods are"),
    ],
)
def test_bad_usage_is_one_line(capsys, argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a refusal that wrote its file after all writes it here
    with pytest.raises(SystemExit) if argv[0] in ("--workers", "--method") else _nothing():
        rc = cli.main(["scale", "lstsq", *argv])
        assert rc == 2
    assert list(tmp_path.iterdir()) == []  # refused: nothing written
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_scale_alone_says_what_is_missing_in_one_line(capsys):
    assert cli.main(["scale"]) == 2
    err = capsys.readouterr().err
    assert "scale needs a target: gpuprobe scale lstsq" in err
    assert len(err.strip().splitlines()) == 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _bad_files(tmp_path):
    rng = np.random.default_rng(1)
    good = rng.standard_normal((400, 4))
    nan = good.copy()
    nan[123, 2] = np.nan
    inf = good.copy()
    inf[7, 4 - 1] = np.inf
    np.save(tmp_path / "nan.npy", nan)
    np.save(tmp_path / "inf.npy", inf)
    np.save(tmp_path / "empty.npy", np.empty((0, 4)))
    np.save(tmp_path / "vector.npy", np.ones(10))
    (tmp_path / "text.npy").write_text("not an array\n")
    np.save(tmp_path / "A.npy", good[:, :3])
    np.save(tmp_path / "b.npy", np.ones(399))
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "nan.npy"], "NaN"),
        (["--input", "inf.npy"], "Inf"),
        (["--input", "empty.npy"], "empty"),
        (["--input", "vector.npy"], "last column is b"),
        (["--input", "text.npy"], "not a readable .npy"),
        (["--input", "A.npy", "--target", "b.npy"], "400 rows but b has 399"),
    ],
)
def test_bad_input_files_are_one_line_and_exit_2(capsys, tmp_path, argv, message):
    d = _bad_files(tmp_path)
    argv = [str(d / v) if v.endswith(".npy") else v for v in argv]
    rc = cli.main(["scale", "lstsq", *argv, "--workers", "1", "--threads"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err and "DLASCL" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_input_files_raise_input_error_from_the_api(tmp_path):
    from gpuprobe.core.errors import InputError
    from gpuprobe.tools.scale.lstsq import lstsq

    d = _bad_files(tmp_path)
    for name, message in (("nan.npy", "NaN"), ("empty.npy", "empty"), ("text.npy", "not a")):
        with pytest.raises(InputError, match=message):
            lstsq(str(d / name))


def _hostile_files(tmp_path):
    """Issue 28's lstsq inputs: a 0-byte .npy, a CSV named .parquet, an empty .parquet, a
    folder of Parquet files of two schemas, a pickled .npy, a Zarr array of Python objects."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "zero.npy").write_bytes(b"")
    (tmp_path / "csv.parquet").write_text("x,y\n1,2\n3,4\n")
    (tmp_path / "zero.parquet").write_bytes(b"")
    (tmp_path / "mixed").mkdir()
    pq.write_table(pa.table({"a": [1.0, 2.0], "y": [1.0, 2.0]}), tmp_path / "mixed" / "p0.parquet")
    pq.write_table(pa.table({"c": [1.0, 2.0], "y": [1.0, 2.0]}), tmp_path / "mixed" / "p1.parquet")
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True)
    os.mkfifo(tmp_path / "fifo.npy")  # opening it used to wait for a writer for ever
    (tmp_path / "zero.pq").symlink_to("/dev/zero")
    return tmp_path


HOSTILE = [
    ("zero.npy", "zero.npy: an empty file, not a .npy array; write one with numpy.save"),
    ("csv.parquet", "csv.parquet: not a readable Parquet file (Parquet magic bytes not found"),
    ("zero.parquet", "zero.parquet: not a readable Parquet file (an empty file); give Parquet"),
    ("mixed", "p1.parquet: no column(s) ['a'], which p0.parquet has; give files of one schema"),
    ("pickled.npy", "pickled.npy: not a readable .npy array: it holds Python objects (pickled)"),
    ("fifo.npy", "fifo.npy: not a regular file (a FIFO, a device or a socket); give a .npy file"),
    ("zero.pq", "zero.pq: not a regular file (a FIFO, a device or a socket)"),
]


@pytest.mark.parametrize(("name", "message"), HOSTILE)
def test_hostile_input_files_are_one_line_before_any_worker_starts(
    capsys, tmp_path, monkeypatch, name, message
):
    import gpuprobe.tools.scale.sweep as sweep

    def no_cluster(**_kw):  # the input is read (lazily) first: no worker to start and stop
        raise AssertionError("a cluster was started for a bad input")

    monkeypatch.setattr(sweep, "open_engine", no_cluster)
    d = _hostile_files(tmp_path)
    rc = cli.main(["scale", "lstsq", "--input", str(d / name), "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpuprobe: ")


@pytest.mark.parametrize(("name", "message"), HOSTILE)
def test_hostile_input_files_raise_input_error_from_the_api(tmp_path, name, message):
    from gpuprobe.core.errors import InputError
    from gpuprobe.tools.scale.lstsq import lstsq

    d = _hostile_files(tmp_path)
    with pytest.raises(InputError) as info:
        lstsq(str(d / name))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_zarr_array_of_python_objects_is_one_line(capsys, tmp_path):
    zarr = pytest.importorskip("zarr")
    from gpuprobe.core.errors import InputError
    from gpuprobe.tools.scale.lstsq import lstsq

    store = tmp_path / "obj.zarr"
    if int(zarr.__version__.split(".")[0]) >= 3:
        from zarr.core.dtype import VariableLengthBytes

        z = zarr.create_array(
            str(store), shape=(4, 3), chunks=(2, 3), dtype=VariableLengthBytes(), zarr_format=2
        )
    else:  # zarr 2: an object array needs its codec
        import numcodecs

        z = zarr.open_array(
            str(store), mode="w", shape=(4, 3), chunks=(2, 3), dtype=object,
            object_codec=numcodecs.VLenBytes(),
        )  # fmt: skip
    z[:] = np.array([[b"1", b"2", b"3"]] * 4, dtype=object)
    rc = cli.main(["scale", "lstsq", "--input", str(store), "--workers", "1", "--threads"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.strip() == "gpuprobe: A has dtype object; give numbers (float64 is used inside)"
    with pytest.raises(InputError, match="A has dtype object"):
        lstsq(str(store))
    (store / ".zarray").write_text(  # the pickle codec: refused by zarr, and never unpickled
        '{"zarr_format": 2, "shape": [4, 3], "chunks": [2, 3], "dtype": "|O", '
        '"compressor": null, "fill_value": null, "filters": [{"id": "pickle"}], "order": "C"}'
    )
    rc = cli.main(["scale", "lstsq", "--input", str(store), "--workers", "1", "--threads"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "obj.zarr" in err


def test_workers_above_the_cores_are_clamped_with_a_warning(capsys):
    from gpuprobe.tools.scale.engine import available_cores

    cores = available_cores()
    argv = ["--rows", "600", "--cols", "4", "--threads", "--json", "--method", "normal"]
    rc = cli.main(["scale", "lstsq", *argv, "--workers", f"1,{cores + 1}"])  # 64 is refused
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert rc == 0
    assert f"more than the {cores} core(s)" in err and len(err.strip().splitlines()) == 1
    assert sorted({r["workers"] for r in data["results"]}) == sorted({1, cores})


def _rank_deficient(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1200, 4))
    a = np.hstack([a, 2 * a[:, 3:]])  # rank 4 of 5
    np.save(tmp_path / "rd.npy", np.column_stack([a, a @ np.ones(5)]))
    return str(tmp_path / "rd.npy")


def test_rank_deficiency_is_one_finding_in_text_with_worker_processes(capfd, tmp_path):
    """Issue 28: once, as a finding, over 2 methods × 2 worker counts (4 solves); no raw
    RankDeficiencyWarning on stderr, from this process or from the Dask worker processes."""
    argv = ["--input", _rank_deficient(tmp_path), "--workers", "1,2", "--method", "normal,tsqr"]
    rc = cli.main(["scale", "lstsq", *argv])
    out, err = capfd.readouterr()
    assert rc == 0, err
    assert out.count("A has rank 4 of 5 columns") == 1
    assert "[warn] A has rank 4 of 5 columns: the minimum-norm solution was returned" in out
    assert "RankDeficiencyWarning" not in out + err and "warnings.warn" not in err


def test_rank_deficiency_is_one_finding_in_json(capsys, tmp_path):
    argv = ["--input", _rank_deficient(tmp_path), "--workers", "1,2", "--threads", "--json"]
    rc = cli.main(["scale", "lstsq", *argv])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert rc == 0 and "RankDeficiency" not in err
    found = [f for f in data["findings"] if f["id"] == "lstsq-rank-deficient"]
    assert len(found) == 1 and found[0]["status"] == "warn"
    assert out.count("lstsq-rank-deficient") == 1
