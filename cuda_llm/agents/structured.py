"""Pydantic-validated answers from any OpenAI-compatible server, with or without JSON-schema support.

First choice is ``with_structured_output(method="json_schema")``. Servers that reject it (HTTP 400 about
response_format / json_schema, or a chat model without structured output) get the schema described in
the prompt and the JSON is pulled out of the text; which way works is remembered per model, so the
fallback is found once per process. Invalid answers are sent back with what was wrong.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Generic, Literal, Sequence, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from cuda_llm.agents.errors import LLMAnswerError, LLMCallError, NotAChatCompletion, snippet
from cuda_llm.agents.textutil import extract_json, message_text
from cuda_llm.agents.usage import TokenUsage, usage_of

T = TypeVar("T", bound=BaseModel)
Method = Literal["json_schema", "fallback"]

_methods: dict[tuple, Method] = {}
_lock = threading.Lock()
_REJECTION_WORDS = ("response_format", "json_schema", "structured output", "structured_output", "guided_json", "schema",
                    "unrecognized", "unsupported", "not supported", "extra_forbidden", "extra inputs")


class StructuredAnswer(BaseModel, Generic[T]):
    value: T
    raw_text: str
    usage: TokenUsage
    method: Method
    attempts: int


def model_key(model: Any) -> tuple:
    """Identity of a chat endpoint + model for remembering which structured-output method works."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    base = getattr(model, "openai_api_base", None)
    return (type(model).__name__, str(name), str(base), id(model) if name is None else 0)


def known_method(model: Any) -> Method | None:
    with _lock:
        return _methods.get(model_key(model))


def remember_method(model: Any, method: Method) -> None:
    with _lock:
        _methods[model_key(model)] = method


def forget_methods() -> None:
    """Clear the per-model memory (tests, or after switching servers behind the same URL)."""
    with _lock:
        _methods.clear()


def _is_schema_rejection(exc: BaseException) -> bool:
    if isinstance(exc, NotImplementedError):  # chat models without structured output support
        return True
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    if status in (400, 404, 415, 422) or type(exc).__name__ in ("BadRequestError", "UnprocessableEntityError"):
        return any(w in text for w in _REJECTION_WORDS)
    return False


def _json_schema_runnable(model: Any, schema: type[BaseModel]) -> Any:
    """The json_schema runnable, or None for chat models that cannot do it (no method= or no tools support).

    A dict schema (not the class) so that a bad answer comes back as parsing_error with the raw message
    and its usage, instead of an exception from the OpenAI SDK's own parser.
    """
    try:
        return model.with_structured_output(_response_schema(schema), method="json_schema", include_raw=True)
    except (NotImplementedError, ValueError, TypeError, AttributeError):
        return None


def _call_error(exc: BaseException, model: Any) -> LLMCallError:
    """An endpoint failure as an error naming the model, the URL and what to check."""
    name = getattr(model, "model_name", None) or type(model).__name__
    request = getattr(exc, "request", None)
    url = getattr(model, "openai_api_base", None) or (str(request.url) if request is not None else None)
    url = url or "https://api.openai.com/v1"
    retries = getattr(model, "max_retries", None)
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries and not is_bad_reply(exc) else ""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    timeout_cls, connection_cls = _openai_classes("APITimeoutError", "APIConnectionError")
    if isinstance(exc, timeout_cls):
        advice = ("the server did not answer in time: check that it is not overloaded, or raise timeout_s "
                  "(--timeout, CUDA_LLM_TIMEOUT_S or timeout_s in cuda-llm.toml)")
    elif isinstance(exc, connection_cls):
        advice = ("check that the server is running and reachable at that URL (--base-url / OPENAI_BASE_URL; "
                  "local servers usually end in /v1, e.g. http://localhost:8000/v1)")
    elif is_bad_reply(exc) or kind == "APIResponseValidationError":
        advice = ("the reply is not an OpenAI chat completion (an HTML page, an empty or cut body, or JSON "
                  "without choices): check that the base URL points at an OpenAI-compatible API (usually "
                  "ending in /v1), not a web page, a login page or a proxy's error page")
    elif status in (401, 403):
        advice = "check the API key (--api-key or OPENAI_API_KEY, or the variable named by api_key_env)"
    elif status == 404:
        advice = ("check the model name (--model / CUDA_LLM_MODEL) against the server's /v1/models, and that "
                  "the base URL ends in /v1")
    elif status == 429:
        advice = "rate limited: lower --candidates, raise max_retries, or wait for the quota to reset"
    elif status is not None and status >= 500:
        advice = "the server failed repeatedly: check its logs (out of memory? model still loading?)"
    else:
        advice = "the server refused the request; its message is above"
    return LLMCallError(
        f"LLM call to model {name!r} at {url} failed{after}: {kind}"
        + (f" (HTTP {status})" if status else "") + f": {snippet(str(exc), 400).rstrip('.')}. What to do: {advice}."
    )


def _openai_classes(*names: str) -> tuple[type, ...]:
    try:
        import openai
    except ImportError:  # pragma: no cover
        return tuple(type(n, (Exception,), {}) for n in names)
    return tuple(getattr(openai, n) for n in names)


# What ChatOpenAI raises for a 200 reply that is not a chat completion (besides json.JSONDecodeError)
_BAD_REPLY_TEXT = ("Unexpected response type from OpenAI-compatible endpoint", "'choices'")


def is_bad_reply(exc: BaseException) -> bool:
    """A reply with HTTP 200 whose body is not a chat completion: HTML (a login or proxy page), an empty or
    truncated body, or JSON without ``choices``. An endpoint error, not a bug of the caller."""
    if isinstance(exc, (json.JSONDecodeError, NotAChatCompletion)):
        return True
    return isinstance(exc, (ValueError, TypeError, KeyError, AttributeError)) and any(t in str(exc) for t in _BAD_REPLY_TEXT)


def _is_api_error(exc: BaseException) -> bool:
    if is_bad_reply(exc):  # a 200 reply whose body is not a chat completion (wrong URL, proxy page)
        return True
    try:
        import openai
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (openai.APIError, openai.APITimeoutError))


def invoke_model(model: Any, messages: Sequence[BaseMessage], **call_kwargs: Any) -> Any:
    """``model.invoke`` with endpoint failures (after the client's own retries) raised as LLMCallError.
    ``call_kwargs`` (a temperature for this candidate, say) go with the request."""
    try:
        return model.invoke(list(messages), **call_kwargs)
    except Exception as exc:  # noqa: BLE001 - classified here
        if _is_api_error(exc):
            raise _call_error(exc, model) from exc
        raise


def schema_instructions(schema: type[BaseModel]) -> str:
    """What a server without JSON-schema support is told about the answer's shape."""
    js = json.dumps(schema.model_json_schema(), indent=1)
    return (
        "Answer with exactly one JSON object and nothing else (no prose; a ```json fenced block is fine). "
        f"It must validate against this JSON schema of `{schema.__name__}`:\n```json\n{js}\n```"
    )


def _with_instructions(messages: Sequence[BaseMessage], schema: type[BaseModel]) -> list[BaseMessage]:
    msgs = list(messages)
    extra = schema_instructions(schema)
    if msgs and isinstance(msgs[0], SystemMessage) and isinstance(msgs[0].content, str):
        msgs[0] = SystemMessage(content=msgs[0].content.rstrip() + "\n\n" + extra)
    else:
        msgs.insert(0, SystemMessage(content=extra))
    return msgs


def _validation_reason(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:8]:
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _response_schema(schema: type[BaseModel]) -> dict[str, Any]:
    js = schema.model_json_schema()
    js.setdefault("title", schema.__name__)
    return js


def _validate(data: dict[str, Any], schema: type[T]) -> T:
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match the schema: {_validation_reason(exc)}") from None


def parse_answer(text: str, schema: type[T]) -> T:
    """Extract and validate; raises ValueError with a reason a model can act on."""
    return _validate(extract_json(text), schema)


def invoke_structured(model: Any, messages: Sequence[BaseMessage], schema: type[T], *, retries: int = 2) -> StructuredAnswer[T]:
    """Ask ``model`` for a ``schema`` instance. Raises LLMAnswerError after ``retries`` corrections, LLMCallError
    when the endpoint fails (after the client's own transport retries)."""
    usage = TokenUsage()
    attempts = 0
    raw_text = ""
    reason = ""
    msgs = list(messages)
    if known_method(model) != "fallback":
        runnable = _json_schema_runnable(model, schema)
        out = None
        if runnable is None:
            remember_method(model, "fallback")
        else:
            try:
                attempts += 1
                out = runnable.invoke(msgs)
            except Exception as exc:  # noqa: BLE001 - classified below
                attempts -= 1  # a rejected request is not an answer
                if _is_schema_rejection(exc):
                    remember_method(model, "fallback")
                elif _is_api_error(exc):
                    raise _call_error(exc, model) from exc
                else:
                    raise
        if out is not None:
            raw = out.get("raw")
            usage = usage + usage_of(raw)
            raw_text = message_text(raw)
            parsed = out.get("parsed")
            try:
                if out.get("parsing_error") is None and isinstance(parsed, dict):
                    value = _validate(parsed, schema)
                else:  # maybe the server ignored response_format and wrapped the JSON in prose
                    value = parse_answer(raw_text, schema)
            except ValueError as exc:
                reason = str(exc)
                msgs = _with_instructions(messages, schema)
                msgs += [AIMessage(content=raw_text or " "), HumanMessage(content=_correction(reason))]
            else:
                remember_method(model, "json_schema")
                return StructuredAnswer[schema](value=value, raw_text=raw_text, usage=usage, method="json_schema", attempts=attempts)
    if not reason:
        msgs = _with_instructions(messages, schema)
    budget = retries if reason else retries + 1  # a rejected or impossible schema call costs no correction
    for _ in range(budget):
        attempts += 1
        ai = invoke_model(model, msgs)
        usage = usage + usage_of(ai)
        raw_text = message_text(ai)
        try:
            value = parse_answer(raw_text, schema)
        except ValueError as exc:
            reason = str(exc)
            msgs += [AIMessage(content=raw_text or " "), HumanMessage(content=_correction(reason))]
            continue
        return StructuredAnswer[schema](value=value, raw_text=raw_text, usage=usage, method="fallback", attempts=attempts)
    raise LLMAnswerError(
        f"{schema.__name__}: no valid answer after {attempts} attempt(s); last problem: {reason}. "
        f"The answer began: {snippet(raw_text)!r}",
        raw_text=raw_text, usage=usage, attempts=attempts,
    )


def _correction(reason: str) -> str:
    return (
        f"Your last answer could not be used: {reason}. Reply again with only the corrected JSON object, "
        "following the schema exactly."
    )
