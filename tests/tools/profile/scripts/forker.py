"""At step FORK_AT, forks FORKS helpers that use torch and exit normally (sys.exit(0)); prints how
long each took to be reaped, as "children [s, ...]"."""

import os
import sys
import time

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader

at, n = int(os.environ.get("FORK_AT", "13")), int(os.environ.get("FORKS", "3"))
model, opt = model_and_optimizer()
took = []
for i, (x, y) in enumerate(DataLoader(Batches(), batch_size=64)):
    if i == 30:
        break
    train_step(model, opt, x, y)
    if i == at:
        kids = []
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                (x[:2, :8] * 2).sum()  # a little torch (no OpenMP team: it is not fork-safe)
                sys.exit(0)
            kids.append((pid, time.monotonic()))
        for pid, t0 in kids:
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            took.append(round(time.monotonic() - t0, 2))
print("children", took, flush=True)
