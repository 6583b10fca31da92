"""The suite leaves nothing behind: not in the checkout, not in ``$TMPDIR``.

- ``$TMPDIR``: the session gets one folder of its own (``gpuprobe-tests-*``), which ``TMPDIR``
  and :data:`tempfile.tempdir` name for the tests and every process they start; it is removed
  when the interpreter exits, whatever a test or gpuprobe left in it (``gpuprobe.record()``'s
  default folder, a ``mkdtemp`` of a helper): by an ``atexit`` handler registered at the start,
  so that it runs after multiprocessing's own clean-up of its ``pymp-*`` folder (atexit runs
  the last registered first). pytest's own ``tmp_path`` folders stay where pytest keeps them
  (``pytest-of-$USER``, the last three runs, for a failed test's files).
- Hypothesis keeps no example database, and its other files (the constants it collects from the
  code under test, its Unicode tables: ``.hypothesis/`` in the working folder) go to the
  session's folder (``HYPOTHESIS_STORAGE_DIRECTORY``).
- The checkout: what ``git status --ignored`` lists at the end that it did not list at the start
  (a committed ``out.pdf`` was once a test's plot; ``build/`` a wheel built in place) fails the
  session, named. Python's and pytest's own caches (``__pycache__``, ``.pytest_cache``) are not
  counted. ``GPUPROBE_TEST_TREE`` names another folder to watch (this module's own test).

``conftest.py`` calls :func:`start` and :func:`finish`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

__all__ = ["finish", "start", "tree_entries"]

ROOT = Path(__file__).resolve().parents[1]
CACHES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")
_STATE: dict[str, object] = {}


def _tree() -> Path:
    return Path(os.environ.get("GPUPROBE_TEST_TREE") or ROOT)


def tree_entries(root: Path) -> set[str] | None:
    """What git lists in ``root`` as untracked or ignored (folders once, as git shows them), less
    the caches; None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--ignored", "-z"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    entries = set()
    for item in out.stdout.split("\0"):
        if item[:3] in ("?? ", "!! ") and not any(c in item[3:].split("/") for c in CACHES):
            entries.add(item[3:])
    return entries


def start(config: pytest.Config) -> None:
    """At the start of the session (``pytest_configure``, after pytest's own)."""
    # pytest's own folder first, where it keeps it (TMPDIR as it was)
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        factory.getbasetemp()
    own = tempfile.mkdtemp(prefix="gpuprobe-tests-")
    _STATE["own"] = own
    _STATE["tree"] = tree_entries(_tree())
    os.environ["TMPDIR"] = own
    tempfile.tempdir = own
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(own, "hypothesis")
    try:
        from hypothesis import settings
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])
    settings.register_profile("gpuprobe-tests", database=None)
    settings.load_profile("gpuprobe-tests")


def finish(session: pytest.Session) -> None:
    """At the end of the session (``pytest_sessionfinish``)."""
    before = _STATE.get("tree")
    after = tree_entries(_tree())
    if not isinstance(before, set) or after is None:
        return
    new = sorted(after - before)
    if not new:
        return
    text = f"the tests left these in {_tree()} (write them under tmp_path):\n  " + "\n  ".join(new)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep("=", "files left in the checkout", red=True)
        reporter.write_line(text)
    else:
        print(text, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
