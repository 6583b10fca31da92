"""``doctor --from`` on mutated snapshots (recorded ``info --json`` files from real machines):
whatever the damage, exit 0, 1 or 2, an error in one line, and no traceback."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuprobe.cli as cli

DATA = Path(__file__).resolve().parents[1] / "data"
SNAPSHOTS = {p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}
WEIRD: list[Any] = ["x", [0], None, 1e400, -1, 2**70, "", {}, "\x1b[31m", True, []]


def _paths(doc: Any, prefix: tuple[Any, ...], out: list[Any]) -> list[Any]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            _paths(v, (*prefix, k), out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:20]):
            out.append((*prefix, i))
            _paths(v, (*prefix, i), out)
    return out


def _mutate(doc: Any, rng: random.Random, n: int) -> Any:
    doc = json.loads(json.dumps(doc))
    for _ in range(n):
        paths = _paths(doc, (), [])
        path = rng.choice(paths)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if rng.random() < 0.2 and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = rng.choice(WEIRD)
    return doc


@pytest.fixture(autouse=True)
def _only_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("doctor",))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(sorted(SNAPSHOTS)),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 5),
)
def test_doctor_from_mutated_snapshots(
    name: str, seed: int, n: int, tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_mutate(SNAPSHOTS[name], random.Random(seed), n)))
    code = cli.main(["doctor", "--from", str(path), "--json"])
    _, err = capsys.readouterr()
    assert code in (0, 1, 2)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuprobe: ")
