"""core/safejson.loads: any bad document is a JSONDecodeError (a ValueError) with a position,
never a RecursionError: 100 000 levels of nesting, more than MAX_JSON_DEPTH, a number of 5000
digits, bytes that are not UTF-8. Issue 28."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from gpuprobe.core.safejson import MAX_JSON_DEPTH, loads


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


@pytest.mark.parametrize("kind", [str, bytes])
def test_100k_levels_are_a_decode_error_not_a_recursion_error(kind: type) -> None:
    doc = "[" * 100_000 + "]" * 100_000
    with pytest.raises(json.JSONDecodeError) as info:
        loads(doc if kind is str else doc.encode())
    e = info.value
    assert e.msg == f"nested deeper than {MAX_JSON_DEPTH} levels" == "nested deeper than 128 levels"
    assert (e.lineno, e.colno) == (1, 129)  # the bracket that opens level 129
    with pytest.raises(RecursionError):  # what json.loads itself does with it
        json.loads(doc)


def test_the_limit_is_exact_and_counts_dicts_too() -> None:
    assert _depth(loads("[" * 128 + "]" * 128)) == 128
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 128") as info:
        loads('{"a":' * 129 + "1" + "}" * 129)  # loads in json, refused by the depth check
    assert info.value.colno == 1 + 5 * 128
    assert loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(json.JSONDecodeError, match="deeper than 1 levels"):
        loads("[[1]]", max_depth=1)


def test_brackets_inside_strings_are_not_nesting() -> None:
    doc = {"s": "[" * 1000, "t": 'q\\"[[[' + "{" * 300, "u": ["]]]}}}"]}
    assert loads(json.dumps(doc)) == doc
    assert loads(json.dumps(doc).encode()) == doc


def test_a_5000_digit_number_and_bad_utf8_say_where() -> None:
    with pytest.raises(json.JSONDecodeError, match="a number too long to read") as info:
        loads(b'{"x": [' + b"1" * 5000 + b"]}")
    assert info.value.colno == 8
    with pytest.raises(json.JSONDecodeError, match=r"not UTF-8 text \(invalid start byte\)") as u:
        loads(b'{"a": "\xff"}')
    assert u.value.colno == 8
    assert isinstance(u.value, ValueError)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)  # infinities: json writes and reads them as Infinity
    | st.text(alphabet='[]{}"\\ ,:eE1aé\n', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


def _wrapped(value: Any, kinds: list[bool]) -> Any:
    for as_dict in kinds:  # innermost first
        value = {"k": value} if as_dict else [value]
    return value


@fuzz_settings(200)
@given(
    value=JSON,
    kinds=st.lists(st.booleans(), max_size=300),
    indent=st.sampled_from([None, 1]),
    as_bytes=st.booleans(),
)
def test_loads_is_json_loads_up_to_the_limit_and_refuses_past_it(
    value: Any, kinds: list[bool], indent: int | None, as_bytes: bool
) -> None:
    """Any JSON (Infinity, whitespace, brackets inside strings) nested inside lists and dicts:
    the same as json.loads up to 128 levels, refused past them."""
    wrapped = _wrapped(value, kinds)
    text = json.dumps(wrapped, indent=indent)
    doc = text.encode() if as_bytes else text
    if _depth(wrapped) <= MAX_JSON_DEPTH:
        assert loads(doc) == json.loads(text)
    else:
        with pytest.raises(json.JSONDecodeError, match="nested deeper than 128 levels"):
            loads(doc)
