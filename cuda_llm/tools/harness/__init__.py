"""The judge: everything that runs on the GPU or times anything. "Where is timing?": here.

Trust boundary: candidate code is loaded only by gpu_worker.py (with worker_loop.py), in a child process
that runner.py starts (no secrets in its environment, one pinned GPU, a fresh folder, a time limit, the
whole process group killed on expiry, one worker per device). torch_timer.py is the same kind of child for
a task's PyTorch module. No other module here ever loads candidate code. The children also import the
light modules they need (worker_protocol, timing_budget, timing_stats, timing_plan, transport, event_channel,
validate: pydantic and NumPy only). In the parent:
judge.py drives the worker, checker.py and validate.py give the verdict from raw data, timing_plan.py and
timing_stats.py decide what is timed and when timing stops (by the one TimingBudget of timing_budget.py, which the
evaluation options, the worker's time command and the PyTorch timer's request each carry whole), evaluate.py
chains compile -> judge -> time.
Outside this folder only profile/ncu.py starts the worker (under Nsight Compute), through runner.py.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.tools.device, cuda_llm.tools.compiler, cuda_llm.tools.bounds.
"""
