import numpy as np


def reference(inputs, sizes):
    x = inputs["logits"].astype(np.float64)
    labels = inputs["labels"].astype(np.int64)
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    picked = x[np.arange(x.shape[0]), labels]
    return {"loss": np.array([np.mean(lse - picked)])}
