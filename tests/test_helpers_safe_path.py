"""Helper processes never import code from the current directory: a ``torch.py`` where the user
types ``gpuprobe info --frameworks runtime`` must not run (helpers start with ``python -P``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _support import pythonpath_env

SRC = Path(__file__).resolve().parents[1] / "src"
BOOT = "import sys; from gpuprobe.cli import main; sys.argv[0] = 'gpuprobe'; sys.exit(main())"


def _plant(folder: Path) -> Path:
    marker = folder / "PWNED"
    for name in ("torch", "numpy", "cupy", "jax", "psutil"):
        (folder / f"{name}.py").write_text(
            f"import pathlib\npathlib.Path({str(marker)!r}).write_text({name!r})\n"
        )
    return marker


def test_info_frameworks_runtime_ignores_the_current_directory(tmp_path: Path) -> None:
    marker = _plant(tmp_path)
    env = pythonpath_env(SRC)  # no empty entry: that would be the folder under test
    r = subprocess.run(
        # -P for gpuprobe itself too: the helpers are under test, not how the test starts it
        [sys.executable, "-P", "-c", BOOT, "info", "--frameworks", "runtime", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert '"frameworks"' in r.stdout
    assert not marker.exists(), f"{marker.read_text()}.py from the current directory ran"
