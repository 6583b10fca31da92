"""Shared by the test scripts: a small MLP, its optimizer, and a dataset of random batches.

These scripts are run unchanged under ``gpuprobe profile`` by tests/tools/profile; none of them
knows about gpuprobe."""

import os
import time

import torch
from torch.utils.data import Dataset

STEPS = int(os.environ.get("STEPS", "20"))


class Batches(Dataset):
    """Random samples; ``delay`` seconds of (simulated) decoding per sample."""

    def __init__(self, n=100_000, delay=0.0):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)  # the slow input pipeline being diagnosed
        return torch.randn(64), i % 10


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model, opt, x, y):
    """One SGD step on a batch: forward, loss, backward, update."""
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss
