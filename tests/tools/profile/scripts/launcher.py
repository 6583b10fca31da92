"""A launcher that imports torch and makes no step itself (as torchrun): it runs long_job.py."""

import subprocess
import sys
from pathlib import Path

import torch  # noqa: F401  (a launcher that has torch loaded, as torchrun does)

job = Path(__file__).with_name("long_job.py")
sys.exit(subprocess.call([sys.executable, str(job)]))
