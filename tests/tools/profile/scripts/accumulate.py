"""Gradient accumulation: ACCUM micro-batches per optimizer step, as HF's
gradient_accumulation_steps or Lightning's accumulate_grad_batches; then, with CLOSURE=1, the
optimizer step takes a closure that runs forward and backward, as Lightning's does."""

import os

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

accum = int(os.environ.get("ACCUM", "16"))
closure = os.environ.get("CLOSURE") == "1"
model, opt = model_and_optimizer()
loader = iter(DataLoader(Batches(), batch_size=32))
for _step in range(STEPS):
    if closure:

        def run():
            opt.zero_grad()
            x, y = next(loader)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        opt.step(run)
        continue
    for _ in range(accum):
        x, y = next(loader)
        (torch.nn.functional.cross_entropy(model(x), y) / accum).backward()
    opt.step()
    opt.zero_grad()
print("optimizer steps", STEPS)
