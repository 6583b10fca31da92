"""SLOW: a DataLoader with num_workers=0 decodes and augments every batch in the training
process, so the model (and the GPU) waits for each batch (E9: GPU 7-15 % busy, one busy core).

Fixed twin: loader_workers.py. Run: python examples/loader_single_process.py [TRACE.json.gz [STEPS]]
"""

import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    """Stands in for JPEG decoding and augmentation: per-sample CPU work in __getitem__."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 32, 32, generator=g)
        for _ in range(14):  # blur-like augmentation, done per sample on the CPU
            img = (img + img.roll(1, dims=1) + img.roll(1, dims=2)) / 3
        return img.flip(2), i % 10


def model_and_loader(num_workers: int):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 64, 10),
    ).to(device)
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    loader = DataLoader(
        Images(), batch_size=64, num_workers=num_workers, pin_memory=device == "cuda", **extra
    )
    return device, model, loader


def train(trace: str, num_workers: int, steps: int, show: bool):
    import gpuprobe

    if not torch.cuda.is_available():
        # On the CPU the model competes with the loader for cores: give it one, as a GPU would
        # take the model's work off the CPU.
        torch.set_num_threads(1)
    device, model, loader = model_and_loader(num_workers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuprobe.profile(trace, show=show) as prof:
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            if step + 1 == steps:
                break
    return prof.diagnosis


def main(trace: str = "loader_single_process.json.gz", steps: int = 7, show: bool = True):
    return train(trace, num_workers=0, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
