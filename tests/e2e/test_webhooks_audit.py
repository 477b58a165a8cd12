"""A PM registers a webhook in Chromium, copies the secret shown once, sees a signed delivery in the
log and their change in the project's audit log; an admin filters the full log. Both pages fit
1440 px and 390 px (zh-Hans); screenshots go to the artifacts folder."""
import hashlib
import hmac

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import WebhookEvent
from annotation.services import project_add_member
from annotation.webhooks.services import webhook_emit
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import AdminFactory, PMFactory
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def _fits(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_pm_registers_a_webhook_sees_the_delivery_and_the_audit_log(page, live_server, receiver, settings,
                                                                      artifacts):
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    pm = PMFactory(username="zhou.pm")
    AdminFactory(username="root.admin")
    project = build_counselling_project(pm=pm)
    project_add_member(project=project, user=pm)
    sign_in(page, live_server.url, "zhou.pm")

    page.goto(f"{live_server.url}/projects/{project.pk}/webhooks/")
    page.fill("input[name=url]", receiver.url("/rubrica"))
    page.check("input[value='task.completed']")
    page.check("input[value='export.ready']")
    page.get_by_role("button", name="注册").click()
    secret = page.locator(".webhook-secret-value").inner_text()
    assert secret.startswith("whsec_")
    page.screenshot(path=str(artifacts / "webhooks-created-1440.png"), full_page=True)

    webhook_emit(project_id=project.pk, event=WebhookEvent.EXPORT_READY, data={"export_job_id": 7},
                 now=timezone.now())
    page.reload()
    expect(page.locator(".webhook-log tbody tr").first).to_contain_text("HTTP 200")
    expect(page.locator(".webhook-secret-value")).to_have_count(0)
    _, _, headers, body = receiver.received[0]
    mac = hmac.new(secret.encode(), headers["X-Rubrica-Timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["X-Rubrica-Signature"] == "sha256=" + mac.hexdigest()
    page.screenshot(path=str(artifacts / "webhooks-1440.png"), full_page=True)
    _fits(page, DESKTOP["width"])
    page.set_viewport_size(PHONE)
    page.reload()
    _fits(page, PHONE["width"])
    page.screenshot(path=str(artifacts / "webhooks-390.png"), full_page=True)

    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/projects/{project.pk}/audit/")
    expect(page.locator(".audit-table tbody tr").first).to_contain_text("注册 Webhook 端点")
    page.screenshot(path=str(artifacts / "audit-project-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    page.reload()
    _fits(page, PHONE["width"])
    page.screenshot(path=str(artifacts / "audit-project-390.png"), full_page=True)

    page.set_viewport_size(DESKTOP)
    page.context.clear_cookies()
    sign_in(page, live_server.url, "root.admin")
    page.goto(f"{live_server.url}/audit/")
    page.select_option("select[name=action]", "webhook.create")
    page.get_by_role("button", name="筛选").click()
    page.wait_for_url("**action=webhook.create**")
    expect(page.locator(".audit-table tbody tr")).to_have_count(1)
    page.screenshot(path=str(artifacts / "audit-admin-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    page.reload()
    _fits(page, PHONE["width"])
    page.screenshot(path=str(artifacts / "audit-admin-390.png"), full_page=True)
