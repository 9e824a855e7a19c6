"""A scripted chat model for tests: canned answers instead of an LLM, every call recorded.

    model = ScriptedChatModel(replies=["```cuda ...```", ...])             # answers in order
    model = ScriptedChatModel.by_role(planner=[plan_json], coder=[k1, k2], critic=[crit_json])
    model = ScriptedChatModel(respond=lambda msgs: ...)                    # answer chosen per call

A reply is a str (the answer's text), an AIMessage (sent as is; its usage_metadata kept if set), an
Exception (raised, e.g. ``endpoint_down()`` for an unreachable server) or a callable of the messages that
returns one of those. Each answer carries usage_metadata (given per reply, fixed by ``tokens``, or
estimated as characters / 4), so token accounting can be tested.

Structured output behaves like ChatOpenAI's ``with_structured_output(method="json_schema",
include_raw=True)`` (the answer's text parsed as JSON) unless ``structured_output`` says otherwise:
"rejected" raises a 400 "response_format json_schema not supported" like a server without schema support
(no reply consumed), "unsupported" makes with_structured_output raise NotImplementedError like a chat model
without it. Both send cuda_llm.agents.structured to its plain-text JSON fallback.

Thread-safe: the graph's coders call one model in parallel.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from cuda_llm.agents.prompts import template
from cuda_llm.agents.textutil import message_text

ROLES = ("planner", "coder", "critic")
StructuredMode = Literal["json_schema", "rejected", "unsupported"]


class ScriptExhausted(RuntimeError):
    """More calls than scripted replies: the test's script is too short (or the code calls too often)."""


class SchemaRejected(Exception):
    """What an OpenAI-compatible server without JSON-schema support answers (HTTP 400)."""

    status_code = 400


@dataclass
class ScriptedCall:
    """One call as the model saw it."""

    messages: list[BaseMessage]
    role: str | None
    structured: bool  # sent with response_format json_schema
    kwargs: dict[str, Any] = field(default_factory=dict)
    reply: str = ""
    usage: dict[str, int] = field(default_factory=dict)  # the usage_metadata the answer carried

    @property
    def system(self) -> str:
        return next((message_text(m) for m in self.messages if isinstance(m, SystemMessage)), "")

    @property
    def user(self) -> str:
        """The last human message (the prompt, or the latest correction)."""
        return next((message_text(m) for m in reversed(self.messages) if m.type == "human"), "")

    @property
    def text(self) -> str:
        """Every message's text, joined: for asserting what a prompt carried."""
        return "\n".join(message_text(m) for m in self.messages)


def _system_prefix(role: str) -> str:
    """The fixed opening of a role's system prompt (up to its first placeholder), from the template file."""
    head = template(f"{role}_system").strip().split("{", 1)[0]
    return " ".join(head.split())[:60]


def detect_role(messages: Sequence[BaseMessage]) -> str | None:
    """planner / coder / critic, from the system prompt's opening; None for other conversations."""
    system = next((message_text(m) for m in messages if isinstance(m, SystemMessage)), "")
    flat = " ".join(system.split())
    for role in ROLES:
        if flat.startswith(_system_prefix(role)):
            return role
    return None


def endpoint_down(url: str = "http://127.0.0.1:9/v1") -> Exception:
    """The exception the OpenAI client raises when the server cannot be reached."""
    import httpx
    import openai

    return openai.APIConnectionError(request=httpx.Request("POST", url + "/chat/completions"))


class ScriptedChatModel(BaseChatModel):
    """Canned answers in order (``replies``) or chosen per call (``respond``); see the module docstring."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    respond: Callable[[list[BaseMessage]], Any] | None = None
    structured_output: StructuredMode = "json_schema"
    model_name: str = ""  # default "scripted-<structured_output>" (structured.py remembers methods by name)
    tokens: tuple[int, int] | None = None  # fixed (input, output) per call; None: characters / 4

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: list[ScriptedCall] = PrivateAttr(default_factory=list)
    _queue: list[Any] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _setup(self) -> "ScriptedChatModel":
        if not self.model_name:
            self.model_name = f"scripted-{self.structured_output}"
        self._queue = list(self.replies)
        return self

    @classmethod
    def by_role(cls, *, planner: Sequence[Any] = (), coder: Sequence[Any] = (), critic: Sequence[Any] = (),
                **kwargs: Any) -> "ScriptedChatModel":
        """One model for all three roles: each role's replies in order, the role read from the system prompt."""
        queues = {"planner": list(planner), "coder": list(coder), "critic": list(critic)}
        lock = threading.Lock()

        def respond(messages: list[BaseMessage]) -> Any:
            role = detect_role(messages)
            if role is None:
                raise ScriptExhausted(f"cannot tell the role of this conversation: {_opening(messages)!r}")
            with lock:
                if not queues[role]:
                    raise ScriptExhausted(f"no scripted {role} reply left; the call began: {_opening(messages)!r}")
                return queues[role].pop(0)

        return cls(respond=respond, **kwargs)

    # -- inspection
    @property
    def calls(self) -> list[ScriptedCall]:
        with self._lock:
            return list(self._calls)

    def calls_for(self, role: str) -> list[ScriptedCall]:
        return [c for c in self.calls if c.role == role]

    @property
    def remaining(self) -> int:
        """Replies of ``replies`` not used yet."""
        with self._lock:
            return len(self._queue)

    # -- BaseChatModel
    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def _next_reply(self, messages: list[BaseMessage]) -> Any:
        if self.respond is not None:
            reply = self.respond(messages)
        else:
            with self._lock:
                if not self._queue:
                    raise ScriptExhausted(
                        f"all {len(self.replies)} scripted replies used; the extra call began: {_opening(messages)!r}")
                reply = self._queue.pop(0)
        if callable(reply) and not isinstance(reply, (BaseMessage, Exception)):
            reply = reply(messages)
        return reply

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        structured = kwargs.get("response_format") is not None
        call = ScriptedCall(messages=list(messages), role=detect_role(messages), structured=structured,
                            kwargs={k: v for k, v in kwargs.items() if k != "response_format"})
        with self._lock:
            self._calls.append(call)
        if structured and self.structured_output == "rejected":
            raise SchemaRejected("Error code: 400 - response_format of type 'json_schema' is not supported by this server")
        reply = self._next_reply(list(messages))
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, AIMessage):
            msg = reply.model_copy()
        elif isinstance(reply, str):
            msg = AIMessage(content=reply)
        else:
            raise TypeError(f"a scripted reply must be str, AIMessage, Exception or a callable; got {type(reply).__name__}")
        call.reply = message_text(msg)
        if not msg.usage_metadata:
            if self.tokens is not None:
                n_in, n_out = self.tokens
            else:
                n_in = max(1, sum(len(message_text(m)) for m in messages) // 4)
                n_out = max(1, len(call.reply) // 4)
            msg.usage_metadata = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        call.usage = dict(msg.usage_metadata)
        msg.response_metadata = {**msg.response_metadata, "model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any) -> Runnable:
        """Tools are recorded in the call's kwargs; tool calls come from scripted AIMessages."""
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, method: str = "json_schema",
                               **kwargs: Any) -> Runnable:
        """ChatOpenAI's json_schema mode: the answer's text is the JSON (a dict, or the pydantic class)."""
        if self.structured_output == "unsupported":
            raise NotImplementedError("with_structured_output is not implemented for this model.")
        if method != "json_schema":
            raise ValueError(f"ScriptedChatModel supports method='json_schema' only, not {method!r}")
        bound = self.bind(response_format={"type": "json_schema", "json_schema": {"schema": _as_json_schema(schema)}})

        def parse(raw: AIMessage) -> Any:
            data = json.loads(message_text(raw))
            if isinstance(schema, type) and issubclass(schema, BaseModel):
                return schema.model_validate(data)
            return data

        def run(raw: AIMessage) -> Any:
            if not include_raw:
                return parse(raw)
            try:
                return {"raw": raw, "parsed": parse(raw), "parsing_error": None}
            except Exception as exc:  # noqa: BLE001 - reported like ChatOpenAI does
                return {"raw": raw, "parsed": None, "parsing_error": exc}

        return bound | RunnableLambda(run)


def _as_json_schema(schema: Any) -> dict[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return dict(schema)


def _opening(messages: Sequence[BaseMessage], limit: int = 120) -> str:
    text = " ".join(" ".join(message_text(m).split()) for m in messages[-1:])
    return text[:limit]
