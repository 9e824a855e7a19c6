"""Which input set each timed call uses, and which calls' outputs are kept for checking: pure, from a seed.

The sets are taken in shuffled blocks (every block of three calls uses each set once, in a random order),
so every set is timed from the third call on and consecutive calls usually see different contents. The
kept outputs are a reservoir sample per set: the output of any call of a set has the same chance of being
the one checked, wherever it falls in the loop, and only ``slots_per_set`` copies exist at any time.

The worker draws from a ``Schedule`` call by call (it cannot know in advance how many calls the stopping
rule will allow); the parent replays the same seed for the number of calls that arrived and so knows
which set every call used and which call each kept output must come from.
"""

from __future__ import annotations

import numpy as np


class Schedule:
    """Call by call: (set index, slot to keep this call's output in, or None)."""

    def __init__(self, seed: int, sets: tuple[int, ...] | list[int] = (0, 1, 2), slots_per_set: int = 1):
        if not sets:
            raise ValueError("a schedule needs at least one input set")
        self._rng = np.random.default_rng([seed, 0x5C4ED])
        self.sets = list(sets)
        self.slots_per_set = slots_per_set
        self._block: list[int] = []
        self._seen = {s: 0 for s in self.sets}

    def next(self) -> tuple[int, int | None]:
        if not self._block:
            self._block = [self.sets[i] for i in self._rng.permutation(len(self.sets))]
        s = self._block.pop()
        self._seen[s] += 1
        n = self._seen[s]
        k = self.slots_per_set
        if k <= 0:
            return s, None
        j = n - 1 if n <= k else int(self._rng.integers(n))
        if j >= k:
            return s, None
        return s, self.sets.index(s) * k + j


def replay(seed: int, calls: int, sets: tuple[int, ...] | list[int] = (0, 1, 2), slots_per_set: int = 1
           ) -> tuple[list[int], dict[int, int]]:
    """(the set of every call, {slot: the call whose output it holds at the end})."""
    sched = Schedule(seed, sets, slots_per_set)
    used: list[int] = []
    kept: dict[int, int] = {}
    for i in range(calls):
        s, slot = sched.next()
        used.append(s)
        if slot is not None:
            kept[slot] = i
    return used, kept


def slot_set(slot: int, sets: tuple[int, ...] | list[int] = (0, 1, 2), slots_per_set: int = 1) -> int:
    return list(sets)[slot // slots_per_set]
