"""A pay cycle end to end on committed data, then `manage.py reconcile_ledger` run as CI runs it."""
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment
from payments.models import LedgerEntry, PayoutBatch, Statement
from payments.services import payout_batch_approve, payout_batch_mark_paid, period_close_now, submission_reject
from tests.factories import AdminFactory, PMFactory
from tests.payments.factories import make_expert, make_paid_project, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres,
              pytest.mark.usefixtures("post_migrate_rows")]


def _manage(*args: str) -> subprocess.CompletedProcess:
    """Run manage.py against this test database in a separate process."""
    db = connection.settings_dict
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    url = f"postgres://{quote(db['USER'])}:{quote(db['PASSWORD'] or '')}@{host}/{db['NAME']}"
    env = os.environ | {"DATABASE_URL": url}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=Path(settings.BASE_DIR), env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_full_pay_cycle_reconciles_and_a_missing_earning_fails_the_command(monkeypatch):
    experts = [make_expert(tier) for tier in ("bronze", "silver", "gold")]
    pm, admin = PMFactory(), AdminFactory()
    project = make_paid_project(experts=[*experts, pm], n_questions=3)
    # Submissions commit for real: the eager "payments.ledger_post_earning" task posts each earning.
    work = [submit(project, e, timezone.now()) for e in experts for _ in range(2)]
    submit(project, experts[0], timezone.now(), kind=Assignment.Kind.CALIBRATION)
    submission_reject(actor=pm, assignment_id=work[0].pk, reason="spam", now=timezone.now())
    [settlement] = period_close_now(actor=admin, project_id=project.pk, now=timezone.now())
    payout_batch_approve(actor=admin, batch_id=settlement.batch.pk, now=timezone.now())
    payout_batch_mark_paid(actor=admin, batch_id=settlement.batch.pk, now=timezone.now(), reference="TX-1")
    submission_reject(actor=pm, assignment_id=work[1].pk, reason="copy-paste", now=timezone.now())
    submit(project, experts[1], timezone.now())

    honest = _manage("reconcile_ledger")

    assert LedgerEntry.objects.filter(kind="earning").count() == 7
    assert (Statement.objects.count(), PayoutBatch.objects.get().status) == (3, "paid")
    assert honest.returncode == 0, honest.stderr
    assert "reconciles" in honest.stdout

    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, **kwargs: None)
    unpaid = submit(project, experts[2], timezone.now())

    tampered = _manage("reconcile_ledger")

    assert tampered.returncode == 1
    assert f"earning_missing: submitted assignment {unpaid.pk} has no earning" in tampered.stderr
