"""Honest, but the first worker session that loads it sees the host stall outside the events, as a busy
host can: each timed call reports a tenth of what the parent's clock sees. A marker file beside the
kernel makes every later session a clean one. For the judge's retiming after a clock disagreement."""
import time
from pathlib import Path

import numpy as np
from forge_times import forge
from gelu_ok import gelu

_MARK = Path(__file__).with_suffix(".stalled")
if not _MARK.exists():
    _MARK.touch()
    forge(10.0)


def solve(dev, x, y, n):
    dev.view(y, np.float32, n)[:] = gelu(dev.view(x, np.float32, n))
    if n == 200_003:
        time.sleep(0.02)
