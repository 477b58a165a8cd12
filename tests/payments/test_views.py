"""The payments pages: an expert sees only their own money and never a model name; money moves by admins."""
import csv
from datetime import timedelta
from io import StringIO

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

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


def test_the_earnings_page_reads_the_same_queries_for_three_projects_as_for_one(paid):
    expert, pm, *_ = paid
    client = _client(expert)

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/payments/").status_code == 200
        return len(queries)

    client.get("/payments/")  # the process's caches (content types) filled
    with_one = page_queries()
    for _ in range(2):
        submit_and_post(make_paid_project(experts=[expert, pm]), expert, WEEK_END + timedelta(hours=2))
    with_three = page_queries()

    # Session, user; the open period's totals, their projects and periods; the recent lines (ids, rows,
    # appeals); profile, projects, price rules, tier factors, currencies (once for every project);
    # unread count, statements.
    assert with_one == with_three == 15


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


def test_rejecting_asks_first_with_the_amount_and_the_reason_then_deducts(paid):
    expert, pm, project, _ = paid
    earning = LedgerEntry.objects.filter(kind="earning").order_by("pk").first()
    url = f"/payments/costs/{project.pk}/assignments/{earning.assignment_id}/reject/"

    refused = _client(pm).post(url, {"reason": " "}, **HTMX)
    asked = _client(pm).post(url, {"reason": "copy-paste"}, **HTMX)
    reversals_after_asking = LedgerEntry.objects.filter(kind="reversal").count()
    done = _client(pm).post(url, {"reason": "copy-paste", "confirmed": "yes"}, **HTMX)
    again = _client(pm).post(url, {"reason": "copy-paste"}, **HTMX)

    assert refused.status_code == 422 and "reason" in refused.content.decode()
    question = asked.content.decode()
    assert asked.status_code == 200 and asked["HX-Retarget"] == "#main"
    assert f"{earning.amount} CNY" in question and "copy-paste" in question and 'name="confirmed"' in question
    assert expert.expert_profile.pseudonym in question
    assert reversals_after_asking == 0
    assert done.status_code == 200 and "<html" not in done.content.decode()
    assert LedgerEntry.objects.get(kind="reversal").reason == "copy-paste"
    assert again.status_code == 422 and LedgerEntry.objects.filter(kind="reversal").count() == 1


def test_rejecting_another_projects_submission_is_not_found_even_on_the_first_step(paid):
    _, _, project, _ = paid
    earning = LedgerEntry.objects.filter(kind="earning").order_by("pk").first()
    other_pm = PMFactory()
    other = make_paid_project(experts=[other_pm])
    url = f"/payments/costs/{other.pk}/assignments/{earning.assignment_id}/reject/"

    response = _client(other_pm).post(url, {"reason": "spam"})

    assert response.status_code == 404
    assert not LedgerEntry.objects.filter(kind="reversal").exists()


def test_approving_a_batch_asks_first_with_the_statements_experts_and_total(paid):
    _, _, project, settlement = paid
    client = _client(AdminFactory())
    batch = settlement.batch
    url = f"/payments/batches/{batch.pk}/approve/"

    asked = client.post(url)
    status_after_asking = PayoutBatch.objects.get(pk=batch.pk).status
    done = client.post(url, {"confirmed": "yes"})

    question = asked.content.decode()
    assert asked.status_code == 200 and "向 1 位专家支付 1 张结算单" in question
    assert f"{batch.total} CNY" in question and f'action="{url}"' in question
    assert status_after_asking == "draft"
    assert done.status_code == 302 and PayoutBatch.objects.get(pk=batch.pk).status == "approved"


def test_marking_paid_asks_for_the_transfer_reference_and_refuses_a_blank_one(paid):
    _, _, project, settlement = paid
    client = _client(AdminFactory())
    batch = settlement.batch
    client.post(f"/payments/batches/{batch.pk}/approve/", {"confirmed": "yes"})
    url = f"/payments/batches/{batch.pk}/paid/"

    asked = client.post(url, **HTMX)
    status_after_asking = PayoutBatch.objects.get(pk=batch.pk).status
    blank = client.post(url, {"confirmed": "yes", "reference": "  "}, **HTMX)
    status_after_blank = PayoutBatch.objects.get(pk=batch.pk).status
    done = client.post(url, {"confirmed": "yes", "reference": "TX-9"}, **HTMX)

    assert asked.status_code == 200 and 'name="reference"' in asked.content.decode()
    assert status_after_asking == "approved"
    assert blank.status_code == 422 and "转账凭证号" in blank.content.decode()
    assert status_after_blank == "approved"
    assert done.status_code == 200 and "<html" not in done.content.decode()
    paid_batch = PayoutBatch.objects.get(pk=batch.pk)
    assert (paid_batch.status, paid_batch.payment_reference) == ("paid", "TX-9")


def test_no_money_action_on_the_cost_page_uses_a_browser_dialog(paid):
    _, _, project, _ = paid

    page = _client(AdminFactory()).get(f"/payments/costs/{project.pk}/")

    assert "hx-confirm" not in page.content.decode()


def test_an_admin_closes_approves_pays_and_exports(paid):
    _, _, project, settlement = paid
    admin = AdminFactory()
    client = _client(admin)
    batch = settlement.batch
    yes = {"confirmed": "yes"}

    page = client.get(f"/payments/costs/{project.pk}/")
    approved = client.post(f"/payments/batches/{batch.pk}/approve/", yes)
    paid_page = client.post(f"/payments/batches/{batch.pk}/paid/", {"reference": "TX-9", **yes}, **HTMX)
    export = client.get(f"/payments/batches/{batch.pk}/payouts.csv")
    asked_close = client.post(f"/payments/costs/{project.pk}/close/")
    batches_after_asking = PayoutBatch.objects.count()
    closed = client.post(f"/payments/costs/{project.pk}/close/", yes)

    assert f'action="/payments/costs/{project.pk}/close/"' in page.content.decode()
    assert approved.status_code == 302
    assert paid_page.status_code == 200 and "<html" not in paid_page.content.decode()
    assert PayoutBatch.objects.get(pk=batch.pk).payment_reference == "TX-9"
    assert export.content.startswith("\ufeff".encode())
    rows = list(csv.reader(StringIO(export.content.decode("utf-8-sig"))))
    assert rows[0][0] == "batch" and rows[0][-2:] == ["currency", "amount"]
    assert rows[1][-2:] == ["CNY", "6.00"]
    assert asked_close.status_code == 200 and batches_after_asking == 1
    assert closed.status_code == 302
    assert PayoutBatch.objects.count() == 2


def test_money_actions_are_not_found_for_pms(paid):
    _, pm, project, settlement = paid
    client = _client(pm)

    assert client.post(f"/payments/batches/{settlement.batch.pk}/approve/").status_code == 404
    assert client.post(f"/payments/batches/{settlement.batch.pk}/approve/", {"confirmed": "yes"}).status_code == 404
    assert client.post(f"/payments/costs/{project.pk}/close/", {"confirmed": "yes"}).status_code == 404
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
