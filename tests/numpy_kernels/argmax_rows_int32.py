"""argmax_rows written as if the output were int32 (`int* out` instead of `long long* out`): the right
values, in the first half of the buffer, as 4-byte numbers; the second half keeps the harness's poison."""
import numpy as np


def solve(dev, x, out, rows, cols):
    dev.view(out, np.int32, rows)[:] = np.argmax(dev.view(x, np.float32, rows * cols).reshape(rows, cols), axis=1)
