import numpy as np


def reference(inputs, sizes):
    return {"out": np.ascontiguousarray(inputs["in"].T)}
