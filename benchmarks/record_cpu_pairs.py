"""Record before/after pairs on this machine's CPU for ``benchmarks/whatif_pairs.py``: one cause,
then the same job with that cause fixed, each under torch.profiler (CPU activities, a schedule
of wait 1, warm-up 2, 4 active steps), into ``tests/data/diagnose/cpu_pairs/``.

* ``loader_starved`` → ``loader_fed``: an MLP trained on a Dataset whose ``__getitem__`` takes
  2 ms a sample (a sleep stands for decoding: it is the workload), batch 8, with
  ``num_workers=0``, then 16 workers prefetching 4 batches each (the wait gone);
* ``rows_loop`` → ``rows_batched``: the same model run on the batch's 128 rows one at a time in a
  Python loop, then on the batch at once (with_stack=True, as one profiles to find a loop);
* ``straggler_slow/`` → ``straggler_even/``: a two-rank gloo job (two processes on this machine),
  each step a matmul then an all-reduce of the gradients' size; rank 1 does 12 ms of extra
  host work a step (a slower input path), then none.

Run:  .venv/bin/python benchmarks/record_cpu_pairs.py [loader] [rows] [straggler]
      (all three without an argument; torch CPU build; ~1 minute)
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

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnose"
OUT = DATA / "cpu_pairs"
sys.path.insert(0, str(DATA))
from record_cpu_loop import Slow  # noqa: E402  (the slow Dataset of cpu_mlp_slow_loader)

STEPS = 1 + 2 + 4  # wait, warm-up, active


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


def _rank(rank: int, name: str, extra_ms: float, port: int) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    a = torch.randn(256, 256)
    grad = torch.zeros(1 << 18)
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=2, active=4)
    ) as prof:
        for _ in range(STEPS):
            for _ in range(20):
                a = torch.tanh(a @ a) * 0.5
            if rank == 1 and extra_ms:
                with torch.profiler.record_function("slow_input"):
                    t = time.perf_counter()
                    while time.perf_counter() - t < extra_ms / 1e3:  # the straggler's own work
                        pass
            dist.all_reduce(grad)
            prof.step()
    dist.barrier()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(raw)
        (OUT / name).mkdir(parents=True, exist_ok=True)
        dst_path = OUT / name / f"rank{rank}.json.gz"
        with open(raw, "rb") as src, gzip.GzipFile(dst_path, "wb", 9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    dist.destroy_process_group()


def straggler(name: str, extra_ms: float, port: int) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(name, extra_ms, port), nprocs=2, join=True)


def main(which: list[str]) -> None:
    torch.set_num_threads(2)
    if not which or "loader" in which:
        loader("loader_starved", 0)
        loader("loader_fed", 16)
    if not which or "rows" in which:
        rows("rows_loop", True)
        rows("rows_batched", False)
    if not which or "straggler" in which:
        straggler("straggler_slow", 12.0, 29511)
        straggler("straggler_even", 0.0, 29512)
    print(f"wrote {sorted(p.name for p in OUT.glob('*.json.gz'))} to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
