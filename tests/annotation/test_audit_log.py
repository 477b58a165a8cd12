"""The audit log: each PM or admin change writes exactly one entry with its ids and request id, the
database refuses to rewrite or delete an entry, and a PM sees only their own projects' part."""
import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, InternalError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.audit.services import audit_record
from annotation.consultations.services import consultation_resolve
from annotation.exchange.export import ExportFilters
from annotation.exchange.export_jobs import export_job_create
from annotation.exchange.questions import questions_import
from annotation.exchange.responses import responses_import
from annotation.judging.runs import judge_run_start
from annotation.models import AuditEntry, Consultation, Project
from annotation.projects.services import project_pause, project_settings_update
from annotation.roster.services import member_add, member_remove
from annotation.rubric_editing.services import (
    rubric_draft_guidelines_update,
    rubric_draft_start,
    rubric_version_publish_by_number,
)
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from core.errors import DomainError
from payments.ledger import ledger_post_earning
from payments.pricing import price_rule_create
from payments.services import period_close_now, submission_reject
from tests.annotation.test_import_questions import heartbench_row, jsonl
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks
from tests.payments.factories import T0, make_expert, make_paid_project, submit_and_post

pytestmark = pytest.mark.django_db


def the_entry(action: str) -> AuditEntry:
    """The one entry of `action` (fails when there are none or several)."""
    [entry] = AuditEntry.objects.filter(action=action)
    return entry


@pytest.fixture
def project(pm):
    return make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, pm=pm)


def _submit(expert, project, value=1):
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    items = rubric_items_for_task(lease.task)
    labels = {i.item_key: (value if isinstance(value, int) else value[i.position]) for i in items}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    return lease


# ----------------------------------------------------------------------------- append-only


def _raw(sql, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.postgres  # the PostgreSQL trigger (CI always runs on PostgreSQL)
@pytest.mark.parametrize("sql", ["UPDATE annotation_auditentry SET action = 'export' WHERE id = %s",
                                 "UPDATE annotation_auditentry SET details = '{}'::jsonb WHERE id = %s",
                                 "DELETE FROM annotation_auditentry WHERE id = %s"])
def test_the_database_refuses_to_update_or_delete_an_entry(pm, project, sql):
    entry = audit_record(actor=pm, action="settings.change", project_id=project.pk, details={"x": 1})

    with pytest.raises((IntegrityError, InternalError)):
        _raw(sql, [entry.pk])

    assert AuditEntry.objects.filter(pk=entry.pk, action="settings.change", details={"x": 1}).exists()


def test_the_orm_cannot_rewrite_an_entry_either(pm, project):
    entry = audit_record(actor=pm, action="settings.change", project_id=project.pk)

    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(action="export")
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).delete()
    assert AuditEntry.objects.get(pk=entry.pk).action == "settings.change"


# ----------------------------------------------------------------------------- one entry per action


def test_a_questions_import_writes_one_entry_naming_the_version_and_not_a_second_for_its_publish(pm):
    project = Project.objects.get(pk=make_project_with_tasks(n_questions=0, pm=pm).pk)

    result = questions_import(project=project, data=jsonl(heartbench_row("qa"), heartbench_row("qb")),
                              now=timezone.now(), by=pm, source="two.jsonl")

    entry = the_entry("questions.import")
    assert (entry.actor, entry.project_id, entry.object_type) == (pm, project.pk, "rubrics.rubricversion")
    assert entry.details["questions"] == 2 and entry.details["version"] == result.version
    assert not AuditEntry.objects.filter(action="rubric.publish").exists()


def test_a_responses_import_writes_one_entry_with_the_questions(pm, project):
    question = project.questions.get()
    data = jsonl({"question_id": question.external_id, "model": "m-new", "response": "a reply"})

    responses_import(project=project, data=data, model=None, now=timezone.now(), by=pm)

    entry = the_entry("responses.import")
    assert (entry.actor, entry.object_ids, entry.details["responses"]) == (pm, [question.pk], 1)


def test_publishing_a_draft_writes_one_entry_and_publishing_again_none(pm, project):
    draft = rubric_draft_start(project=project)
    rubric_draft_guidelines_update(project=project, guidelines="Mark a hit only when the reply says it.")

    rubric_version_publish_by_number(project=project, number=draft.number, reason="wording", now=timezone.now(), by=pm)
    with pytest.raises(DomainError):
        rubric_version_publish_by_number(project=project, number=draft.number, reason="again", now=timezone.now(),
                                         by=pm)

    entry = the_entry("rubric.publish")
    assert (entry.object_type, entry.object_ids, entry.details["reason"]) == ("rubrics.rubricversion", [draft.pk],
                                                                              "wording")


def test_a_settings_change_writes_one_entry_with_old_and_new_values(pm, project):
    project_settings_update(project=project, values={"overlap": 3}, changed_by=pm, now=timezone.now())
    project_settings_update(project=project, values={"overlap": 3}, changed_by=pm, now=timezone.now())

    entry = the_entry("settings.change")
    assert entry.object_ids == [project.pk]
    assert entry.details["changes"]["overlap"] == {"old": "2", "new": "3"}


def test_pausing_writes_one_entry_and_pausing_again_none(pm, project):
    project_pause(project=project, by=pm, now=timezone.now())
    project_pause(project=project, by=pm, now=timezone.now())

    assert the_entry("project.state").details == {"old": "active", "new": "paused"}


def test_adding_and_removing_a_member_write_one_entry_each(pm, project):
    expert = ExpertFactory()

    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    member_remove(project=project, user=expert, by=pm, via="page", now=timezone.now())

    assert the_entry("member.add").object_ids == [expert.pk]
    removed = the_entry("member.remove")
    assert (removed.object_type, removed.object_ids, removed.details["role"]) == ("experts.user", [expert.pk],
                                                                                 "expert")


def test_a_rejection_writes_one_entry_with_the_submission_and_its_reversal():
    pm = PMFactory()
    experts = [make_expert() for _ in range(2)]
    project = make_paid_project(experts=[*experts, pm], n_questions=1, overlap=2)
    spam = _submit(experts[0], project, 0)
    ledger_post_earning(assignment_id=spam.pk, now=T0)

    reversal = submission_reject(actor=pm, assignment_id=spam.pk, reason="all misses", reason_code="spam", now=T0)

    entry = the_entry("submission.reject")
    assert (entry.actor, entry.project_id, entry.object_ids) == (pm, project.pk, [spam.pk])
    assert entry.details["reversal_id"] == reversal.pk and entry.details["reason"] == "all misses"


def test_resolving_a_consultation_writes_one_entry(pm):
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=2, pm=pm)
    project_settings_update(project=project, values={"tie_extra_experts": "off"}, changed_by=None, now=timezone.now())
    a, b = ExpertFactory(), ExpertFactory()
    for expert in (a, b):
        project_add_member(project=project, user=expert)
    _submit(a, project, {1: 1, 2: 1, 3: 0})
    _submit(b, project, {1: 0, 2: 1, 3: 0})
    consultation = Consultation.objects.get()

    consultation_resolve(pm=pm, consultation=consultation, outcome="hit", category="annotator_error",
                         text="The reply names the feeling.", now=timezone.now())

    entry = the_entry("consultation.resolve")
    assert (entry.object_ids, entry.details["outcome"]) == ([consultation.pk], "hit")


def test_a_price_change_writes_one_entry(pm, project):
    admin = AdminFactory()

    rule = price_rule_create(project=project, difficulty="normal", amount="2.50", effective_from=None,
                             created_by=admin, now=timezone.now())

    entry = the_entry("price.change")
    assert (entry.actor, entry.object_type, entry.object_ids) == (admin, "payments.pricerule", [rule.pk])
    assert entry.details["amount"] == "2.50"


def test_a_settlement_writes_one_entry_with_the_period():
    expert, admin = make_expert(), AdminFactory()
    project = make_paid_project(experts=[expert])
    submit_and_post(project, expert, T0)

    [settlement] = period_close_now(actor=admin, project_id=project.pk, now=T0 + timedelta(hours=3))

    entry = the_entry("period.settle")
    assert (entry.actor, entry.object_ids) == (admin, [settlement.period.pk])
    assert entry.details["statements"] == 1 and entry.details["payout_batch_id"] == settlement.batch.pk


def test_an_export_writes_one_entry(pm, project):
    job = export_job_create(project=project, owner=pm, fmt="jsonl", filters=ExportFilters(), now=timezone.now())

    entry = the_entry("export")
    assert (entry.object_type, entry.object_ids, entry.details["format"]) == ("annotation.exportjob", [job.pk], "jsonl")


def test_starting_a_judge_run_writes_one_entry_without_the_key(pm, project):
    run = judge_run_start(project=project, name="run-1", base_url="https://llm.invalid/v1", judge_model="j",
                          api_key="sk-very-secret", api_key_env=None, requests_per_second=1, created_by=pm)

    entry = the_entry("judge_run.start")
    assert entry.object_ids == [run.pk]
    assert "sk-very-secret" not in json.dumps(entry.details)


def test_a_change_that_fails_writes_no_entry(pm, project):
    with pytest.raises(DomainError):
        project_settings_update(project=project, values={"overlap": 0}, changed_by=pm, now=timezone.now())

    assert not AuditEntry.objects.exists()


# ----------------------------------------------------------------------------- request id and pages


def test_an_entry_written_during_a_request_carries_its_request_id(client, pm, project):
    client.force_login(pm)

    response = client.post(reverse("project_pause", args=[project.pk]), {"confirmed": "yes"},
                           HTTP_X_REQUEST_ID="req-abc-123")

    assert response["X-Request-ID"] == "req-abc-123"
    assert the_entry("project.state").request_id == "req-abc-123"


def test_an_unusable_request_id_is_replaced_by_a_generated_one(client, pm):
    client.force_login(pm)

    response = client.get(reverse("home"), HTTP_X_REQUEST_ID="bad id\n<script>")

    assert len(response["X-Request-ID"]) == 32 and response["X-Request-ID"].isalnum()


def test_a_pm_sees_their_projects_entries_and_another_projects_pm_gets_404(client, pm, project):
    other_pm = PMFactory()
    other = make_project_with_tasks(n_questions=1, pm=other_pm)
    audit_record(actor=pm, action="settings.change", project_id=project.pk, details={"mine": "yes"})
    audit_record(actor=other_pm, action="settings.change", project_id=other.pk, details={"theirs": "yes"})
    client.force_login(pm)

    own = client.get(reverse("project_audit", args=[project.pk])).content.decode()
    assert "mine" in own and "theirs" not in own
    assert client.get(reverse("project_audit", args=[other.pk])).status_code == 404
    assert client.get(reverse("project_audit", args=[other.pk]) + "?format=csv").status_code == 404
    assert client.get(reverse("audit_log")).status_code == 404


def test_the_admin_filters_by_project_user_action_and_date_and_exports_formula_safe_csv(client):
    admin, pm = AdminFactory(), PMFactory()
    a = make_project_with_tasks(n_questions=1, pm=pm)
    b = make_project_with_tasks(n_questions=1, pm=pm)
    now = timezone.now()
    audit_record(actor=pm, action="export", project_id=a.pk, details={"note": "=HYPERLINK(\"x\")"}, now=now)
    audit_record(actor=pm, action="export", project_id=b.pk, now=now)
    audit_record(actor=admin, action="price.change", project_id=a.pk, now=now - timedelta(days=3))
    client.force_login(admin)
    url = reverse("audit_log")

    filtered = client.get(url, {"project": a.pk, "user": pm.username, "action": "export",
                                "since": f"{now:%Y-%m-%d}"})
    old = client.get(url, {"until": f"{now - timedelta(days=2):%Y-%m-%d}"})
    exported = b"".join(client.get(url, {"project": a.pk, "format": "csv"}).streaming_content).decode("utf-8-sig")

    assert [e.project_id for e in filtered.context["entries"]] == [a.pk]
    assert [e.action for e in old.context["entries"]] == ["price.change"]
    lines = exported.strip().splitlines()
    assert lines[0].startswith("at,actor,action,project_id")
    assert len(lines) == 3
    # The details cell is JSON text starting with "{": no formula; a formula-looking cell gets an apostrophe.
    assert '"{""note"": ""=HYPERLINK(\\""x\\"")""}"' in exported


def test_the_audit_page_is_a_fragment_for_htmx(client, pm, project):
    audit_record(actor=pm, action="export", project_id=project.pk)
    client.force_login(pm)

    fragment = client.get(reverse("project_audit", args=[project.pk]), HTTP_HX_REQUEST="true").content.decode()

    assert 'id="audit"' in fragment and "<html" not in fragment


def test_a_csv_cell_that_looks_like_a_formula_is_defused(client):
    admin = AdminFactory()
    project = make_project_with_tasks(n_questions=1)
    audit_record(actor=admin, action="export", project_id=project.pk, object_type="=cmd|' /C calc'!A0")
    client.force_login(admin)

    exported = b"".join(client.get(reverse("audit_log"), {"format": "csv"}).streaming_content).decode("utf-8-sig")

    assert "'=cmd" in exported


def test_the_audit_page_reads_in_a_fixed_number_of_queries(client, pm, project, django_assert_max_num_queries):
    for n in range(30):
        audit_record(actor=pm, action="export", project_id=project.pk, details={"n": n})
    client.force_login(pm)

    with django_assert_max_num_queries(10):
        assert client.get(reverse("project_audit", args=[project.pk])).status_code == 200
