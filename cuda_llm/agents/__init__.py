"""LLM roles (planner, coder, critic): prompts, structured answers and the chat model configuration.

Nothing here runs a compiler or touches a GPU; the graph passes the evidence in and gets text out.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths.
"""

from cuda_llm.agents.errors import CodeExtractionError, LLMAnswerError, LLMCallError, LLMConfigError, LLMError
from cuda_llm.agents.settings import LLMSettings, RoleSettings, load_settings
from cuda_llm.agents.usage import TokenUsage, usage_of

__all__ = [
    "CodeExtractionError", "LLMAnswerError", "LLMCallError", "LLMConfigError", "LLMError",
    "LLMSettings", "RoleSettings", "load_settings", "TokenUsage", "usage_of",
]
