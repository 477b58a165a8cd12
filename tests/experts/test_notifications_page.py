"""The notifications page and the top bar's badge: counted in one query, refreshed by htmx, yours only."""
import re

import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from experts.middleware import NotificationsChangedMiddleware, notifications_changed
from experts.models import Notification
from experts.notifications import TEMPLATES, notification_send, notification_text
from tests.factories import ExpertFactory, PMFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
TIER_PARAMS = {"from_tier": "bronze", "to_tier": "silver", "reason": "reviewed"}
# Params each kind's template uses, as the senders (this app and the consultation, FAQ and
# appeal work) fill them.
KIND_PARAMS = {
    "rubric_published": {"version": 2, "reason": "clarify q0"},
    "expert_paused": {"expert": "E-1a2b", "accuracy": 61, "window": 20, "threshold": 70},
    "account_paused": {},
    "task_superseded": {"version": 3},
    "tier_changed": TIER_PARAMS,
    "statement_issued": {"period": "2025-03-03 – 2025-03-09", "payable": "16.00", "currency": "CNY", "count": 3},
    "submission_rejected": {"question": "q7", "reason_label": "Spam", "text": "全部 3 秒内完成"},
    "mention": {"author": "E-9f00", "question": "q7", "item": "q7:2", "excerpt": "@E-1a2b 这里算建议给得太早吗？"},
    "consultation_vote": {"question": "q7", "item": 2, "deadline": "2025-03-05 18:00"},
    "consultation_revealed": {"question": "q7", "item": 2},
    "consultation_resolved": {"question": "q7", "item": "q7:2", "outcome": "hit"},
    "faq_asked": {"question": "共情和认可有什么区别？"},
    "faq_answered": {"question": "共情和认可有什么区别？"},
    "appeal_decided": {"outcome": "accepted", "reason": "labels restored"},
    # Review and reminders (annotation.review).
    "submission_returned": {"question": "q7", "text": "请对照回复再看一遍"},
    "lease_expiring": {"question": "q7", "minutes": 10},
    "expert_idle": {"days": 4, "count": 12},
    "quality_alert": {"expert": "E-1a2b", "signal": "control accuracy fell", "value": "90% → 60%"},
    "deadline_risk": {"forecast": "2025-04-01", "due": "2025-03-20", "remaining": 120, "rate": "4.0"},
    # Judge drift (annotation.judging.drift).
    "judge_drift": {"run": "judge-b", "earlier": "judge-a", "share": "29.2%", "shared": 24, "threshold": "10%"},
}


def _notify(user, n=1, kind="tier_changed"):
    for _ in range(n):
        notification_send(users=[user], kind=kind, params=TIER_PARAMS, now=timezone.now(), link="/me/portrait/")
    return Notification.objects.filter(user=user).latest("pk")


@pytest.mark.parametrize("kind", list(TEMPLATES))
def test_every_kind_is_a_choice_and_reads_in_chinese(kind):
    params = {"project": "共情评测", **KIND_PARAMS[kind]}
    note = Notification(kind=kind, params=params, message="")

    with translation.override("zh-hans"):
        chinese = notification_text(note)
        label = str(Notification.Kind(kind).label)
    with translation.override("en"):
        english = notification_text(note)

    assert kind in Notification.Kind.values
    assert chinese != english and re.search(r"[\u4e00-\u9fff]", label)
    assert "%(" not in chinese
    assert "共情评测" in chinese or "%(project)s" not in str(TEMPLATES[kind])


def test_labels_stored_in_english_are_read_in_the_readers_language():
    note = Notification(kind="submission_rejected", message="",
                        params={"project": "p", "question": "q7", "reason_label": "Spam", "text": "太快"})

    with translation.override("zh-hans"):
        assert "垃圾提交" in notification_text(note)
    with translation.override("en"):
        assert "(Spam)" in notification_text(note)


def test_the_top_bar_shows_the_count_in_the_bar_the_menu_and_a_poller(client):
    expert = ExpertFactory()
    _notify(expert, 3)
    client.force_login(expert)

    page = client.get("/").content.decode()

    assert page.count('<span class="js-unread"><span class="badge-count"') == 3  # bar, menu button, menu
    assert 'id="notifications-poll"' in page and "/notifications/unread/?shown=3" in page
    assert "every 45s, notifications-changed from:body" in page


def test_the_badge_fragment_is_one_query_and_says_204_while_the_count_is_unchanged(client):
    expert = ExpertFactory()
    _notify(expert, 2)
    client.force_login(expert)
    client.get("/")  # the session is loaded once, as in a browser

    with CaptureQueriesContext(connection) as queries:
        unchanged = client.get("/notifications/unread/?shown=2", **HTMX)

    counted = [q["sql"] for q in queries.captured_queries if "experts_notification" in q["sql"]]
    assert len(counted) == 1 and "COUNT(" in counted[0]
    assert len(queries.captured_queries) <= 3  # the session, the user, the count
    assert unchanged.status_code == 204 and unchanged.content == b""
    assert "no-cache" in unchanged["Cache-Control"]


def test_the_badge_fragment_sends_the_new_count_for_every_place_and_a_new_poller(client, django_assert_max_num_queries):
    expert = ExpertFactory()
    _notify(expert, 2)
    client.force_login(expert)
    client.get("/")

    with django_assert_max_num_queries(3):
        changed = client.get("/notifications/unread/?shown=1", **HTMX)

    body = changed.content.decode()
    assert changed.status_code == 200
    assert "/notifications/unread/?shown=2" in body
    assert 'hx-swap-oob="innerHTML:.js-unread"' in body and '<span class="badge-count"' in body and ">2</span>" in body


def test_the_badge_fragment_empties_the_count_when_all_are_read(client):
    expert = ExpertFactory()
    client.force_login(expert)

    body = client.get("/notifications/unread/?shown=4", **HTMX).content.decode()

    assert "?shown=0" in body and "badge-count" not in body


def test_a_signed_out_poller_is_told_to_stop(client):
    response = client.get("/notifications/unread/?shown=1", **HTMX)

    assert response.status_code == 286 and response.content == b""


def test_marking_one_read_returns_its_row_and_tells_the_badge_to_refresh(client):
    expert = ExpertFactory()
    first, second = _notify(expert), _notify(expert)
    client.force_login(expert)

    response = client.post(f"/notifications/{first.pk}/read/", **HTMX)

    first.refresh_from_db()
    second.refresh_from_db()
    assert response.status_code == 200 and response["HX-Trigger"] == '{"notifications-changed": {}}'
    assert f'id="notification-{first.pk}"' in response.content.decode()
    assert "is-unread" not in response.content.decode()
    assert first.read_at is not None and second.read_at is None


def test_marking_one_read_without_htmx_goes_back_to_the_list_and_twice_keeps_the_first_time(client):
    expert = ExpertFactory()
    note = _notify(expert)
    client.force_login(expert)

    first = client.post(f"/notifications/{note.pk}/read/")
    note.refresh_from_db()
    read_at = note.read_at
    client.post(f"/notifications/{note.pk}/read/")
    note.refresh_from_db()

    assert first.status_code == 302 and first.url == "/notifications/"
    assert note.read_at == read_at


@pytest.mark.parametrize("action", ["read", "open"])
def test_another_users_notification_is_404_and_stays_unread(client, action):
    owner, other = ExpertFactory(), PMFactory()
    note = _notify(owner)
    client.force_login(other)

    response = (client.post if action == "read" else client.get)(f"/notifications/{note.pk}/{action}/", **HTMX)
    missing = client.post("/notifications/999999/read/")

    note.refresh_from_db()
    assert response.status_code == 404 and missing.status_code == 404
    assert note.read_at is None


def test_the_list_marks_all_read(client):
    expert = ExpertFactory()
    _notify(expert, 2)
    client.force_login(expert)

    page = client.get("/notifications/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    client.post("/notifications/read/")

    assert "全部标为已读" in page or "标为已读" in page
    assert not Notification.objects.filter(user=expert, read_at__isnull=True).exists()


def test_a_notification_whose_link_leaves_the_site_opens_the_list_instead(client):
    expert = ExpertFactory()
    notification_send(users=[expert], kind="tier_changed", params=TIER_PARAMS, now=timezone.now(),
                      link="https://evil.example/steal")
    client.force_login(expert)

    response = client.get(f"/notifications/{Notification.objects.get(user=expert).pk}/open/")

    assert response.url == "/notifications/"


def _through_middleware(user, *, htmx: bool, notify: list):
    request = RequestFactory().post("/anything/")
    request.user = user
    request.htmx = htmx

    def view(_request):
        notification_send(users=notify, kind="tier_changed", params=TIER_PARAMS, now=timezone.now())
        return HttpResponse("ok")

    return NotificationsChangedMiddleware(view)(request)


def test_an_htmx_action_that_notifies_its_user_tells_the_badge_to_refresh():
    expert, other = ExpertFactory(), ExpertFactory()

    mine = _through_middleware(expert, htmx=True, notify=[expert])
    others = _through_middleware(expert, htmx=True, notify=[other])
    full_page = _through_middleware(expert, htmx=False, notify=[expert])

    assert mine["HX-Trigger"] == '{"notifications-changed": {}}'
    assert "HX-Trigger" not in others and "HX-Trigger" not in full_page


def test_the_refresh_event_joins_events_a_view_already_triggers():
    named = HttpResponse()
    named["HX-Trigger"] = "saved"
    as_json = HttpResponse()
    as_json["HX-Trigger"] = '{"saved": {"n": 1}}'

    assert notifications_changed(named)["HX-Trigger"] == "saved, notifications-changed"
    assert notifications_changed(as_json)["HX-Trigger"] == '{"saved": {"n": 1}, "notifications-changed": {}}'
