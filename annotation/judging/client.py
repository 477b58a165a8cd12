"""A small, strict client for OpenAI-compatible chat completion endpoints.

Used by judge runs: one prompt in, the assistant's text out, with a shared
requests-per-second limit, retries with exponential backoff and full jitter
for transient failures, and no retry for errors that will not go away by
themselves (a bad key, a bad request, a refused target).

Every request goes through the guarded outbound client (``core.outbound``): a PM
types the base URL, so the target is resolved and refused when it is private,
loopback, link-local, multicast or reserved, at connect time and after each
redirect, unless an admin named its host in RUBRICA_OUTBOUND_ALLOWED_HOSTS. The
guard reads that list from Django's settings; everything else here is plain Python.

``base_url`` is taken as given (only a trailing slash is stripped) and the
client POSTs to ``{base_url}/chat/completions``; so pass the URL that already
ends in the API version, e.g. ``https://api.openai.com/v1``.  Guessing a
``/v1`` suffix would break providers whose path differs (``.../v4``,
``.../openai/deployments/x``).

A failure says its class (``error_class``) and HTTP status, never what the target
answered: a PM must not be able to read a server's reply by pointing a run at it.
A short, key-free excerpt of an error body goes to the log only. The API key is
kept out of every exception message and ``repr``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from core.outbound import OutboundError, OutboundResponse, Resolver, outbound_request

from .pacing import RateLimiter, backoff_delay, parse_retry_after, retryable_status
from .prompt import JudgeAnswer, JudgeParseError, parse_judge_answer, render_judge_prompt, render_judge_prompt_from

__all__ = [
    "ChatClient",
    "Completer",
    "JudgeRequestError",
    "judge_one",
]

logger = logging.getLogger(__name__)

_LOG_EXCERPT_CHARS = 200
# A chat completion with a judge's answer is a few KB; a longer body is cut and then
# fails to parse as one, instead of filling a worker's memory.
MAX_RESPONSE_BYTES = 1024 * 1024

# Failures of the guarded client that may heal by waiting; "refused", "tls" and
# "too_many_redirects" will not.
_RETRYABLE_CLASSES = frozenset({"timeout", "connect", "protocol", "dns"})


class JudgeRequestError(RuntimeError):
    """A chat completion request failed for good.

    ``error_class`` names the kind of failure (``http_status``, ``refused``, ``timeout``,
    ``connect``, ``dns``, ``tls``, ``protocol``, ``too_many_redirects``,
    ``not_chat_completion``, ``no_content``), ``status`` is the last HTTP status
    (None when no response came), ``attempts`` how many HTTP requests were made, and
    ``retryable`` whether the last failure was of a transient kind (so a caller such as
    a Celery task may try again later, whereas a 401 or 400 will not heal by waiting).
    The message holds none of the target's response.
    """

    def __init__(
        self,
        message: str,
        *,
        error_class: str = "http_status",
        status: int | None = None,
        attempts: int = 0,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


class Completer(Protocol):
    """Anything that turns a prompt into the model's text (``ChatClient`` or a test double)."""

    def complete(self, prompt: str) -> str:
        """Return the model's answer to ``prompt``."""
        ...


class ChatClient:
    """Synchronous client for ``POST {base_url}/chat/completions``.

    Thread-safe: one instance (and its rate limiter) is meant to be shared by all
    threads of a process.  Create it inside the worker process, not before a fork.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 60,
        max_retries: int = 5,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20,
        rps: float | None = 2.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        *,
        rate_limiter: RateLimiter | None = None,
        rng: random.Random | None = None,
        extra_body: dict[str, Any] | None = None,
        resolve: Resolver | None = None,
        temperature: float = 0.0,
    ) -> None:
        """Configure the client.

        ``rps=None`` disables rate limiting; ``rate_limiter`` shares an existing
        limiter (e.g. between clients of the same provider account).
        ``extra_body`` adds provider-specific fields (``max_tokens`` ...) to
        every request; it cannot override ``model``, ``messages`` or
        ``temperature`` (``temperature``, 0 unless a judge configuration sets it).
        ``transport`` and ``resolve`` replace the network and
        the DNS resolver of the guarded client, for tests.
        """
        if not base_url or not isinstance(base_url, str):
            raise ValueError("base_url is required")
        if not model or not isinstance(model, str):
            raise ValueError("model is required")
        if not isinstance(api_key, str):
            raise ValueError("api_key must be a string")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self._api_key = api_key.strip()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()  # random.Random is not documented thread-safe
        self._extra_body = dict(extra_body or {})
        self.temperature = float(temperature)
        self._transport = transport
        self._resolve = resolve
        if rate_limiter is not None:
            self.rate_limiter: RateLimiter | None = rate_limiter
        elif rps is not None:
            self.rate_limiter = RateLimiter(rps, clock=clock, sleep=sleep)
        else:
            self.rate_limiter = None

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Nothing to release: the guarded client opens one connection per request."""

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # Never the key, not even a prefix: prefixes identify accounts.
        return f"ChatClient(base_url={self.base_url!r}, model={self.model!r}, api_key='***')"

    def __getstate__(self) -> dict[str, Any]:
        # Pickling a client (e.g. into a Celery message) would put the key into the broker.
        raise TypeError("ChatClient cannot be pickled; pass its settings instead")

    # -- helpers -----------------------------------------------------------

    def _redact(self, text: str) -> str:
        """Remove the API key from text that may echo it (provider error bodies do)."""
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text

    def _log_excerpt(self, body: bytes) -> str:
        """A short, single-line, key-free excerpt of a response body, for the log only."""
        flat = " ".join(self._redact(body[: _LOG_EXCERPT_CHARS * 4].decode("utf-8", "replace")).split())
        return flat if len(flat) <= _LOG_EXCERPT_CHARS else flat[: _LOG_EXCERPT_CHARS - 1] + "…"

    def _delay(self, attempt: int, retry_after_s: float | None) -> float:
        with self._rng_lock:
            return backoff_delay(
                attempt, self.backoff_base_s, self.backoff_max_s, self._rng, retry_after_s
            )

    def _payload(self, prompt: str) -> dict[str, Any]:
        body = dict(self._extra_body)
        body.update(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": prompt}],
                # 0 unless the run's judge configuration says otherwise: labels should be reproducible.
                "temperature": self.temperature,
            }
        )
        return body

    def _content(self, response: OutboundResponse, attempts: int) -> str:
        """Extract ``choices[0].message.content`` or raise a non-retryable error."""
        try:
            data = json.loads(response.body)
            message = data["choices"][0]["message"]
            content = message.get("content")
            finish = data["choices"][0].get("finish_reason")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            # A 200 that is not a chat completion is a wrong base_url or an
            # incompatible provider; asking again would get the same page.
            logger.warning("judge endpoint answered without a chat completion", extra={
                "status": response.status, "excerpt": self._log_excerpt(response.body)})
            raise JudgeRequestError(
                f"the answer of {self.url} (HTTP {response.status}) is not a chat completion; "
                "check the base URL",
                error_class="not_chat_completion",
                status=response.status,
                attempts=attempts,
            ) from None
        if not isinstance(content, str):
            finish_text = finish if isinstance(finish, str) and len(finish) <= 40 else "?"
            raise JudgeRequestError(
                f"chat completion has no text content (finish_reason={finish_text!r})",
                error_class="no_content",
                status=response.status,
                attempts=attempts,
            )
        return content

    def _post(self, payload: dict[str, Any], headers: dict[str, str]) -> OutboundResponse:
        return outbound_request(
            "POST", self.url, headers=headers, content=json.dumps(payload, ensure_ascii=False).encode(),
            timeout_s=self.timeout_s, max_body_bytes=MAX_RESPONSE_BYTES, resolve=self._resolve,
            transport=self._transport,
        )

    # -- the request -------------------------------------------------------

    def complete(self, prompt: str) -> str:
        """Send ``prompt`` as a single user message and return the assistant's text.

        Retries 429, 408, 5xx, timeouts and connection errors up to
        ``max_retries`` times; raises ``JudgeRequestError`` at once for other
        4xx and for a refused target, and after the last attempt otherwise.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
        payload = self._payload(prompt)
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json",
                   "Content-Type": "application/json"}
        total_attempts = self.max_retries + 1
        last_problem = "no attempt made"
        last_status: int | None = None
        last_class = "http_status"

        for attempt in range(1, total_attempts + 1):
            if self.rate_limiter is not None:
                # Every HTTP attempt counts against the provider's limit, retries included.
                self.rate_limiter.acquire()
            retry_after_s: float | None = None
            try:
                response = self._post(payload, headers)
            except OutboundError as exc:
                # The guard's messages name the host or the failure, never a response.
                last_status, last_class = None, exc.error_class
                last_problem = f"{exc.error_class} ({self._redact(str(exc))})"
                if exc.error_class not in _RETRYABLE_CLASSES:
                    raise JudgeRequestError(
                        f"request to {self.url} not sent or not finished, not retried: {last_problem}",
                        error_class=exc.error_class,
                        attempts=attempt,
                    ) from None
            else:
                status = response.status
                if 200 <= status < 300:
                    return self._content(response, attempt)
                last_status, last_class = status, "http_status"
                last_problem = f"HTTP {status}"
                logger.warning("judge endpoint answered with an error", extra={
                    "status": status, "attempt": attempt, "excerpt": self._log_excerpt(response.body)})
                if not retryable_status(status):
                    raise JudgeRequestError(
                        f"request to {self.url} rejected, not retried: {last_problem}",
                        error_class="http_status",
                        status=status,
                        attempts=attempt,
                    )
                retry_after_s = parse_retry_after(response.headers.get("Retry-After"))

            if attempt < total_attempts:
                delay = self._delay(attempt, retry_after_s)
                logger.warning("chat completion attempt failed; retrying", extra={
                    "attempt": attempt, "attempts": total_attempts, "problem": last_problem,
                    "delay_s": round(delay, 2)})
                if delay > 0:
                    self._sleep(delay)

        raise JudgeRequestError(
            f"request to {self.url} gave up after {total_attempts} attempts; last: {last_problem}",
            error_class=last_class,
            status=last_status,
            attempts=total_attempts,
            retryable=True,
        )


_REASK_NOTE = (
    "\n\n注意：你上一次的回答无法解析（{error}）。"
    "请严格按照上面的输出要求，只输出一个JSON对象，detail的元素个数必须等于rubric条数。"
)


def judge_one(
    client: Completer,
    dialogue: list[dict[str, Any]],
    response: str,
    rubric: list[dict[str, Any]],
    template: str | None = None,
) -> JudgeAnswer:
    """Ask the judge about one reply and return its parsed labels.

    An unparseable answer is re-asked once, with a short note naming the
    problem appended to the same prompt (at temperature 0 the identical
    prompt tends to produce the identical bad answer).  A second failure
    raises ``JudgeParseError``; ``JudgeRequestError`` propagates untouched.
    ``template`` is a judge configuration's prompt template (the built-in prompt without one).
    """
    prompt = (render_judge_prompt(dialogue, response, rubric) if template is None
              else render_judge_prompt_from(template, dialogue, response, rubric))
    n_items = len(rubric)
    try:
        return parse_judge_answer(client.complete(prompt), n_items)
    except JudgeParseError as first:
        logger.info("judge answer unparseable; re-asking once", extra={"problem": str(first)})
        reask = prompt + _REASK_NOTE.format(error=str(first))
        return parse_judge_answer(client.complete(reask), n_items)
