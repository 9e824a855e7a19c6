import numpy as np


def reference(inputs, sizes):
    return {"out": np.array([inputs["x"].sum(dtype=np.float64)])}
