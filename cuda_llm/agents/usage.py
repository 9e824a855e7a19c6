"""Token usage of LLM calls, read from what langchain-openai reports on each AIMessage."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class TokenUsage(BaseModel):
    """Tokens of one or more calls; add them up per role for the token budget."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: "TokenUsage") -> "TokenUsage":
        """A new TokenUsage with both counts summed (the operands are left unchanged)."""
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
        )

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        return self.add(other)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def usage_of(message: Any) -> TokenUsage:
    """Usage of one call: AIMessage.usage_metadata, else response_metadata's token_usage/usage; zeros if absent.

    Servers that report no usage (some local ones) count as zero tokens but still as one call.
    """
    if message is None:
        return TokenUsage()
    meta = getattr(message, "usage_metadata", None)
    if meta:
        return TokenUsage(input_tokens=_int(meta.get("input_tokens")), output_tokens=_int(meta.get("output_tokens")), calls=1)
    resp = getattr(message, "response_metadata", None) or {}
    raw = resp.get("token_usage") or resp.get("usage") or {}
    if raw:
        return TokenUsage(
            input_tokens=_int(raw.get("prompt_tokens", raw.get("input_tokens"))),
            output_tokens=_int(raw.get("completion_tokens", raw.get("output_tokens"))),
            calls=1,
        )
    return TokenUsage(calls=1)


def total_tokens(tokens: dict[str, dict] | None) -> int:
    """Input plus output tokens over every role of a run's ``{role: {input, output, calls}}``."""
    return sum(int(u.get("input", 0)) + int(u.get("output", 0)) for u in (tokens or {}).values())
