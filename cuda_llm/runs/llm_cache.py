"""LLM answers cached on disk by prompt hash, with a trace event and prompt/response files per call.

Wrapping each role's chat model this way makes a resumed run replay the answers a killed run already
paid for, instead of asking again: the key is the role, the model name, the kind of call (text or JSON
schema), every message sent and the call's own settings (a temperature, a larger token budget). The
wrapper forwards everything else to the real model, so the agents (which call ``invoke`` and
``with_structured_output``) cannot tell the difference. Reasoning text that the server returned beside an
answer is kept with it and written beside the answer file.

Each exchange is also written for people as prompts/<name>.md and answers/<name>.md, the name from
``exchange_name``: the role, the label the node sets around its call with ``call_label`` (the candidate,
or the round for the planner) and the call's turn in its conversation, as a manual role's pending prompt
is named. A failed call is reported to ``on_error`` (which may raise to stop the run).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from cuda_llm.paths import atomic_write
from cuda_llm.runs.rundir import exchange_name, message_text, read_json, turn_of

OnCall = Callable[[dict[str, Any]], None]
OnError = Callable[[dict[str, Any], BaseException], None]
_LABEL: contextvars.ContextVar[str | None] = contextvars.ContextVar("cuda_llm_call_label", default=None)


@contextlib.contextmanager
def call_label(label: str) -> Iterator[None]:
    """Name the LLM calls made inside the block after ``label`` (a candidate id, or a round such as r2)."""
    token = _LABEL.set(label)
    try:
        yield
    finally:
        _LABEL.reset(token)


def current_call_label() -> str | None:
    """The label set by the innermost ``call_label`` around this call (None outside one)."""
    return _LABEL.get()


def prompt_key(role: str, model: str, kind: str, messages: Sequence[BaseMessage], schema: Any = None,
               call: dict[str, Any] | None = None) -> str:
    payload: dict[str, Any] = {
        "role": role, "model": model, "kind": kind,
        "schema": schema if isinstance(schema, (dict, type(None))) else getattr(schema, "__name__", str(schema)),
        "messages": [[m.type, message_text(m.content)] for m in messages],
    }
    if call:   # only when given, so the keys of calls without settings stay what they were
        payload["call"] = call
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def reasoning_of(msg: Any) -> str:
    """The reasoning text a server returned beside the answer (kept by cuda_llm.agents.llm), or ''."""
    text = (getattr(msg, "additional_kwargs", None) or {}).get("reasoning_content")
    return text if isinstance(text, str) else ""


def _dump_ai(msg: Any) -> dict[str, Any]:
    return {
        "content": message_text(getattr(msg, "content", "")),
        "usage_metadata": dict(getattr(msg, "usage_metadata", None) or {}) or None,
        "response_metadata": json.loads(json.dumps(getattr(msg, "response_metadata", None) or {}, default=str)),
        "reasoning": reasoning_of(msg) or None,
    }


def _load_ai(data: dict[str, Any]) -> AIMessage:
    kw: dict[str, Any] = {"content": data.get("content", ""), "response_metadata": data.get("response_metadata") or {}}
    if data.get("reasoning"):
        kw["additional_kwargs"] = {"reasoning_content": data["reasoning"]}
    if data.get("usage_metadata"):
        u = data["usage_metadata"]
        kw["usage_metadata"] = {"input_tokens": int(u.get("input_tokens", 0)), "output_tokens": int(u.get("output_tokens", 0)),
                                "total_tokens": int(u.get("total_tokens", 0))}
    return AIMessage(**kw)


def _tokens(msg: Any) -> tuple[int, int]:
    u = getattr(msg, "usage_metadata", None) or {}
    return int(u.get("input_tokens", 0) or 0), int(u.get("output_tokens", 0) or 0)


class CachedChatModel:
    """A chat model in front of ``inner`` that answers repeated prompts from ``cache_dir``."""

    def __init__(self, inner: Any, role: str, cache_dir: Path, *, on_call: OnCall | None = None,
                 rundir: Any = None, on_error: OnError | None = None):
        self._inner = inner
        self._role = role
        self._dir = Path(cache_dir)
        self._on_call = on_call
        self._on_error = on_error
        self._rundir = rundir

    def _name(self, key: str, messages: Sequence[BaseMessage]) -> str:
        """prompts/answers file stem: role-label[-turn], or role-<prompt hash> for a call made outside a node."""
        label = _LABEL.get()
        if not label:
            return f"{self._role}-{key[:10]}"
        return exchange_name(self._role, label, turn_of(messages))

    def _call_inner(self, fn: Callable[[], Any]) -> Any:
        """The real model's call; a failure goes to on_error first (which may replace it by its own exception)."""
        try:
            return fn()
        except Exception as exc:
            if self._on_error is not None:
                self._on_error({"role": self._role, "model": self.model_label, "candidate": _LABEL.get()}, exc)
            raise

    def __getattr__(self, name: str) -> Any:  # model_name, openai_api_base, ... of the real model
        return getattr(self._inner, name)

    @property
    def model_label(self) -> str:
        return str(getattr(self._inner, "model_name", None) or getattr(self._inner, "model", None) or type(self._inner).__name__)

    def _path(self, key: str) -> Path:
        return self._dir / f"{key[:24]}.json"

    def _get(self, key: str) -> dict | None:
        return read_json(self._path(key))

    def _put(self, key: str, data: dict) -> None:
        atomic_write(self._path(key), json.dumps(data))

    def _record(self, key: str, kind: str, messages: Sequence[BaseMessage], ai: Any, cached: bool, seconds: float) -> None:
        call_id = self._name(key, messages)
        prompt_path = answer_path = None
        if self._rundir is not None:
            try:   # written again on a cached replay: the same name and text, so a kill between never loses them
                prompt_path = self._rundir.write_prompt(call_id, list(messages))
                answer_path = self._rundir.write_answer(call_id, message_text(getattr(ai, "content", "")))
                if reasoning_of(ai):   # beside the answer: <name>.reasoning.md
                    self._rundir.write_answer(f"{call_id}.reasoning", reasoning_of(ai))
            except Exception:  # noqa: BLE001 - files are for people; never fail a call over them
                pass
        if self._on_call is not None:
            tin, tout = _tokens(ai)
            self._on_call({"role": self._role, "model": self.model_label, "kind": kind, "cached": cached,
                           "latency_s": round(seconds, 3), "input_tokens": tin, "output_tokens": tout,
                           "call_id": call_id, "candidate": _LABEL.get(),
                           "cutoff_retries": (getattr(ai, "response_metadata", None) or {}).get("cutoff_retries") or 0,
                           "reasoning_chars": len(reasoning_of(ai)),
                           "prompt": str(prompt_path) if prompt_path else None,
                           "response": str(answer_path) if answer_path else None})

    def invoke(self, messages: Sequence[BaseMessage], config: Any = None, **kw: Any) -> AIMessage:
        messages = list(messages)
        key = prompt_key(self._role, self.model_label, "text", messages, call=dict(kw) or None)
        hit = self._get(key)
        if hit is not None:
            ai = _load_ai(hit["message"])
            self._record(key, "text", messages, ai, True, 0.0)
            return ai
        t0 = time.perf_counter()
        ai = self._call_inner(lambda: self._inner.invoke(messages, config, **kw) if config is not None
                              else self._inner.invoke(messages, **kw))
        dt = time.perf_counter() - t0
        self._put(key, {"message": _dump_ai(ai)})
        self._record(key, "text", messages, ai, False, dt)
        return ai

    def with_structured_output(self, schema: Any, *, method: str = "json_schema", include_raw: bool = False, **kw: Any) -> Any:
        inner = self._inner.with_structured_output(schema, method=method, include_raw=include_raw, **kw)
        return _CachedStructured(self, inner, schema, method, include_raw)


class _CachedStructured:
    def __init__(self, owner: CachedChatModel, inner: Any, schema: Any, method: str, include_raw: bool):
        self._owner, self._inner, self._schema, self._method, self._include_raw = owner, inner, schema, method, include_raw

    def invoke(self, messages: Sequence[BaseMessage], config: Any = None, **kw: Any) -> Any:
        o = self._owner
        messages = list(messages)
        kind = f"structured:{self._method}:{int(self._include_raw)}"
        key = prompt_key(o._role, o.model_label, kind, messages, self._schema, call=dict(kw) or None)
        hit = o._get(key)
        if hit is not None:
            raw = _load_ai(hit["raw"])
            o._record(key, kind, messages, raw, True, 0.0)
            if not self._include_raw:
                return hit["parsed"]
            return {"raw": raw, "parsed": hit["parsed"], "parsing_error": hit["parsing_error"]}
        t0 = time.perf_counter()
        out = o._call_inner(lambda: self._inner.invoke(messages, config, **kw) if config is not None
                            else self._inner.invoke(messages, **kw))
        dt = time.perf_counter() - t0
        if isinstance(out, dict) and "raw" in out:
            raw, parsed, err = out.get("raw"), out.get("parsed"), out.get("parsing_error")
        else:
            raw, parsed, err = AIMessage(content=json.dumps(out if isinstance(out, dict) else getattr(out, "model_dump", lambda: {})())), out, None
        if isinstance(parsed, BaseModel):
            parsed = parsed.model_dump(mode="json")
        o._put(key, {"raw": _dump_ai(raw), "parsed": parsed, "parsing_error": None if err is None else str(err)})
        o._record(key, kind, messages, raw, False, dt)
        return out
