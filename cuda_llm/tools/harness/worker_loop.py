"""What the GPU worker does, written against a small Device interface (gpu_worker.PycudaDevice on a GPU).

The worker only runs the candidate: it reads inputs the parent wrote, calls solve(), and hands back raw
data (outputs, inputs after the call, guard bytes) and times. It computes no reference and gives no
verdict, so nothing the candidate does to this process's Python state can change one (checker.py runs in
the parent). Commands arrive as JSON lines on stdin, events leave as JSON lines on their own pipe
(worker_protocol.py); progress lines go to stderr for the log.

The timing loop (``time``): the benchmark-shape input sets are staged on the device once; before every
timed call the call's set (timing_plan.Schedule) is copied into the same input buffers, the outputs are
poisoned, a buffer twice the L2's size is written (no input served from L2), the persisting-L2 limit is
set to 0 and its lines reset, and the device is synchronized; then events around solve(), and the whole
device synchronized again. Kept outputs are copied aside outside the timed region. A loop without solve()
follows, for the parent's clock check; then the benchmark shape on an input set the loop never used.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from cuda_llm.tasks import LoadedTask
from cuda_llm.tasks.inputs import dims, scalar_value
from cuda_llm.tasks.model import SCALAR_DTYPES
from cuda_llm.tools.harness import timing_stats, transport, validate
from cuda_llm.tools.harness.event_channel import write_all
from cuda_llm.tools.harness.timing_plan import Schedule
from cuda_llm.tools.harness.worker_protocol import (EXIT_CUDA_FAULT, EXIT_HARNESS, EXIT_OK, GUARD_BYTE, GUARD_BYTES,
                                            CallCheck, TimeCommand, decode, encode)

STAGING_HEADROOM = 512 << 20     # device memory left free when the input sets are staged


class DeviceFault(Exception):
    """A CUDA error while the candidate's work ran: the context is unusable afterwards."""


class Device(Protocol):
    """The operations the worker needs; every copy and memset is ordered on the default stream."""

    name: str
    l2_bytes: int
    flush_bytes: int                                   # written before every timed call: evicts the L2

    def alloc(self, nbytes: int) -> int: ...
    def free(self, ptr: int) -> None: ...
    def memset_d8(self, ptr: int, value: int, count: int) -> None: ...
    def memset_d32(self, ptr: int, value: int, count: int) -> None: ...
    def htod(self, ptr: int, host: np.ndarray) -> None: ...
    def dtoh(self, host: np.ndarray, ptr: int) -> None: ...
    def dtod(self, dst: int, src: int, nbytes: int) -> None: ...
    def sync(self) -> None: ...                       # whole device; raises DeviceFault
    def free_memory(self) -> int: ...
    def staging(self, nbytes: int) -> np.ndarray: ...  # a reused host buffer (page-locked where possible), uint8
    def reset_persisting_l2(self) -> None: ...        # limit 0 and every persisting line normal again
    def launch_error(self) -> str | None: ...
    def load(self, so_path: str, entry: str) -> Any: ...
    def bind(self, fn: Any, args: list[tuple[str, Any]]) -> Callable[[], None]: ...
    def timed(self, call: Callable[[], None]) -> tuple[float, float, float]: ...   # event, host, hidden ms
    def load_compare(self, lib: str | None) -> None: ...                            # device_compare.py's build
    def compare(self, got: int, got_dtype: str, want: int, want_dtype: str, count: int, atol: float, rtol: float,
                exact: bool) -> int: ...                                            # elements outside; <0 error


_T0 = time.perf_counter()


def progress(msg: str) -> None:
    """One line on stderr, with the seconds since the worker started (worker_stderr.log)."""
    print(f"[gpu-worker] +{time.perf_counter() - _T0:.2f}s {msg}", file=sys.stderr, flush=True)


class Events:
    """JSON lines on the events channel; one message per event (the parent stamps each with its send time)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, ev: str, **fields: Any) -> None:
        write_all(self.fd, encode({"ev": ev, **fields}))


# --------------------------------------------------------------------------------------------- buffers
class Buffers:
    """Device buffers for one set of sizes (guard bytes after each), and the arguments of solve()."""

    def __init__(self, dev: Device, loaded: LoadedTask, sizes: dict[str, int]):
        self.dev, self.task, self.sizes = dev, loaded.task, dict(sizes)
        self.ptr: dict[str, int] = {}
        self.nbytes: dict[str, int] = {}
        self.words: dict[str, int] = {}
        self.shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        args: list[tuple[str, Any]] = []
        try:
            for p in self.task.params:
                if p.kind == "pointer":
                    shape, dtype = dims(p, sizes), np.dtype(p.dtype.numpy)
                    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                    words = max(1, (nbytes + 3) // 4)
                    ptr = dev.alloc(words * 4 + GUARD_BYTES)
                    self.ptr[p.name], self.nbytes[p.name], self.words[p.name] = ptr, nbytes, words
                    self.shapes[p.name] = (shape, dtype)
                    dev.memset_d8(ptr + words * 4, GUARD_BYTE, GUARD_BYTES)
                    args.append(("ptr", ptr))
                else:
                    if p.dtype not in SCALAR_DTYPES:
                        raise ValueError(f"scalar parameter {p.name}: dtype {p.dtype.value} is not supported")
                    args.append((p.dtype.value, scalar_value(p, sizes)))
        except BaseException:
            self.free()
            raise
        self.args = args

    def upload(self, name: str, host: np.ndarray) -> None:
        if self.nbytes[name]:
            self.dev.htod(self.ptr[name], np.ascontiguousarray(host))

    def poison(self) -> None:
        """Every output filled with its dtype's poison by 32-bit words (a whole buffer rounded up to words):
        poison_word32 is one float32/int32 element, two float16 halves, half of an int64's 64-bit sentinel."""
        for p in self.task.outputs:
            self.dev.memset_d32(self.ptr[p.name], validate.poison_word32(self.shapes[p.name][1]), self.words[p.name])

    def guards(self) -> np.ndarray:
        names = list(self.ptr)
        out = np.empty((len(names), GUARD_BYTES), dtype=np.uint8)
        for i, n in enumerate(names):
            self.dev.dtoh(out[i], self.ptr[n] + self.words[n] * 4)
        return out

    def hand_back(self, folder: Path, *, inputs: bool = True) -> None:
        """Outputs (and the inputs as they are now, and the guard bytes) as .npy files in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        names = [p.name for p in self.task.outputs] + ([p.name for p in self.task.inputs] if inputs else [])
        for i, n in enumerate(names):
            kind = "out" if i < len(self.task.outputs) else "after"
            hand_back(self.dev, folder / f"{kind}_{n}.npy", self.ptr[n], *self.shapes[n])
        if inputs:
            transport.write_array(folder / "guard.npy", self.guards())

    def free(self) -> None:
        for ptr in self.ptr.values():
            self.dev.free(ptr)
        self.ptr = {}


HAND_BACK_CHUNK = 64 << 20       # bytes per device-to-host copy: the page-locked staging buffer stays small


def hand_back(dev: Device, path: Path, ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Device memory to a .npy file for the parent: chunk by chunk through the page-locked staging buffer,
    each chunk one bulk write."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        if nbytes:
            stage = dev.staging(min(nbytes, HAND_BACK_CHUNK))
            for off in range(0, nbytes, HAND_BACK_CHUNK):
                n = min(HAND_BACK_CHUNK, nbytes - off)
                dev.dtoh(stage[:n], ptr + off)
                f.write(memoryview(stage[:n]))


# ------------------------------------------------------------------------------------------ input sets
class SetStore:
    """The benchmark's input sets, staged on the device when it has room (else copied from the host each
    time), and written into the solve() buffers on demand."""

    def __init__(self, dev: Device, loaded: LoadedTask, buf: Buffers, plan: dict[str, dict[str, Any]],
                 needed: list[int]):
        self.dev, self.buf = dev, buf
        self.inputs = [p.name for p in loaded.task.inputs]
        self.host: dict[int, dict[str, np.ndarray]] = {}
        self.chunks: dict[int, dict[str, tuple[np.ndarray, int, np.ndarray]]] = {}
        self.base: dict[int, int] = {}
        for key, spec in plan.items():
            i = int(key)
            if spec["kind"] == "fresh":
                self.host[i] = {n: transport.read_array(Path(f)) for n, f in spec["inputs"].items()}
            else:
                self.base[i] = int(spec["base"])
                self.chunks[i] = {n: (np.load(c["starts"]), int(c["length"]), transport.read_array(Path(c["values"])))
                                  for n, c in spec["chunks"].items()}
        self.needed = needed
        self.staged: dict[int, dict[str, int]] = {}
        need = sum(buf.nbytes[n] for n in self.inputs) * len(needed)
        if dev.free_memory() > need + STAGING_HEADROOM:
            for i in sorted(needed, key=lambda s: s in self.base):     # fresh sets first: derived ones copy them
                self.staged[i] = {}
                for n in self.inputs:
                    ptr = dev.alloc(max(1, buf.nbytes[n]))
                    self.staged[i][n] = ptr
                    if i in self.base:
                        if buf.nbytes[n]:
                            dev.dtod(ptr, self.staged[self.base[i]][n], buf.nbytes[n])
                        self._write_chunks(ptr, i, n)
                    else:
                        if buf.nbytes[n]:
                            dev.htod(ptr, np.ascontiguousarray(self.host[i][n]))
            dev.sync()
        else:
            for i in needed:
                if i in self.base:
                    self.host[i] = {n: self._materialize(i, n) for n in self.inputs}

    def _write_chunks(self, ptr: int, i: int, name: str) -> None:
        got = self.chunks[i].get(name)
        if got is None:
            return
        starts, length, values = got
        item = self.buf.shapes[name][1].itemsize
        for k, s in enumerate(starts):
            self.dev.htod(ptr + int(s) * item, np.ascontiguousarray(values[k * length:(k + 1) * length]))

    def _materialize(self, i: int, name: str) -> np.ndarray:
        base = np.array(self.host[self.base[i]][name], copy=True)
        got = self.chunks[i].get(name)
        if got is not None:
            starts, length, values = got
            flat = base.reshape(-1)
            for k, s in enumerate(starts):
                flat[int(s):int(s) + length] = values[k * length:(k + 1) * length]
        return base

    @property
    def on_device(self) -> bool:
        return bool(self.staged)

    def use(self, i: int) -> None:
        """Write set i into the solve() buffers (every time: a call never sees what the last one left)."""
        for n in self.inputs:
            if not self.buf.nbytes[n]:
                continue
            if self.staged:
                self.dev.dtod(self.buf.ptr[n], self.staged[i][n], self.buf.nbytes[n])
            else:
                self.buf.upload(n, self.host[i][n])

    def free(self) -> None:
        for ptrs in self.staged.values():
            for ptr in ptrs.values():
                self.dev.free(ptr)
        self.staged = {}


# ------------------------------------------------------------------------------------ every call checked
class CallCompare:
    """The references of the timed input sets on the device, and the count of elements outside the tolerance
    in each output after a call (CallCheck). Off, with the reason, when the device has no room for them."""

    def __init__(self, dev: Device, buf: Buffers, check: CallCheck, sets: list[int]):
        self.dev, self.buf, self.check = dev, buf, check
        self.refs: dict[int, dict[str, tuple[int, str]]] = {}
        self.off: str | None = None
        arrays = {s: {o.name: transport.read_array(Path(o.refs[s])) for o in check.outputs} for s in sets}
        need = sum(a.nbytes for per in arrays.values() for a in per.values())
        if dev.free_memory() < need + STAGING_HEADROOM:
            self.off = f"no room on the device for the {need / 2**20:.0f} MB of references"
            return
        dev.load_compare(check.lib)
        for s, per in arrays.items():
            self.refs[s] = {}
            for name, a in per.items():
                ptr = dev.alloc(max(1, a.nbytes))
                if a.nbytes:
                    dev.htod(ptr, np.ascontiguousarray(a))
                self.refs[s][name] = (ptr, a.dtype.name)
        dev.sync()

    def bad(self, s: int) -> tuple[str, int] | None:
        """(output, elements outside its tolerance) of the first output of this call that fails against set s."""
        for o in self.check.outputs:
            n = self.count(o.name, s)
            if n:
                return o.name, n
        return None

    def count(self, name: str, s: int) -> int:
        o = next(x for x in self.check.outputs if x.name == name)
        ptr, ref_dtype = self.refs[s][name]
        shape, dtype = self.buf.shapes[name]
        atol, rtol = o.tol[s]
        n = self.dev.compare(self.buf.ptr[name], dtype.name, ptr, ref_dtype, int(np.prod(shape, dtype=np.int64)),
                             atol, rtol, o.exact)
        if n < 0:
            raise DeviceFault(f"the harness's output comparison failed on the device (code {n})")
        return n

    def matches(self, name: str, s: int) -> int | None:
        """Another timed set whose reference this output matches (a replayed result), if any."""
        return next((j for j in self.refs if j != s and self.count(name, j) == 0), None)

    def free(self) -> None:
        for per in self.refs.values():
            for ptr, _ in per.values():
                self.dev.free(ptr)
        self.refs = {}


# ------------------------------------------------------------------------------------------ the worker
class Worker:
    def __init__(self, dev: Device, loaded: LoadedTask, solve: Any, emit: Events, commands: Any = ()):
        self.dev, self.loaded, self.task, self.solve, self.emit = dev, loaded, loaded.task, solve, emit
        self.commands = iter(commands)          # the parent's command lines, shared with serve()

    def _repeats_allowed(self) -> bool:
        """Wait for the parent's word before timing again: it answers once every check of the calls at the
        benchmark shape is done, and stops this process instead when one failed (a wrong kernel is never
        timed twice, however fast its repeats would run)."""
        self.emit("checks-wait")
        cmd = decode(next(self.commands, b""))
        return cmd is not None and cmd.get("cmd") == "repeat"

    def _checked_call(self, buf: Buffers, call: Callable[[], None], where: str) -> None:
        """One untimed call of solve(), the device synchronized, a failed launch reported as a fault."""
        self.emit("calling", where=where)
        call()
        self.dev.sync()
        err = self.dev.launch_error()
        if err:
            raise DeviceFault(f"{err}: a kernel launch in solve() failed; check its block size, shared memory "
                              f"and registers against the device limits")
        self.emit("returned", where=where)

    # ----------------------------------------------------------------------------------- one case
    def case(self, cmd: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        sizes, folder, held = dict(cmd["sizes"]), Path(cmd["dir"]), bool(cmd.get("held_out"))
        progress(f"case {cmd['i']}: " + ("a held-out shape" if held else f"sizes {sizes}"))
        buf = Buffers(self.dev, self.loaded, sizes)
        try:
            for p in self.task.inputs:
                buf.upload(p.name, transport.read_array(folder / f"in_{p.name}.npy"))
            buf.poison()
            self.dev.sync()
            self._checked_call(buf, self.dev.bind(self.solve, buf.args), "case")
            buf.hand_back(folder)
        finally:
            buf.free()
        self.emit("case", i=cmd["i"], seconds=time.perf_counter() - t0)

    # -------------------------------------------------------------------------------------- timing
    def time(self, c: TimeCommand) -> None:
        t_all = time.perf_counter()
        progress(f"timing: sizes {c.sizes}")
        buf = Buffers(self.dev, self.loaded, c.sizes)
        sets = slots = compare = None
        flush = 0
        try:
            t0 = time.perf_counter()
            sets = SetStore(self.dev, self.loaded, buf, c.sets, [*c.timed_sets, c.post_set])
            self.emit("sets-ready", seconds=time.perf_counter() - t0, on_device=sets.on_device)
            progress(f"timing: input sets ready ({'on the device' if sets.on_device else 'copied from the host'})")
            flush_bytes = self.dev.flush_bytes
            flush = self.dev.alloc(flush_bytes)
            call = self.dev.bind(self.solve, buf.args)
            if c.check is not None:
                compare = CallCompare(self.dev, buf, c.check, list(c.timed_sets))
                self.emit("check-ready", on=compare.off is None, why=compare.off)

            def prepare(s: int, fill: int) -> None:       # everything a timed call does outside the events
                sets.use(s)
                buf.poison()
                self.dev.memset_d32(flush, fill & 0xFF, flush_bytes // 4)
                self.dev.reset_persisting_l2()

            # the first call on its own: checked in the parent while the loop runs
            sets.use(c.timed_sets[0])
            buf.poison()
            self.dev.reset_persisting_l2()
            self.dev.sync()
            self._checked_call(buf, call, "first")
            t0 = time.perf_counter()
            buf.hand_back(Path(c.dirs["first"]))
            self.emit("first", set=c.timed_sets[0], seconds=time.perf_counter() - t0)
            for _ in range(max(0, c.budget.warmup - 1)):
                call()
            self.dev.sync()

            slots = _Slots(self.dev, buf, len(c.timed_sets) * c.slots_per_set, Path(c.dirs["snap"]))
            sched = Schedule(c.schedule_seed, c.timed_sets, c.slots_per_set)
            samples, used, stop = self._loop(c, prepare, call, sched, slots, compare)
            if stop == WRONG:
                self.emit("timed", seconds=time.perf_counter() - t_all)
                return
            n = len(samples)
            progress(f"timing: {n} timed calls ({stop}); handing back the last output")
            last_set = used[-1]
            buf.hand_back(Path(c.dirs["last"]))
            self.emit("last", set=last_set, call=n - 1)

            t0 = time.perf_counter()
            kept = slots.hand_back()
            self.emit("snaps", items=kept, seconds=time.perf_counter() - t0)

            sets.use(c.post_set)                   # the benchmark shape again, on a set the loop never used
            buf.poison()
            self.dev.reset_persisting_l2()
            self.dev.sync()
            self._checked_call(buf, call, "post")
            buf.hand_back(Path(c.dirs["post"]))
            self.emit("post", set=c.post_set)

            repeats = c.budget.timing_repeats - 1 if c.budget.timing_repeats > 1 and self._repeats_allowed() else 0
            for r in range(repeats):
                progress(f"timing: repeat {r + 2} of {c.budget.timing_repeats}")
                t0 = time.perf_counter()
                rs, _, rstop = self._loop(c, prepare, call, Schedule(c.schedule_seed + 1 + r, c.timed_sets, 0), None,
                                          compare, report=False, repeat=r + 2)
                if rstop == WRONG:
                    break
                self.emit("repeat", samples=rs, stop_reason=rstop, seconds=time.perf_counter() - t0)
            self.emit("timed", seconds=time.perf_counter() - t_all)
        finally:
            if compare is not None:
                compare.free()
            if slots is not None:
                slots.free()
            if sets is not None:
                sets.free()
            if flush:
                self.dev.free(flush)
            buf.free()

    def _loop(self, c: TimeCommand, prepare: Callable[[int, int], None], call: Callable[[], None],
              sched: Schedule, slots: "_Slots | None", compare: CallCompare | None = None, report: bool = True,
              repeat: int = 1) -> tuple[list[float], list[int], str]:
        """Timed calls until the stopping rule says enough: (event ms per call, set per call, why it stopped).
        With ``compare``, every call's outputs are counted against its set's reference after its events (a
        blank iteration does the same work, so the parent's clock check sees it on both sides); the first
        call with elements outside the tolerance ends the loop (WRONG) with a ``wrong`` event."""
        checking = compare is not None and compare.off is None
        samples: list[float] = []
        used: list[int] = []
        t_loop = time.perf_counter()
        if report:
            self.emit("timing-start")
        stop = None
        blanks = Schedule(c.schedule_seed ^ 0xB1A4C, c.timed_sets, 0)
        n_blank = 0

        def stop_rule() -> str | None:
            return timing_stats.should_stop(samples, elapsed_s=time.perf_counter() - t_loop, budget=c.budget)
        while stop is None:
            s, slot = sched.next()
            prepare(s, len(samples))
            e, h, x = self.dev.timed(call)
            samples.append(e)
            used.append(s)
            bad = compare.bad(s) if checking else None    # type: ignore[union-attr]
            if report:
                self.emit("t", i=len(samples) - 1, set=s, ms=e, host=h, hidden=x, bad=bad[1] if bad else 0)
            if bad is not None:
                like = compare.matches(bad[0], s)          # type: ignore[union-attr]
                self.emit("wrong", i=len(samples) - 1, set=s, output=bad[0], count=bad[1], like=like, repeat=repeat)
                return samples, used, WRONG
            if slot is not None and slots is not None:
                slots.keep(slot, s, len(samples) - 1)
            stop = stop_rule()
            if report and stop is None and len(samples) % c.blank_every == 0:
                # a blank iteration: everything a timed call does but solve() (the same bookkeeping too),
                # interleaved with the calls, for the parent's clock check
                bs = blanks.next()[0]
                prepare(bs, len(samples))
                self.dev.timed(_nothing)
                if checking:
                    compare.bad(bs)                            # type: ignore[union-attr]
                self.emit("b", i=n_blank)
                n_blank += 1
                stop_rule()
        if report:
            self.emit("timing-end", n=len(samples), stop_reason=stop)
        return samples, used, stop


def _nothing() -> None:
    return None


WRONG = "a call's output was wrong"


class _Slots:
    """Copies of kept outputs: on the device (a copy outside the timed region) when it has room, else
    straight to the exchange folder."""

    def __init__(self, dev: Device, buf: Buffers, n: int, folder: Path):
        self.dev, self.buf, self.folder = dev, buf, folder
        self.outputs = [p.name for p in buf.task.outputs]
        self.meta: dict[int, tuple[int, int]] = {}
        need = sum(buf.nbytes[o] for o in self.outputs) * n
        self.ptrs: dict[int, dict[str, int]] | None = None
        if dev.free_memory() > need + STAGING_HEADROOM:
            self.ptrs = {k: {o: dev.alloc(max(1, buf.nbytes[o])) for o in self.outputs} for k in range(n)}

    def keep(self, slot: int, s: int, call: int) -> None:
        self.meta[slot] = (s, call)
        if self.ptrs is not None:
            for o in self.outputs:
                if self.buf.nbytes[o]:
                    self.dev.dtod(self.ptrs[slot][o], self.buf.ptr[o], self.buf.nbytes[o])
        else:
            self.dev.sync()
            self._write(slot, self.buf.ptr)

    def _write(self, slot: int, ptrs: dict[str, int]) -> None:
        d = self.folder / f"slot{slot}"
        d.mkdir(parents=True, exist_ok=True)
        for o in self.outputs:
            hand_back(self.dev, d / f"out_{o}.npy", ptrs[o], *self.buf.shapes[o])

    def hand_back(self) -> list[dict[str, Any]]:
        if self.ptrs is not None:
            self.dev.sync()
            for slot in self.meta:
                self._write(slot, self.ptrs[slot])
        return [{"slot": k, "set": s, "call": i, "dir": str(self.folder / f"slot{k}")} for k, (s, i) in sorted(self.meta.items())]

    def free(self) -> None:
        if self.ptrs is not None:
            for ptrs in self.ptrs.values():
                for p in ptrs.values():
                    self.dev.free(p)
            self.ptrs = None


# ------------------------------------------------------------------------------------------ serving
def serve(dev: Device, loaded: LoadedTask, so_path: str, events_fd: int, commands: Any = None) -> int:
    """Load the candidate, then run commands until quit. The exit code says whether the context is sound."""
    emit = Events(events_fd)
    commands = commands if commands is not None else sys.stdin.buffer
    emit("loading")            # from here on a death of the process may be the candidate's (its load-time code)
    try:
        solve = dev.load(so_path, loaded.task.entry)
    except (OSError, AttributeError) as exc:
        emit("load-error", message=f"{type(exc).__name__}: {exc}")
        return EXIT_OK
    emit("ready", device=dev.name)
    commands = iter(commands)
    worker = Worker(dev, loaded, solve, emit, commands)
    for line in commands:
        cmd = decode(line)
        if cmd is None:
            emit("error", message=f"not a command: {line[:200]!r}")
            return EXIT_HARNESS
        what = cmd.get("cmd")
        try:
            if what == "case":
                worker.case(cmd)
            elif what == "time":
                worker.time(TimeCommand.model_validate(cmd))
            elif what == "quit":
                emit("bye")
                return EXIT_OK
            else:
                emit("error", message=f"unknown command {what!r}")
                return EXIT_HARNESS
        except DeviceFault as exc:
            progress(f"CUDA error: {exc}")
            emit("fault", message=str(exc), cmd=what)
            return EXIT_CUDA_FAULT
        except Exception as exc:    # our own failure (files, task data): not the kernel's
            progress("harness error:\n" + traceback.format_exc())
            emit("error", message=f"{type(exc).__name__}: {exc}", cmd=what)
            return EXIT_HARNESS
    return EXIT_OK
