"""Honest gelu."""
import numpy as np


def gelu(x):
    x = x.astype(np.float64)
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))).astype(np.float32)


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
