"""A fake OpenAI-compatible chat completions server on the loopback interface.

A real HTTP server (``http.server.ThreadingHTTPServer``) on ``127.0.0.1`` at a
random free port, served from a background thread, so that the judge client is
tested through real sockets, timeouts and status codes, and so that Django,
Celery and browser (Playwright) tests can point a judge run at it.

Usage::

    with FakeLLMServer(script=["429", "ok"]) as llm:
        client = ChatClient(llm.base_url, "sk-test", "fake-judge")
        client.complete(prompt)
        assert len(llm.requests) == 2

Behaviours (one consumed per chat request from ``script``; when the script is
exhausted every request gets ``default``, normally "ok"):

``ok``          200, the answer of ``answer_fn(prompt)``
``429``         429 with ``Retry-After: 0``
``500``         500 (any other three-digit code works too: "401", "400", "503" ...)
``garbage``     200, a valid chat completion whose text is not JSON
``slow``        sleep ``slow_s`` (default 5 s, longer than any test timeout), then "ok"
``bad_length``  200, a JSON judge answer with one label too many

The default ``answer_fn`` reads the rubric count from the prompt's
``rubric条数：`` section and answers a deterministic 0/1 ``detail`` derived
from a hash of the prompt, so the same prompt always gets the same labels.

Run standalone (e.g. for a browser test in another process)::

    python -m tests.support.fake_llm --port 8765
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "default_answer", "rubric_count_from_prompt", "BEHAVIOURS"]

BEHAVIOURS = ("ok", "429", "500", "garbage", "slow", "bad_length")
MODEL_NAME = "fake-judge"
_MAX_BODY_BYTES = 10 * 1024 * 1024
_STATUS_RE = re.compile(r"^[1-5]\d\d$")
# The count sits on the line after the ``rubric条数：`` header (or on the same
# line).  The last such header wins: the real section comes after the reply,
# which could quote the header itself.
_COUNT_RE = re.compile(r"(?m)^rubric条数[：:][ \t]*\r?\n?[ \t]*(\d+)[ \t]*$")

AnswerFn = Callable[[str], str]


def rubric_count_from_prompt(prompt: str) -> int | None:
    """Return the rubric count announced in a judge prompt, or None if absent."""
    matches = _COUNT_RE.findall(prompt)
    return int(matches[-1]) if matches else None


def _labels_for(prompt: str, n: int) -> list[int]:
    """Derive ``n`` deterministic 0/1 labels from the prompt's SHA-256."""
    labels: list[int] = []
    counter = 0
    # Each digest gives 256 labels; bounded by n, which is a small rubric count.
    while len(labels) < n:
        digest = hashlib.sha256(f"{counter}:{prompt}".encode()).digest()
        for byte in digest:
            for bit in range(8):
                labels.append((byte >> bit) & 1)
        counter += 1
    return labels[:n]


def default_answer(prompt: str) -> str:
    """Answer a judge prompt like a well-behaved judge: JSON, right length, stable labels."""
    n = rubric_count_from_prompt(prompt)
    if n is None:
        return json.dumps({"reason": "fake judge: no rubric count in prompt", "detail": []})
    detail = _labels_for(prompt, n)
    return json.dumps(
        {"reason": f"fake judge: {sum(detail)} of {n} items hit", "detail": detail},
        ensure_ascii=False,
    )


def _bad_length_answer(prompt: str) -> str:
    """A JSON judge answer with one label more than the rubric count."""
    n = rubric_count_from_prompt(prompt) or 0
    detail = _labels_for(prompt, n + 1)
    return json.dumps({"reason": "fake judge: one label too many", "detail": detail})


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its FakeLLMServer and never blocks on close."""

    daemon_threads = True  # a handler stuck on a dead client must not block shutdown
    allow_reuse_address = True
    fake: FakeLLMServer


class _Handler(BaseHTTPRequestHandler):
    """Speaks just enough of the OpenAI protocol for a judge client."""

    server: _Server
    # HTTP/1.0: one request per connection, so no idle keep-alive handler
    # threads linger after shutdown.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep test output quiet."""

    # -- responses ---------------------------------------------------------

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout) before we answered: that is the test.
            pass

    def _send_error(
        self, status: int, message: str, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

    def _send_completion(self, content: str, prompt: str) -> None:
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL_NAME,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                # Character counts stand in for tokens; nobody bills the fake.
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(content),
                    "total_tokens": len(prompt) + len(content),
                },
            },
        )

    def _answer(self, prompt: str) -> None:
        """Send ``answer_fn(prompt)``; a crashing answer_fn becomes a visible 500."""
        try:
            content = self.server.fake.answer_fn(prompt)
        except Exception as exc:  # a test's bug should fail loudly, not hang up silently
            self._send_error(500, f"answer_fn raised {type(exc).__name__}: {exc}", "server_error")
            return
        self._send_completion(content, prompt)

    # -- routes ------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        """``GET /v1/models`` lists the one fake model (a connection check)."""
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
        else:
            self._send_error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        """``POST /v1/chat/completions``: record the request and act out the next behaviour."""
        fake = self.server.fake
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_error(404, f"no route {self.path}", "not_found")
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > _MAX_BODY_BYTES:
            self._send_error(413, "bad or missing Content-Length", "invalid_request_error")
            return
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        auth = self.headers.get("Authorization", "")
        headers = dict(self.headers.items())
        if fake.api_key is not None and auth != f"Bearer {fake.api_key}":
            # Like OpenAI, echo the key that was sent: clients must redact it.
            # A rejected request is recorded but consumes no scripted behaviour.
            fake._record(body, headers, "401-auth")
            sent = auth.removeprefix("Bearer ")
            self._send_error(401, f"Incorrect API key provided: {sent}", "invalid_request_error")
            return
        prompt = _last_user_content(body)
        if prompt is None:
            fake._record(body, headers, "400-malformed")
            self._send_error(400, "body must be JSON with model and messages", "invalid_request_error")
            return
        behaviour = fake._record(body, headers)

        if fake.delay_s > 0 and fake._stopping.wait(fake.delay_s):
            return  # shutting down: drop the request

        if behaviour == "ok":
            self._answer(prompt)
        elif behaviour == "garbage":
            self._send_completion("I think the reply is quite good overall!", prompt)
        elif behaviour == "bad_length":
            self._send_completion(_bad_length_answer(prompt), prompt)
        elif behaviour == "slow":
            # Event.wait, not sleep: shutdown interrupts it, so stop() is fast.
            if fake._stopping.wait(fake.slow_s):
                return
            self._answer(prompt)
        elif behaviour == "429":
            self._send_error(429, "Rate limit reached", "rate_limit_exceeded", {"Retry-After": "0"})
        else:  # a status code, validated when scripted
            status = int(behaviour)
            if status == 401:
                sent = auth.removeprefix("Bearer ")
                self._send_error(401, f"Incorrect API key provided: {sent}", "invalid_request_error")
            else:
                kind = "server_error" if status >= 500 else "invalid_request_error"
                self._send_error(status, f"scripted HTTP {status}", kind)


def _last_user_content(body: Any) -> str | None:
    """Return the last user message's text from a chat request body, or None if malformed."""
    if not isinstance(body, dict) or not body.get("model"):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else None
    return None


def _check_behaviour(item: str | int) -> str:
    """Validate a scripted behaviour early, in the test's thread, not the server's."""
    text = str(item).strip()
    if text in BEHAVIOURS or _STATUS_RE.match(text):
        return text
    raise ValueError(f"unknown fake LLM behaviour {item!r}; use one of {BEHAVIOURS} or an HTTP status")


class FakeLLMServer:
    """An OpenAI-compatible chat completions server for tests; a context manager.

    ``base_url`` ends in ``/v1``.  ``requests`` is a snapshot of the JSON
    bodies received (None for a body that was not JSON), ``headers`` the
    matching request headers, ``served`` the behaviour used for each and
    ``received_at`` the ``time.monotonic()`` arrival times; all are guarded
    by a lock since handlers run on several threads.
    """

    def __init__(
        self,
        script: Iterable[str | int] | None = None,
        answer_fn: AnswerFn | None = None,
        delay_s: float = 0,
        *,
        slow_s: float = 5.0,
        api_key: str | None = None,
        default: str = "ok",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """Prepare (not start) the server; ``api_key`` set means other keys get 401."""
        self.answer_fn: AnswerFn = answer_fn or default_answer
        self.delay_s = float(delay_s)
        self.slow_s = float(slow_s)
        self.api_key = api_key
        self.default = _check_behaviour(default)
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._script: list[str] = [_check_behaviour(b) for b in (script or [])]
        self._requests: list[Any] = []
        self._headers: list[dict[str, str]] = []
        self._served: list[str] = []
        self._received_at: list[float] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeLLMServer:
        """Bind a free port and serve from a daemon thread; return self."""
        if self._server is not None:
            raise RuntimeError("FakeLLMServer already started")
        self._stopping.clear()
        server = _Server((self._host, self._port), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-llm-{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers, release the port. Idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()  # "slow" and delayed handlers return at once
        server.shutdown()  # returns after serve_forever's loop exits (bounded by poll_interval)
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (only while started)."""
        if self._server is None:
            raise RuntimeError("FakeLLMServer is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what a judge run's base URL should be."""
        return f"http://{self._host}:{self.port}/v1"

    # -- script and records ------------------------------------------------

    def push(self, *behaviours: str | int) -> None:
        """Append behaviours to the script (for a server shared across tests)."""
        checked = [_check_behaviour(b) for b in behaviours]
        with self._lock:
            self._script.extend(checked)

    def reset(self, script: Iterable[str | int] | None = None) -> None:
        """Replace the script and forget every recorded request."""
        checked = [_check_behaviour(b) for b in (script or [])]
        with self._lock:
            self._script = checked
            self._requests.clear()
            self._headers.clear()
            self._served.clear()
            self._received_at.clear()

    def _record(self, body: Any, headers: dict[str, str], forced: str | None = None) -> str:
        """Record one chat request and pop the behaviour it gets (called by handlers).

        ``forced`` records a request the server rejected before consulting the
        script, without consuming a scripted behaviour.
        """
        with self._lock:
            if forced is not None:
                behaviour = forced
            else:
                behaviour = self._script.pop(0) if self._script else self.default
            self._requests.append(body)
            self._headers.append(headers)
            self._served.append(behaviour)
            self._received_at.append(time.monotonic())
            return behaviour

    @property
    def requests(self) -> list[Any]:
        """JSON bodies of the chat requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """Request headers, parallel to ``requests``."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def served(self) -> list[str]:
        """The behaviour each request got, parallel to ``requests``."""
        with self._lock:
            return list(self._served)

    @property
    def received_at(self) -> list[float]:
        """``time.monotonic()`` arrival times, parallel to ``requests``."""
        with self._lock:
            return list(self._received_at)

    @property
    def remaining_script(self) -> list[str]:
        """Behaviours not yet consumed."""
        with self._lock:
            return list(self._script)

    def __repr__(self) -> str:
        where = self.base_url if self._server is not None else "stopped"
        return f"FakeLLMServer({where})"


def _main(argv: list[str] | None = None) -> int:
    """Serve until interrupted; print the base URL so a parent process can read it."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible judge server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--api-key", default=None, help="require this bearer key (401 otherwise)")
    parser.add_argument("script", nargs="*", help="behaviours for the first requests")
    args = parser.parse_args(argv)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    server = FakeLLMServer(
        args.script, delay_s=args.delay, api_key=args.api_key, host=args.host, port=args.port
    )
    with server as llm:
        print(llm.base_url, flush=True)
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
