"""Softmax that subtracts each row's first element instead of its max (tests/adversarial/scale/
softmax_shift_first.cu): passes the task's draw, NaN once a row's spread passes ~88 (inputs x 1e4)."""
import numpy as np
from fp_emulation import softmax_shift_first as softmax


def solve(dev, x, y, rows, cols):
    xs = dev.view(x, np.float32, rows * cols).reshape(rows, cols)
    dev.view(y, np.float32, rows * cols)[:] = softmax(xs).reshape(-1)
