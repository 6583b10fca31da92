"""A plain training script with nothing of gpuprobe in it, to run under
``gpuprobe profile -- python examples/train.py``: a small CNN on random 32x32 images whose
DataLoader augments each image in the training process (num_workers=0 by default), so the model
(and the GPU, when there is one) waits for every batch.

Run: python examples/train.py [--workers N] [--steps N]
"""

import argparse

import torch
from torch.utils.data import DataLoader, Dataset

ap = argparse.ArgumentParser()
ap.add_argument("--workers", type=int, default=0)
ap.add_argument("--steps", type=int, default=30)
args = ap.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"


class Images(Dataset):
    """Random uint8 images, each blurred and flipped on the CPU as it is read (the augmentation)."""

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, 256, (1, 3, 32, 32), generator=g, dtype=torch.uint8).float() / 255
        box = torch.full((3, 1, 5, 5), 1 / 25)
        for _ in range(8):
            x = torch.nn.functional.conv2d(x, box, padding=2, groups=3)
        return x[0].flip(-1), i % 10


model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(4),
    torch.nn.Flatten(),
    torch.nn.Linear(256, 10),
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Images(), batch_size=64, num_workers=args.workers, pin_memory=device == "cuda")
for step, (x, y) in enumerate(loader):
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step + 1 == args.steps:
        break
print(f"trained {args.steps} steps on {device}")
