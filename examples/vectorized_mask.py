"""FIXED twin of python_loop_mask.py: one broadcast comparison makes all 80 masks of every image
at once (E10).

Run: python examples/vectorized_mask.py [TRACE.json.gz]
"""

import sys

import torch

import gpuprobe

CLASSES = 80


def masks_vectorized(seg: torch.Tensor) -> torch.Tensor:
    classes = torch.arange(CLASSES, device=seg.device)
    return seg[:, None] == classes[None, :, None, None]  # (B, 80, H, W) in one op


def main(trace: str = "vectorized_mask.json.gz", steps: int = 6, show: bool = True):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    seg = torch.randint(0, CLASSES, (2, 64, 64), device=device)
    with gpuprobe.profile(trace, show=show) as prof:
        for _ in range(steps):
            masks = masks_vectorized(seg)
            prof.step()
    assert masks.sum() == seg.numel()
    return prof.diagnosis


if __name__ == "__main__":
    main(*sys.argv[1:2])
