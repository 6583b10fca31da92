"""Trains on a daemon thread; the main thread exits once the thread is inside the default window
(steps 10..16), the thread still stepping, a step each 0.05 s (with ``STALL=1``, it then stalls
for a minute, as on a hung input pipeline). Plain Python exits 0: finalization stops the daemon
thread where it waits."""

import os
import threading
import time

import torch
from _common import model_and_optimizer, train_step

model, opt = model_and_optimizer()
steps = 0


def train():
    global steps
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    while True:
        train_step(model, opt, x, y)
        steps += 1
        time.sleep(60 if steps >= 12 and os.environ.get("STALL") else 0.05)


threading.Thread(target=train, daemon=True).start()
while steps < 12:
    time.sleep(0.001)
print("main thread leaves at step", steps, flush=True)
