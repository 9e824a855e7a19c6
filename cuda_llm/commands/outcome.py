"""How a run ends on the command line: the closing lines `optimize` and `resume` print and their exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from cuda_llm.graph.run import RunOutcome

def print_outcome(out: RunOutcome, stream: TextIO | None = None) -> None:
    """The end of a run in a few lines: the table, then what happened and what to do next (answer, resume)."""
    stream = stream or sys.stdout
    if out.table:
        print(out.table, file=stream)
    if out.waiting:
        print(f"waiting for {len(out.waiting)} answer{'s' if len(out.waiting) != 1 else ''} (a role is played "
              "manually):", file=stream)
        for w in out.waiting:
            print(f"  {w['name']}: the prompt is {w['prompt']}\n    write the answer to {w['answer']}", file=stream)
        print(f"or `cuda-llm answer {out.run_id} NAME FILE`; then continue with `cuda-llm resume {out.run_id}`",
              file=stream)
    elif out.finished:
        reason = out.stop_reason or "done"
        print(f"stop reason: {reason}" + (f" ({out.stop_text})" if out.stop_text else ""), file=stream)
        print(f"best kernel: {out.root / 'best.cu'}", file=stream)
        if out.report_path:
            print(f"report:      {out.report_path}", file=stream)
    elif out.halt:
        print(f"stopped ({out.halt}): {out.halt_text}", file=stream)
        print(f"the run is not finished; continue with `cuda-llm resume {out.run_id}`", file=stream)
    elif out.error:
        print(f"stopped by an error: {out.error}\ncontinue with `cuda-llm resume {out.run_id}`", file=stream)
    else:
        print(f"stopped at round {out.rounds}; continue with `cuda-llm resume {out.run_id}`", file=stream)
    if out.report_path and not out.finished:
        print(f"report:      {out.report_path} (the rounds so far)", file=stream)
    print(f"trace:       {out.root / 'trace.jsonl'}", file=stream)


EXIT_FINISHED, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 2, 3, 130
EXIT_WAITING = 4   # a manual role has prompts to answer: not an error, not finished


def exit_code(out: RunOutcome) -> int:
    """0 finished; 4 waiting for a manual answer; 3 stopped by an error or a halt (resumable); 130 interrupted (resumable)."""
    if out.finished:
        return EXIT_FINISHED
    if out.waiting:
        return EXIT_WAITING
    return EXIT_STOPPED if (out.error or out.halt) else EXIT_INTERRUPTED
