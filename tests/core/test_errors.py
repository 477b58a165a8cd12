"""One error type, one registry of codes, one adapter per interface, in the user's language."""
import logging
import re
import subprocess
from pathlib import Path

import pytest
from django.utils import translation

from core.error_codes import GENERIC_CODES, ErrorCode
from core.errors import Conflict, DomainError, NotFound, error_message, field_error_message
from core.logging import KeyValueFormatter
from tests.factories import make_project_with_tasks

ROOT = Path(__file__).resolve().parents[2]


def _codes_used_in_the_code() -> set[str]:
    sources = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    found: set[str] = set()
    for name in sources:
        if name.startswith(("tests/", "bench/")) or "/migrations/" in name:
            continue
        text = (ROOT / name).read_text(encoding="utf-8")
        found |= set(re.findall(r'\bcode="([a-z_]+)"', text))
        found |= set(re.findall(r'"code": "([a-z_]+)"', text))
        found |= {m.lower() for m in re.findall(r"ErrorCode\.([A-Z_]+)", text)}
    return found


def test_every_code_the_services_raise_is_in_the_registry():
    unknown = _codes_used_in_the_code() - set(ErrorCode.values)

    assert unknown == set()


# Enough to fill every placeholder of every label.
PARAMS = {"count": 2, "size": "30.0 MB", "limit": "20.0 MB", "source": "q.jsonl", "first": "line 1",
          "field": "run", "message": "required", "retry_at": "2026-12-01 10:00 UTC", "role": "'boss'",
          "roles": "expert, pm, admin", "username": "'lin'", "reasons": "too short", "max": "50",
          "name": "lin", "low": 1, "high": 1000, "value": "xx", "label": "Overlap", "minutes": 1, "seconds": 60,
          "byte": "0xff", "position": 3, "column": 2, "got": '"high"', "length": 60, "min": 0, "what": "turns",
          "question": '"q1"', "dimension": '"warmth"', "expected": 3}
PARAMS |= {"expired": "2026-12-02 10:00", "status": "building"}  # dataset exports
PARAMS |= {"deadline": "2026-12-08 10:00", "days": 7, "currency": "CNY"}  # appeals
PARAMS |= {"kind": "weather"}  # notification email preferences
PARAMS |= {"key": "q1:2"}  # consultations
PARAMS |= {"character": "U+0000"}  # input guard
PARAMS |= {"task": 42}  # assignment by hand
PARAMS |= {"number": 2, "missing": "{dialogue}", "version_a": 1, "version_b": 2}  # judge configurations, comparison


@pytest.mark.parametrize("code", [c for c in ErrorCode])
def test_every_registered_message_has_a_chinese_translation(code):
    with translation.override("en"):
        english = str(code.label % PARAMS)
    with translation.override("zh-hans"):
        chinese = str(code.label % PARAMS)

    assert english and chinese != english
    if re.search(r"[a-z]{3}", str(code.label).replace("%(", "").split(")s")[-1]):
        assert re.search(r"[\u4e00-\u9fff]", chinese)


def test_a_message_is_the_codes_label_with_its_params_in_the_active_language():
    exc = DomainError("The file is 30.0 MB, over ...", code=ErrorCode.TOO_LARGE, status=413,
                      params={"size": "30.0 MB", "limit": "20.0 MB"})

    with translation.override("en"):
        english = error_message(exc)
    with translation.override("zh-hans"):
        chinese = error_message(exc)

    assert english == "The file is 30.0 MB, over the import limit of 20.0 MB; split it into smaller files."
    assert "30.0 MB" in chinese and "20.0 MB" in chinese and "拆分" in chinese


def test_a_generic_code_shows_the_services_own_text():
    assert ErrorCode.INVALID in GENERIC_CODES
    assert error_message(DomainError("overlap must be between 1 and 9, got 12.")) == \
        "overlap must be between 1 and 9, got 12."


def test_a_plural_message_agrees_with_its_count():
    with translation.override("en"):
        one = error_message(DomainError("x", code=ErrorCode.INVALID_LABELS, params={"count": 1}))
        three = error_message(DomainError("x", code=ErrorCode.INVALID_LABELS, params={"count": 3}))

    assert one.startswith("1 item has no mark yet")
    assert three.startswith("3 items have no mark yet")


def test_missing_params_fall_back_to_the_english_message_instead_of_failing():
    exc = Conflict("You can retry calibration after 2026-12-01 10:00 UTC.", code=ErrorCode.RETRY_LATER)

    assert error_message(exc) == "You can retry calibration after 2026-12-01 10:00 UTC."


def test_a_field_error_is_translated_by_its_code_and_keeps_unknown_text():
    with translation.override("zh-hans"):
        known = field_error_message({"field": "name", "message": "required", "code": "required"})
        unknown = field_error_message({"field": "name", "message": "something else"})

    assert known != "required" and re.search(r"[\u4e00-\u9fff]", known)
    assert unknown == "something else"


# --- The two adapters -----------------------------------------------------------------

@pytest.fixture
def project(db):
    return make_project_with_tasks(n_questions=1, items_per_question=2)


def test_a_page_for_someone_elses_project_is_the_404_page(client, expert, project):
    client.force_login(expert)

    response = client.get(f"/projects/{project.pk}/calibration/")

    assert response.status_code == 404
    assert "<html" in response.content.decode()


def test_the_middleware_renders_a_domain_error_as_page_or_fragment(rf, expert):
    from core.middleware import DomainErrorMiddleware

    middleware = DomainErrorMiddleware(lambda request: None)
    exc = Conflict("This payout batch is already approved.", code=ErrorCode.BATCH_NOT_DRAFT)
    page_request = rf.post("/payments/x/")
    page_request.user = expert
    page_request.htmx = False
    fragment_request = rf.post("/payments/x/", HTTP_HX_REQUEST="true")
    fragment_request.user = expert
    fragment_request.htmx = True

    with translation.override("zh-hans"):
        page = middleware.process_exception(page_request, exc)
        fragment = middleware.process_exception(fragment_request, exc)
        chinese = str(ErrorCode.BATCH_NOT_DRAFT.label)
    assert page.status_code == 409 and fragment.status_code == 409
    assert "<html" in page.content.decode() and chinese in page.content.decode()
    assert "<html" not in fragment.content.decode() and chinese in fragment.content.decode()
    assert middleware.process_exception(page_request, NotFound("No such batch.")).status_code == 404
    assert middleware.process_exception(page_request, ValueError("not ours")) is None


def test_the_api_answers_in_english_without_accept_language(api, expert, project):
    api.force_authenticate(expert)

    response = api.post(f"/api/v1/projects/{project.pk}/next-task/")

    assert response.status_code == 404
    assert response.json() == {"detail": "Not found, or not yours.", "code": "not_found"}


def test_the_api_answers_in_the_language_the_client_asks_for(api, expert, project):
    api.force_authenticate(expert)

    response = api.post(f"/api/v1/projects/{project.pk}/next-task/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert re.search(r"[\u4e00-\u9fff]", response.json()["detail"])


# --- After commit and logging -----------------------------------------------------------

def test_follow_up_work_is_sent_by_name_with_keywords_only_after_commit(db, django_capture_on_commit_callbacks,
                                                                         monkeypatch):
    from core import after_commit

    sent = []
    monkeypatch.setattr(after_commit, "task_send", lambda name, **kwargs: sent.append((name, kwargs)))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        after_commit.task_send_on_commit("payments.ledger_post_earning", assignment_id=7)
        assert sent == []
    for callback in callbacks:
        callback()

    assert sent == [("payments.ledger_post_earning", {"countdown": None, "assignment_id": 7})]


def test_log_lines_carry_their_facts_as_key_value_pairs():
    record = logging.LogRecord("rubrica", logging.INFO, __file__, 1, "judge run started", None, None)
    record.run_id = 7
    record.tasks = 120

    line = KeyValueFormatter("%(levelname)s %(message)s").format(record)

    assert line == "INFO judge run started run_id=7 tasks=120"
