"""`cuda-llm import kernelbench FILE_OR_DIR`: PyTorch modules in KernelBench's format -> task folders."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.report.formats import render_table

HELP = "make tasks from PyTorch modules in KernelBench's format (a file, or a folder of them)"
DESCRIPTION = """Turn PyTorch modules into tasks. Each file defines `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()` (KernelBench's format). Dry runs derive the entry point the kernel implements:
forward()'s inputs (a float or int argument passed by value, a bool tensor as uint8 0/1), then the
module's parameters and buffers as const device pointers, then the outputs, then the sizes as ints,
named after the file's int constants (batch_size, dim, and the elements of int tuples such as
input_shape). The reference is the module itself, run by PyTorch; PyTorch eager is the baseline
(speedup 1.0) and torch.compile the yardstick. Needs PyTorch (pip install -e '.[torch]' in the cuda-llm
checkout).

Shapes come from the meta device (nothing allocated), the checks run on the CPU at small sizes, and the
file's own sizes are run only when the estimate fits --max-memory. Each task is tested at the file's own
sizes and at six smaller ones with its size constants varied (odd and distinct where the module allows;
two of them held out, never shown to the LLM); a module whose sizes cannot vary is tested at its own over
--seeds seeds, and says so. --shape (and then at least one --held-out) adds shapes: give the file's
constants, e.g. --shape batch_size=7,dim=999.

A module that fails is one row of the table (out of memory named as such) and a folder import goes on.
Writes OUT/<task>/ (module.py, task.toml, reference.py, naive.cu). A folder already imported from the same
file is left as it is (your edits to task.toml stay); one from a changed file needs --force.

Examples:
  cuda-llm import kernelbench KernelBench/level1 --out tasks/kb1
  cuda-llm import kernelbench my_model.py --shape batch_size=3 --shape batch_size=100 --held-out batch_size=37
  cuda-llm tasks --tasks-dir tasks/kb1 && cuda-llm optimize tasks/kb1/kb_19_relu"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("format", choices=["kernelbench"], help="the file format (KernelBench's: Model, get_inputs, ...)")
    p.add_argument("source", type=Path, help="a module file, or a folder of them (every *.py in it)")
    p.add_argument("--out", type=Path, default=Path("tasks"), help="folder for the task folders (default ./tasks)")
    p.add_argument("--name", help="task name (one file only; default: from the file name)")
    p.add_argument("--class-name", default="Model", help="the module class (default Model)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=INT,...",
                   help="another correctness shape, by the file's int constants (one file only; repeatable)")
    p.add_argument("--held-out", action="append", default=[], metavar="NAME=INT,...",
                   help="a correctness shape never shown to the LLM (needed with --shape; repeatable)")
    p.add_argument("--seeds", type=int, help="cases at the file's own sizes, one seed each (default 1 where the sizes "
                                             "vary, else 3)")
    p.add_argument("--eval-mode", action="store_true", help="run the module in eval mode (default: training mode, "
                                                            "nn.Module's default, as KernelBench runs it)")
    p.add_argument("--atol", type=float, help="absolute tolerance for float outputs (default KernelBench's: "
                                              "1e-4 for float32, 1e-2 for float16)")
    p.add_argument("--rtol", type=float, help="relative tolerance for float outputs (default as --atol)")
    p.add_argument("--flops", help="flop formula over the sizes (default: counted by torch.utils.flop_counter)")
    p.add_argument("--bytes", help="bytes formula over the sizes (default: every input, weight and output once)")
    p.add_argument("--native-reference", action="store_true",
                   help="run the reference in the module's own dtypes (default float64 where it runs in it)")
    p.add_argument("--max-memory", metavar="SIZE", help="memory the import may use for a full-size forward, e.g. 8G "
                                                        "(default: half the memory available now)")
    p.add_argument("--force", action="store_true", help="replace task folders imported from another version")
    p.add_argument("--json", action="store_true", help="print one JSON object per file")


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(f for f in source.glob("*.py") if not f.name.startswith("_"))
    return [source]


def run(args: argparse.Namespace) -> int:
    # the PyTorch task source (NumPy, then PyTorch): imported on use, off the `--help` start-up
    from cuda_llm.tasks.torch_source import INSTALL_HINT, ModuleFileError

    source: Path = args.source
    if not source.exists():
        print(f"cuda-llm import: {source} does not exist", file=sys.stderr)
        return 2
    files = _files(source)
    if not files:
        print(f"cuda-llm import: {source} holds no .py files", file=sys.stderr)
        return 2
    if len(files) > 1 and (args.name or args.shape or args.held_out):
        print("cuda-llm import: --name, --shape and --held-out apply to one file; import the folder without them, "
              "then each file you want more shapes for on its own", file=sys.stderr)
        return 2
    if args.seeds is not None and args.seeds < 1:
        print("cuda-llm import: --seeds must be at least 1", file=sys.stderr)
        return 2
    from cuda_llm.tasks.import_limits import clip, default_max_memory, error_line, is_allocation_failure, parse_memory

    try:
        max_memory = parse_memory(args.max_memory) if args.max_memory else default_max_memory()
    except ValueError as exc:
        print(f"cuda-llm import: {exc}", file=sys.stderr)
        return 2
    try:
        from cuda_llm.tasks.torch_import import ImportOptions, default_limits, derive, write_task_folder
        from cuda_llm.tasks.torch_reference import import_torch

        import_torch()
    except ImportError:
        print(f"cuda-llm import: PyTorch is not installed; {INSTALL_HINT}", file=sys.stderr)
        return 2
    limits = default_limits().model_copy(update={"max_memory": max_memory})
    from cuda_llm.tasks import TaskError, load_task_folder

    rows, failed = [], 0
    for f in files:
        t0 = time.perf_counter()
        opts = ImportOptions(name=args.name, class_name=args.class_name, seeds=args.seeds,
                             mode="eval" if args.eval_mode else "train", atol=args.atol, rtol=args.rtol,
                             flops=args.flops, bytes=args.bytes,
                             reference_dtype="native" if args.native_reference else None)
        row = {"file": str(f), "task": None, "status": "error", "signature": "", "seconds": 0.0, "notes": [],
               "shapes": ""}
        try:
            record = derive(f, opts, (args.shape, args.held_out), limits)
            folder, status = write_task_folder(record, args.out, force=args.force)
            task = load_task_folder(folder).task
            row.update(task=task.name, folder=str(folder), status=status, signature=task.signature, notes=record.notes,
                       shapes=_shapes_text(record), estimate=record.estimate, reference=record.reference_dtype)
        except (ModuleFileError, TaskError, FileExistsError, ValueError, OSError) as exc:
            failed += 1
            row["error"] = clip(str(exc), 400)
            row["kind"] = _kind(exc)
        except Exception as exc:  # noqa: BLE001 - one module's failure is its row; the folder goes on
            failed += 1
            row["error"] = f"{f}: " + ("out of memory: " if is_allocation_failure(exc) else "") + error_line(exc)
            row["kind"] = "memory" if is_allocation_failure(exc) else "error"
        row["seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
        if args.json:
            print(json.dumps(row))
        else:
            what = row.get("error") or f"{row['task']}: {row['status']}"
            print(f"[import] {f.name}: {what} ({row['seconds']:.1f} s)", file=sys.stderr, flush=True)
            for n in row["notes"]:
                print(f"[import]   note: {n}", file=sys.stderr)
    if not args.json:
        table = [[Path(r["file"]).name, r["task"] or "-", r["status"], r["shapes"] or "-",
                  r["signature"] or r.get("error", "")] for r in rows]
        print(render_table(["file", "task", "status", "cases", "entry point / error"], table))
        ok = len(rows) - failed
        print(f"\n{ok} of {len(rows)} imported into {args.out}"
              + (f"; {failed} refused (see the errors above)" if failed else ""))
        if ok:
            first = next(r for r in rows if r["task"])
            print(f"list them:  cuda-llm tasks --tasks-dir {args.out} -v\n"
                  f"optimize:   cuda-llm optimize {Path(first['folder'])}")
    return 1 if failed else 0


def _shapes_text(record) -> str:
    """The table's cases column: 'file + 4 + 2 held out', or 'fixed x3 (why)', and the reference's dtype."""
    ref = "" if record.reference_dtype == "float64" else ", native reference (float64 failed: a dtype error)"
    if record.fixed_sizes:
        return f"fixed x{record.seeds}: sizes cannot vary{ref}"
    return f"file + {len(record.shapes)} + {len(record.held_out)} held out{ref}"


def _kind(exc: BaseException) -> str:
    from cuda_llm.tasks.torch_import import ImportMemoryError

    return "memory" if isinstance(exc, ImportMemoryError) else "refused"
