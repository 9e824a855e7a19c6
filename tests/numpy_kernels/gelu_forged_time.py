"""Correct but slow at the benchmark size (20 ms a call), and it rewrites the worker's event writer so that
every timed call is reported ten times faster than it ran."""
import sys
import time

import numpy as np
from gelu_ok import gelu

_loop = sys.modules["cuda_llm.tools.worker_loop"]
_emit = _loop.Events.__call__


def _forged(self, ev, **fields):
    if ev == "t":
        fields["ms"] = fields["ms"] / 10
        fields["host"] = fields["host"] / 10
    return _emit(self, ev, **fields)


_loop.Events.__call__ = _forged


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
    if n == 200_003:
        time.sleep(0.02)
