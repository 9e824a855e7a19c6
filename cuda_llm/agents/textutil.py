"""Pulling JSON and code out of free-form model answers."""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-.]*)[^\n]*\n(.*?)```", re.DOTALL)


def message_text(message: Any) -> str:
    """The text of an AIMessage (string content or text blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in ("text", "output_text"):
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


def strip_thinking(text: str) -> str:
    """Drop <think>...</think> sections that reasoning models served by vLLM/Ollama put before the answer."""
    text = _THINK.sub("", text or "")
    if "</think>" in text:  # opening tag eaten by the server's template
        text = text.split("</think>", 1)[1]
    return text


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every closed ``` fenced block as (language tag lowercased, body)."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def balanced_objects(text: str) -> list[str]:
    """Top-level {...} spans in order, respecting JSON strings and escapes."""
    spans, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in an answer: a ```json block, any fenced block, the whole text, or the first balanced {...}.

    Raises ValueError saying what was found instead.
    """
    text = strip_thinking(text).strip()
    if not text:
        raise ValueError("the answer was empty")
    candidates: list[str] = []
    blocks = fenced_blocks(text)
    candidates += [b for lang, b in blocks if lang == "json"]
    candidates += [b for lang, b in blocks if lang != "json"]
    candidates.append(text)
    candidates += balanced_objects(text)
    last_error = None
    for cand in candidates:
        try:
            value = json.loads(cand.strip())
        except json.JSONDecodeError as exc:
            last_error = exc
            continue
        if isinstance(value, dict):
            return value
        last_error = f"a JSON {type(value).__name__}, not an object"
    if last_error is None or not balanced_objects(text) and not blocks:
        raise ValueError("no JSON object found in the answer")
    raise ValueError(f"no valid JSON object found in the answer ({last_error})")
