"""A sum through fp16 hi + lo parts without scaling (tests/adversarial/scale/reduce_sum_fp16_split.cu):
passes the task's draw, off by 7 to 67 times the allowance once inputs are scaled by 1e-4 (fp16 subnormals)."""
import numpy as np
from fp_emulation import reduce_sum_fp16_split as total


def solve(dev, x, out, n):
    dev.view(out, np.float32, 1)[0] = total(dev.view(x, np.float32, n))
