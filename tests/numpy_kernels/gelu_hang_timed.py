"""Correct on every case, then never returns from its fifth call at the benchmark shape (its second timed call)."""
import time

import numpy as np

CALLS = {"bench": 0}


def gelu(x):
    x = x.astype(np.float64)
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))).astype(np.float32)


def solve(dev, x, y, n):
    if n == 200_003:          # the benchmark shape of tests/test_harness_session.py
        CALLS["bench"] += 1
        if CALLS["bench"] == 5:
            time.sleep(3600)
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
