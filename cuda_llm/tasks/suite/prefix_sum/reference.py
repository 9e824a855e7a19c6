import numpy as np


def reference(inputs, sizes):
    return {"y": np.cumsum(inputs["x"], dtype=np.int64)}
