"""Import every KernelBench file of some folders, one process at a time, and write what happened to each.

    python benchmarks/kernelbench_manifest.py KB/level1 KB/level2 --max-memory 8G --timeout 300 --out bench-out

Each file is imported by `cuda-llm import kernelbench FILE --json` in its own process, under an address-space
limit (--max-memory plus room for PyTorch's libraries), with a time limit; a file refused because its
forward is random is imported again with --eval-mode (KernelBench's dropout problems). Per file: imported
or refused, the reason (one line), the cases (varied or fixed), seconds and peak resident memory (the
process's, from wait4). Writes OUT/kernelbench_manifest.md and .json after every file, so a run cut short
keeps its table. KernelBench's files are MIT licensed; keep them outside the package.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.report.formats import render_table  # noqa: E402
from cuda_llm.tasks.import_limits import clip, parse_memory  # noqa: E402

LIB_ROOM = 6 << 30          # address space PyTorch's libraries and allocator reserve beyond the data
RANDOM = "different outputs for the same inputs"


def log(msg: str) -> None:
    print(f"[manifest] {msg}", file=sys.stderr, flush=True)


def _limit(nbytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
        os.nice(10)
    return apply


def import_one(f: Path, out: Path, args, extra: list[str]) -> dict:
    """One import in its own process: (its JSON row, seconds, peak RSS bytes, exit status)."""
    cmd = [sys.executable, "-m", "cuda_llm.cli", "import", "kernelbench", str(f), "--json", "--out", str(out),
           "--max-memory", args.max_memory, "--force", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": str(args.threads), "CUDA_LLM_CACHE": str(out / ".cache")}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, env=env, preexec_fn=_limit(parse_memory(args.max_memory) + LIB_ROOM),
                             start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > args.timeout:
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(p.pid, 0)
                timed_out = True
                break
            time.sleep(0.1)
        p.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read().decode(errors="replace"), se.read().decode(errors="replace")
    row: dict = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    row["peak_mb"] = round(usage.ru_maxrss / 1024)
    row["exit"] = p.returncode
    if timed_out:
        row.update(status="error", kind="time", error=f"over the {args.timeout:.0f} s limit of this run")
    elif not row:
        tail = (stderr.strip().splitlines() or ["(no output)"])[-1]
        killed = p.returncode < 0 or "MemoryError" in stderr or "not enough memory" in stderr
        row.update(status="error", kind="memory" if killed else "crash",
                   error=clip(f"exit {p.returncode}: {tail}", 300))
    return row


def classify(row: dict) -> str:
    """imported / refused (a documented reason: the module's or the machine's) / failed (an import bug)."""
    if row.get("status") in ("written", "unchanged"):
        return "imported"
    kind = row.get("kind", "")
    err = row.get("error", "")
    if kind in ("memory", "time"):
        return "refused"
    if kind == "refused" and not any(w in err for w in ("failed: ", "Traceback")):
        return "refused"
    return "failed"


def write(rows: list[dict], out: Path, args) -> None:
    counts = {k: sum(1 for r in rows if r["outcome"] == k) for k in ("imported", "refused", "failed")}
    varied = sum(1 for r in rows if r["outcome"] == "imported" and "held out" in r.get("shapes", ""))
    n = len(rows)
    table = [[r["level"], r["file"], r["outcome"], r.get("shapes", "") or "-", f"{r['seconds']:.1f}", str(r["peak_mb"]),
              clip(r.get("error", "") or "; ".join(r.get("notes", [])), 160) or "-"] for r in rows]
    lines = [f"# KernelBench import manifest ({n} files)", "",
             f"--max-memory {args.max_memory}, {args.timeout:.0f} s per file, one process at a time (nice 10, "
             f"{args.threads} threads).", "",
             f"- imported: {counts['imported']} ({varied} with varied and held-out shapes)",
             f"- refused for a stated reason: {counts['refused']}",
             f"- failed (an import error to fix): {counts['failed']}",
             f"- imported or refused with a reason: {100 * (counts['imported'] + counts['refused']) / max(1, n):.1f}%",
             "", render_table(["level", "file", "outcome", "cases", "s", "peak MB", "reason / notes"], table), ""]
    (out / "kernelbench_manifest.md").write_text("\n".join(lines))
    (out / "kernelbench_manifest.json").write_text(json.dumps({"args": vars(args), "counts": counts, "rows": rows},
                                                              indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="KernelBench level folders (e.g. KernelBench/level1)")
    ap.add_argument("--max-memory", default="8G", help="passed to the import; the process gets 6 GB more address space")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per file (default 300)")
    ap.add_argument("--threads", type=int, default=1, help="OMP threads per import (default 1)")
    ap.add_argument("--only", default="", help="comma-separated file-name prefixes (e.g. 1_,23_)")
    ap.add_argument("--again", type=Path, help="an earlier manifest's JSON: keep its rows of files imported with "
                                                "varied shapes within the memory cap, import the others again")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    prefixes = [p for p in args.only.split(",") if p]
    kept: dict[tuple[str, str], dict] = {}
    if args.again:
        cap_mb = parse_memory(args.max_memory) >> 20
        for r in json.loads(args.again.read_text())["rows"]:
            if r["outcome"] == "imported" and "held out" in r.get("shapes", "") and r["peak_mb"] <= cap_mb:
                kept[(r["level"], r["file"])] = r
    with tempfile.TemporaryDirectory(prefix="kb-manifest-") as tmp:
        for folder in args.folders:
            files = sorted(folder.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]) if p.name[0].isdigit() else 0,
                                                              p.name))
            for f in files:
                if prefixes and not any(f.name.startswith(p) for p in prefixes):
                    continue
                if (folder.name, f.name) in kept:
                    rows.append(kept[(folder.name, f.name)])
                    continue
                row = import_one(f, Path(tmp), args, [])
                if RANDOM in row.get("error", ""):
                    again = import_one(f, Path(tmp), args, ["--eval-mode"])
                    again["notes"] = ["imported with --eval-mode (random in training mode)", *again.get("notes", [])]
                    again["seconds"] += row["seconds"]
                    again["peak_mb"] = max(again["peak_mb"], row["peak_mb"])
                    row = again
                row.update(level=folder.name, file=f.name)
                row["outcome"] = classify(row)
                rows.append(row)
                log(f"{folder.name}/{f.name}: {row['outcome']} {row.get('shapes', '')} {row['seconds']} s "
                    f"{row['peak_mb']} MB {clip(row.get('error', ''), 200)}")
                write(rows, args.out, args)
    write(rows, args.out, args)
    if args.again:
        log(f"kept {len(kept)} rows of {args.again}; imported {len(rows) - len(kept)} files again")
    print((args.out / "kernelbench_manifest.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
