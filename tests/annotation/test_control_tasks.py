"""Silent control tasks: mixed into work at a rate, indistinguishable, scored, and pausing weak experts."""
import random
from html.parser import HTMLParser

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import _lease, assignment_claim_next
from annotation.lock_objects import task_lock
from annotation.models import (
    Assignment,
    CalibrationTask,
    ControlResult,
    GoldenReference,
    ItemConsensus,
    Project,
    Task,
)
from annotation.quality.control import expert_resume
from annotation.selectors import rubric_items_for_task
from annotation.submission.services import labels_submit
from core.errors import Forbidden
from experts.models import ExpertProfile, Notification
from tests.factories import PMFactory
from tests.support.quality import calibrated, make_golden_project

pytestmark = pytest.mark.django_db


def _set(project: Project, **values) -> None:
    Project.objects.filter(pk=project.pk).update(**values)
    project.refresh_from_db()


def _answer(assignment, *, right: bool) -> None:
    refs = dict(GoldenReference.objects.filter(task=assignment.task).values_list("rubric_item__item_key", "value"))
    if refs:
        labels = {k: v if right else 1 - v for k, v in refs.items()}
    else:
        labels = {i.item_key: 1 for i in rubric_items_for_task(assignment.task)}
    labels_submit(expert=assignment.expert, assignment_id=assignment.pk, labels=labels, now=timezone.now())


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def project(pm):
    return make_golden_project(golden=16, regular=20, pm=pm)


def shape(value):
    """The structure of a JSON value: keys and types, without the contents."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


class Skeleton(HTMLParser):
    """Tag names and classes of a page, in order; texts, ids and values left out."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.parts.append(f"{tag}.{dict(attrs).get('class', '')}")


def skeleton(html: str) -> list[str]:
    parser = Skeleton()
    parser.feed(html)
    return parser.parts


def test_at_rate_100_the_lease_is_a_control_task_never_one_seen_in_calibration(project):
    _set(project, control_rate_pct=100)
    expert = calibrated(project)

    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    assert lease.task.is_golden and lease.kind == "work"
    seen = set(CalibrationTask.objects.filter(attempt__expert=expert).values_list("task_id", flat=True))
    assert lease.task_id not in seen


def test_at_rate_0_no_control_task_is_leased(project):
    _set(project, control_rate_pct=0)
    expert = calibrated(project)

    leases = []
    for _ in range(20):
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        leases.append(lease)
        _answer(lease, right=True)

    assert not any(lease.task.is_golden for lease in leases)


def test_the_rate_holds_over_many_leases(project):
    _set(project, control_rate_pct=25)
    expert = calibrated(project)
    rng = random.Random(2024)

    kinds = []
    for _ in range(20):
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=rng)
        kinds.append(lease.task.is_golden)
        _answer(lease, right=True)

    assert 2 <= sum(kinds) <= 10
    assert kinds != sorted(kinds) and kinds != sorted(kinds, reverse=True)


def test_control_tasks_look_exactly_like_regular_tasks_in_the_api(api, project):
    expert = calibrated(project)
    token = Token.objects.create(user=expert)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    _set(project, control_rate_pct=0)
    regular = api.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    _answer(Assignment.objects.get(pk=regular["id"]), right=True)
    _set(project, control_rate_pct=100)
    control = api.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    fetched = api.get(f"/api/v1/assignments/{control['id']}/").json()
    keys = [i["id"] for i in control["rubric_items"]]
    submitted = api.post(f"/api/v1/assignments/{control['id']}/submit/", {"labels": dict.fromkeys(keys, 1)},
                         format="json")

    assert Assignment.objects.get(pk=control["id"]).task.is_golden
    assert shape(control) == shape(regular) == shape(fetched)
    assert control["id"] == regular["id"] + 1
    assert control["difficulty"] == regular["difficulty"] and control["status"] == "leased"
    assert len(control["rubric_items"]) == len(regular["rubric_items"])
    text = str(control).lower()
    assert "golden" not in text and "control" not in text and "calibration" not in text
    assert submitted.status_code == 201
    assert set(submitted.json()) == {"assignment", "status", "submitted_at", "task_complete"}


def test_control_tasks_look_exactly_like_regular_tasks_on_the_page(client, project):
    expert = calibrated(project)
    client.force_login(expert)
    _set(project, control_rate_pct=0)
    regular = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    regular_page = client.get(f"/assignments/{regular.pk}/").content.decode()
    _answer(regular, right=True)
    _set(project, control_rate_pct=100)
    control = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    control_page = client.get(f"/assignments/{control.pk}/").content.decode()

    assert control.task.is_golden and not regular.task.is_golden
    assert skeleton(control_page) == skeleton(regular_page)
    assert "golden" not in control_page.lower() and "control task" not in control_page.lower()


def test_a_submitted_control_task_is_scored_and_never_gets_consensus(project):
    _set(project, control_rate_pct=100)
    expert = calibrated(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    _answer(lease, right=False)

    result = ControlResult.objects.get(assignment=lease)
    assert (result.items_total, result.items_correct) == (3, 0)
    assert not ItemConsensus.objects.filter(task=lease.task).exists()


def test_submission_reports_completion_like_a_regular_panel(project):
    golden = Task.objects.filter(project=project, is_golden=True).first()
    experts = [calibrated(project) for _ in range(4)]
    refs = dict(GoldenReference.objects.filter(task=golden).values_list("rubric_item__item_key", "value"))

    reported = []
    for expert in experts:
        with transaction.atomic():
            lease = _lease(task=task_lock(golden.pk), expert=expert, now=timezone.now(), timeout_s=600)
        reported.append(labels_submit(expert=expert, assignment_id=lease.pk, labels=refs,
                                      now=timezone.now()).task_complete)

    assert reported == [False, False, True, False]
    golden.refresh_from_db()
    assert golden.status == "open" and golden.submitted_count == 4


def test_control_tasks_are_handed_out_only_while_regular_work_is_left():
    project = make_golden_project(golden=14, regular=0, control_rate_pct=100)
    expert = calibrated(project)

    assert assignment_claim_next(project=project, expert=expert, now=timezone.now()) is None


def test_low_accuracy_over_the_window_pauses_the_expert_and_notifies_the_pm(project, pm):
    _set(project, control_rate_pct=100, control_window=3, control_pause_below_pct=60)
    expert = calibrated(project)

    for n in range(3):
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        assert lease.task.is_golden
        _answer(lease, right=n == 0)  # 3 of 9 items right: 33 %

    profile = ExpertProfile.objects.get(user=expert)
    assert profile.status == "paused"
    assert "33%" in profile.status_reason
    pm_note = Notification.objects.get(user=pm)
    assert pm_note.kind == "expert_paused" and profile.pseudonym in pm_note.message
    assert Notification.objects.get(user=expert).kind == "account_paused"
    with pytest.raises(Forbidden) as caught:
        assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert caught.value.code == "paused"


def test_accuracy_at_the_threshold_does_not_pause(project):
    _set(project, control_rate_pct=100, control_window=2, control_pause_below_pct=50)
    expert = calibrated(project)

    for n in range(2):
        _answer(assignment_claim_next(project=project, expert=expert, now=timezone.now()), right=n == 0)

    assert ExpertProfile.objects.get(user=expert).status == "active"


def test_a_resumed_expert_gets_a_fresh_window(project, pm):
    _set(project, control_rate_pct=100, control_window=2, control_pause_below_pct=60)
    expert = calibrated(project)
    for _ in range(2):
        _answer(assignment_claim_next(project=project, expert=expert, now=timezone.now()), right=False)
    assert ExpertProfile.objects.get(user=expert).status == "paused"

    expert_resume(project=project, expert_id=expert.pk, now=timezone.now(), by=pm)
    _answer(assignment_claim_next(project=project, expert=expert, now=timezone.now()), right=False)

    assert ExpertProfile.objects.get(user=expert).status == "active"


def test_the_resume_page_is_for_the_projects_pm_only(client, project, pm):
    _set(project, control_rate_pct=100, control_window=1, control_pause_below_pct=60)
    expert = calibrated(project)
    _answer(assignment_claim_next(project=project, expert=expert, now=timezone.now()), right=False)
    client.force_login(PMFactory())

    denied = client.post(f"/projects/{project.pk}/experts/{expert.pk}/resume/")
    client.force_login(pm)
    resumed = client.post(f"/projects/{project.pk}/experts/{expert.pk}/resume/")

    assert denied.status_code == 404
    assert resumed.status_code == 302
    assert ExpertProfile.objects.get(user=expert).status == "active"


def test_the_pm_reads_the_pause_notification_in_the_api_and_the_page(api, client, project, pm):
    _set(project, control_rate_pct=100, control_window=1, control_pause_below_pct=60)
    expert = calibrated(project)
    _answer(assignment_claim_next(project=project, expert=expert, now=timezone.now()), right=False)
    token = Token.objects.create(user=pm)
    client.force_login(pm)

    listed = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=f"Token {token.key}").json()
    page = client.get("/notifications/")
    client.post("/notifications/read/")

    assert [n["kind"] for n in listed] == ["expert_paused"]
    assert listed[0]["link"] == f"/projects/{project.pk}/experts/{expert.pk}/"
    assert page.status_code == 200 and "is-unread" in page.content.decode()
    assert Notification.objects.get(user=pm).read_at is not None
