"""Honest, but the first worker session that loads it sees the host stall outside the events, as a busy
host can: each timed call reports a tenth of what the parent's clock sees. A marker file beside the
kernel makes every later session a clean one. For the judge's retiming after a clock disagreement."""
import sys
import time
from pathlib import Path

import numpy as np
from gelu_ok import gelu

_MARK = Path(__file__).with_suffix(".stalled")
_STALL = not _MARK.exists()
_MARK.touch()

if _STALL:
    _loop = sys.modules["cuda_llm.tools.worker_loop"]
    _emit = _loop.Events.__call__

    def _noisy(self, ev, **fields):
        if ev == "t":
            fields["ms"] = fields["ms"] / 10
            fields["host"] = fields["host"] / 10
        return _emit(self, ev, **fields)

    _loop.Events.__call__ = _noisy


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
    if n == 200_003:
        time.sleep(0.02)
