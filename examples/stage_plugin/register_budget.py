"""A cuda-llm tool stage: reject passing candidates whose kernels spill registers to local memory or use more
registers per thread than a budget (what ptxas reported when the candidate was built).

It runs after `evaluate` (`--stage register_budget:evaluate`), so the round's candidates are built and
measured; a rejected candidate is never selected and the trace says why. The budget is
$CUDA_LLM_REGISTER_BUDGET (default 255, the hardware limit: only spills are rejected then).
"""

from __future__ import annotations

import os
from typing import Any

BUDGET_ENV = "CUDA_LLM_REGISTER_BUDGET"


class RegisterBudget:
    """Spilling or register-hungry kernels lower occupancy; this stage keeps them from becoming the best."""

    name = "register_budget"

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget if budget is not None else int(os.environ.get(BUDGET_ENV, "255"))

    def run(self, ctx: Any) -> dict[str, Any]:
        update: dict[str, Any] = {}
        for c in ctx.passed():
            result = ctx.result(c.id)
            kernels = result.compile.kernels if result is not None and result.compile is not None else []
            over = [f"{k.name.split('(')[0]}: {k.registers} registers > {self.budget}" for k in kernels
                    if k.registers > self.budget]
            spills = [f"{k.name.split('(')[0]}: spills {k.spill_store_bytes} bytes" for k in kernels if k.spills]
            if over or spills:
                update = ctx.merge(update, ctx.reject(c.id, "register budget: " + "; ".join(over + spills)))
        return update
