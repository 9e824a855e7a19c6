"""Shared by the kernels that lie about their timing: rewrite the worker's event writer so that every timed
call is reported ``factor`` times faster than it ran (what a candidate that took over the worker, or a host
stall the events never saw, looks like to the parent's clock)."""
import sys


def forge(factor: float = 10.0) -> None:
    loop = sys.modules["cuda_llm.tools.harness.worker_loop"]
    emit = loop.Events.__call__

    def forged(self, ev, **fields):
        if ev == "t":
            fields["ms"] = fields["ms"] / factor
            fields["host"] = fields["host"] / factor
        return emit(self, ev, **fields)

    loop.Events.__call__ = forged
