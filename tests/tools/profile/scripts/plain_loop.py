"""Inference with no DataLoader and no optimizer: only a time window can delimit it."""

import os
import time

import torch
from _common import model_and_optimizer

model, _ = model_and_optimizer()
x = torch.randn(256, 64)
end = time.monotonic() + float(os.environ.get("RUN_S", "3"))
n = 0
with torch.no_grad():
    while time.monotonic() < end:
        model(x)
        n += 1
print("forward passes", n)
