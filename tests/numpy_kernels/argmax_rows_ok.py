"""Honest argmax_rows (examples/torch/modules/argmax_rows.py): the int64 index of each row's maximum."""
import numpy as np


def solve(dev, x, out, rows, cols):
    dev.view(out, np.int64, rows)[:] = np.argmax(dev.view(x, np.float32, rows * cols).reshape(rows, cols), axis=1)
