"""Correct, and it rewrites the worker's event writer so that every timed call is reported twice as fast as it
ran: a lie small enough to hide in the parent's clock noise when the parent reads its events late."""
import numpy as np
from forge_times import forge
from gelu_ok import gelu

forge(2.0)


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
