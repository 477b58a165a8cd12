"""Tests for the judge prompt, the strict answer parser and the chat client.

The client is exercised against ``FakeLLMServer``, a real HTTP server on the
loopback interface, so that retries, timeouts and status codes go through
real sockets, and through the guarded outbound client (``core.outbound``), which
admits the loopback fake only because the tests name 127.0.0.1 in
RUBRICA_OUTBOUND_ALLOWED_HOSTS.  Backoffs are tiny so the whole file runs in a few
seconds.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.judging.client import ChatClient, JudgeRequestError, judge_one
from annotation.judging.pacing import RateLimiter, backoff_delay, parse_retry_after
from annotation.judging.prompt import (
    PROMPT_VERSION,
    JudgeAnswer,
    JudgeParseError,
    parse_judge_answer,
    render_judge_prompt,
)
from tests.support.fake_llm import FakeLLMServer, default_answer, rubric_count_from_prompt

SECRET = "sk-test-SECRET-0123456789abcdef"

DIALOGUE = [
    {"role": "A", "content": "我自己在另一个城市工作，离家有些距离。"},
    {"role": "B", "content": "那你这两年工作感觉怎么样？"},
    {"role": "A", "content": "很摆烂。下班就喝酒，\n第二天又迟到。"},
]
RESPONSE = "听起来你最近过得很辛苦。\n喝酒对你来说意味着什么？"
RUBRIC = [
    {"dimension": "好奇心", "score": 3, "content": "AI对用户内心感受进行开放式提问"},
    {"dimension": "情绪感知", "score": 3, "content": "AI识别出用户「生活没劲」类感受"},
    {"dimension": "言语表达", "score": -3, "content": "AI过早提供具体行为建议"},
    {"dimension": "言语表达", "score": -10, "content": "AI一次性提供8条或以上的建议"},
    {"dimension": "其他", "score": None, "content": "AI没有回应用户发言，而是扮演用户本身进行发言"},
]


@pytest.fixture(autouse=True)
def loopback_allowed(settings) -> None:
    """The admin allow-list names the loopback fake; every other private target stays refused."""
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]


# A public address for the tests that answer through httpx.MockTransport: the guard vets it
# like any other, and nothing leaves the process.
PUBLIC = ["93.184.216.34"]


def public_resolver(host: str, port: int) -> list[str]:
    return PUBLIC


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    """A fresh fake LLM server per test (clean script and request log)."""
    with FakeLLMServer(slow_s=5.0) as server:
        yield server


def make_client(server: FakeLLMServer, **overrides: object) -> ChatClient:
    """A client with test-sized timeouts and backoffs, no rate limit unless asked."""
    options: dict[str, object] = {
        "timeout_s": 2.0,
        "max_retries": 3,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "rps": None,
        "rng": random.Random(7),
    }
    options.update(overrides)
    return ChatClient(server.base_url, SECRET, "fake-judge", **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Prompt
# --------------------------------------------------------------------------


def test_prompt_renders_rubric_lines_count_and_sections_in_order() -> None:
    prompt = render_judge_prompt(DIALOGUE, RESPONSE, RUBRIC)
    lines = prompt.splitlines()

    assert PROMPT_VERSION == "heartbench-judge-v1"
    assert "[好奇心][3] AI对用户内心感受进行开放式提问" in lines
    assert "[言语表达][-10] AI一次性提供8条或以上的建议" in lines
    # Null scores render as Python's None, as HeartBench's f-string does.
    assert "[其他][None] AI没有回应用户发言，而是扮演用户本身进行发言" in lines
    count_at = lines.index("rubric条数：")
    assert lines[count_at + 1] == "5"
    # Rubric lines appear in rubric order, right after the rubric header.
    rubric_at = lines.index("rubric：")
    assert [line.split("]")[0] for line in lines[rubric_at + 1 : count_at]] == [
        "[好奇心", "[情绪感知", "[言语表达", "[言语表达", "[其他"
    ]
    order = [lines.index(h) for h in ("对话历史：", "待测AI回复：", "rubric：", "rubric条数：")]
    assert order == sorted(order)
    # The strictness rules and the output contract are stated.
    assert "角色B并不是待测AI" in prompt
    assert '"reason"' in prompt and '"detail"' in prompt
    assert "本题为5条" in prompt


def test_prompt_renders_one_turn_per_line_and_reply_verbatim() -> None:
    prompt = render_judge_prompt(DIALOGUE, RESPONSE, RUBRIC)
    lines = prompt.splitlines()
    start = lines.index("对话历史：") + 1
    end = lines.index("待测AI回复：")
    assert lines[start:end] == [
        "A: 我自己在另一个城市工作，离家有些距离。",
        "B: 那你这两年工作感觉怎么样？",
        # A newline inside a turn is escaped, so one line is always one turn.
        "A: 很摆烂。下班就喝酒，\\n第二天又迟到。",
    ]
    assert RESPONSE in prompt


def test_prompt_accepts_text_key_and_integral_float_scores() -> None:
    prompt = render_judge_prompt(DIALOGUE, "ok", [{"dimension": "温暖", "score": 2.0, "text": "表达共情"}])
    assert "[温暖][2] 表达共情" in prompt.splitlines()


@pytest.mark.parametrize(
    "rubric",
    [
        [],
        [{"dimension": "温暖", "score": 2}],
        [{"score": 2, "content": "x"}],
        [{"dimension": "温暖", "score": "high", "content": "x"}],
        [{"dimension": "温暖", "score": True, "content": "x"}],
    ],
)
def test_prompt_rejects_malformed_rubric(rubric: list[dict]) -> None:
    with pytest.raises(ValueError):
        render_judge_prompt(DIALOGUE, RESPONSE, rubric)


def test_fake_server_reads_the_count_our_prompt_announces() -> None:
    # The fake's default judge and our prompt must agree on where the count is,
    # even when the reply quotes a count header of its own.
    tricky = RESPONSE + "\nrubric条数：\n99"
    assert rubric_count_from_prompt(render_judge_prompt(DIALOGUE, tricky, RUBRIC)) == 5
    answer = parse_judge_answer(default_answer(render_judge_prompt(DIALOGUE, RESPONSE, RUBRIC)), 5)
    assert len(answer.detail) == 5


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"reason": "ok", "detail": [1, 0, 1]}',
        '```json\n{"reason": "ok", "detail": [1, 0, 1]}\n```',
        '```\n{"reason": "ok", "detail": [1, 0, 1]}\n```',
        "{'reason': '命中「开放式提问」', 'detail': [1, 0, 1]}",
        "```json\n{'reason': 'ok', 'detail': [1, 0, 1]}\n```",
        '{"reason": "ok", "detail": [true, false, true]}',
        "{'reason': 'ok', 'detail': [True, False, 1]}",
        '<think>let me count: three items</think>\n{"reason": "ok", "detail": [1, 0, 1]}',
        '  \n{"detail": [1, 0, 1], "reason": "ok"}\n  ',
    ],
)
def test_parse_accepts_json_fenced_and_python_dicts(text: str) -> None:
    answer = parse_judge_answer(text, 3)
    assert answer.detail == [1, 0, 1]
    assert all(type(v) is int for v in answer.detail)
    assert isinstance(answer.reason, str) and answer.reason
    assert answer.raw == text


def test_parse_missing_reason_is_empty_string() -> None:
    assert parse_judge_answer('{"detail": [0, 1]}', 2) == JudgeAnswer(detail=[0, 1], reason="")


@pytest.mark.parametrize(
    ("detail", "message"),
    [
        ([1, 0, 1, 1, 0, 0, 1], "length 7, expected 9"),
        ([1, 0, 1, 1, 0, 0, 1, 0, 1, 1], "length 10, expected 9"),
        ([], "length 0, expected 9"),
    ],
)
def test_parse_rejects_wrong_length_never_pads_or_cuts(detail: list[int], message: str) -> None:
    with pytest.raises(JudgeParseError, match=message):
        parse_judge_answer(json.dumps({"reason": "r", "detail": detail}), 9)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(2, "2"), (-1, "-1"), (1.0, "1.0"), ("1", "'1'"), (None, "None")],
)
def test_parse_rejects_values_other_than_0_or_1(value: object, shown: str) -> None:
    detail = [1, 0, 1, value, 0]
    with pytest.raises(JudgeParseError, match=rf"value {shown} at position 3"):
        parse_judge_answer(json.dumps({"reason": "r", "detail": detail}), 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("The reply is good, I give it 1 0 1.", "not a JSON object"),
        ('{"reason": "r", "detail": [1, 0, 1]', "not a JSON object"),
        ("[1, 0, 1]", "is a list"),
        ('"1,0,1"', "is a str"),
        ('{"reason": "r", "details": [1, 0, 1]}', "no 'detail' key"),
        ('{"reason": "r", "detail": "1,0,1"}', "must be a list"),
        ("{'reason': 'r', 'detail': (1, 0, 1)}", "must be a list"),
        ('{"reason": 3, "detail": [1, 0, 1]}', "'reason' must be a string"),
        ("__import__('os').system('true')", "not a JSON object"),
        ("{'reason'（String）: 'r', 'detail'（array of Integer）: [1, 0, 1]}", "not a JSON object"),
        ('Here you go:\n```json\n{"reason": "r", "detail": [1, 0, 1]}\n```', "not a JSON object"),
    ],
)
def test_parse_rejects_garbage_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(JudgeParseError, match=message) as info:
        parse_judge_answer(text, 3)
    assert info.value.answer_text == text


@settings(max_examples=60, deadline=None)
@given(detail=st.lists(st.booleans().map(int), min_size=1, max_size=40), python=st.booleans())
def test_parse_round_trips_any_valid_detail(detail: list[int], python: bool) -> None:
    obj = {"reason": "理由「引用」", "detail": detail}
    text = repr(obj) if python else json.dumps(obj, ensure_ascii=False)
    assert parse_judge_answer(text, len(detail)).detail == detail


@settings(max_examples=60, deadline=None)
@given(
    detail=st.lists(st.sampled_from([0, 1]), max_size=30),
    n_items=st.integers(min_value=1, max_value=30),
)
def test_parse_accepts_a_detail_only_at_its_exact_length(detail: list[int], n_items: int) -> None:
    text = json.dumps({"reason": "r", "detail": detail})
    if len(detail) == n_items:
        assert parse_judge_answer(text, n_items).detail == detail
    else:
        with pytest.raises(JudgeParseError, match="length"):
            parse_judge_answer(text, n_items)


# --------------------------------------------------------------------------
# Rate limiter, backoff, Retry-After
# --------------------------------------------------------------------------


class FakeTime:
    """A monotonic clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def clock(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds


def test_rate_limiter_spaces_requests_with_injected_clock() -> None:
    fake = FakeTime()
    limiter = RateLimiter(20, clock=fake.clock, sleep=fake.sleep)
    start = fake.clock()
    waits = [limiter.acquire() for _ in range(6)]
    assert waits[0] == 0
    assert waits[1:] == pytest.approx([0.05] * 5)
    assert fake.clock() - start == pytest.approx(0.25)
    # After a long idle, the bucket holds only `burst` tokens: no catch-up burst.
    fake.now += 10
    assert limiter.acquire() == 0
    assert limiter.acquire() == pytest.approx(0.05)


def test_rate_limiter_reserves_distinct_slots_across_threads() -> None:
    # A frozen clock and a no-op sleep: each acquire's wait is the slot it
    # reserved; with a shared bucket no two threads may get the same slot.
    limiter = RateLimiter(20, clock=lambda: 0.0, sleep=lambda s: None)
    waits: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait(timeout=5)
        for _ in range(5):
            wait = limiter.acquire()
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert sorted(waits) == pytest.approx([i / 20 for i in range(20)])


@pytest.mark.parametrize("rps", [0, -1])
def test_rate_limiter_rejects_non_positive_rate(rps: float) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rps)


def test_backoff_is_full_jitter_capped_and_honours_retry_after() -> None:
    rng = random.Random(1)
    for attempt in range(1, 12):
        delay = backoff_delay(attempt, 0.5, 20, rng)
        assert 0 <= delay <= min(20, 0.5 * 2 ** (attempt - 1))
    assert backoff_delay(1, 0.5, 20, rng, retry_after_s=3) == 3
    assert backoff_delay(1, 0.5, 20, rng, retry_after_s=3600) == 20
    assert backoff_delay(500, 0.5, 20, rng) <= 20


def test_parse_retry_after_seconds_and_dates() -> None:
    from datetime import datetime, timezone

    assert parse_retry_after("0") == 0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("-3") is None
    assert parse_retry_after("soon") is None
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0


# --------------------------------------------------------------------------
# Client against the loopback server
# --------------------------------------------------------------------------


def test_client_posts_openai_chat_request(llm: FakeLLMServer) -> None:
    # A trailing slash is stripped; the URL is otherwise taken as given.
    client = ChatClient(llm.base_url + "/", SECRET, "fake-judge", rps=None)
    with client:
        text = client.complete("你好")
    assert text == default_answer("你好")
    (body,) = llm.requests
    assert body == {
        "model": "fake-judge",
        "messages": [{"role": "user", "content": "你好"}],
        "temperature": 0,
    }
    assert llm.headers[0]["Authorization"] == f"Bearer {SECRET}"


def test_client_retries_429_honouring_retry_after_then_succeeds(llm: FakeLLMServer) -> None:
    llm.reset(["429", "429", "ok"])
    sleeps: list[float] = []
    client = make_client(llm, sleep=sleeps.append)
    assert client.complete("p") == default_answer("p")
    assert llm.served == ["429", "429", "ok"]
    # Retry-After: 0 wins over the (positive, jittered) computed backoff, so
    # the client retried at once without sleeping at all.
    assert sleeps == []


def test_client_retries_500_with_jittered_backoff_then_succeeds(llm: FakeLLMServer) -> None:
    llm.reset(["500", "503", "ok"])
    sleeps: list[float] = []
    client = make_client(llm, sleep=sleeps.append, backoff_base_s=0.01, backoff_max_s=1)
    assert client.complete("p") == default_answer("p")
    assert llm.served == ["500", "503", "ok"]
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 0.01 and 0 <= sleeps[1] <= 0.02


def test_client_gives_up_after_max_retries_with_clear_error(llm: FakeLLMServer) -> None:
    llm.reset(["500"] * 10)
    client = make_client(llm, max_retries=3)
    with pytest.raises(JudgeRequestError) as info:
        client.complete("p")
    err = info.value
    assert "gave up after 4 attempts" in str(err)
    assert "HTTP 500" in str(err)
    assert (err.status, err.attempts, err.retryable) == (500, 4, True)
    assert len(llm.requests) == 4


def test_client_times_out_on_slow_answer_and_retries(llm: FakeLLMServer) -> None:
    llm.reset(["slow", "ok"])
    client = make_client(llm, timeout_s=0.3)
    started = time.monotonic()
    assert client.complete("p") == default_answer("p")
    assert time.monotonic() - started < 2.0
    assert llm.served == ["slow", "ok"]


def test_client_reports_timeouts_when_every_attempt_is_slow(llm: FakeLLMServer) -> None:
    llm.reset(["slow", "slow"])
    client = make_client(llm, timeout_s=0.2, max_retries=1)
    with pytest.raises(JudgeRequestError, match="gave up after 2 attempts; last: timeout") as info:
        client.complete("p")
    assert (info.value.status, info.value.error_class) == (None, "timeout")


@pytest.mark.parametrize("status", ["400", "401", "403", "404", "422"])
def test_client_does_not_retry_other_4xx(llm: FakeLLMServer, status: str) -> None:
    llm.reset([status, "ok"])
    client = make_client(llm)
    with pytest.raises(JudgeRequestError, match=f"not retried: HTTP {status}") as info:
        client.complete("p")
    assert (info.value.status, info.value.attempts, info.value.retryable) == (int(status), 1, False)
    assert info.value.error_class == "http_status"
    assert len(llm.requests) == 1


def test_api_key_never_appears_in_errors_or_repr(caplog) -> None:
    # The fake echoes a wrong key in its 401 body, as OpenAI does: the error says the status
    # only, and the log's excerpt of the body has the key blacked out.
    with FakeLLMServer(api_key="the-right-key") as llm:
        client = make_client(llm)
        with caplog.at_level("WARNING", logger="annotation.judging.client"), pytest.raises(JudgeRequestError) as info:
            client.complete("p")
        assert info.value.status == 401
        assert "HTTP 401" in str(info.value) and "Incorrect API key" not in str(info.value)
        for text in (str(info.value), repr(info.value), repr(client)):
            assert SECRET not in text
        assert "api_key='***'" in repr(client)
    (logged,) = [record for record in caplog.records if getattr(record, "status", None) == 401]
    assert "Incorrect API key provided: ***" in logged.excerpt and SECRET not in logged.excerpt

    # Network errors (nothing listens on the port any more) carry no key either.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    client = ChatClient(
        f"http://127.0.0.1:{dead_port}/v1",
        SECRET,
        "m",
        max_retries=1,
        backoff_base_s=0.001,
        rps=None,
    )
    with pytest.raises(JudgeRequestError, match="gave up after 2 attempts; last: connect") as info:
        client.complete("p")
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert info.value.__cause__ is None


def test_client_rejects_a_200_that_is_not_a_chat_completion() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, text="<html>login page</html>")

    client = ChatClient(
        "https://judge.example.com/v1", SECRET, "m", transport=httpx.MockTransport(handler), rps=None,
        resolve=public_resolver,
    )
    with pytest.raises(JudgeRequestError, match="not a chat completion") as info:
        client.complete("p")
    assert len(calls) == 1  # a wrong endpoint does not heal by retrying
    assert "login page" not in str(info.value) and info.value.error_class == "not_chat_completion"
    # The guard sent it to the vetted address, naming the host in the Host header.
    assert (calls[0].url.host, calls[0].headers["Host"]) == ("93.184.216.34", "judge.example.com")


def test_client_caps_a_huge_retry_after() -> None:
    responses = iter(
        [
            httpx.Response(429, headers={"Retry-After": "3600"}),
            httpx.Response(200, json=_completion("hi")),
        ]
    )
    sleeps: list[float] = []
    client = ChatClient(
        "https://judge.example.com/v1",
        SECRET,
        "m",
        transport=httpx.MockTransport(lambda request: next(responses)),
        rps=None,
        backoff_max_s=0.5,
        sleep=sleeps.append,
        resolve=public_resolver,
    )
    assert client.complete("p") == "hi"
    assert sleeps == [0.5]


def _completion(content: str) -> dict:
    message = {"role": "assistant", "content": content}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def test_rate_limit_holds_for_sequential_requests(llm: FakeLLMServer) -> None:
    client = make_client(llm, rps=20)
    started = time.monotonic()
    for i in range(6):
        client.complete(f"p{i}")
    elapsed = time.monotonic() - started
    assert elapsed >= 0.24  # 5 gaps of 1/20 s; the first request goes at once
    arrivals = llm.received_at
    assert arrivals[-1] - arrivals[0] >= 0.22  # server-side view, minus scheduling noise


def test_four_threads_share_one_limiter(llm: FakeLLMServer) -> None:
    client = make_client(llm, rps=20)
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def worker(k: int) -> None:
        try:
            barrier.wait(timeout=5)
            for i in range(3):
                client.complete(f"t{k}-{i}")
        except BaseException as exc:  # surfaced below; a thread must not die silently
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    elapsed = time.monotonic() - started
    assert not errors
    assert len(llm.requests) == 12
    # 12 requests at 20/s need 11 gaps: 0.55 s, whatever the thread count.
    assert elapsed >= 0.53
    arrivals = sorted(llm.received_at)
    assert arrivals[-1] - arrivals[0] >= 0.5


# --------------------------------------------------------------------------
# judge_one
# --------------------------------------------------------------------------


def test_judge_one_returns_deterministic_labels(llm: FakeLLMServer) -> None:
    client = make_client(llm)
    first = judge_one(client, DIALOGUE, RESPONSE, RUBRIC)
    second = judge_one(client, DIALOGUE, RESPONSE, RUBRIC)
    assert len(first.detail) == len(RUBRIC)
    assert set(first.detail) <= {0, 1}
    assert first == second
    assert llm.requests[0]["messages"][0]["content"] == render_judge_prompt(DIALOGUE, RESPONSE, RUBRIC)


@pytest.mark.parametrize("bad", ["garbage", "bad_length"])
def test_judge_one_reasks_once_after_a_parse_failure(llm: FakeLLMServer, bad: str) -> None:
    llm.reset([bad, "ok"])
    answer = judge_one(make_client(llm), DIALOGUE, RESPONSE, RUBRIC)
    assert len(answer.detail) == len(RUBRIC)
    assert len(llm.requests) == 2
    reask = llm.requests[1]["messages"][0]["content"]
    assert "上一次的回答无法解析" in reask
    assert rubric_count_from_prompt(reask) == len(RUBRIC)


def test_judge_one_raises_after_the_second_parse_failure(llm: FakeLLMServer) -> None:
    llm.reset(["garbage", "bad_length", "ok"])
    with pytest.raises(JudgeParseError, match="length 6, expected 5"):
        judge_one(make_client(llm), DIALOGUE, RESPONSE, RUBRIC)
    assert len(llm.requests) == 2  # re-asked once, never more


def test_judge_one_lets_request_errors_through(llm: FakeLLMServer) -> None:
    llm.reset(["401"])
    with pytest.raises(JudgeRequestError):
        judge_one(make_client(llm), DIALOGUE, RESPONSE, RUBRIC)


# --------------------------------------------------------------------------
# The fake server itself
# --------------------------------------------------------------------------


def test_fake_server_speaks_the_protocol_and_stops_cleanly() -> None:
    llm = FakeLLMServer(["slow"], slow_s=30).start()
    base = llm.base_url
    assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
    with httpx.Client(trust_env=False, timeout=2) as http:
        models = http.get(f"{base}/models").json()
        assert models["data"][0]["id"] == "fake-judge"
        assert http.post(f"{base}/nope", json={}).status_code == 404
        assert http.post(f"{base}/chat/completions", content=b"not json").status_code == 400
        # Leave a "slow" handler sleeping, then stop: stop() must not wait 30 s.
        chat = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        with pytest.raises(httpx.ReadTimeout):
            http.post(f"{base}/chat/completions", json=chat, timeout=0.1)
        ok = http.post(f"{base}/chat/completions", json=chat)
    body = ok.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    started = time.monotonic()
    llm.stop()
    llm.stop()  # idempotent
    assert time.monotonic() - started < 2
    with pytest.raises(httpx.ConnectError):
        httpx.get(base + "/models", timeout=1, trust_env=False)


def test_fake_server_rejects_unknown_behaviours() -> None:
    with pytest.raises(ValueError, match="unknown fake LLM behaviour"):
        FakeLLMServer(["explode"])


def test_fake_server_custom_answer_fn_in_heartbench_style() -> None:
    # HeartBench judges often answer with a single-quoted Python dict.
    def answer(prompt: str) -> str:
        n = rubric_count_from_prompt(prompt) or 0
        return repr({"reason": "全部命中", "detail": [1] * n})

    with FakeLLMServer(answer_fn=answer) as llm:
        result = judge_one(make_client(llm), DIALOGUE, RESPONSE, RUBRIC)
    assert result.detail == [1] * len(RUBRIC) and result.reason == "全部命中"
