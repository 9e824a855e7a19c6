"""The FSR loop as a LangGraph state machine: plan, code, tool stages, select, critique, repair, finalize.

Entry points: ``cuda_llm.graph.run.start_run`` / ``resume_run``; extension point: ``cuda_llm.graph.stages``.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.halts, cuda_llm.tasks, cuda_llm.agents, cuda_llm.feature_db, cuda_llm.runs, cuda_llm.report, cuda_llm.measure, and of tools/ only what neither builds nor runs: cuda_llm.tools.harness.failure_text, cuda_llm.tools.harness.eval_options, cuda_llm.tools.harness.timing_budget, cuda_llm.tools.profile.profile_models, cuda_llm.tools.tune.tuning, cuda_llm.tools.compiler.build_summary (pure summaries of a build's facts), cuda_llm.tools.bounds.tensor_rates (a stored table).
"""
