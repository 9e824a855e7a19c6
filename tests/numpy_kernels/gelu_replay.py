"""Shared by gelu_replay_every_{2,10,100}: honest gelu that keeps its last computed output and, on every
P-th call (a module-level counter) whose n equals the kept output's, writes the kept output instead of
computing. A replayed call leaves the kept output as it was. Twins of tests/adversarial/scale/
gelu_replay_every_*.cu."""
import numpy as np
from gelu_ok import gelu


class Replay:
    """solve(dev, x, y, n) with a call counter and the previous computed output."""

    def __init__(self, every: int):
        self.every = every
        self.calls = 0
        self.kept: np.ndarray | None = None

    def __call__(self, dev, x, y, n):
        self.calls += 1
        out = dev.view(y, np.float32, n)
        if self.calls % self.every == 0 and self.kept is not None and self.kept.size == n:
            out[:] = self.kept
            return
        out[:] = gelu(dev.view(x, np.float32, n))
        self.kept = out.copy()
