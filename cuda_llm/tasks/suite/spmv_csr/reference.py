"""SpMV in CSR form. make_inputs builds a matrix with power-law (Pareto) row lengths: most rows are
short, a few are long (up to max_row), some are empty, as in web graphs and FEM/circuit matrices."""

import numpy as np

PARETO_SHAPE = 1.5


def row_lengths(m: int, n: int, nnz: int, max_row: int, rng: np.random.Generator) -> np.ndarray:
    """M row lengths summing to exactly nnz, each <= min(n, max_row), power-law distributed."""
    cap = min(n, max_row)
    if nnz > m * cap:
        raise ValueError(f"spmv_csr: nnz={nnz} does not fit in M={m} rows of at most {cap} entries")
    weights = rng.pareto(PARETO_SHAPE, size=m) + 0.05
    lengths = rng.multinomial(nnz, weights / weights.sum()).astype(np.int64)
    # Clip rows above the cap and hand the excess to rows that still have room, until none is left.
    while True:
        excess = int(np.maximum(lengths - cap, 0).sum())
        lengths = np.minimum(lengths, cap)
        if excess == 0:
            return lengths
        room = cap - lengths
        open_rows = np.flatnonzero(room > 0)
        add = rng.multinomial(excess, room[open_rows] / room[open_rows].sum())
        lengths[open_rows] += add


def make_inputs(sizes, rng):
    """Power-law row lengths (many short rows, a few up to max_row long, some empty) summing to nnz;
    sorted, distinct columns spread over [0, N); values and x normal(0, 1)."""
    m, n, nnz, max_row = sizes["M"], sizes["N"], sizes["nnz"], sizes["max_row"]
    lengths = row_lengths(m, n, nnz, max_row, rng)
    row_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    # Distinct, sorted columns per row: entry t of a row of length L lies in the t-th of L equal
    # integer strata of [0, n) (each at least one column wide since L <= n), at a random offset.
    row_of = np.repeat(np.arange(m, dtype=np.int64), lengths)
    t = np.arange(nnz, dtype=np.int64) - row_ptr[row_of]
    length = lengths[row_of]
    lo = t * n // np.maximum(length, 1)
    hi = (t + 1) * n // np.maximum(length, 1)
    cols = lo + (rng.random(nnz) * (hi - lo)).astype(np.int64)
    cols = np.minimum(cols, hi - 1)
    return {
        "row_ptr": row_ptr.astype(np.int32),
        "col_idx": cols.astype(np.int32),
        "vals": rng.normal(0.0, 1.0, nnz).astype(np.float32),
        "x": rng.normal(0.0, 1.0, n).astype(np.float32),
    }


def reference(inputs, sizes):
    row_ptr = inputs["row_ptr"].astype(np.int64)
    cols = inputs["col_idx"].astype(np.int64)
    vals = inputs["vals"].astype(np.float64)
    x = inputs["x"].astype(np.float64)
    m = row_ptr.shape[0] - 1
    lengths = np.diff(row_ptr)
    rows = np.repeat(np.arange(m), lengths)
    y = np.bincount(rows, weights=vals * x[cols], minlength=m)
    return {"y": y}
