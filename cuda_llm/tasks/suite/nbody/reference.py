"""All-pairs n-body accelerations in float64. For a block of bodies i, |r_j - r_i|^2 comes from one
matrix product (|r_i|^2 + |r_j|^2 - 2 r_i.r_j, exact enough in float64 beside the 0.01 softening) and
acc_i = sum_j w_ij r_j - (sum_j w_ij) r_i from another, so large n costs BLAS time, not Python loops."""

import numpy as np

EPS2 = 0.01
_CHUNK = 1024  # bodies per step, so that large n never builds an n x n array


def make_inputs(sizes, rng):
    n = sizes["n"]
    body = np.empty((n, 4), dtype=np.float32)
    body[:, :3] = rng.normal(0.0, 1.0, (n, 3))  # a centrally concentrated cluster
    body[:, 3] = rng.uniform(0.5, 1.5, n)
    return {"body": body}


def reference(inputs, sizes):
    b = inputs["body"].astype(np.float64)
    pos, mass = np.ascontiguousarray(b[:, :3]), b[:, 3]
    sq = (pos * pos).sum(axis=1)
    acc = np.empty_like(pos)
    for start in range(0, pos.shape[0], _CHUNK):
        p = pos[start:start + _CHUNK]
        r2 = sq[start:start + _CHUNK, None] + sq[None, :] - 2.0 * (p @ pos.T)
        np.maximum(r2, 0.0, out=r2)  # rounding can leave -1e-16 where i == j
        r2 += EPS2
        w = np.sqrt(r2)
        w *= r2
        np.divide(mass[None, :], w, out=w)  # w_ij = m_j / (r2 + eps^2)^(3/2); the i == j term has r_j - r_i = 0
        acc[start:start + _CHUNK] = w @ pos - w.sum(axis=1)[:, None] * p
    return {"acc": acc}
