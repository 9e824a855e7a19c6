import numpy as np


def reference(inputs, sizes):
    a = inputs["inp"].astype(np.float64)
    out = a.copy()
    if a.shape[0] > 2 and a.shape[1] > 2:
        out[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    return {"out": out}
