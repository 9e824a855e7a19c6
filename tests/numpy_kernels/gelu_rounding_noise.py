"""Honest gelu whose outputs move by up to 3 ulps, differently on every call (the noise is a function of a
module-level call counter): what atomics or a changing reduction order do to a correct kernel. Every
output is within the tolerance, so no check of any call may fail it."""
import numpy as np
from gelu_ok import gelu

_calls = 0


def solve(dev, x, y, n):
    global _calls
    _calls += 1
    r = gelu(dev.view(x, np.float32, n))
    steps = np.random.default_rng(_calls).integers(-3, 4, size=n)
    bits = r.view(np.uint32)
    sign = bits & np.uint32(0x80000000)
    mag = (bits & np.uint32(0x7FFFFFFF)).astype(np.int64)
    mag = np.where(mag > 0, np.clip(mag + steps, 1, 0x7F7FFFFF), 0)     # zero stays zero, no Inf or NaN
    dev.view(y, np.uint32, n)[:] = sign | mag.astype(np.uint32)
