"""A fake OpenAI-compatible chat server for tests: http.server in a thread on 127.0.0.1, replies scripted by the test.

It records every request so tests can assert what the real ChatOpenAI client sent (retries included).
Error replies carry ``retry-after-ms: 1`` so the client's backoff stays tiny in tests.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a chat completion (status 200) or an HTTP error with a message."""

    status: int = 200
    content: str = ""
    prompt_tokens: int = 11
    completion_tokens: int = 7
    error: str = "scripted error"
    body: bytes | None = None  # sent verbatim instead (garbage bodies: HTML, empty, cut JSON)
    delay_s: float = 0.0  # wait before answering (client timeouts)
    content_type: str = "application/json"  # e.g. text/html for a proxy's login page
    finish_reason: str = "stop"  # "length": the answer was cut at max_tokens
    reasoning_content: str | None = None  # reasoning text beside the answer, as vLLM/SGLang/DeepSeek send it


@dataclass
class Seen:
    path: str
    body: dict[str, Any]
    status: int

    @property
    def response_format(self) -> str | None:
        rf = self.body.get("response_format")
        return rf.get("type") if isinstance(rf, dict) else None


@dataclass
class FakeOpenAIServer:
    script: list[Reply] = field(default_factory=list)
    reject_json_schema: bool = False  # answer 400 to any request with response_format json_schema
    requests: list[Seen] = field(default_factory=list)
    # GET /models: the served model ids (None: 404, like servers without the route), or a scripted reply
    models: list[str] | None = None
    models_reply: Reply | None = None

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    # -- lifecycle
    def start(self) -> "FakeOpenAIServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802
                status, payload, delay_s, ctype = server._get(self.path)
                if delay_s:
                    time.sleep(delay_s)
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode(errors="replace")}
                status, payload, delay_s, ctype = server._answer(self.path, body)
                if delay_s:
                    time.sleep(delay_s)
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                if status >= 400:
                    self.send_header("retry-after-ms", "1")
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self._url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The /v1 URL; still readable after stop() so tests can check error messages against it."""
        assert self._url is not None, "server not started"
        return self._url

    # -- behaviour
    def _get(self, path: str) -> tuple[int, bytes, float, str]:
        with self._lock:
            r = self.models_reply
            if r is not None:
                payload = r.body if r.body is not None else (
                    _error(r.error, "server_error") if r.status != 200 else _models(self.models or []))
                ctype = "text/html" if payload.lstrip().startswith(b"<") else "application/json"
                self._record(path, {}, r.status, payload)
                return r.status, payload, r.delay_s, ctype
            if not path.endswith("/models") or self.models is None:
                self._record(path, {}, 404, b"")
                return 404, _error(f"no route {path}", "not_found"), 0.0, "application/json"
            self._record(path, {}, 200, b"")
            return 200, _models(self.models), 0.0, "application/json"

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, float, str]:
        with self._lock:
            head = self.script[0] if self.script and path.endswith("/chat/completions") else None
            status, payload = self._reply(path, body)
        return status, payload, head.delay_s if head else 0.0, head.content_type if head else "application/json"

    def _reply(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        with self._lock:
            if not path.endswith("/chat/completions"):
                return self._record(path, body, 404, _error(f"no route {path}", "not_found"))
            rf = body.get("response_format")
            if self.reject_json_schema and isinstance(rf, dict) and rf.get("type") == "json_schema":
                return self._record(path, body, 400, _error(
                    "response_format of type 'json_schema' is not supported by this server", "invalid_request_error"))
            if not self.script:
                return self._record(path, body, 418, _error("fake server: script exhausted", "script_exhausted"))
            reply = self.script.pop(0)
            if reply.body is not None:
                return self._record(path, body, reply.status, reply.body)
            if reply.status != 200:
                return self._record(path, body, reply.status, _error(reply.error, "server_error"))
            completion = {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": _message(reply), "finish_reason": reply.finish_reason,
                             "logprobs": None}],
                "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                          "total_tokens": reply.prompt_tokens + reply.completion_tokens},
            }
            return self._record(path, body, 200, json.dumps(completion).encode())

    def _record(self, path: str, body: dict[str, Any], status: int, payload: bytes) -> tuple[int, bytes]:
        self.requests.append(Seen(path=path, body=body, status=status))
        return status, payload

    @property
    def statuses(self) -> list[int]:
        return [r.status for r in self.requests]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is expected in tests


def _models(ids: list[str]) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                                                  for m in ids]}).encode()


def _message(reply: Reply) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning_content is not None:
        msg["reasoning_content"] = reply.reasoning_content
    return msg


def _error(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
