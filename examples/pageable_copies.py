"""SLOW (needs a CUDA GPU): copy each batch from ordinary (pageable) host memory. CUDA first
stages it through a pinned buffer, at lower bandwidth, and the host waits for the copy (E10).

Fixed twin: pinned_copies.py. Run: python examples/pageable_copies.py [TRACE.json.gz]
"""

import sys

import torch


def train(trace: str, pinned: bool, steps: int, show: bool):
    import gpuprobe

    if not torch.cuda.is_available():
        sys.exit(
            f"{sys.argv[0] or 'this example'} needs a CUDA GPU (torch.cuda.is_available() "
            "is False); the CPU-only examples are item_*, *_mask and loader_*"
        )
    batches = [torch.randn(256, 3, 64, 64) for _ in range(4)]  # 12.6 MB each
    if pinned:
        batches = [b.pin_memory() for b in batches]
    model = torch.nn.Conv2d(3, 16, 3, padding=1).cuda()
    with gpuprobe.profile(trace, show=show) as prof:
        for step in range(steps):
            x = batches[step % len(batches)].to("cuda", non_blocking=pinned)
            model(x).sum().backward()
            prof.step()
    torch.cuda.synchronize()
    return prof.diagnosis


def main(trace: str = "pageable_copies.json.gz", steps: int = 8, show: bool = True):
    return train(trace, pinned=False, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2])
