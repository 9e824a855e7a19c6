"""Correct output, but uses the input x as scratch at the benchmark size on every timed call after the
first (x[5] is changed and left changed)."""
import numpy as np
from gelu_ok import gelu

_calls = [0]


def solve(dev, x, y, n):
    xs = dev.view(x, np.float32, n)
    dev.view(y, np.float32, n)[:] = gelu(xs)
    if n == 200_003:
        _calls[0] += 1
        if _calls[0] > 1:
            xs[5] += 1.0
