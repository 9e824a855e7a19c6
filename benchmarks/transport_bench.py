"""How to move a large output from the GPU worker to the parent: measured, for the judge's choice.

    python benchmarks/transport_bench.py [--elements 67108864] [--repeats 3] [--out bench-out]

For each transport a child process hands a float32 array (64M elements: gelu's benchmark output) to this
process, which then reads every element (a sum, as the checker does). The child's source array stands for
device memory: copying it once is what memcpy_dtoh does. Timed from the child's first copy to the
parent's last read; process start-up excluded. Writes OUT/transport.md and OUT/transport.json.

- npy-file: the child copies into its own array, np.save to /dev/shm; the parent np.load (a copy) and reads
- npy-write-mmap-read: the child as npy-file (bulk write calls); the parent maps the file (no copy)
- mmap-npy: the child copies straight into a memory-mapped .npy on /dev/shm; the parent maps it (no copy)
- shared-memory: multiprocessing.shared_memory, the child copies into it, the parent views it
- pipe: the child copies into its own array and writes the bytes to a pipe; the parent reads them all
- mmap-npy-fallocate: as mmap-npy, with the file's pages allocated in one call first (posix_fallocate)
- mmap-npy-disk: as mmap-npy, in a folder on disk (the fallback where /dev/shm is small)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import os, sys, time
import numpy as np
from multiprocessing import shared_memory
kind, n, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
src = np.arange(n, dtype=np.float32)               # "device memory"
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
t0 = time.perf_counter()
if kind in ("npy-file", "npy-write-mmap-read"):
    host = np.empty_like(src); np.copyto(host, src); np.save(target, host)
elif kind in ("mmap-npy", "mmap-npy-disk", "mmap-npy-fallocate"):
    mm = np.lib.format.open_memmap(target, mode="w+", dtype=np.float32, shape=(n,))
    if kind == "mmap-npy-fallocate":
        with open(target, "r+b") as f:
            os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
    np.copyto(mm, src); del mm
elif kind == "shared-memory":
    from multiprocessing import resource_tracker
    shm = shared_memory.SharedMemory(name=target)
    resource_tracker.unregister(shm._name, "shared_memory")   # the parent owns it
    np.copyto(np.ndarray((n,), np.float32, buffer=shm.buf), src); shm.close()
elif kind == "pipe":
    host = np.empty_like(src); np.copyto(host, src)
    out = os.fdopen(int(target), "wb", buffering=0); out.write(memoryview(host).cast("B")); out.close()
sys.stderr.write(f"T={time.perf_counter() - t0}\n"); sys.stderr.flush()
"""

KINDS = ("npy-file", "npy-write-mmap-read", "mmap-npy", "mmap-npy-fallocate", "shared-memory", "pipe", "mmap-npy-disk")


def one(kind: str, n: int, shm_dir: Path, disk_dir: Path) -> dict:
    from multiprocessing import shared_memory

    nbytes = 4 * n
    shm = None
    if kind == "shared-memory":
        shm = shared_memory.SharedMemory(create=True, size=nbytes)
        target = shm.name
    else:
        folder = disk_dir if kind == "mmap-npy-disk" else shm_dir
        target = str(folder / f"x-{kind}.npy")
    r, w = os.pipe()
    if kind == "pipe":
        target = str(w)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, str(n), target], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,) if kind == "pipe" else (),
                            text=True)
    os.close(w)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.readline()                                 # the child's source is ready
    t0 = time.perf_counter()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    if kind == "pipe":
        buf = bytearray(nbytes)
        view = memoryview(buf)
        got = 0
        with os.fdopen(r, "rb", buffering=0) as f:
            while got < nbytes:
                k = f.readinto(view[got:])
                if not k:
                    break
                got += k
        arr = np.frombuffer(buf, dtype=np.float32)
    else:
        os.close(r)
        proc.wait()
        if kind == "npy-file":
            arr = np.load(target)
        elif kind == "shared-memory":
            arr = np.ndarray((n,), np.float32, buffer=shm.buf)  # type: ignore[union-attr]
        else:
            arr = np.load(target, mmap_mode="r")
    t_got = time.perf_counter()
    total = float(np.sum(arr, dtype=np.float64))
    t_read = time.perf_counter()
    proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    child_s = next((float(ln[2:]) for ln in err.splitlines() if ln.startswith("T=")), float("nan"))
    if not total > 0:
        raise RuntimeError(f"{kind}: the parent read {total}, not the child's data: {err}")
    del arr
    if shm is not None:
        shm.close()
        shm.unlink()
    elif kind != "pipe" and Path(target).exists():
        os.unlink(target)
    return {"kind": kind, "child_write_s": child_s, "handed_over_s": t_got - t0, "total_s": t_read - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=1 << 26)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "bench-out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shm_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    rows = []
    with tempfile.TemporaryDirectory(dir=args.out) as disk:
        base = np.arange(args.elements, dtype=np.float32)
        t0 = time.perf_counter()
        float(np.sum(base, dtype=np.float64))
        sum_s = time.perf_counter() - t0
        del base
        runs: dict[str, list[dict]] = {k: [] for k in KINDS}
        for _ in range(args.repeats):            # round robin: a machine that slows down hits every kind alike
            for kind in KINDS:
                runs[kind].append(one(kind, args.elements, shm_dir, Path(disk)))
        for kind in KINDS:
            row = {"kind": kind, **{k: statistics.median(r[k] for r in runs[kind])
                                    for k in ("child_write_s", "handed_over_s", "total_s")}}
            rows.append(row)
            print(f"{kind:20s} child {row['child_write_s']:.3f} s, handed over {row['handed_over_s']:.3f} s, "
                  f"read by the parent {row['total_s']:.3f} s", file=sys.stderr)
    mb = 4 * args.elements / 1e6
    lines = [f"# Transport of a {args.elements}-element float32 output ({mb:.0f} MB)", "",
             f"{os.cpu_count()} CPUs; median of {args.repeats}; a sum over a private array of the same size takes "
             f"{sum_s:.3f} s (the parent's read).", "",
             "| transport | child copy + write s | handed over s | handed over + read s |", "|---|---:|---:|---:|"]
    lines += [f"| {r['kind']} | {r['child_write_s']:.3f} | {r['handed_over_s']:.3f} | {r['total_s']:.3f} |" for r in rows]
    (args.out / "transport.md").write_text("\n".join(lines) + "\n")
    (args.out / "transport.json").write_text(json.dumps({"elements": args.elements, "sum_s": sum_s, "rows": rows}, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
