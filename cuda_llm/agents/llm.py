"""The chat model of an ``llm`` role: ChatOpenAI against any OpenAI-compatible endpoint, with two additions.

- A cut-off answer (``finish_reason == "length"``) is asked again with twice the token budget, up to
  ``max_tokens_limit`` and ``CUTOFF_RETRIES`` times, so a long kernel is not retried with the budget that
  cut it; the usage of every try is counted on the answer, and ``response_metadata`` says how often it was
  cut (``cutoff_retries``) and the budget that gave the answer (``max_tokens_used``).
- The reasoning text that servers such as vLLM, SGLang, DeepSeek and OpenRouter return beside the answer
  (``reasoning_content`` or ``reasoning`` on the message), which ChatOpenAI drops, is kept in
  ``additional_kwargs["reasoning_content"]`` so the run can save it beside the answer.

Transport retries: the OpenAI client under ChatOpenAI retries connection errors, timeouts, 408/409/429 and
5xx itself (``max_retries``), with exponential backoff from 0.5 s up to 8 s with jitter, and honours the
server's Retry-After headers. No second retry layer is added for those.
"""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from cuda_llm.agents.errors import NotAChatCompletion
from cuda_llm.agents.settings import DEFAULT_MAX_TOKENS_LIMIT, LLMSettings

CUTOFF_RETRIES = 2
FIRST_RETRY_BUDGET = 8192          # when no max_tokens was set, the server's default cut the answer
REASONING_FIELDS = ("reasoning_content", "reasoning")


def finish_reason(result: ChatResult) -> str | None:
    gen = result.generations[0] if result.generations else None
    if gen is None:
        return None
    return (gen.generation_info or {}).get("finish_reason") or gen.message.response_metadata.get("finish_reason")


def next_budget(current: int | None, used_output_tokens: int, limit: int) -> int | None:
    """The budget to ask a cut-off answer again with: twice what cut it (or twice what it used, at least
    FIRST_RETRY_BUDGET, when the server's default cut it), at most ``limit``; None when nothing larger fits."""
    base = current if current else max(used_output_tokens, FIRST_RETRY_BUDGET // 2)
    budget = min(limit, 2 * base)
    return budget if budget > (current or used_output_tokens) else None


def _usage(result: ChatResult) -> dict[str, int]:
    msg = result.generations[0].message if result.generations else None
    return dict(getattr(msg, "usage_metadata", None) or {})


def _add_usage(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    keys = ("input_tokens", "output_tokens", "total_tokens")
    return {k: int(a.get(k, 0) or 0) + int(b.get(k, 0) or 0) for k in keys}


class EndpointChatModel(ChatOpenAI):
    """ChatOpenAI that asks cut-off answers again with a larger budget and keeps the reasoning text."""

    max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT
    cutoff_retries: int = CUTOFF_RETRIES

    def _one(self, messages: list[Any], stop: list[str] | None, run_manager: Any, **kwargs: Any) -> ChatResult:
        """One request; a reply that the client cannot read as a chat completion becomes NotAChatCompletion."""
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except openai.APIError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise NotAChatCompletion(f"the reply is not a chat completion ({type(exc).__name__}: {exc})") from exc

    def _generate(self, messages: list[Any], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        result = self._one(messages, stop, run_manager, **kwargs)
        budget = kwargs.get("max_tokens", self.max_tokens)
        usage = _usage(result)
        tries = 0
        while finish_reason(result) == "length" and tries < self.cutoff_retries:
            bigger = next_budget(budget, int(usage.get("output_tokens", 0) or 0), self.max_tokens_limit)
            if bigger is None:
                break
            budget, tries = bigger, tries + 1
            result = self._one(messages, stop, run_manager, **{**kwargs, "max_tokens": budget})
            usage = _add_usage(usage, _usage(result))
        msg = result.generations[0].message if result.generations else None
        if msg is not None:
            if tries:
                msg.usage_metadata = {**usage}  # type: ignore[assignment]
            msg.response_metadata = {**msg.response_metadata, "cutoff_retries": tries, "max_tokens_used": budget}
        return result

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        data = response if isinstance(response, dict) else getattr(response, "model_dump", lambda: {})()
        for gen, choice in zip(result.generations, data.get("choices") or []):
            message = (choice or {}).get("message") or {}
            text = next((message.get(k) for k in REASONING_FIELDS if isinstance(message.get(k), str) and message.get(k)), None)
            if text:
                gen.message.additional_kwargs["reasoning_content"] = text
        return result


def make_chat_model(settings: LLMSettings, role: str) -> BaseChatModel:
    """The chat model of an ``llm`` role, with its timeout, retries, budget, reasoning and extra body."""
    rs = settings.role(role)
    if not rs.uses_endpoint:
        raise ValueError(f"the {role} is played by {rs.provider}, not by an LLM endpoint")
    kwargs: dict[str, Any] = dict(
        model=rs.model,
        api_key=rs.api_key,
        timeout=rs.timeout_s,
        max_retries=rs.max_retries,
        stream_usage=True,          # usage on streamed answers too (off by default for non-OpenAI base URLs)
        use_responses_api=False,    # chat completions: what every OpenAI-compatible server speaks
        max_tokens_limit=max(rs.max_tokens_limit, rs.max_tokens or 0),
    )
    if rs.base_url:
        kwargs["base_url"] = rs.base_url
    if rs.temperature is not None:
        kwargs["temperature"] = rs.temperature
    if rs.max_tokens is not None:
        kwargs["max_tokens"] = rs.max_tokens
    if rs.reasoning_effort:
        kwargs["reasoning_effort"] = rs.reasoning_effort
    if rs.extra_body:
        kwargs["extra_body"] = dict(rs.extra_body)
    return EndpointChatModel(**kwargs)
