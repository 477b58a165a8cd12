"""Admins set prices in the Django admin (history rows, never edits); tasks are thin and idempotent."""
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from payments import tasks
from payments.models import LedgerEntry, PaymentSettings, Period, PriceRule, TierMultiplier
from tests.factories import AdminFactory
from tests.payments.factories import T0, make_expert, make_paid_project, submit, submit_and_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(AdminFactory())
    return client


def test_an_admin_adds_a_price_rule_that_takes_effect_a_minute_later(admin_client):
    project = make_paid_project(experts=[])

    response = admin_client.post("/admin/payments/pricerule/add/", {
        "project": project.pk, "difficulty": "hard", "amount": "18.5", "effective_from_0": "", "effective_from_1": "",
    })

    rule = PriceRule.objects.get()
    assert response.status_code == 302
    assert (rule.amount, rule.currency, rule.created_by.is_superuser) == (Decimal("18.5"), "CNY", True)
    assert timedelta(0) < rule.effective_from - timezone.now() <= timedelta(minutes=1)


def test_a_backdated_multiplier_is_a_form_error_not_a_row(admin_client):
    project = make_paid_project(experts=[])

    response = admin_client.post("/admin/payments/tiermultiplier/add/", {
        "project": project.pk, "tier": "gold", "multiplier": "1.7",
        "effective_from_0": "2020-01-01", "effective_from_1": "00:00:00",
    })

    assert response.status_code == 200
    assert not TierMultiplier.objects.exists()


def test_price_history_and_money_cannot_be_edited_or_deleted_in_the_admin(admin_client):
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    rule = PriceRule.objects.create(project=project, difficulty="normal", amount="6", effective_from=T0)

    edit_entry = admin_client.post(f"/admin/payments/ledgerentry/{entry.pk}/change/", {"amount": "99"})
    delete_entry = admin_client.post(f"/admin/payments/ledgerentry/{entry.pk}/delete/", {"post": "yes"})
    delete_rule = admin_client.post(f"/admin/payments/pricerule/{rule.pk}/delete/", {"post": "yes"})
    listing = admin_client.get("/admin/payments/ledgerentry/")

    assert (edit_entry.status_code, delete_entry.status_code, delete_rule.status_code) == (403, 403, 403)
    assert listing.status_code == 200
    assert LedgerEntry.objects.get().amount == Decimal("5.00")
    assert PriceRule.objects.filter(pk=rule.pk).exists()


def test_the_currency_is_fixed_once_money_moved(admin_client):
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    submit_and_post(project, expert, T0)
    payment_settings = PaymentSettings.objects.get(project=project)

    response = admin_client.post(f"/admin/payments/paymentsettings/{payment_settings.pk}/change/", {
        "currency": "USD", "period_length": "biweekly", "period_anchor": "2024-01-01"})

    payment_settings.refresh_from_db()
    assert response.status_code == 302
    assert (payment_settings.currency, payment_settings.period_length) == ("CNY", "biweekly")


def test_the_post_earning_task_is_idempotent_and_skips_what_does_not_earn():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)

    first = tasks.ledger_post_earning_task.apply(kwargs={"assignment_id": assignment.pk}).get()
    again = tasks.ledger_post_earning_task.apply(kwargs={"assignment_id": assignment.pk}).get()
    missing = tasks.ledger_post_earning_task.apply(kwargs={"assignment_id": 10**9}).get()

    assert first == again == LedgerEntry.objects.get().pk
    assert missing is None


def test_the_beat_tasks_sweep_and_settle():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    submit(project, expert, timezone.now() - timedelta(days=30))

    swept = tasks.earnings_sweep_task.apply().get()
    # The sweep posts at the wall-clock time, in the current period: nothing is due yet.
    settled = tasks.periods_settle_due_task.apply().get()

    assert (swept, settled) == (1, [])
    assert Period.objects.get().status == "open"


def test_the_beat_schedule_runs_the_sweep_and_the_settlement():
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    assert {"payments.earnings_sweep", "payments.periods_settle_due"} <= scheduled
