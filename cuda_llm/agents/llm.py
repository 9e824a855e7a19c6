"""The chat model of one role: langchain_openai.ChatOpenAI against any OpenAI-compatible endpoint.

Retries: the OpenAI client under ChatOpenAI retries connection errors, timeouts, 408/409/429 and 5xx
itself (``max_retries``), with exponential backoff from 0.5 s up to 8 s with jitter, and honours the
server's Retry-After / retry-after-ms headers. So no second retry layer is added here.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from cuda_llm.agents.settings import LLMSettings


def make_chat_model(settings: LLMSettings, role: str) -> BaseChatModel:
    """ChatOpenAI for ``role`` ("planner", "coder" or "critic"), with timeout, retries and usage reporting."""
    from langchain_openai import ChatOpenAI

    rs = settings.role(role)
    kwargs = dict(
        model=rs.model,
        api_key=rs.api_key,
        timeout=rs.timeout_s,
        max_retries=rs.max_retries,
        stream_usage=True,  # usage on streamed answers too (off by default for non-OpenAI base URLs)
    )
    if rs.base_url:
        kwargs["base_url"] = rs.base_url
    if rs.temperature is not None:
        kwargs["temperature"] = rs.temperature
    return ChatOpenAI(**kwargs)
