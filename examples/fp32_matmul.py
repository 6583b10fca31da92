"""SLOW (needs a CUDA GPU with Tensor Cores, compute capability >= 7): large FP32 matmuls run on
the CUDA cores; the Tensor Cores sit unused (E4).

Fixed twin: tf32_matmul.py. Run: python examples/fp32_matmul.py [TRACE.json.gz]
"""

import sys

import torch


def train(trace: str, tensor_cores: bool, steps: int, show: bool):
    import gpuprobe

    if not torch.cuda.is_available():
        sys.exit(
            f"{sys.argv[0] or 'this example'} needs a CUDA GPU (torch.cuda.is_available() is False)"
        )
    torch.backends.cuda.matmul.allow_tf32 = tensor_cores  # the fix: TF32 on the Tensor Cores
    torch.backends.cudnn.allow_tf32 = tensor_cores
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    with gpuprobe.profile(trace, show=show) as prof:
        for _ in range(steps):
            c = a @ b
            a = c / c.norm()
            prof.step()
    torch.cuda.synchronize()
    return prof.diagnosis


def main(trace: str = "fp32_matmul.json.gz", steps: int = 8, show: bool = True):
    return train(trace, tensor_cores=False, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2])
