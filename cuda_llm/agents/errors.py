"""Errors of the LLM roles: each says what went wrong and what to do about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from cuda_llm.agents.usage import TokenUsage


class LLMError(Exception):
    """Base of every error raised by cuda_llm.agents."""


class LLMConfigError(LLMError):
    """No usable LLM configuration (no model, no key for OpenAI, a bad cuda-llm.toml)."""


class LLMCallError(LLMError):
    """The endpoint could not be reached or refused the request after the client's own retries."""


class NotAChatCompletion(ValueError):
    """An HTTP 200 reply whose body is not a chat completion (an HTML login or proxy page, an empty or cut
    body, JSON without choices). Classified as an endpoint failure (LLMCallError) by cuda_llm.agents.structured."""


class LLMAnswerError(LLMError):
    """The model answered, but not with something usable, even after being told what was wrong."""

    def __init__(self, message: str, *, raw_text: str = "", usage: "TokenUsage | None" = None, attempts: int = 0):
        super().__init__(message)
        self.raw_text = raw_text
        self.usage = usage
        self.attempts = attempts


class CodeExtractionError(LLMAnswerError):
    """The coder's answer holds no usable CUDA source; the message says why (fed back to the model)."""

    def __init__(self, reason: str, *, raw_text: str = ""):
        super().__init__(reason, raw_text=raw_text)
        self.reason = reason


def snippet(text: str, limit: int = 300) -> str:
    """A short, one-paragraph excerpt of an answer for error messages."""
    text = (text or "").strip()
    if not text:
        return "<empty answer>"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."
