"""Packages that are also functions of the public API.

``gpuprobe.doctor`` and ``gpuprobe.diagnose`` each name both a package and the function users call.
Importing any submodule makes Python set the package itself as the attribute on ``gpuprobe``, which
would hide the function, so each such package is made callable as its function.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["callable_package"]


def callable_package(module_name: str, function_name: str) -> None:
    """Make the package ``module_name`` call its own ``function_name`` when called."""
    module = sys.modules[module_name]
    function = getattr(module, function_name)

    class _CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    _CallablePackage.__doc__ = function.__doc__
    module.__class__ = _CallablePackage
