"""gpuprobe in Jupyter, as a user meets it: a notebook executed headless (nbclient + ipykernel).

``rec.plot()`` shows its chart inline and leaves the user's matplotlib backend alone, so the user's
own ``plt.show()`` still draws afterwards; a BenchReport shows once (no side output from rich);
results show as HTML with a short text/plain.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

SNAPSHOT = Path(__file__).parents[1] / "data" / "t4.json"

CELLS = [
    # 0: the backend before gpuprobe does anything (read without resolving it)
    "import matplotlib, gpuprobe\n"
    "before = dict.__getitem__(matplotlib.rcParams, 'backend')\n"
    "print('backend before:', before)",
    # 1: a recording's chart, as the cell's result
    "with gpuprobe.record(hz=20) as rec:\n    sum(i * i for i in range(300_000))\nrec.plot()",
    # 2: the backend after
    "after = dict.__getitem__(matplotlib.rcParams, 'backend')\n"
    "print('backend after:', after)\n"
    "assert after == before, (before, after)",
    # 3: the user's own pyplot still shows
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    # 4: a BenchReport as the cell's result
    "report = gpuprobe.bench(['launch'], ['numpy'], quick=True, save=False, isolate=False,"
    " budget_s=0.05)\n"
    "report",
    # 5: the recording and a doctor report (a recorded snapshot: no kernels) as results
    "rec",
    "from gpuprobe.platform.inventory import load\n"
    f"inv = load({str(SNAPSHOT)!r})\n"
    "doc = gpuprobe.doctor(inventory=inv)\n"
    "doc",
    # 7: a measurement of 1000 times
    "from gpuprobe.platform.measurement import Measurement\n"
    "m = Measurement.from_times('add', 'numpy', 'cpu', [1e-3 + (i % 7) * 1e-4 for i in range(1000)])\n"
    "m",
]


def _outputs(cell: Any) -> list[dict[str, Any]]:
    return [dict(o) for o in cell.get("outputs", [])]


def _errors(cell: Any) -> list[str]:
    return [
        f"{o.get('ename')}: {o.get('evalue')}"
        for o in _outputs(cell)
        if o["output_type"] == "error"
    ]


def _images(outs: list[dict[str, Any]]) -> int:
    return sum("image/png" in o.get("data", {}) for o in outs)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    home = tmp_path_factory.mktemp("nbhome")
    env_backup = dict(os.environ)
    # a history folder of its own, and no user matplotlib settings
    os.environ["GPUPROBE_DATA_DIR"] = str(home / "gpuprobe")
    os.environ["MPLCONFIGDIR"] = str(home / "mpl")
    os.environ.pop("MPLBACKEND", None)
    try:
        client = nbclient.NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,  # each test below judges its own cell
            resources={"metadata": {"path": str(home)}},
        )
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    return nb


def test_plot_shows_inline_once_and_leaves_the_backend(executed: Any) -> None:
    assert not [e for c in executed.cells[:3] for e in _errors(c)]
    before = "".join(o.get("text", "") for o in _outputs(executed.cells[0]))
    after = "".join(o.get("text", "") for o in _outputs(executed.cells[2]))
    assert "inline" in before  # ipykernel's default backend
    assert before.split(":", 1)[1].strip() == after.split(":", 1)[1].strip()
    outs = _outputs(executed.cells[1])
    assert _images(outs) == 1, outs  # the chart, once
    png = next(o["data"]["image/png"] for o in outs if "image/png" in o.get("data", {}))
    assert len(png) > 10_000  # a real chart, base64


def test_users_own_pyplot_still_shows(executed: Any) -> None:
    assert _images(_outputs(executed.cells[3])) == 1


def test_bench_report_shows_once(executed: Any) -> None:
    outs = _outputs(executed.cells[4])
    assert [o["output_type"] for o in outs] == ["execute_result"], outs
    data = outs[0]["data"]
    assert "launch" in data["text/html"] and "µs/op" in data["text/html"]
    assert data["text/plain"].startswith("<BenchReport ") and len(data["text/plain"]) < 300


@pytest.mark.parametrize(
    ("cell", "starts", "html"),
    [
        (5, "<Recording done", "gpuprobe run"),
        (6, "<DoctorReport", "verdict"),
        (7, "<Measurement", "median"),
    ],
)
def test_results_show_as_html_with_a_short_text(
    executed: Any, cell: int, starts: str, html: str
) -> None:
    outs = _outputs(executed.cells[cell])
    assert [o["output_type"] for o in outs] == ["execute_result"], outs
    data = outs[0]["data"]
    assert data["text/plain"].startswith(starts), data["text/plain"]
    assert len(data["text/plain"]) < 400, data["text/plain"]
    assert html in data["text/html"]


def test_notebook_is_valid(executed: Any) -> None:
    nbformat.validate(json.loads(nbformat.writes(executed)))
