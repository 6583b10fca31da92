"""Plain, frozen data that round-trips through JSON.

Every type that passes between stages (probe → measure → judge → show) is a frozen dataclass that
inherits :class:`Record`, which gives it ``to_dict()`` and ``from_dict()``. ``None`` stands for a
value that is unknown or unsupported on this machine; it is shown as ``n/a`` and written as JSON
``null``.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

__all__ = ["Record"]

R = TypeVar("R", bound="Record")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def _admits_none(tp: Any) -> bool:
    if tp is Any or tp is type(None):
        return True
    if get_origin(tp) in (Union, types.UnionType):
        return type(None) in get_args(tp)
    return False


def _decode(tp: Any, value: Any) -> Any:
    if tp is Any:
        return value
    if value is None:
        if _admits_none(tp):
            return None
        # a null where the record needs a value: a damaged or hand-edited file, not "unknown"
        raise TypeError(f"null where {getattr(tp, '__name__', tp)} is needed")
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = tuple(a for a in get_args(tp) if a is not type(None))
        if any(type(value) is a for a in args):  # an exact fit wins: 3 stays an int
            return value
        for arg in args:
            try:
                return _decode(arg, value)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{value!r} does not fit {tp}")
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if origin is list:
        (arg,) = get_args(tp)
        return [_decode(arg, v) for v in value]
    if origin is dict:
        _, varg = get_args(tp)
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return {k: _decode(varg, v) for k, v in value.items()}
    if origin is typing.Literal:
        if value not in get_args(tp):
            raise ValueError(f"{value!r} is not one of {get_args(tp)}")
        return value
    if isinstance(tp, type):
        if issubclass(tp, Record):
            if not isinstance(value, dict):
                raise TypeError(f"expected an object for {tp.__name__}")
            return tp.from_dict(value)
        if issubclass(tp, enum.Enum):
            return tp(value)
        if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if tp in (int, str, bool) and not isinstance(value, tp):
            raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
    return value


class Record:
    """Mixin for frozen dataclasses: ``to_dict()`` for JSON and ``from_dict()`` back."""

    def to_dict(self) -> dict[str, Any]:
        """Return this record as JSON-ready builtins (nested records become dicts)."""
        return {
            f.name: _encode(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
        }

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        """Rebuild a record from ``to_dict()`` output; unknown keys are ignored, missing optional
        keys take their defaults, so snapshots written by older versions still load."""
        hints = _hints(cls)  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in data:
                try:
                    kwargs[f.name] = _decode(hints[f.name], data[f.name])
                except (TypeError, ValueError) as exc:  # say which field was wrong
                    raise type(exc)(f"{f.name}: {exc}") from None
        return cls(**kwargs)
