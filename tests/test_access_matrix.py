"""Every URL of the project, every method its view takes, as six kinds of caller, against a world
of two projects: what a caller may not see answers 404 (403 for a role refused on its own
project), changes no row and leaks no text of it.

The world: project A (its PM, the expert E1 who owns the assignments, statements and
calibration attempts, and a second member expert E2) and project B (its own PM and expert),
plus an admin. The callers are anonymous, E2 (a member, against E1's objects), B's expert,
B's PM, A's PM and the admin; every URL is filled with ids of A's objects and E1's.

`MATRIX` names every URL of the resolver with the rule of who may reach it; a URL added
without an entry fails `test_the_matrix_covers_every_url`. Each request runs in a savepoint
that is rolled back afterwards, so every request sees the same world and what a refused
request would have written is read from PostgreSQL's per-transaction write counters, which a rollback does not reset.
"""
from __future__ import annotations

import copy
import dataclasses
import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from annotation.models import (
    Assignment,
    BatchJob,
    CalibrationAttempt,
    CalibrationTask,
    Case,
    ExportJob,
    FaqEntry,
    Invitation,
    JudgeRun,
    Label,
    RubricItemSuggestion,
    Task,
    WebhookEndpoint,
    WebhookMessage,
)
from annotation.models.work import Draft
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from experts.models import Notification
from payments.appeals import appeal_create_for_line
from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry, PaymentSettings, PayoutBatch, Statement
from payments.periods import grid_bounds
from payments.services import period_close_now, submission_reject
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks
from tests.payments.factories import submit

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("access_matrix")]

# Text only project A's members may read, and text only E1 (and A's PM, and admins) may read.
PROJECT_MARK = "ZQXPROJECTAMARK"
EXPERT_MARK = "ZQXEXPERTONEMARK"

# Who may reach a URL.
PUBLIC = "public"  # anyone, signed in or not (login, health, an invitation link)
SELF = "self"  # any signed-in user, about their own rows only (lists, their profile)
MEMBER = "member"  # project A's members (E2 among them) and admins
PM = "pm"  # project A's PM and admins; an expert of A is refused by role (403 or 404)
OWNER = "owner"  # E1's object: E2 and the other project get 404; A's PM and admins may or may not
ADMIN = "admin"  # platform admins only
EXPERT = "expert"  # like MEMBER, but a PM anywhere is refused by role first (403), before any lookup
BEARER = "bearer"  # an invitation link: whoever holds the token sees the project's name and may join
EXPERT_SELF = "expert-self"  # like SELF, for experts only (a PM or admin is refused by role)
MANAGER_SELF = "manager-self"  # like SELF, for PMs and admins only (an expert is refused by role)
METRICS = "metrics"  # admins, or a bearer token (tests/core/test_metrics.py); everyone else is refused


@dataclasses.dataclass(frozen=True)
class Rule:
    access: str
    kwargs: dict[str, str] = dataclasses.field(default_factory=dict)  # URL kwarg -> world key, beyond DEFAULTS
    # A well-formed body, so that a write reaches the access check instead of stopping at validation.
    body: dict | None = None
    anonymous: frozenset[int] | None = None  # what an anonymous caller gets, where it is not the usual refusal
    htmx: bool = False  # a fragment that answers htmx requests only


def r(access: str, body: dict | None = None, anonymous: set[int] | None = None, htmx: bool = False,
      **kwargs: str) -> Rule:
    return Rule(access, kwargs, body, frozenset(anonymous) if anonymous else None, htmx)


LABELS = {"labels": {}, "notes": {}}


# The world object each URL kwarg names unless a rule says otherwise.
DEFAULTS = {
    "project_id": "project", "assignment_id": "lease", "job_id": "export_job", "consultation_id": "consultation",
    "item_id": "rubric_item", "number": "version_number", "attempt_id": "attempt", "position": "position",
    "user_id": "e1", "case_id": "case", "entry_id": "faq_entry", "run_id": "judge_run", "appeal_id": "appeal",
    "config_id": "judge_config",
    "notification_id": "notification", "statement_id": "statement", "batch_id": "batch", "task_id": "task",
    "endpoint_id": "webhook", "message_id": "webhook_message", "suggestion_id": "suggestion",
    "invitation_id": "invitation", "token": "invitation_token", "member": "e1", "kind": "import_kind",
}

MATRIX: dict[str, Rule] = {
    # Outside any project.
    "favicon.ico": r(PUBLIC),
    "healthz": r(PUBLIC),
    "set_language": r(PUBLIC),
    "login": r(PUBLIC),
    "logout": r(PUBLIC),
    "invite_start": r(PUBLIC),
    "invite": r(BEARER),
    "metrics": r(METRICS),
    "schema": r(SELF),
    "api-docs": r(SELF),
    "home": r(SELF),
    "my_profile": r(EXPERT_SELF),
    "notifications": r(SELF),
    "notifications_read": r(SELF),
    "notifications_badge": r(SELF, anonymous={286, 405}),  # 286: htmx stops polling
    "notification_email_preferences": r(SELF),
    "notification_read": r(OWNER),
    "notification_open": r(OWNER),
    "my_portrait": r(EXPERT_SELF),
    "my_consultations": r(SELF),
    "audit_log": r(ADMIN),
    # Payments.
    "earnings": r(SELF),
    "statement_detail": r(OWNER),
    "costs": r(MANAGER_SELF),
    "project_costs": r(PM),
    "period_close": r(ADMIN),
    "submission_reject": r(PM, assignment_id="submitted"),
    "submissions_reject_batch": r(PM),
    "appeal_list": r(SELF),
    "appeal_rejection_new": r(OWNER, assignment_id="rejected"),
    "appeal_line_new": r(OWNER, entry_id="ledger_entry"),
    "appeal_decide": r(PM),
    "project_appeals": r(PM),
    "batch_approve": r(ADMIN),
    "batch_mark_paid": r(ADMIN),
    "batch_csv": r(ADMIN),
    # Projects and the work.
    "project_detail": r(PM),
    "project_import": r(PM),
    "project_new": r(MANAGER_SELF),
    "project_settings": r(PM),
    "project_overlap_preview": r(PM),
    "project_pause": r(PM),
    "project_resume": r(PM),
    "project_close": r(PM),
    "project_archive": r(PM),
    "project_clone": r(PM),
    "annotate": r(OWNER),
    "draft_save_view": r(OWNER),
    "submit_view": r(OWNER),
    "lease_extend_view": r(OWNER),
    "lease_release_view": r(OWNER),
    "task_skip_view": r(OWNER),
    "my_history": r(EXPERT_SELF),
    "project_skips": r(PM),
    "next_task": r(MEMBER),
    "judge_runs": r(PM),
    "judge_items": r(PM),
    "judge_item": r(PM),
    "judge_configs": r(PM),
    "judge_config": r(PM),
    "judge_config_diff": r(PM),
    "judge_runs_compare": r(PM),
    "judge_labels_import": r(PM),
    "judge_run": r(PM),
    "judge_run_cancel": r(PM),
    "judge_run_resume": r(PM),
    "exports": r(PM),
    "export_download": r(PM),
    "export_job_start": r(PM),
    "export_job": r(OWNER),  # the PM's own job
    "export_job_download": r(OWNER),
    "calibration": r(EXPERT),
    "calibration_start": r(MEMBER),
    "calibration_task": r(OWNER),
    "calibration_draft": r(OWNER),
    "calibration_result": r(OWNER),
    "quality": r(PM),
    "golden_import": r(PM),
    "quality_experts": r(PM),
    "quality_expert": r(PM),
    "quality_expert_resume": r(PM),
    "quality_expert_evaluate": r(PM),
    "rubric_draft": r(PM),
    "rubric_draft_start": r(PM),
    "rubric_item_add": r(PM),
    "rubric_item_edit": r(PM),
    "rubric_item_delete": r(PM),
    "rubric_guidelines_save": r(PM),
    "rubric_publish": r(PM),
    "rubric_versions": r(MEMBER),
    "rubric_versions_compare": r(PM),
    "project_guidelines": r(MEMBER),
    "quality_dashboard": r(PM),
    "benchmark_report": r(PM),
    "benchmark_report_recompute": r(PM),
    "benchmark_gates_edit": r(PM),
    "judge_convergence": r(PM),
    "judge_convergence_targets": r(PM),
    "blind_test": r(PM),
    "blind_test_create": r(PM),
    "quality_status": r(PM),
    "quality_recompute": r(PM),
    "quality_items": r(PM),
    "board": r(PM),
    "task_history": r(PM),
    "members": r(PM),
    "member_remove": r(PM),
    "invitation_create": r(PM),
    "invitation_revoke": r(PM),
    "cases": r(MEMBER),
    "case_new": r(PM),
    "case_detail": r(MEMBER),
    "case_edit": r(PM),
    "case_publish": r(PM),
    "case_unpublish": r(PM),
    "faq": r(MEMBER),
    "faq_ask": r(MEMBER),
    "faq_similar": r(MEMBER, htmx=True),
    "faq_detail": r(MEMBER),
    "faq_answer": r(PM),
    "consultation_list": r(PM),
    "consultation_open_pm": r(PM),
    "consultation_detail": r(PM),
    "consultation_vote": r(PM),
    "consultation_post": r(PM),
    "consultation_invite": r(PM),
    "consultation_reveal": r(PM),
    "consultation_resolve": r(PM),
    "consultation_ask": r(OWNER, assignment_id="submitted"),
    "reveal": r(OWNER, assignment_id="submitted"),
    "rubric_suggestion_take": r(PM),
    "rubric_suggestion_dismiss": r(PM),
    "review_queue": r(PM),
    "review_accept": r(PM, assignment_id="submitted"),
    "review_return": r(PM, assignment_id="submitted"),
    "review_reject": r(PM, assignment_id="submitted"),
    "workload": r(PM),
    "batch": r(PM),
    "batch_tasks": r(PM),
    "batch_experts": r(PM),
    "batch_job": r(PM, job_id="batch_job"),
    "webhooks": r(PM),
    "webhook_disable": r(PM),
    "webhook_resend": r(PM),
    "project_audit": r(PM),
    # The API.
    "api-project-create": r(SELF),
    "api-project": r(PM),
    "api-project-pause": r(PM),
    "api-project-resume": r(PM),
    "api-project-close": r(PM),
    "api-project-archive": r(PM),
    "api-project-clone": r(PM),
    "api-project-settings-history": r(PM),
    "api-members": r(PM),
    "api-member": r(PM),
    "api-invitations": r(PM),
    "api-invitation-revoke": r(PM),
    "api-next-task": r(EXPERT),
    "api-assignment": r(OWNER),
    "api-draft": r(OWNER, body=LABELS),
    "api-submit": r(OWNER, body=LABELS),
    "api-extend": r(OWNER),
    "api-release": r(OWNER),
    "api-skip": r(OWNER, body={"reason": "other", "text": "unsure"}),
    "api-reveal": r(OWNER, assignment_id="submitted", body={"changes": {}}),
    "api-my-history": r(EXPERT_SELF),
    "api-project-skips": r(PM),
    "api-assign-by-hand": r(PM),
    "api-task-priority": r(PM),
    "api-hand-over": r(PM),
    "api-questions-import": r(PM),
    "api-responses-import": r(PM),
    "api-golden-import": r(PM),
    "api-judge-labels-import": r(PM),
    "api-judge-run-start": r(PM),
    "api-consensus-export": r(PM),
    "api-export-job-create": r(PM),
    "api-export-job": r(OWNER),
    "api-export-job-download": r(OWNER),
    "api-consultations": r(MEMBER),  # an expert sees those they are asked to vote on
    "api-consultation": r(PM),
    "api-consultation-vote": r(PM),
    "api-consultation-post": r(PM),
    "api-consultation-resolve": r(PM),
    "api-rubric-draft": r(PM),
    "api-rubric-draft-impact": r(PM),
    "api-rubric-versions": r(MEMBER),
    "api-rubric-draft-items": r(PM),
    "api-rubric-item": r(PM),
    "api-rubric-version-publish": r(PM),
    "api-calibration": r(EXPERT),
    "api-calibration-attempt": r(OWNER),
    "api-calibration-task": r(OWNER, body=LABELS),
    "api-calibration-draft": r(OWNER, body=LABELS),
    "api-quality-settings": r(PM),
    "api-my-portrait": r(EXPERT_SELF),
    "api-expert-portrait": r(PM),
    "api-notifications": r(SELF),
    "api-cases": r(MEMBER),
    "api-case": r(MEMBER),
    "api-faq": r(MEMBER),
    "api-faq-entry": r(MEMBER),
    "api-judge-run": r(PM),
    "api-agreement": r(PM),
    "api-agreement-recompute": r(PM),
    "api-appeal-create": r(SELF),
    "api-appeals-mine": r(SELF),
    "api-appeals-to-decide": r(SELF),
    "api-appeal-decide": r(PM, body={"outcome": "deny", "reason": "no"}),
}

# Left out on purpose, each with the reason.
EXCLUDED_PREFIXES = {
    "admin/": "Django's admin: staff only by Django's own login check, and covered by its own tests "
              "(tests/annotation/test_admin.py); walking every ModelAdmin URL would triple the run.",
}

# Tables whose rows a refused request may legitimately touch: the session store (a session
# is saved on every response that changed it) and django-axes' access log.
UNCOUNTED_TABLES = {"django_session", "axes_accessattempt", "axes_accesslog", "axes_accessfailurelog"}


@dataclasses.dataclass(frozen=True)
class Route:
    name: str
    pattern: URLPattern
    kwargs: tuple[str, ...]
    methods: tuple[str, ...]
    is_api: bool


def _methods_of(pattern: URLPattern) -> tuple[str, ...]:
    """The methods the view answers: a class view's handlers, else GET and POST (a function view's
    decorators cannot be read, and the one it refuses answers 405)."""
    callback = pattern.callback
    view_class = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if view_class is None:
        return ("GET", "POST")
    methods = [m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(view_class, m)]
    return tuple(methods)


def routes() -> list[Route]:
    found: list[Route] = []

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                if any(route.startswith(p) for p in EXCLUDED_PREFIXES):
                    continue
                walk(entry, route)
                continue
            name = entry.name or route
            view_class = getattr(entry.callback, "cls", None)
            found.append(Route(name=name, pattern=entry, kwargs=tuple(entry.pattern.converters),
                               methods=_methods_of(entry),
                               is_api=view_class is not None and issubclass(view_class, APIView)))

    walk(get_resolver(), "")
    return found


def test_the_matrix_covers_every_url():
    names = [route.name for route in routes()]

    assert len(names) == len(set(names)), "two URL patterns share a name; the matrix needs one rule per URL"
    assert set(names) - set(MATRIX) == set(), "URLs without an access rule in MATRIX"
    assert set(MATRIX) - set(names) == set(), "MATRIX rules for URLs that no longer exist"


# --- the world ---------------------------------------------------------------------------------

def _build_world() -> dict:
    now = timezone.now()
    pm_a, pm_b, admin = PMFactory(), PMFactory(), AdminFactory()
    e1, e2, eb = ExpertFactory(), ExpertFactory(), ExpertFactory()
    project = make_project_with_tasks(n_questions=4, items_per_question=2, overlap=3, pm=pm_a)
    project.name = f"{PROJECT_MARK} counselling"
    project.save(update_fields=["name"])
    for member in (e1, e2, pm_a):
        project_add_member(project=project, user=member)
    other = make_project_with_tasks(n_questions=1, items_per_question=2, pm=pm_b)
    for member in (eb, pm_b):
        project_add_member(project=other, user=member)

    # The settled history lies in one pay period: within three hours after a period's start (a week's,
    # in the settings' time zone), it is set just before that start instead of the last two hours.
    settings_row = PaymentSettings.objects.get_or_create(project=project)[0]
    period_start, _end = grid_bounds(anchor=settings_row.period_anchor, days=settings_row.period_days, at=now)
    past = now if now - period_start >= timedelta(hours=3) else period_start - timedelta(minutes=1)
    submitted = submit(project, e1, past - timedelta(hours=2))
    rejected = submit(project, e1, past - timedelta(hours=2))
    for done in (submitted, rejected):  # the earnings the on-commit task would post
        ledger_post_earning(assignment_id=done.pk, now=past - timedelta(hours=2))
    Label.objects.filter(assignment=submitted).update(note=f"{EXPERT_MARK} my reasoning")
    submission_reject(actor=pm_a, assignment_id=rejected.pk, reason="copy-paste", now=past - timedelta(hours=1))
    [settlement] = period_close_now(actor=admin, project_id=project.pk, now=past - timedelta(minutes=30))
    lease = submit_lease(project, e1, now)
    Draft.objects.create(assignment=lease, labels={}, notes={"x": f"{EXPERT_MARK} draft note"})
    entry = LedgerEntry.objects.filter(assignment=submitted, kind="earning").get()
    appeal = appeal_create_for_line(expert=e1, entry_id=entry.pk, reason=f"{EXPERT_MARK} pay me", now=now)

    version = submitted.task.rubric_version
    item = rubric_items_for_task(submitted.task)[0]
    golden = Task.objects.filter(project=project).exclude(assignments__expert=e1).order_by("pk").first()
    attempt = CalibrationAttempt.objects.create(expert=e1, project=project, rubric_version=version,
                                                threshold_pct=80, started_at=now)
    CalibrationTask.objects.create(attempt=attempt, task=golden, position=1)

    from annotation.consultations.opening import consultation_open_by_pm

    consultation = consultation_open_by_pm(pm=pm_a, task_id=submitted.task_id, rubric_item_id=item.pk,
                                           reason="ambiguous", now=now).consultation
    suggestion = RubricItemSuggestion.objects.create(project=project, item_key=item.item_key, text="clearer",
                                                     consultation=consultation, created_at=now)
    run = JudgeRun.objects.create(project=project, rubric_version=version, name="judge", source="import")
    from annotation.judging.configs import builtin_prompt_template, judge_config_create

    judge_config = judge_config_create(project=project, name="matrix config",
                                       prompt_template=builtin_prompt_template(), created_by=pm_a, now=now).config
    job = ExportJob.objects.create(project=project, owner=pm_a, fmt="jsonl", created_at=now,
                                   expires_at=now + timedelta(days=1))
    case = Case.objects.create(project=project, title=f"{PROJECT_MARK} case", problem="p", reading="r",
                               created_by=pm_a, created_at=now, updated_at=now, status="published",
                               published_by=pm_a, published_at=now)
    faq = FaqEntry.objects.create(project=project, question=f"{PROJECT_MARK} question?", asked_by=e1, asked_at=now,
                                  answer="Mark it a miss.", answered_by=pm_a, answered_at=now)
    invitation = Invitation.objects.create(project=project, token="matrix-token-" + "a" * 20,
                                           expires_at=now + timedelta(days=3), created_at=now, created_by=pm_a)
    webhook = WebhookEndpoint.objects.create(project=project, url="https://hooks.invalid/x", secret_encrypted="x",
                                             created_by=pm_a, created_at=now)
    message = WebhookMessage.objects.create(endpoint=webhook, event="task.completed", payload={}, created_at=now)
    batch_job = BatchJob.objects.create(project=project, created_by=pm_a, token="matrix-batch", op="priority",
                                        created_at=now)
    notification = Notification.objects.create(user=e1, kind=Notification.Kind.MENTION,
                                               message=f"{EXPERT_MARK} mentioned you", created_at=now)
    return {
        "users": {"pm_a": pm_a, "pm_b": pm_b, "admin": admin, "e1": e1, "e2": e2, "eb": eb},
        "project": project.pk, "lease": lease.pk, "submitted": submitted.pk, "rejected": rejected.pk,
        "export_job": job.pk, "consultation": consultation.pk, "rubric_item": item.pk,
        "version_number": version.number, "attempt": attempt.pk, "position": 1, "e1": e1.pk, "case": case.pk,
        "faq_entry": faq.pk, "judge_run": run.pk, "appeal": appeal.pk, "notification": notification.pk,
        "judge_config": judge_config.pk,
        "statement": Statement.objects.get(period=settlement.period, expert=e1).pk,
        "batch": PayoutBatch.objects.get(period=settlement.period).pk, "task": submitted.task_id,
        "webhook": webhook.pk, "webhook_message": message.pk, "suggestion": suggestion.pk,
        "invitation": invitation.pk, "invitation_token": invitation.token, "ledger_entry": entry.pk,
        "import_kind": "questions", "batch_job": batch_job.pk,
    }


def submit_lease(project, expert, now) -> Assignment:
    from annotation.assignment.services import assignment_claim_next

    lease = assignment_claim_next(project=project, expert=expert, now=now)
    assert lease is not None and rubric_items_for_task(lease.task)
    return lease


# --- measuring ---------------------------------------------------------------------------------

# Rows inserted, updated or deleted so far in this transaction, per table. PostgreSQL keeps
# counting what a rolled-back savepoint wrote, so a request's writes show as the difference.
WRITES_SQL = ("SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_xact_user_tables "
              "WHERE n_tup_ins + n_tup_upd + n_tup_del > 0")


def _writes() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(WRITES_SQL)
        return {table: n for table, n in cursor.fetchall() if table not in UNCOUNTED_TABLES}


def _changed(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(t for t, n in after.items() if n != before.get(t, 0))


ACTORS = ("anonymous", "e2", "eb", "pm_b", "pm_a", "admin")


def _expected(rule: Rule, actor: str, route: Route, method: str) -> tuple[set[int] | None, bool, tuple[str, ...]]:
    """(statuses allowed or None for any non-5xx, whether rows may change, marks the body must not hold)."""
    refuse_anon = {401, 403} if route.is_api else {302}
    outsiders = actor in ("eb", "pm_b")
    hidden: tuple[str, ...] = ()
    if actor == "anonymous" or outsiders:
        hidden = (PROJECT_MARK, EXPERT_MARK)
    elif actor == "e2":
        hidden = (EXPERT_MARK,)
    method_refused = {405}
    access = rule.access
    if access == PUBLIC:
        return None, False, hidden
    if access == BEARER:
        return None, actor != "anonymous", ()
    if access == METRICS:
        return ({401, 403, 404} | method_refused if actor != "admin" else None), False, hidden
    if actor == "anonymous":
        return (rule.anonymous or refuse_anon | method_refused), False, hidden
    if access in (SELF, EXPERT_SELF, MANAGER_SELF):
        return None, True, hidden
    if access == ADMIN:
        return (None, True, ()) if actor == "admin" else ({403, 404} | method_refused, False, hidden)
    if actor in ("pm_a", "admin"):
        return None, True, ()
    if access == EXPERT and actor == "pm_b":
        return {403, 404} | method_refused, False, hidden
    if outsiders:
        return {404} | method_refused, False, hidden
    # E2, a member expert of project A.
    if access in (MEMBER, EXPERT):
        return None, True, hidden
    if access == PM:
        return {403, 404} | method_refused, False, hidden
    return {404} | method_refused, False, hidden  # OWNER: E1's object


def entitled(rule: Rule) -> tuple[str, ...]:
    """Callers whose GET must be answered, not refused (the rule's kwargs name objects they may read)."""
    return {PM: ("pm_a", "admin"), MEMBER: ("e2", "pm_a", "admin"), EXPERT: ("e2",),
            SELF: ("e2", "eb", "pm_b", "pm_a", "admin"), EXPERT_SELF: ("e2", "eb"),
            MANAGER_SELF: ("pm_b", "pm_a", "admin"),
            ADMIN: ("admin",)}.get(rule.access, ())


@pytest.mark.django_db
def test_every_url_refuses_what_the_caller_may_not_reach(monkeypatch):
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": None, "anon": None, "address": None})
    world = _build_world()
    clients = {"anonymous": Client()}
    for key, user in world["users"].items():
        if key == "e1":
            continue
        clients[key] = Client()
        clients[key].force_login(user)
    # A response may end the session (logout) or set cookies; every request starts from the same ones.
    cookies = {actor: copy.deepcopy(client.cookies) for actor, client in clients.items()}
    failures: list[str] = []
    requests = 0
    shown_to_entitled: set[str] = set()  # the marks do reach the pages of those who may read them

    for route in routes():
        rule = MATRIX[route.name]
        kwargs = {k: world[rule.kwargs.get(k, DEFAULTS[k])] for k in route.kwargs}
        url = reverse(route.name, kwargs=kwargs) if route.pattern.name else "/" + route.name
        json_api = url.startswith("/api/v1/")
        for method in route.methods:
            for actor in ACTORS:
                allowed, may_write, hidden = _expected(rule, actor, route, method)
                client = clients[actor]
                client.cookies = copy.deepcopy(cookies[actor])
                with transaction.atomic():
                    before = None if may_write else _writes()
                    try:
                        response = client.generic(method, url, data=json.dumps(rule.body or {}) if json_api else b"",
                                                  content_type="application/json" if json_api
                                                  else "application/x-www-form-urlencoded",
                                                  HTTP_ACCEPT="application/json" if json_api else "text/html,*/*;q=0.8",
                                                  **({"HTTP_HX_REQUEST": "true"} if rule.htmx else {}))
                    except Exception as exc:  # a view that raised is a 500 to the user
                        failures.append(f"{actor} {method} {url} ({route.name}): raised {type(exc).__name__}: {exc}")
                        transaction.set_rollback(True)
                        continue
                    after = None if may_write else _writes()
                    transaction.set_rollback(True)
                requests += 1
                where = f"{actor} {method} {url} ({route.name}, {rule.access})"
                status = response.status_code
                if status in (301, 302):
                    where += f" -> {response['Location']}"
                if status >= 500:
                    failures.append(f"{where}: {status}")
                elif allowed is not None and status not in allowed:
                    failures.append(f"{where}: {status}, expected one of {sorted(allowed)}")
                if status == 302 and actor == "anonymous" and rule.access not in (PUBLIC,):
                    if not response["Location"].startswith(reverse("login")):
                        failures.append(f"{where}: redirected to {response['Location']}, not to the login page")
                if actor in entitled(rule) and method == "GET" and status in (401, 403, 404):
                    failures.append(f"{where}: {status}, but this caller may read it")
                if before is not None and not may_write and (changed := _changed(before, after)):
                    failures.append(f"{where}: {status} and changed rows of {changed}")
                body = b"".join(response) if getattr(response, "streaming", False) else response.content
                for mark in hidden:
                    if mark.encode() in body:
                        failures.append(f"{where}: {status} and its body shows {mark}")
                if actor in ("pm_a", "admin"):
                    shown_to_entitled |= {m for m in (PROJECT_MARK, EXPERT_MARK) if m.encode() in body}

    assert requests > 1000
    assert shown_to_entitled == {PROJECT_MARK, EXPERT_MARK}
    assert failures == [], f"{len(failures)} of {requests} requests:\n" + "\n".join(failures)
