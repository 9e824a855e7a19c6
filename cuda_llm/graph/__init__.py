"""The FSR loop as a LangGraph state machine: plan, code, tool stages, select, critique, repair, finalize.

Entry points: ``cuda_llm.graph.run.start_run`` / ``resume_run``; extension point: ``cuda_llm.graph.stages``.
"""
