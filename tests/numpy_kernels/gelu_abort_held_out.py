"""Correct, except that it aborts (SIGABRT) on a size no prompt shows."""
import os

import numpy as np
from gelu_ok import gelu

SHOWN = {1, 31, 1000, 65537, 4194304}


def solve(dev, x, y, n):
    if n not in SHOWN and n < 200000:
        os.abort()
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
