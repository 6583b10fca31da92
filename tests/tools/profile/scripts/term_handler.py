"""Installs its own SIGTERM handler (a checkpoint) at step 11, inside gpuprobe's window, then is
sent SIGTERM at the end: it writes CKPT and exits 0, as it does without gpuprobe."""

import os
import signal
import sys

from _common import Batches, model_and_optimizer, train_step
from torch.utils.data import DataLoader


def checkpoint(signum, frame):
    with open(os.environ["CKPT"], "w") as f:
        f.write("saved")
    sys.exit(0)


model, opt = model_and_optimizer()
for i, (x, y) in enumerate(DataLoader(Batches(), batch_size=64)):
    if i == 11:
        signal.signal(signal.SIGTERM, checkpoint)
    if i == 30:
        break
    train_step(model, opt, x, y)
os.kill(os.getpid(), signal.SIGTERM)
signal.pause()
