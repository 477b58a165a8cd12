"""Browser tests: Playwright's sync API driving Debian's Chromium against pytest-django's live server."""
import os
import threading
import time
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the tests still touch the
# database synchronously (factories), which Django refuses inside a loop unless told.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
PASSWORD = "pass-word-123"  # tests.factories.UserFactory's password
# Chromium logs every 4xx response; a 422 is how a refused form comes back by design.
EXPECTED_CONSOLE = ("Failed to load resource: the server responded with a status of 422",)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A 1440×900 page that fails the test on any script error or CSP violation."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: problems.append(f"console: {message.text}")
            if message.type == "error" and not message.text.startswith(EXPECTED_CONSOLE) else None)
    yield page
    context.close()
    assert problems == []


def _requests_in_flight() -> int:
    # The live server (Django's ThreadedWSGIServer) serves each connection on a thread of
    # its own running socketserver's process_request_thread.
    return sum(1 for thread in threading.enumerate() if thread.name.endswith("(process_request_thread)"))


@pytest.fixture(autouse=True)
def _server_idle_before_flush(request, transactional_db):
    """Let the live server finish every request before the database is flushed.

    A page that closes sends its last autosave (annotate.js flushes on `pagehide`), and a
    test can end with a request still in flight. If the live server is still inside that
    request's transaction when pytest-django truncates the tables, PostgreSQL sees a
    deadlock, the flush fails, and the next test starts on the previous one's rows. This
    fixture depends on `transactional_db`, so its teardown runs before the flush: it closes
    any browser context a test left open and waits until no request has been in flight for
    a short quiet window.
    """
    yield
    if "browser" in request.fixturenames:
        for context in list(request.getfixturevalue("browser").contexts):
            context.close()
    deadline = time.monotonic() + 15
    quiet_since = None
    while time.monotonic() < deadline:
        if _requests_in_flight():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 0.2:
            return
        time.sleep(0.02)


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base_url}/")
