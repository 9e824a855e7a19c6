import numpy as np

_POOL = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1, 12345, 2**16], dtype=np.uint32)


def make_inputs(sizes, rng):
    """Uniform 32-bit keys; about 1 in 8 replaced by a few repeated values, the extremes included."""
    n = sizes["n"]
    keys = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    dup = rng.random(n) < 0.125
    keys[dup] = rng.choice(_POOL, size=int(dup.sum()))
    return {"keys_in": keys}


def reference(inputs, sizes):
    # Keys only: equal keys are indistinguishable, so stability does not matter (and the default
    # sort is ten times faster than the stable one on 64M keys).
    return {"keys_out": np.sort(inputs["keys_in"])}
