"""``doctor --from`` on mutated snapshots (recorded ``info --json`` files from real machines):
whatever the damage, exit 0, 1 or 2, an error in one line, and no traceback."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuprobe.cli as cli
from fuzzing import SEEDS, assert_clean_exit, fuzz_settings, mutate_json

DATA = Path(__file__).resolve().parents[2] / "data"
SNAPSHOTS = {p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}


@pytest.fixture(autouse=True)
def _only_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("doctor",))


@fuzz_settings(60)
@given(
    name=st.sampled_from(sorted(SNAPSHOTS)),
    seed=SEEDS,
    n=st.integers(1, 5),
)
def test_doctor_from_mutated_snapshots(
    name: str, seed: int, n: int, tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(mutate_json(SNAPSHOTS[name], random.Random(seed), n, limit=20)))
    code = cli.main(["doctor", "--from", str(path), "--json"])
    _, err = capsys.readouterr()
    assert_clean_exit(code, err)


@pytest.mark.parametrize("renamed", ["]0;t\x1b[31m", "", "tensorflow"])
def test_a_framework_gpuprobe_does_not_know_is_left_out(
    renamed: str, tmp_path: Path, capsys: Any
) -> None:
    """A snapshot naming a framework outside the catalogue (what the fuzz above once made of
    'cupy') gets no finding for it, so no id the catalogue lacks."""
    snap = json.loads(json.dumps(SNAPSHOTS["h200.json"]))
    names = [f["name"] for f in snap["frameworks"] if f.get("installed")]
    assert "torch" in names
    for f in snap["frameworks"]:
        if f["name"] != "torch":
            f["name"] = renamed
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    assert cli.main(["doctor", "--from", str(path), "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    ids = [f["id"] for f in doc["findings"]]
    assert "torch-ok" in ids or any(i.startswith("torch-") for i in ids)
    assert not any(i.startswith(f"{renamed}-") for i in ids)
