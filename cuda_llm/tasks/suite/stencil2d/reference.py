import numpy as np

_ROWS = 512  # rows per step: float64 work on slabs that stay in cache, not on copies of the whole grid


def reference(inputs, sizes):
    a = inputs["inp"]
    h, w = a.shape
    out = a.astype(np.float64)  # boundary cells keep their value
    if h <= 2 or w <= 2:
        return {"out": out}
    for start in range(1, h - 1, _ROWS):
        stop = min(start + _ROWS, h - 1)
        s = a[start - 1:stop + 1].astype(np.float64)  # the slab and one halo row on each side
        o = out[start:stop, 1:-1]
        np.add(s[:-2, 1:-1], s[2:, 1:-1], out=o)
        o += s[1:-1, :-2]
        o += s[1:-1, 2:]
        o *= 0.25
    return {"out": out}
