"""The payments pages: an expert sees only their own money and never a model name; money moves by admins."""
import csv
from datetime import timedelta
from io import StringIO

import pytest
from django.test import Client

from annotation.models import Response
from payments.models import LedgerEntry, PayoutBatch
from payments.services import statement_settle_period
from tests.factories import AdminFactory, PMFactory
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit_and_post

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def paid():
    """An expert with one settled statement and one entry in the open period."""
    expert, pm = make_expert("silver"), PMFactory()
    project = make_paid_project(experts=[expert, pm])
    first = submit_and_post(project, expert, T0)
    settlement = statement_settle_period(period_id=first.period_id, now=WEEK_END)
    submit_and_post(project, expert, WEEK_END + timedelta(hours=1))
    return expert, pm, project, settlement


def test_the_earnings_page_shows_the_open_period_prices_and_statements(paid):
    expert, _, project, settlement = paid

    page = _client(expert).get("/payments/")

    body = page.content.decode()
    assert page.status_code == 200
    assert "<html" in body
    assert "6.00 CNY" in body  # 5.00 × silver 1.2, in the open period
    assert "×1.2" in body and "24.00 CNY" in body  # the tier's effect on the hard price
    assert f"/payments/statements/{settlement.statements[0].pk}/" in body


def test_the_live_fragment_is_only_the_period_totals(paid):
    expert, *_ = paid

    fragment = _client(expert).get("/payments/", **HTMX)

    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<html" not in body and 'id="earnings-live"' in body
    assert "6.00 CNY" in body and 'hx-trigger="every 20s"' in body


def test_a_statement_traces_each_line_to_its_task_without_the_model_name(paid):
    expert, _, project, settlement = paid
    statement = settlement.statements[0]
    entry = LedgerEntry.objects.get(period=statement.period)

    page = _client(expert).get(f"/payments/statements/{statement.pk}/")

    body = page.content.decode()
    assert page.status_code == 200
    question = entry.assignment.task.response.question.external_id
    assert f"#{entry.assignment.task_id}" in body and f"<code>{question}</code>" in body and "v1" in body
    assert all(name not in body for name in Response.objects.filter(project=project)
               .values_list("model_name", flat=True))


def test_another_experts_statement_is_not_found(paid):
    _, _, _, settlement = paid

    page = _client(make_expert()).get(f"/payments/statements/{settlement.statements[0].pk}/")

    assert page.status_code == 404


def test_the_pm_sees_cost_per_period_and_per_consensus_label(paid):
    _, pm, project, _ = paid

    listing = _client(pm).get("/payments/costs/")
    page = _client(pm).get(f"/payments/costs/{project.pk}/")

    assert listing.status_code == 200 and project.name in listing.content.decode()
    body = page.content.decode()
    assert page.status_code == 200
    assert "12.00 CNY" in body  # net cost so far
    assert f"/payments/costs/{project.pk}/close/" not in body and "payouts.csv" not in body  # admin only


def test_the_cost_page_fragment_is_only_its_main_part(paid):
    _, pm, project, _ = paid

    fragment = _client(pm).get(f"/payments/costs/{project.pk}/", **HTMX)

    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<html" not in body and body.lstrip().startswith('<div id="costs-main">')


def test_the_cost_page_and_its_fragment_both_vary_on_hx_request(paid):
    _, pm, project, _ = paid
    client = _client(pm)

    full = client.get(f"/payments/costs/{project.pk}/")
    fragment = client.get(f"/payments/costs/{project.pk}/", **HTMX)

    assert "<html" in full.content.decode() and 'id="costs-main"' in full.content.decode()
    assert fragment.content.decode().lstrip().startswith('<div id="costs-main">')
    assert "HX-Request" in full["Vary"] and "HX-Request" in fragment["Vary"]


def test_the_cost_page_is_not_found_for_other_pms_and_experts(paid):
    expert, _, project, _ = paid

    assert _client(PMFactory()).get(f"/payments/costs/{project.pk}/").status_code == 404
    assert _client(expert).get(f"/payments/costs/{project.pk}/").status_code == 404
    assert _client(expert).get("/payments/costs/").status_code == 404


def test_a_pm_rejects_a_submission_from_the_cost_page_fragment(paid):
    expert, pm, project, _ = paid
    earning = LedgerEntry.objects.filter(kind="earning").order_by("pk").first()
    url = f"/payments/costs/{project.pk}/assignments/{earning.assignment_id}/reject/"

    refused = _client(pm).post(url, {"reason": " "}, **HTMX)
    done = _client(pm).post(url, {"reason": "copy-paste"}, **HTMX)

    assert refused.status_code == 422 and "reason" in refused.content.decode()
    assert done.status_code == 200 and "<html" not in done.content.decode()
    assert LedgerEntry.objects.get(kind="reversal").reason == "copy-paste"


def test_an_admin_closes_approves_pays_and_exports(paid):
    _, _, project, settlement = paid
    admin = AdminFactory()
    client = _client(admin)
    batch = settlement.batch

    page = client.get(f"/payments/costs/{project.pk}/")
    approved = client.post(f"/payments/batches/{batch.pk}/approve/")
    paid_page = client.post(f"/payments/batches/{batch.pk}/paid/", {"reference": "TX-9"}, **HTMX)
    export = client.get(f"/payments/batches/{batch.pk}/payouts.csv")
    closed = client.post(f"/payments/costs/{project.pk}/close/")

    assert f'action="/payments/costs/{project.pk}/close/"' in page.content.decode()
    assert approved.status_code == 302
    assert paid_page.status_code == 200 and "<html" not in paid_page.content.decode()
    assert PayoutBatch.objects.get(pk=batch.pk).payment_reference == "TX-9"
    rows = list(csv.reader(StringIO(export.content.decode("utf-8-sig"))))
    assert rows[0][-2:] == ["currency", "amount"]
    assert rows[1][-2:] == ["CNY", "6.00"]
    assert closed.status_code == 302
    assert PayoutBatch.objects.count() == 2


def test_money_actions_are_not_found_for_pms(paid):
    _, pm, project, settlement = paid
    client = _client(pm)

    assert client.post(f"/payments/batches/{settlement.batch.pk}/approve/").status_code == 404
    assert client.get(f"/payments/batches/{settlement.batch.pk}/payouts.csv").status_code == 404
    assert client.post(f"/payments/costs/{project.pk}/close/").status_code == 404
    assert PayoutBatch.objects.get().status == "draft"


def test_a_spreadsheet_formula_in_a_name_is_neutralised(paid):
    expert, _, _, settlement = paid
    expert.first_name = "=HYPERLINK(1)"
    expert.save(update_fields=["first_name"])

    export = _client(AdminFactory()).get(f"/payments/batches/{settlement.batch.pk}/payouts.csv")

    assert "'=HYPERLINK(1)" in export.content.decode("utf-8-sig")


def test_pms_are_taken_from_earnings_to_costs(paid):
    _, pm, *_ = paid

    assert _client(pm).get("/payments/").url == "/payments/costs/"
