"""Admins see projects and the work in the Django admin; the work cannot be added, changed or deleted there."""
import pytest
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, ItemConsensus, Label, Project, Question, Response, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

MODELS = [Project, Question, Response, Task, Assignment, Label, ItemConsensus]

# A changelist takes 4 or 5 queries (session, user, count, rows, list filters); one
# that fetched a related row per line would need 3 to 27 more here. A change page
# takes at most 9 (the task's: its read-only relations and its assignments).
CHANGELIST_MAX_QUERIES = 7
CHANGE_PAGE_MAX_QUERIES = 10


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # Four accounts per test; the production hasher would spend most of this file's time on them.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def work(monkeypatch):
    """Three tasks, each labelled by the same three experts and with its consensus written."""
    # The follow-up tasks (earnings, agreement) are not what this file tests, and in a
    # test transaction that never commits they would not run anyway.
    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, *args, **kwargs: None)
    project = make_project_with_tasks(n_questions=3, items_per_question=3)
    experts = [ExpertFactory() for _ in range(3)]
    for expert in experts:
        project_add_member(project=project, user=expert)
    for _ in range(3):
        for expert in experts:
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            labels = {item.item_key: 1 for item in rubric_items_for_task(lease.task)}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    return project


def _url(model, *parts) -> str:
    return "/".join(["/admin", model._meta.app_label, model._meta.model_name, *map(str, parts), ""])


def test_the_fixture_holds_enough_rows_to_show_an_n_plus_one(work):
    counts = [model.objects.count() for model in MODELS]

    assert counts == [1, 3, 3, 3, 9, 27, 9]


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_an_admin_opens_each_changelist_in_a_bounded_number_of_queries(admin_client, work, model,
                                                                       django_assert_max_num_queries):
    with django_assert_max_num_queries(CHANGELIST_MAX_QUERIES):
        response = admin_client.get(_url(model))

    assert response.status_code == 200
    assert response.context["cl"].result_count == model.objects.count()


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_an_admin_opens_a_change_page_of_each_model(admin_client, work, model, django_assert_max_num_queries):
    obj = model.objects.order_by("pk").first()

    with django_assert_max_num_queries(CHANGE_PAGE_MAX_QUERIES):
        response = admin_client.get(_url(model, obj.pk, "change"))

    assert response.status_code == 200


def test_the_rows_of_one_task_are_a_filter_away(admin_client, work):
    task = Task.objects.order_by("pk").first()

    response = admin_client.get(_url(Label), {"task__id__exact": task.pk})

    assert response.status_code == 200
    assert response.context["cl"].result_count == 9


@pytest.mark.parametrize("model", [Task, Assignment, Label, ItemConsensus], ids=lambda model: model.__name__)
def test_the_work_is_shown_without_a_form_to_add_change_or_delete(admin_client, work, model):
    obj = model.objects.order_by("pk").first()

    page = admin_client.get(_url(model, obj.pk, "change"))
    add = admin_client.get(_url(model, "add"))

    assert (page.context["has_change_permission"], page.context["has_delete_permission"]) == (False, False)
    assert add.status_code == 403


def test_posting_a_change_or_a_delete_of_an_assignment_is_refused_and_changes_nothing(admin_client, work):
    assignment = Assignment.objects.order_by("pk").first()
    before = Assignment.objects.values().get(pk=assignment.pk)

    change = admin_client.post(_url(Assignment, assignment.pk, "change"), {
        "task": assignment.task_id, "expert": assignment.expert_id, "kind": "work", "slot": 9, "status": "expired",
        "leased_at_0": "2026-01-05", "leased_at_1": "09:00:00", "expires_at_0": "2026-01-05",
        "expires_at_1": "10:00:00", "tier_at_submission": "platinum"})
    delete = admin_client.post(_url(Assignment, assignment.pk, "delete"), {"post": "yes"})

    assert (change.status_code, delete.status_code) == (403, 403)
    assert Assignment.objects.values().get(pk=assignment.pk) == before


def test_posting_a_change_or_a_delete_of_a_label_is_refused_and_changes_nothing(admin_client, work):
    label = Label.objects.order_by("pk").first()

    change = admin_client.post(_url(Label, label.pk, "change"), {
        "assignment": label.assignment_id, "task": label.task_id, "rubric_item": label.rubric_item_id,
        "value": 0, "note": "rewritten"})
    delete = admin_client.post(_url(Label, label.pk, "delete"), {"post": "yes"})

    label.refresh_from_db()
    assert (change.status_code, delete.status_code) == (403, 403)
    assert (label.value, label.note) == (1, "")


def test_a_question_with_work_cannot_be_deleted_through_its_cascade(admin_client, work):
    question = Question.objects.order_by("pk").first()

    response = admin_client.post(_url(Question, question.pk, "delete"), {"post": "yes"})

    assert response.status_code == 403
    assert Label.objects.filter(task__response__question=question).count() == 9


def test_an_admin_changes_a_project_setting_but_not_its_rubric(admin_client, work):
    rubric_id = work.rubric_id
    form = {field: getattr(work, field) for field in (
        "name", "description", "overlap", "lease_timeout_s", "calibration_threshold_pct", "calibration_size",
        "calibration_retry_delay_s", "control_rate_pct", "control_pause_below_pct", "control_window",
        "hard_min_tier", "tie_extra_cap", "appeal_window_days", "consult_split_min_score",
        "consult_split_share_pct", "consult_deadline_h", "min_seconds_per_item", "review_run_length",
        "remind_lease_minutes", "remind_idle_days", "judge_agreement_bar_pct", "fill_order", "consensus_labels")} | {
        "tie_extra_experts": "on", "consult_on_unbroken_tie": "on", "consult_on_score_split": "on",
        "consult_on_many_splits": "on", "review_repeated_notes": "on", "remind_lease_expiring": "on",
        "alert_quality": "on", "alert_deadline_risk": "on"}

    response = admin_client.post(_url(Project, work.pk, "change"), form | {"lease_timeout_s": 600, "rubric": 999})

    work.refresh_from_db()
    assert response.status_code == 302
    assert (work.lease_timeout_s, work.rubric_id) == (600, rubric_id)


def test_projects_questions_and_responses_are_not_added_or_deleted_by_hand(admin_client, work):
    pages = [admin_client.get(_url(model, "add")).status_code for model in (Project, Question, Response)]
    delete_project = admin_client.post(_url(Project, work.pk, "delete"), {"post": "yes"})

    assert pages == [403, 403, 403]
    assert delete_project.status_code == 403
    assert Project.objects.filter(pk=work.pk).exists()
