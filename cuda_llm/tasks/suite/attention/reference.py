import numpy as np

D = 64
_CHUNK = 1024  # query rows per step, so that large S never builds the whole S x S matrix


def reference(inputs, sizes):
    q = inputs["Q"].astype(np.float64)
    k = inputs["K"].astype(np.float64)
    v = inputs["V"].astype(np.float64)
    out = np.empty_like(q)
    for start in range(0, q.shape[0], _CHUNK):
        s = q[start:start + _CHUNK] @ k.T / np.sqrt(D)
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[start:start + _CHUNK] = p @ v
    return {"O": out}
