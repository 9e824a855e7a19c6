import numpy as np

EPS2 = 0.01
_CHUNK = 512  # bodies per step, so that large n never builds an n x n x 3 array


def make_inputs(sizes, rng):
    n = sizes["n"]
    body = np.empty((n, 4), dtype=np.float32)
    body[:, :3] = rng.normal(0.0, 1.0, (n, 3))  # a centrally concentrated cluster
    body[:, 3] = rng.uniform(0.5, 1.5, n)
    return {"body": body}


def reference(inputs, sizes):
    b = inputs["body"].astype(np.float64)
    pos, mass = b[:, :3], b[:, 3]
    acc = np.empty_like(pos)
    for start in range(0, pos.shape[0], _CHUNK):
        d = pos[None, :, :] - pos[start:start + _CHUNK, None, :]  # (chunk, n, 3): r_j - r_i
        r2 = (d * d).sum(axis=2) + EPS2
        w = mass[None, :] / (r2 * np.sqrt(r2))
        acc[start:start + _CHUNK] = np.einsum("ij,ijk->ik", w, d)
    return {"acc": acc}
