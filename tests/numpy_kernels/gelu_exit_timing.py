"""Correct, but ends the process on its fifth call at a size above any correctness shape."""
import os

import numpy as np
from gelu_ok import gelu

_calls = [0]


def solve(dev, x, y, n):
    if n > 5_000_000 or n == 200_003:
        _calls[0] += 1
        if _calls[0] == 5:
            os._exit(0)
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
