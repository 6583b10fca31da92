"""Inference: a DataLoader and a model under no_grad, no optimizer."""

import torch
from _common import STEPS, Batches, model_and_optimizer
from torch.utils.data import DataLoader

model, _ = model_and_optimizer()
model.eval()
loader = DataLoader(Batches(n=256 * STEPS), batch_size=256)
seen = 0
with torch.no_grad():
    for x, _y in loader:
        seen += model(x).argmax(1).numel()
print("predicted", seen)
