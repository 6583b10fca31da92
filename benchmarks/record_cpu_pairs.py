"""Record before/after pairs on this machine's CPU for ``benchmarks/whatif_pairs.py``: one cause,
then the same job with that cause fixed, each under torch.profiler (CPU activities, a schedule
of wait 1, warm-up 2, 4 active steps), into ``tests/data/diagnose/cpu_pairs/``.

* ``loader_starved`` → ``loader_fed``: an MLP trained on a Dataset whose ``__getitem__`` takes
  2 ms a sample (a sleep stands for decoding: it is the workload), batch 8, with
  ``num_workers=0``, then 16 workers prefetching 4 batches each (the wait gone);
* ``rows_loop`` → ``rows_batched``: the same model run on the batch's 128 rows one at a time in a
  Python loop, then on the batch at once (with_stack=True, as one profiles to find a loop).

Run:  .venv/bin/python benchmarks/record_cpu_pairs.py   (torch CPU build; ~1 minute)
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnose" / "cpu_pairs"
STEPS = 1 + 2 + 4  # wait, warm-up, active


class Slow(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.002)  # the slow input being diagnosed: 2 ms per sample
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), int(i % 10)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def _write(prof: profile, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(raw)
        OUT.mkdir(parents=True, exist_ok=True)
        with (
            open(raw, "rb") as src,
            gzip.GzipFile(OUT / f"{name}.json.gz", "wb", 9, mtime=0) as dst,
        ):
            shutil.copyfileobj(src, dst)


def loader(name: str, workers: int) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    extra = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
    data = torch.utils.data.DataLoader(Slow(), batch_size=8, num_workers=workers, **extra)
    it = iter(data)
    for _ in range(3 if workers else 0):  # the workers start and fill their queues
        next(it)
    if workers:
        time.sleep(1.0)
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=2, active=4)
    ) as prof:
        for _ in range(STEPS):
            x, y = next(it)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            prof.step()
    _write(prof, name)


def rows(name: str, loop: bool) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(128, 64)
    y = torch.arange(128) % 10
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=2, active=4),
        with_stack=True,
    ) as prof:
        for _ in range(STEPS):
            opt.zero_grad()
            out = torch.cat([model(x[i : i + 1]) for i in range(128)]) if loop else model(x)
            loss_fn(out, y).backward()
            opt.step()
            prof.step()
    _write(prof, name)


def main() -> None:
    torch.set_num_threads(2)
    loader("loader_starved", 0)
    loader("loader_fed", 16)
    rows("rows_loop", True)
    rows("rows_batched", False)
    print(f"wrote {sorted(p.name for p in OUT.glob('*.json.gz'))} to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
