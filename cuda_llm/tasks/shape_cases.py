"""The sizes of a PyTorch task's correctness cases besides the file's own: pure, no torch.

A KernelBench file has one shape, often with equal sizes (N = M = 4096, in = out = 8192), so a kernel
that swaps two dimensions or hard-codes the sizes would pass a check at that shape alone. The import
varies the file's size constants: each case gives every large constant a different, smaller value, odd
where the module allows (so no size is a multiple of a tile), distinct from the other constants of the
case (so equal sizes become different). Where odd sizes break the module (groups, heads, a pooling
window) the same is tried with the file's values halved, which keeps their divisibility. torch_import
checks every candidate with a dry run on the meta device and shrinks it to a small cost.
"""

from __future__ import annotations

ODD_BASES = (37, 19, 53, 27, 45, 23, 31, 41)     # case k's first size; the j-th constant adds 2 j
KEEP_BELOW = 9                                    # smaller constants (kernel sizes, 3 channels) stay
CASES = 6                                         # 4 shown, 2 held out
SHOWN = 4


def odd_case(values: dict[str, int], k: int, keep_equal: bool = False) -> dict[str, int]:
    """Case ``k``: every constant of at least KEEP_BELOW takes an odd value below its own, distinct
    from the case's other constants (``keep_equal``: constants of equal value keep one value, for a
    module that needs them equal, such as a depthwise convolution's channels and groups)."""
    if keep_equal:
        return _grouped(odd_case, values, k)
    out: dict[str, int] = {}
    taken: set[int] = set()
    for j, (c, v) in enumerate(values.items()):
        if v < KEEP_BELOW:
            continue
        odds = [x for x in range(v - 1, 2, -1) if x % 2 == 1]
        t = ODD_BASES[k % len(ODD_BASES)] + 2 * j
        pick = t if t < v else odds[(k + j) % len(odds)]
        while pick in taken and pick - 2 >= 3:
            pick -= 2
        taken.add(pick)
        out[c] = pick
    return out


def halved_case(values: dict[str, int], k: int, keep_equal: bool = False, again: bool = True) -> dict[str, int]:
    """Case ``k`` keeping divisibility: each large constant halved down to at most 64, then (``again``)
    halved 0-2 times more by its position and the case, so equal constants differ in most cases."""
    if keep_equal:
        return _grouped(halved_case, values, k)
    out: dict[str, int] = {}
    for j, (c, v) in enumerate(values.items()):
        if v < KEEP_BELOW:
            continue
        x = v
        while x > 64 and x % 2 == 0:
            x //= 2
        for _ in range((j + k) % 3 if again else 0):
            if x % 2 == 0 and x >= 8:
                x //= 2
        out[c] = x
    return out


def shrink(case: dict[str, int], floor: int = 3) -> dict[str, int] | None:
    """The case with its largest value cut to about 3/5 (an odd value stays odd); None when nothing can shrink."""
    big = [(v, c) for c, v in case.items() if v > floor]
    if not big:
        return None
    v, c = max(big)
    new = max(floor, v * 3 // 5)
    if v % 2 == 1 and new % 2 == 0:
        new = new - 1 if new - 1 >= floor else new + 1
    if new >= v:
        return None
    return {**case, c: new}


def _grouped(make, values: dict[str, int], k: int) -> dict[str, int]:
    """``make`` over one representative per value; constants of equal value take their representative's."""
    first: dict[int, str] = {}
    for c, v in values.items():
        first.setdefault(v, c)
    chosen = make({c: values[c] for c in first.values()}, k)
    return {c: chosen[first[v]] for c, v in values.items() if first[v] in chosen}
