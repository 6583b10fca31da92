"""Kernel names shortened for the terminal's tables and lists: without ``void``, ATen's
namespaces and wrapper templates (the functor that says what the kernel does stays) and without
the argument list; the template arguments stay, they tell instances apart. The JSON and the HTML
keep every name whole."""

from __future__ import annotations

import re

__all__ = ["short_kernel_name"]


# (pattern, replacement) applied in order to make a kernel name short and still telling: ATen's
# element-wise and reduce wrappers hide the functor that says what the kernel does.
_SHORTEN: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^void "), ""),
    (re.compile(r"at::native::|\(anonymous namespace\)::|at::detail::|at::cuda::"), ""),
    (
        re.compile(r"(vectorized_|unrolled_)?elementwise_kernel<(\d+, )*(gpu_kernel_impl\w*<)?"),
        "elementwise<",
    ),
    (re.compile(r"reduce_kernel<\d+, \d+, ReduceOp<"), "reduce<"),
    (re.compile(r"\((at::)?TensorIteratorBase&\)"), ""),
    (re.compile(r"::\{lambda\(\)#\d+\}|::operator\(\)\(\) const"), ""),
)


def short_kernel_name(name: str) -> str:
    """A kernel name for a table: without ``void``, ``at::native::`` and ATen's wrapper templates
    (the functor stays) and without its argument list; whole otherwise (the table wraps it)."""
    s = name
    for rx, repl in _SHORTEN:
        s = rx.sub(repl, s)
    return _without_arguments(s)


def _without_arguments(s: str) -> str:
    """``s`` without the argument list that closes it (``kernel<T>(int, float*)`` ->
    ``kernel<T>``); parentheses inside template arguments stay, and so does a description
    after a space (``Memcpy HtoD (Pinned -> Device)``): an argument list follows its name."""
    s = s.strip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            if s[i - 1 : i].isspace():
                return s
            head = s[:i].rstrip()
            angle = head.count("<") - head.count(">")
            return head if head and angle == 0 else s
    return s
