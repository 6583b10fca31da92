"""Mutators shared by the fuzz tests and benchmarks/fuzz.py: damage a JSON document (a value
replaced by a weird one, a key dropped) or its bytes (a flipped byte, a cut, an insertion)."""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = [
    "SEEDS",
    "WEIRD",
    "assert_clean_exit",
    "fuzz_settings",
    "json_paths",
    "mutate_bytes",
    "mutate_json",
]


def _seeds() -> Any:
    from hypothesis import strategies as st

    return st.integers(0, 2**32 - 1)


SEEDS = _seeds()  # a random.Random seed per case: the mutation is reproducible from it
# values that broke readers before: wrong types, non-finite and huge numbers, terminal escapes
WEIRD: list[Any] = ["x", [0], None, 1e400, -1, 2**70, "", {}, "\x1b]0;t\x07\x1b[31m", True, []]


def json_paths(doc: Any, prefix: tuple[Any, ...] = (), limit: int = 40) -> list[Any]:
    """Every path into ``doc`` (the first ``limit`` items of each list)."""
    out: list[Any] = []
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc[:limit])
    else:
        return out
    for k, v in items:
        out.append((*prefix, k))
        out += json_paths(v, (*prefix, k), limit)
    return out


def mutate_json(doc: Any, rng: random.Random, n: int, limit: int = 40) -> Any:
    """A copy of ``doc`` with ``n`` values replaced by :data:`WEIRD` ones or keys dropped."""
    doc = json.loads(json.dumps(doc))
    for _ in range(n):
        paths = json_paths(doc, (), limit)
        if not paths:
            break
        path = rng.choice(paths)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if rng.random() < 0.2 and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = rng.choice(WEIRD)
    return doc


def mutate_bytes(data: bytes, rng: random.Random, n: int) -> bytes:
    """``data`` with ``n`` byte-level damages: a byte changed, the rest cut, junk inserted."""
    b = bytearray(data)
    for _ in range(n):
        i = rng.randrange(max(1, len(b)))
        kind = rng.randrange(3)
        if kind == 0 and b:
            b[i] = rng.randrange(256)
        elif kind == 1:
            del b[i:]
        else:
            b[i:i] = rng.choice([b"\x00", b"{", b"]", b'"', b"\xff", b"1e400", b"NaN"])
    return bytes(b)


def fuzz_settings(examples: int) -> Any:
    """Hypothesis settings for a fuzz test: ``examples`` cases, no deadline (the machine is
    shared), function-scoped fixtures allowed (each case writes its own file in tmp_path)."""
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


def assert_clean_exit(code: int, err: str, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    """The property every command keeps: an allowed exit code, and exit 2 in one line."""
    assert code in allowed, (code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuprobe: "), err
