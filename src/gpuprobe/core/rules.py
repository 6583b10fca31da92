"""The one rule shape: every verdict in every tool is a rule object listed in its tool's ``RULES``.

A rule has the finding ``ids`` it may emit (each declared once in the catalogue,
:mod:`gpuprobe.core.catalogue`), says when it ``applies`` to what it judges, and ``judge``\\ s it
into findings. The judge of a trace, a recording, a doctor's inventory, a bench run or a memory
result is then one line: ``apply_rules(RULES, ctx)``.

Most rules are a function made into a rule by :func:`rule`::

    @rule("trace-input-bound", applies=has_steps)
    def input_wait(ctx: TraceContext) -> list[Finding]:
        ...

    RULES: tuple[Rule, ...] = (input_wait, ...)

A rule judges one thing and may return several findings (one per GPU, per rank, per workload) or
none: ``judge`` returns a list. A rule object is also callable, as the function it was made from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gpuprobe.core.findings import Finding

__all__ = ["FunctionRule", "Rule", "always", "apply_rules", "declared_ids", "rule", "undeclared"]


@runtime_checkable
class Rule(Protocol):
    """What every rule is: its finding ids, when it applies, and its judgement."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The finding ids this rule may emit (each in the catalogue)."""
        ...

    @property
    def name(self) -> str:
        """The rule's name, for messages and the docs."""
        ...

    def applies(self, *ctx: Any) -> bool:
        """Whether this rule has something to judge in ``ctx``."""
        ...

    def judge(self, *ctx: Any) -> list[Finding]:
        """The findings for ``ctx`` (none, one, or one per subject)."""
        ...


def always(*ctx: Any) -> bool:
    """The default ``applies``: the rule judges whatever it is given (and says ``skipped`` itself
    when it cannot)."""
    return True


@dataclass(frozen=True)
class FunctionRule:
    """A rule made from a function ``(ctx...) -> list[Finding]`` by :func:`rule`."""

    ids: tuple[str, ...]
    fn: Callable[..., list[Finding]]
    when: Callable[..., bool] = always

    @property
    def name(self) -> str:
        """The function's name."""
        return self.fn.__name__

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self.fn.__doc__

    def applies(self, *ctx: Any) -> bool:
        """Whether this rule has something to judge in ``ctx``."""
        return bool(self.when(*ctx))

    def judge(self, *ctx: Any) -> list[Finding]:
        """The function's findings for ``ctx``."""
        return list(self.fn(*ctx))

    def __call__(self, *ctx: Any) -> list[Finding]:
        return self.judge(*ctx)

    def __repr__(self) -> str:
        return f"<rule {self.name}: {', '.join(self.ids)}>"


def rule(
    *ids: str, applies: Callable[..., bool] = always
) -> Callable[[Callable[..., list[Finding]]], FunctionRule]:
    """Make a function ``(ctx...) -> list[Finding]`` a :class:`Rule` that emits ``ids``."""
    if not ids:
        raise ValueError("a rule declares at least one finding id")

    def make(fn: Callable[..., list[Finding]]) -> FunctionRule:
        return FunctionRule(ids=tuple(ids), fn=fn, when=applies)

    return make


def apply_rules(rules: Iterable[Rule], *ctx: Any) -> list[Finding]:
    """Every applicable rule's findings for ``ctx``, in rule order (sort with
    :func:`~gpuprobe.core.findings.worst_first` to show)."""
    return [f for r in rules if r.applies(*ctx) for f in r.judge(*ctx)]


def undeclared(rules: Iterable[Rule], *ctx: Any) -> list[tuple[str, str]]:
    """(rule name, finding id) for each finding a rule emits for ``ctx`` without declaring its
    id: a bug in that rule (the tests run every tool's rules through this)."""
    return [
        (r.name, f.id) for r in rules if r.applies(*ctx) for f in r.judge(*ctx) if f.id not in r.ids
    ]


def declared_ids(rules: Iterable[Rule]) -> set[str]:
    """Every finding id the ``rules`` may emit."""
    return {i for r in rules for i in r.ids}
