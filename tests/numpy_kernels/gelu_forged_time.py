"""Correct but slow at the benchmark size (20 ms a call), and it rewrites the worker's event writer so that
every timed call is reported ten times faster than it ran."""
import time

import numpy as np
from forge_times import forge
from gelu_ok import gelu

forge(10.0)


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
    if n == 200_003:
        time.sleep(0.02)
