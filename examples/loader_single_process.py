"""SLOW: a DataLoader with num_workers=0 decodes and augments every image, one at a time, in the
training process, so the model (and the GPU) waits for each batch (E9).

Measured on a 2-core CPU (AMD EPYC, torch 2.13, no GPU; the model trains on the CPU too):
input-bound, the DataLoader takes 50-60 % of each profiled step (about 180 of 350 ms).
On an H200 (an estimate from the kernel times it recorded for a narrower model; a card must
confirm it): a batch of 128 images costs about 70 ms of CPU (0.5 ms each, about 100 ms while
profiled) against 13-20 ms of GPU work, so the GPU idles most of each step.

Fixed twin: loader_workers.py. Run: python examples/loader_single_process.py [TRACE.json.gz [STEPS]]
"""

import sys

import torch
from torch.utils.data import DataLoader, Dataset

GPU = torch.cuda.is_available()
# Sizes per device, so that the step shows the loader and little else. A GPU gets a model wide
# enough that its step (13-20 ms on an H200, an estimate) outlasts launching it (about 3 ms of
# CPU) and a worker decoding the next batch (about 3 ms). One CPU core gets a narrow model, on
# batches big enough that a step (about 0.25 s) outlasts taking a batch from a worker process
# (1-10 ms: its tensors come through shared memory, their file descriptors through sockets, and
# each hand-over waits for the worker's turn on a busy CPU).
WIDTH, BATCH = (256, 128) if GPU else (8, 256)
BLURS = 8  # the augmentation's 5x5 blurs: about 0.5 ms of CPU per image, one image at a time
WORKERS, PREFETCH = 2, 2  # the fixed twin's loader: 2 processes, 2 batches ahead each
# Profile past the batches the workers make ahead at start-up (WORKERS x PREFETCH, made while
# step 0 sets CUDA up), twice over, so that the profiled steps show the steady state.
SKIP, WARMUP, ACTIVE = 2 * WORKERS * PREFETCH, 1, 3
STEPS = SKIP + WARMUP + ACTIVE  # the fewest steps that reach the end of the profiled window


def augment(images: torch.Tensor) -> torch.Tensor:
    """Stands in for augmentation: uint8 images to floats, blurred with a 5x5 box filter, then
    flipped. One image (3, 32, 32) or a whole batch (N, 3, 32, 32), on the CPU or the GPU."""
    x = images.float().div(255).reshape(-1, 3, 32, 32)
    box = torch.full((3, 1, 5, 5), 1 / 25, device=x.device)
    for _ in range(BLURS):
        x = torch.nn.functional.conv2d(x, box, padding=2, groups=3)
    return x.flip(-1).reshape(images.shape)


class Images(Dataset):
    """A CIFAR-sized set of 3x32x32 images, each "decoded" on the CPU in __getitem__ (about
    15 µs), then passed through ``transform`` when there is one."""

    def __init__(self, transform=None):
        self.transform = transform

    def __len__(self) -> int:
        return 50_000

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=g)  # "decode"
        return (self.transform(img) if self.transform else img), i % 10


def model_on(device: str) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, WIDTH, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(WIDTH, 2 * WIDTH, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(2 * WIDTH, 2 * WIDTH, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * WIDTH * 64, 10),
    ).to(device)


def train(trace: str, loader: DataLoader, augment_batches: bool, steps: int, show: bool):
    """Train on ``steps`` batches, epoch after epoch; profile steps SKIP+WARMUP.. (9..11)."""
    import gpuprobe

    device = "cuda" if GPU else "cpu"
    if not GPU:
        # On the CPU the model competes with the loader for cores: give it one, as a GPU would
        # take the model's work off the CPU.
        torch.set_num_threads(1)
    model = model_on(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    with gpuprobe.profile(trace, skip=SKIP, warmup=WARMUP, active=ACTIVE, show=show) as prof:
        while step < steps:
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                if augment_batches:
                    x = augment(x)  # the whole batch at once, on the device
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
                step += 1
                if step == steps:
                    break
    return prof.diagnosis


def main(trace: str = "loader_single_process.json.gz", steps: int = STEPS, show: bool = True):
    # each image decoded and augmented in this process, one after the other (num_workers=0)
    loader = DataLoader(Images(transform=augment), batch_size=BATCH, shuffle=True, pin_memory=GPU)
    return train(trace, loader, augment_batches=False, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
