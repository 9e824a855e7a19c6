"""K-means assignment. make_inputs draws points around random centroids and redraws every point whose
best and second-best squared distances are closer than a margin that fp32 rounding cannot cross."""

import numpy as np

# Required gap between the two smallest squared distances, relative to |p|^2 + |c|^2 + 1: fp32
# evaluation errors are ~d * 6e-8 of that scale, far below 1e-3.
MARGIN = 1e-3


def _sq_dists(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    p = p.astype(np.float64)
    c = c.astype(np.float64)
    d2 = (p * p).sum(axis=1)[:, None] - 2.0 * (p @ c.T) + (c * c).sum(axis=1)[None, :]
    return np.maximum(d2, 0.0)


_CHUNK = 65536  # points per step, so that large n never builds the whole n x k matrix


def _bad_points(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    bad = np.zeros(p.shape[0], dtype=bool)
    if c.shape[0] < 2:
        return bad
    c_max = (c.astype(np.float64) ** 2).sum(axis=1).max()
    for start in range(0, p.shape[0], _CHUNK):
        pc = p[start:start + _CHUNK]
        two = np.partition(_sq_dists(pc, c), 1, axis=1)[:, :2]
        scale = (pc.astype(np.float64) ** 2).sum(axis=1) + c_max + 1.0
        bad[start:start + _CHUNK] = (two[:, 1] - two[:, 0]) < MARGIN * scale
    return bad


def make_inputs(sizes, rng):
    """Centroids normal(0, 1); each point is a random centroid plus normal(0, 0.5) noise, so the nearest
    centroid is clear for most points and close to a tie for a few."""
    n, k, d = sizes["n"], sizes["k"], sizes["d"]
    centroids = rng.normal(0.0, 1.0, (k, d)).astype(np.float32)

    def draw(m: int) -> np.ndarray:
        home = rng.integers(0, k, m)
        noise = rng.normal(0.0, 0.5, (m, d))
        return (centroids[home] + noise).astype(np.float32)

    points = draw(n)
    bad = np.flatnonzero(_bad_points(points, centroids))
    for _ in range(200):
        if bad.size == 0:
            return {"points": points, "centroids": centroids}
        points[bad] = draw(bad.size)
        bad = bad[_bad_points(points[bad], centroids)]  # only the redrawn points can still be bad
    raise RuntimeError(f"kmeans_assign: could not draw points without near-ties for sizes {sizes}")


def reference(inputs, sizes):
    p, c = inputs["points"], inputs["centroids"]
    labels = np.empty(p.shape[0], dtype=np.int32)
    for start in range(0, p.shape[0], _CHUNK):
        # argmin returns the lowest index on ties
        labels[start:start + _CHUNK] = np.argmin(_sq_dists(p[start:start + _CHUNK], c), axis=1)
    return {"labels": labels}
