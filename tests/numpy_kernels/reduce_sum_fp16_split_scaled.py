"""The fp16 split with a power of two per 256-element chunk (tests/adversarial/scale/
reduce_sum_fp16_split_scaled.cu): right at every scale."""
import numpy as np
from fp_emulation import reduce_sum_fp16_split_scaled as total


def solve(dev, x, out, n):
    dev.view(out, np.float32, 1)[0] = total(dev.view(x, np.float32, n))
