"""The benchmark shape's input sets, and their references, kept on disk in the cache.

Memoization must not pay: inside the timing loop the harness writes several input sets into the same
device buffers, so a result cached by pointer, or by a fingerprint cheaper than the work, is wrong for
some of the calls that are checked.

- S0 and S2 are drawn fresh (the task's generators, fixed seeds).
- S1 is S0 with a small scattered part changed (about 1/1024 of the elements, in up to 64 chunks at
  random places): a fingerprint that samples a few positions sees S0 and replays S0's answer, which is
  wrong for S1.
- S3 is S2 changed the same way. It is never used in the timing loop: it is the benchmark shape checked
  again on inputs the process has not seen, after timing.

How an input changes is the task's ``vary`` setting (``replace``: chunks take the other fresh set's values
at the same positions; ``shuffle_rows``: chunks take whole rows from elsewhere in the same array;
``fixed``: never changed), so structural inputs (CSR row pointers, sorted column indices) stay valid.
The changed part grows (x4 at a time) until a replay of any set's answer fails every other set's check
within the task's tolerance; the test over all tasks checks that this holds.

The key of an entry is the task's files, the sizes and the fixed seed of the set: nothing else, so an
overnight run reuses the same entries (the cap in cache_store bounds the whole cache; sets larger than the
cap itself are made for the evaluation and never stored). References are
stored in the output's dtype (float32 for float outputs, the rounding then adds 2^-23 to rtol).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from cuda_llm.tasks.inputs import dims, make_case_inputs, reference_outputs
from cuda_llm.tasks.loader import LoadedTask
from cuda_llm.tasks.model import Param, Sizes
from cuda_llm import cache_store
from cuda_llm.tools.harness import validate
from cuda_llm.tools.harness.checker import tolerance

FORMAT = 1                       # bump when the files or their meaning change
SET_SEEDS = (0x5E70, 0x5E71, 0x5E72, 0x5E73)
FRESH, DERIVED = "fresh", "derived"
# (set index, how it is made, base set, donor set): S1 from S0 with S2's values, S3 from S2 with S0's
PLAN = ((0, FRESH, None, None), (2, FRESH, None, None), (1, DERIVED, 0, 2), (3, DERIVED, 2, 0))
TIMED_SETS = (0, 1, 2)
POST_SET = 3
START_FRACTION = 2.0 ** -10
MAX_CHUNKS = 64
FLOAT32_REF_SLACK = 2.0 ** -23   # added to rtol where a float64 reference was stored as float32

Log = Callable[[str], None]


# ------------------------------------------------------------------------------- changed chunks (pure)
@dataclass
class Chunks:
    """Equal-length runs of elements of one flattened input: ``starts`` (element offsets, sorted), each
    ``length`` elements long, replaced by ``values`` (concatenated in the order of ``starts``)."""

    starts: np.ndarray
    length: int
    values: np.ndarray

    @property
    def count(self) -> int:
        return int(self.starts.size) * self.length


def _row_len(p: Param, shape: tuple[int, ...]) -> int:
    return int(np.prod(shape[1:], dtype=np.int64)) if (p.vary == "shuffle_rows" and len(shape) > 1) else 1


def draw_chunks(p: Param, base: np.ndarray, donor: np.ndarray, rng: np.random.Generator, fraction: float) -> Chunks | None:
    """Which elements of ``base`` change in a derived set, and to what (None: the input stays)."""
    if p.vary == "fixed" or base.size == 0:
        return None
    flat_base, flat_donor = base.reshape(-1), donor.reshape(-1)
    row = _row_len(p, base.shape)
    rows = base.size // row
    changed = max(1, int(np.ceil(rows * min(1.0, fraction))))
    n_chunks = min(MAX_CHUNKS, changed)
    run = int(np.ceil(changed / n_chunks))                 # rows per chunk
    slots = rows // run
    n_chunks = min(n_chunks, slots)
    if n_chunks == 0:
        return None
    picked = np.sort(rng.choice(slots, size=n_chunks, replace=False))
    length = run * row
    starts = (picked * length).astype(np.int64)
    if p.vary == "shuffle_rows":
        if slots < 2:
            return None
        src = rng.integers(0, slots - 1, size=n_chunks)
        src = np.where(src >= picked, src + 1, src)        # another slot than the one replaced
        values = np.concatenate([flat_base[s * length:(s + 1) * length] for s in src])
    else:
        values = np.concatenate([flat_donor[s:s + length] for s in starts])
    return Chunks(starts=starts, length=length, values=np.ascontiguousarray(values.astype(base.dtype)))


def apply_chunks(base: np.ndarray, chunks: Chunks | None) -> np.ndarray:
    """A copy of ``base`` with the chunks written in."""
    out = np.array(base, copy=True)
    if chunks is not None:
        flat = out.reshape(-1)
        for k, s in enumerate(chunks.starts):
            flat[s:s + chunks.length] = chunks.values[k * chunks.length:(k + 1) * chunks.length]
    return out


def replay_fails(loaded: LoadedTask, sizes: Sizes, replayed: dict[str, np.ndarray], expected: dict[str, np.ndarray],
                 rel_slack: float = 0.0) -> bool:
    """Would a kernel that returns ``replayed`` (another set's reference, written in the output dtype) fail
    the check against ``expected``? The property that makes a replay detectable."""
    for p in loaded.task.outputs:
        got = np.asarray(replayed[p.name]).astype(np.dtype(p.dtype.numpy), copy=False)
        atol, rtol = tolerance(loaded.task, p, sizes)
        if not validate.passes(got, expected[p.name], (atol, rtol + rel_slack)):
            return True
    return False


def compact_reference(p: Param, ref: np.ndarray) -> tuple[np.ndarray, float]:
    """The reference in the output's dtype where that loses nothing the check needs: (array, rtol slack)."""
    want = np.dtype(p.dtype.numpy)
    if ref.dtype == want:
        return ref, 0.0
    if not p.dtype.is_float:
        cast = ref.astype(want)
        return (cast, 0.0) if np.array_equal(cast, ref) else (ref, 0.0)
    if ref.dtype.kind == "f" and ref.dtype.itemsize > 4:
        r32 = ref.astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(r32.astype(np.float64) - ref)
            ok = bool(np.all((err <= 2.0 ** -24 * np.abs(ref)) | (r32 == ref) | np.isnan(ref)))
        if ok:                                    # no overflow to Inf, no underflow below float32's normals
            return r32, FLOAT32_REF_SLACK
    return ref, 0.0


# ------------------------------------------------------------------------------------------ the sets
@dataclass
class InputSet:
    """One input set at the benchmark shape: full inputs (fresh sets) or chunks over a base set (derived)."""

    index: int
    kind: str
    folder: Path | None
    expected: dict[str, np.ndarray]
    rel_slack: float = 0.0
    inputs: dict[str, np.ndarray] = field(default_factory=dict)      # fresh sets
    base: int | None = None                                          # derived sets
    chunks: dict[str, Chunks] = field(default_factory=dict)
    fraction: float = 0.0

    def input_files(self) -> dict[str, str]:
        assert self.folder is not None
        return {n: str(self.folder / f"in_{n}.npy") for n in self.inputs}

    def chunk_files(self) -> dict[str, dict]:
        assert self.folder is not None
        return {n: {"starts": str(self.folder / f"chg_{n}_starts.npy"), "values": str(self.folder / f"chg_{n}_values.npy"),
                    "length": c.length} for n, c in self.chunks.items()}


@dataclass
class BenchSets:
    """S0..S3 at one shape; ``sets[i]`` is set i. Holds the cache entries in use until ``close``."""

    sizes: Sizes
    sets: dict[int, InputSet]
    distinct: bool
    seconds: float
    made: int = 0                                   # entries written now (0: everything came from the cache)
    _stack: ExitStack = field(default_factory=ExitStack, repr=False)

    def full_inputs(self, index: int) -> dict[str, np.ndarray]:
        s = self.sets[index]
        if s.kind == FRESH:
            return s.inputs
        base = self.full_inputs(s.base)  # type: ignore[arg-type]
        return {n: apply_chunks(a, s.chunks.get(n)) for n, a in base.items()}

    def plan(self) -> dict:
        """What the worker needs to build the sets on the device: files only, never a reference."""
        out = {}
        for i, s in self.sets.items():
            if s.kind == FRESH:
                out[str(i)] = {"kind": FRESH, "inputs": s.input_files()}
            else:
                out[str(i)] = {"kind": DERIVED, "base": s.base, "chunks": s.chunk_files()}
        return out

    def close(self) -> None:
        self._stack.close()


def _task_hash(loaded: LoadedTask) -> str:
    h = hashlib.sha256()
    folder = loaded.task.folder
    for f in ("task.toml", "reference.py"):
        p = Path(folder) / f if folder else None
        h.update(p.read_bytes() if p is not None and p.exists() else loaded.task.model_dump_json().encode())
    return h.hexdigest()


def entry_key(loaded: LoadedTask, sizes: Sizes, index: int) -> str:
    """task files + sizes + the set's fixed seed (and, for a derived set, its base and donor)."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "task": _task_hash(loaded), "sizes": dict(sorted(sizes.items())),
                         "set": index, "seeds": SET_SEEDS, "start_fraction": START_FRACTION}).encode())
    return f"{loaded.task.name}-s{index}-{h.hexdigest()[:16]}"


def _load_entry(folder: Path, loaded: LoadedTask) -> InputSet | None:
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != FORMAT or not (folder / "done").exists():
            return None
        expected = {p.name: np.load(folder / f"ref_{p.name}.npy", mmap_mode="r") for p in loaded.task.outputs}
        s = InputSet(index=meta["set"], kind=meta["kind"], folder=folder, expected=expected,
                     rel_slack=meta["rel_slack"], fraction=meta.get("fraction", 0.0))
        if s.kind == FRESH:
            s.inputs = {p.name: np.load(folder / f"in_{p.name}.npy", mmap_mode="r") for p in loaded.task.inputs}
        else:
            s.base = meta["base"]
            for n, length in meta["chunks"].items():
                s.chunks[n] = Chunks(starts=np.load(folder / f"chg_{n}_starts.npy"), length=int(length),
                                     values=np.load(folder / f"chg_{n}_values.npy", mmap_mode="r"))
        return s
    except (OSError, ValueError, KeyError):
        return None


def _write_entry(folder: Path, s: InputSet, distinct: bool) -> None:
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}-{time.monotonic_ns()}")
    tmp.mkdir(parents=True)
    try:
        for n, a in s.expected.items():
            np.save(tmp / f"ref_{n}.npy", a)
        for n, a in s.inputs.items():
            np.save(tmp / f"in_{n}.npy", a)
        for n, c in s.chunks.items():
            np.save(tmp / f"chg_{n}_starts.npy", c.starts)
            np.save(tmp / f"chg_{n}_values.npy", c.values)
        meta = {"format": FORMAT, "set": s.index, "kind": s.kind, "base": s.base, "rel_slack": s.rel_slack,
                "fraction": s.fraction, "distinct": distinct, "chunks": {n: c.length for n, c in s.chunks.items()}}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        (tmp / "done").write_text("ok")
        try:
            os.rename(tmp, folder)
        except OSError:            # another evaluation wrote the same entry first: the same data
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compact(loaded: LoadedTask, ref: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
    out, slack = {}, 0.0
    for p in loaded.task.outputs:
        out[p.name], s = compact_reference(p, np.asarray(ref[p.name]))
        slack = max(slack, s)
    return out, slack


def make_sets(loaded: LoadedTask, sizes: Sizes, log: Log = lambda m: None) -> tuple[dict[int, InputSet], bool]:
    """S0..S3 in memory (no files): fresh sets drawn, derived ones grown until every replay fails.

    The inputs of all four sets are cheap (the derived ones are the fresh ones with chunks written in), so
    they are made first and the four references, the costly part, are computed side by side (NumPy releases
    the GIL in the heavy work: about a third of the serial time for a 64M-element task on 4 cores). Then
    every replay is checked; a derived set whose replay would pass is grown (x4) and checked again."""
    fresh = [i for i, k, _, _ in PLAN if k == FRESH]
    derived = [(i, b, d) for i, k, b, d in PLAN if k == DERIVED]
    with ThreadPoolExecutor(max_workers=len(PLAN), thread_name_prefix="benchdata") as pool:
        inputs = dict(zip(fresh, pool.map(
            lambda i: make_case_inputs(loaded, sizes, np.random.default_rng(SET_SEEDS[i])), fresh)))
        chunks = {i: _draw_all_chunks(loaded, i, inputs[b], inputs[d], START_FRACTION) for i, b, d in derived}
        for i, b, _ in derived:
            inputs[i] = {n: apply_chunks(a, chunks[i].get(n)) for n, a in inputs[b].items()}
        order = fresh + [i for i, _, _ in derived]
        refs = dict(zip(order, pool.map(lambda i: _compact(loaded, reference_outputs(loaded, inputs[i], sizes)),
                                        order)))
    sets: dict[int, InputSet] = {}
    for i in fresh:
        sets[i] = InputSet(index=i, kind=FRESH, folder=None, expected=refs[i][0], rel_slack=refs[i][1],
                           inputs=inputs[i])
        log(f"benchmark data: set S{i} drawn")
    for i, b, _ in derived:
        sets[i] = InputSet(index=i, kind=DERIVED, folder=None, expected=refs[i][0], rel_slack=refs[i][1], base=b,
                           chunks=chunks[i], fraction=START_FRACTION)
    distinct = True
    for k, a in enumerate(fresh):                # two fresh sets must differ too
        for b in fresh[k + 1:]:
            distinct &= _replays_fail(loaded, sizes, sets[a], sets[b])
    for i, b, d in derived:
        others = [sets[j] for j in sorted(sets) if j != i]
        if all(_replays_fail(loaded, sizes, sets[i], o) for o in others):
            log(f"benchmark data: set S{i} derived from S{b} ({_changed(sets[i])} elements changed)")
            continue
        sets[i], ok = _derive(loaded, sizes, i, sets[b], sets[d], others, log, start=START_FRACTION * 4)
        distinct &= ok
    return sets, distinct


def _replays_fail(loaded: LoadedTask, sizes: Sizes, x: InputSet, y: InputSet) -> bool:
    """Neither set's reference passes the other's check."""
    return (replay_fails(loaded, sizes, x.expected, y.expected, y.rel_slack)
            and replay_fails(loaded, sizes, y.expected, x.expected, x.rel_slack))


def _changed(s: InputSet) -> int:
    return sum(c.count for c in s.chunks.values())


def _draw_all_chunks(loaded: LoadedTask, index: int, base: dict[str, np.ndarray], donor: dict[str, np.ndarray],
                     fraction: float) -> dict[str, Chunks]:
    """The chunks of derived set ``index`` at ``fraction`` (the same for the same set and fraction)."""
    rng = np.random.default_rng(SET_SEEDS[index])
    return {p.name: c for p in loaded.task.inputs
            if (c := draw_chunks(p, base[p.name], donor[p.name], rng, fraction)) is not None}


def _derive(loaded: LoadedTask, sizes: Sizes, index: int, base: InputSet, donor: InputSet, others: list[InputSet],
            log: Log, start: float = START_FRACTION) -> tuple[InputSet, bool]:
    """Derived set ``index`` grown from ``start`` until no replay between it and ``others`` passes."""
    fraction = min(1.0, start)
    while True:
        chunks = _draw_all_chunks(loaded, index, base.inputs, donor.inputs, fraction)
        inputs = {n: apply_chunks(a, chunks.get(n)) for n, a in base.inputs.items()}
        expected, slack = _compact(loaded, reference_outputs(loaded, inputs, sizes))
        s = InputSet(index=index, kind=DERIVED, folder=None, expected=expected, rel_slack=slack, base=base.index,
                     chunks=chunks, fraction=fraction)
        ok = all(_replays_fail(loaded, sizes, s, o) for o in others)
        if ok or fraction >= 1.0 or not chunks:
            log(f"benchmark data: set S{index} derived from S{base.index} ({_changed(s)} elements changed)")
            return s, ok
        fraction = min(1.0, fraction * 4)


def prepare(loaded: LoadedTask, sizes: Sizes, root: Path | None, log: Log = lambda m: None) -> BenchSets:
    """The four sets, from the cache where they are (and held in use until ``close``), else made and stored.
    ``root=None``: no cache, everything in memory."""
    t0 = time.perf_counter()
    sizes = dict(sizes)
    if root is not None and entry_bytes(loaded, sizes) * len(PLAN) > cache_store.max_bytes():
        log(f"benchmark data: {entry_bytes(loaded, sizes) * len(PLAN) / 2**30:.1f} GB of sets, over the cache cap: "
            f"made for this evaluation only, not stored")
        root = None
    if root is None:
        sets, distinct = make_sets(loaded, sizes, log)
        return BenchSets(sizes=sizes, sets=sets, distinct=distinct, seconds=time.perf_counter() - t0, made=len(sets))
    folder = Path(root) / "benchdata"
    folder.mkdir(parents=True, exist_ok=True)
    stack = ExitStack()
    try:
        sets: dict[int, InputSet] = {}
        for index, *_ in PLAN:
            d = folder / entry_key(loaded, sizes, index)
            if stack.enter_context(cache_store.in_use(d)):
                got = _load_entry(d, loaded)
                if got is not None:
                    sets[index] = got
        made = 0
        distinct = True
        if len(sets) < len(PLAN):
            log("benchmark data: making the input sets and their references (once per task and shape)")
            fresh, distinct = make_sets(loaded, sizes, log)
            for index, s in fresh.items():
                if index in sets:
                    continue
                d = folder / entry_key(loaded, sizes, index)
                _write_entry(d, s, distinct)
                made += 1
                if stack.enter_context(cache_store.in_use(d)) and (got := _load_entry(d, loaded)) is not None:
                    sets[index] = got
                else:              # could not be stored (disk full?): keep the data in memory
                    sets[index] = s
            cache_store.enforce_cap(Path(root), keep=[folder / entry_key(loaded, sizes, i) for i, *_ in PLAN])
        else:
            distinct = all(_meta_distinct(s) for s in sets.values())
        bench = BenchSets(sizes=sizes, sets=sets, distinct=distinct, seconds=time.perf_counter() - t0, made=made)
        bench._stack = stack
        return bench
    except BaseException:
        stack.close()
        raise


def entry_bytes(loaded: LoadedTask, sizes: Sizes) -> int:
    """One set's size on disk: every input and output at ``sizes`` (KernelBench's are gigabytes)."""
    task = loaded.task
    total = 0
    for p in task.params:
        if p.kind == "pointer":
            total += int(np.prod(dims(p, sizes), dtype=np.int64)) * np.dtype(p.dtype.numpy).itemsize
    return total


def _meta_distinct(s: InputSet) -> bool:
    try:
        return bool(json.loads((Path(s.folder) / "meta.json").read_text()).get("distinct", True))  # type: ignore[arg-type]
    except (OSError, ValueError):
        return True


def output_shapes(loaded: LoadedTask, sizes: Sizes) -> dict[str, tuple[tuple[int, ...], str]]:
    return {p.name: (dims(p, sizes), p.dtype.numpy) for p in loaded.task.outputs}
