import numpy as np

EPS = 1e-6


def reference(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    w = inputs["w"].astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    return {"y": x * scale * w[None, :]}
