"""FIXED twin of fp32_matmul.py (needs a CUDA GPU): TF32 runs the same FP32 matmuls on the
Tensor Cores (``torch.set_float32_matmul_precision("high")`` does the same) (E4).

Run: python examples/tf32_matmul.py [TRACE.json.gz]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fp32_matmul import train


def main(trace: str = "tf32_matmul.json.gz", steps: int = 8, show: bool = True):
    return train(trace, tensor_cores=True, steps=steps, show=show)


if __name__ == "__main__":
    main(*sys.argv[1:2])
