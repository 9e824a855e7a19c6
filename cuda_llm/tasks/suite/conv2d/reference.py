import numpy as np


def reference(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    w = inputs["w"].astype(np.float64)
    n, c, h, wd = x.shape
    k = w.shape[0]
    xp = np.zeros((n, c, h + 2, wd + 2))
    xp[:, :, 1:-1, 1:-1] = x
    y = np.zeros((n, k, h, wd))
    for di in range(3):
        for dj in range(3):
            patch = xp[:, :, di:di + h, dj:dj + wd]  # n, c, h, w
            y += np.einsum("kc,nchw->nkhw", w[:, :, di, dj], patch, optimize=True)
    return {"y": y}
