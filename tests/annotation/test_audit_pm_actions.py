"""Each PM or admin action that changes data leaves one audit entry (who, what, which project, which
rows, the request id); a refused action leaves none."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils import timezone
from guardian.models import UserObjectPermission
from guardian.shortcuts import assign_perm

from annotation import permissions
from annotation.assignment.manual import assignments_create_by_hand, leases_hand_over, tasks_set_priority
from annotation.assignment.services import assignment_claim_next
from annotation.consultations.opening import consultation_open_by_pm
from annotation.judging.configs import judge_config_create, judge_config_edit
from annotation.library.services import case_create, case_publish, case_unpublish
from annotation.models import AuditEntry, Case, Project, Task
from annotation.projects.services import project_clone
from annotation.quality.control import expert_resume
from annotation.review.services import review_accept, submission_return
from annotation.roster.services import invitation_create, invitation_revoke
from annotation.rubric_editing.services import (
    rubric_draft_guidelines_update,
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_start,
)
from annotation.services import project_add_member, project_create
from annotation.workload.batch import batch_experts_pause
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import ExpertProfile
from payments.appeals import appeal_create_for_rejection, appeal_decide
from rubrics.models import RubricItem
from tests.annotation.test_consultations import _tied_case
from tests.annotation.test_review_flags import _submit
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks
from tests.payments.factories import make_expert, make_paid_project
from tests.payments.test_appeals import T0, _second_pm, rejected  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def pm_project():
    pm = PMFactory()
    return pm, make_project_with_tasks(n_questions=4, pm=pm)


def _members(project, n):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
        ExpertProfile.objects.filter(user=e).update(max_concurrent_leases=10)
    return experts


def _only(action):
    entries = list(AuditEntry.objects.filter(action=action))
    assert len(entries) == 1, entries
    return entries[0]


def _task_ids(project):
    return list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))


def test_an_assignment_by_hand_is_audited_with_its_tasks_and_experts(pm_project):
    pm, project = pm_project
    (expert,) = _members(project, 1)
    ids = _task_ids(project)[:2]

    made = assignments_create_by_hand(project=project, task_ids=ids, experts=[expert], by=pm, now=timezone.now())

    entry = _only("assign.by_hand")
    assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
        pm.pk, project.pk, "annotation.task", ids)
    assert entry.details["experts"] == [expert.pk]
    assert sorted(entry.details["assignments"]) == sorted(a.pk for a in made.assignments)


def test_a_refused_assignment_by_hand_leaves_no_entry(pm_project):
    pm, project = pm_project
    (expert,) = _members(project, 1)
    ExpertProfile.objects.filter(user=expert).update(status=ExpertProfile.Status.PAUSED)

    with pytest.raises(DomainError):
        assignments_create_by_hand(project=project, task_ids=_task_ids(project), experts=[expert], by=pm,
                                   now=timezone.now())

    assert not AuditEntry.objects.filter(action="assign.by_hand").exists()


def test_a_priority_change_is_audited_and_an_out_of_range_one_is_not(pm_project):
    pm, project = pm_project
    ids = _task_ids(project)

    with pytest.raises(DomainError):
        tasks_set_priority(project=project, task_ids=ids, priority=999, by=pm)
    assert not AuditEntry.objects.exists()
    tasks_set_priority(project=project, task_ids=ids[:3], priority=5, by=pm)

    entry = _only("task.priority")
    assert (entry.actor_id, entry.project_id, entry.object_ids) == (pm.pk, project.pk, ids[:3])
    assert entry.details == {"priority": 5, "changed": 3}


def test_a_hand_over_is_audited_with_the_old_leases_and_a_refused_one_is_not(pm_project):
    pm, project = pm_project
    giver, taker = _members(project, 2)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=giver, now=now)

    with pytest.raises(DomainError):
        leases_hand_over(project=project, expert=giver, to=[giver], by=pm, now=now)
    assert not AuditEntry.objects.exists()
    result = leases_hand_over(project=project, expert=giver, to=[taker], by=pm, now=now)

    entry = _only("leases.hand_over")
    assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
        pm.pk, project.pk, "annotation.assignment", [lease.pk])
    assert entry.details["from"] == giver.pk and entry.details["moved"] == [result.moved[0].pk]


def test_pausing_and_resuming_experts_is_audited_once_per_batch(pm_project):
    pm, project = pm_project
    experts = _members(project, 3)
    ids = [e.pk for e in experts]
    now = timezone.now()

    with pytest.raises(DomainError):
        batch_experts_pause(project=project, user_ids=[*ids, PMFactory().pk], pause=True, by=pm, now=now)
    assert not AuditEntry.objects.exists()
    batch_experts_pause(project=project, user_ids=ids, pause=True, by=pm, now=now)
    batch_experts_pause(project=project, user_ids=ids[:2], pause=False, by=pm, now=now)
    expert_resume(project=project, expert_id=ids[2], now=now, by=pm)

    assert _only("expert.pause").object_ids == ids
    resumed = list(AuditEntry.objects.filter(action="expert.resume").order_by("id"))
    assert [(e.actor_id, e.project_id, e.object_ids) for e in resumed] == [(pm.pk, project.pk, ids[:2]),
                                                                         (pm.pk, project.pk, [ids[2]])]
    # Resuming someone who is not paused changes nothing and writes nothing.
    expert_resume(project=project, expert_id=ids[2], now=now, by=pm)
    assert AuditEntry.objects.filter(action="expert.resume").count() == 2


def test_review_decisions_are_audited_and_a_refused_return_is_not():
    pm = PMFactory()
    experts = [make_expert() for _ in range(2)]
    project = make_paid_project(experts=[*experts, pm], n_questions=4)
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    fast = _submit(project, experts[0], seconds=2, at=t0)
    other = _submit(project, experts[1], seconds=2, at=t0 + timedelta(minutes=5))
    now = timezone.now()

    with pytest.raises(DomainError):
        submission_return(actor=pm, project=project, assignment_id=fast.pk, comment="  ", now=now)
    assert not AuditEntry.objects.filter(action__startswith="review.").exists()
    submission_return(actor=pm, project=project, assignment_id=fast.pk, comment="Read the whole reply.", now=now)
    review_accept(actor=pm, project=project, assignment_id=other.pk, now=now)

    returned = _only("review.return")
    assert (returned.actor_id, returned.project_id, returned.object_type, returned.object_ids) == (
        pm.pk, project.pk, "annotation.assignment", [fast.pk])
    assert returned.details["comment"] == "Read the whole reply."
    assert _only("review.accept").object_ids == [other.pk]
    with pytest.raises(DomainError):
        review_accept(actor=pm, project=project, assignment_id=other.pk, now=now)
    assert AuditEntry.objects.filter(action="review.accept").count() == 1


def test_a_batch_page_action_carries_the_request_id(client, pm_project):
    pm, project = pm_project
    client.force_login(pm)

    done = client.post(f"/projects/{project.pk}/batch/tasks/", {"op": "priority", "value": "3", "confirmed": "yes"},
                       HTTP_X_REQUEST_ID="req-batch-1")

    assert done.status_code == 302
    entry = _only("task.priority")
    assert (entry.request_id, entry.actor_id, entry.project_id) == ("req-batch-1", pm.pk, project.pk)
    assert entry.object_ids == _task_ids(project)


def _user_form(user, **changes):
    data = {"username": user.username, "first_name": "", "last_name": "", "email": user.email, "role": user.role,
            "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": user.date_joined.strftime("%H:%M:%S"), "last_login_0": "", "last_login_1": "",
            "groups": [g.pk for g in user.groups.all()]}
    flags = {"is_active": user.is_active, "is_staff": user.is_staff, "is_superuser": user.is_superuser}
    flags |= {k: v for k, v in changes.items() if k in flags}
    data |= {k: "on" for k, v in flags.items() if v}
    data |= {k: v for k, v in changes.items() if k not in flags}
    return data


def test_making_an_account_staff_and_giving_it_a_group_in_the_admin_is_audited(client):
    admin = AdminFactory()
    pm = PMFactory()
    group = Group.objects.create(name="auditors")
    client.force_login(admin)

    done = client.post(f"/admin/experts/user/{pm.pk}/change/", _user_form(pm, is_staff=True, groups=[group.pk]),
                       HTTP_X_REQUEST_ID="req-admin-1")

    assert done.status_code == 302, done.content.decode()[:2000]
    entry = _only("permission.change")
    assert (entry.actor_id, entry.object_type, entry.object_ids, entry.request_id) == (
        admin.pk, "experts.user", [pm.pk], "req-admin-1")
    assert entry.details["changes"] == {"is_staff": {"old": False, "new": True},
                                        "groups": {"old": [], "new": ["auditors"]}}


def test_an_admin_edit_that_touches_no_permission_or_is_refused_writes_nothing(client):
    admin = AdminFactory()
    pm = PMFactory()
    client.force_login(admin)

    kept = client.post(f"/admin/experts/user/{pm.pk}/change/", _user_form(pm, email="new@example.org"))
    refused = client.post(f"/admin/experts/user/{pm.pk}/change/", _user_form(pm, is_superuser=True, username=""))

    assert kept.status_code == 302 and refused.status_code == 200
    pm.refresh_from_db()
    assert (pm.email, pm.is_superuser) == ("new@example.org", False)
    assert not AuditEntry.objects.exists()


def test_project_membership_is_read_only_in_the_admin_so_it_always_goes_through_the_roster(client, pm_project):
    _pm, project = pm_project
    admin = AdminFactory()
    expert = ExpertFactory()
    assign_perm("annotate_project", expert, project)
    row = UserObjectPermission.objects.get(user=expert)
    before = sorted(UserObjectPermission.objects.values_list("pk", flat=True))
    client.force_login(admin)
    perm = Permission.objects.get(codename="annotate_project")
    content_type = ContentType.objects.get_for_model(Project)

    listed = client.get("/admin/guardian/userobjectpermission/")
    added = client.post("/admin/guardian/userobjectpermission/add/",
                        {"permission": perm.pk, "content_type": content_type.pk, "object_pk": str(project.pk),
                         "user": AdminFactory().pk})
    removed = client.post(f"/admin/guardian/userobjectpermission/{row.pk}/delete/", {"post": "yes"})

    assert listed.status_code == 200 and f"/admin/guardian/userobjectpermission/{row.pk}/" in listed.content.decode()
    assert (added.status_code, removed.status_code) == (403, 403)
    assert sorted(UserObjectPermission.objects.values_list("pk", flat=True)) == before
    assert permissions.can_annotate(expert, project)
    assert not AuditEntry.objects.exists()


# --- Appeals, invitations, projects, cases, judge configurations, the rubric draft ------------------


@pytest.mark.parametrize("outcome", ["accept", "deny"])
def test_an_appeal_decision_is_audited_with_its_correction_and_a_refused_one_is_not(rejected, outcome):  # noqa: F811
    project, pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    decider = _second_pm(project)

    with pytest.raises(Forbidden):  # the PM who made the rejection does not decide its appeal
        appeal_decide(actor=pm, appeal_id=appeal.pk, outcome=outcome, reason="mine", now=T0)
    assert not AuditEntry.objects.filter(action__startswith="appeal.").exists()
    decided = appeal_decide(actor=decider, appeal_id=appeal.pk, outcome=outcome, reason="Read the guideline.",
                            now=T0 + timedelta(hours=1))
    with pytest.raises(Conflict):  # decided once: the second decision changes nothing and writes nothing
        appeal_decide(actor=decider, appeal_id=appeal.pk, outcome="accept", reason="again", now=T0)

    entry = _only(f"appeal.{outcome}")
    assert AuditEntry.objects.filter(action__startswith="appeal.").count() == 1
    assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
        decider.pk, project.pk, "payments.appeal", [appeal.pk])
    assert (entry.details["assignment"], entry.details["expert"], entry.details["reason"]) == (
        contested.pk, contested.expert_id, "Read the guideline.")
    if outcome == "accept":
        assert decided.correction is not None
        assert (entry.details["correction"], entry.details["amount"]) == (decided.correction.pk,
                                                                         str(decided.correction.amount))
    else:
        assert (entry.details["correction"], entry.details["amount"]) == (None, None)


def test_creating_and_withdrawing_an_invitation_is_audited_and_a_refused_or_repeated_one_is_not(pm_project):
    pm, project = pm_project
    now = timezone.now()

    with pytest.raises(DomainError):
        invitation_create(project=project, role="admin", expires_in_days=7, max_uses=5, by=pm, now=now)
    assert not AuditEntry.objects.exists()
    invitation = invitation_create(project=project, role="expert", expires_in_days=7, max_uses=5, by=pm, now=now)
    assert invitation_revoke(invitation=invitation, by=pm, now=now)
    assert not invitation_revoke(invitation=invitation, by=pm, now=now)

    created, revoked = _only("invitation.create"), _only("invitation.revoke")
    for entry in (created, revoked):
        assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
            pm.pk, project.pk, "annotation.invitation", [invitation.pk])
    assert (created.details["role"], created.details["max_uses"]) == ("expert", 5)
    assert invitation.token not in str(created.details)  # the link's secret stays out of the log


def test_creating_a_project_is_audited_and_a_refused_one_is_not():
    pm = PMFactory()

    with pytest.raises(DomainError):
        project_create(name="  ", created_by=pm, overlap=3)
    assert not AuditEntry.objects.exists()
    project = project_create(name="Round one", created_by=pm, overlap=3)

    entry = _only("project.create")
    assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
        pm.pk, project.pk, "annotation.project", [project.pk])
    assert (entry.details["name"], entry.details["overlap"]) == ("Round one", 3)


def test_cloning_a_project_writes_one_clone_entry_on_the_clone_and_no_creation_entry(pm_project):
    pm, project = pm_project

    clone = project_clone(source=project, by=pm, name="round 2", now=timezone.now())

    entry = _only("project.clone")
    assert (entry.actor_id, entry.project_id, entry.object_ids) == (pm.pk, clone.pk, [clone.pk])
    assert (entry.details["source"], entry.details["rubric_version"]) == (project.pk, 1)
    assert not AuditEntry.objects.filter(action="project.create").exists()


def test_publishing_and_unpublishing_a_case_are_audited_once_each(pm_project):
    pm, project = pm_project
    now = timezone.now()
    text = {"title": "Advice too early", "problem": "p", "disagreement": "d", "discussion": "", "reading": "r"}

    draft = case_create(project=project, by=pm, now=now, **text)
    assert not AuditEntry.objects.exists()  # a draft is not published: experts see nothing yet
    case_publish(case=draft, by=pm, now=now)
    case_publish(case=draft, by=pm, now=now)  # already published: nothing changes, nothing is written
    case_unpublish(case=draft, by=pm, now=now)
    case_unpublish(case=draft, by=pm, now=now)
    at_once = case_create(project=project, by=pm, now=now, publish=True, **{**text, "title": "Second"})

    published = list(AuditEntry.objects.filter(action="case.publish").order_by("id"))
    assert [(e.actor_id, e.project_id, e.object_type, e.object_ids) for e in published] == [
        (pm.pk, project.pk, "annotation.case", [draft.pk]), (pm.pk, project.pk, "annotation.case", [at_once.pk])]
    assert _only("case.unpublish").object_ids == [draft.pk]
    assert Case.objects.get(pk=draft.pk).status == "draft"


def test_a_case_refused_for_a_bad_field_writes_no_entry(pm_project):
    pm, project = pm_project

    with pytest.raises(DomainError):
        case_create(project=project, by=pm, now=timezone.now(), title="", problem="p", disagreement="d",
                    discussion="", reading="r", publish=True)

    assert not AuditEntry.objects.exists() and not Case.objects.exists()


def test_a_judge_configuration_and_its_new_version_are_audited_and_an_unchanged_edit_is_not(pm_project):
    pm, project = pm_project
    now = timezone.now()
    template = "{dialogue}\n{response}\n{rubric}\n{count}"

    with pytest.raises(DomainError):
        judge_config_create(project=project, name="", prompt_template=template, created_by=pm, now=now)
    assert not AuditEntry.objects.exists()
    first = judge_config_create(project=project, name="strict", prompt_template=template, judge_model="m1",
                                created_by=pm, now=now)
    second = judge_config_edit(config=first.config, prompt_template=template, judge_model="m2", created_by=pm,
                               now=now)
    with pytest.raises(Conflict):
        judge_config_edit(config=first.config, prompt_template=template, judge_model="m2", created_by=pm, now=now)

    created, edited = _only("judge_config.create"), _only("judge_config.edit")
    for entry, version in ((created, first), (edited, second)):
        assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
            pm.pk, project.pk, "annotation.judgeconfig", [first.config_id])
        assert (entry.details["version"], entry.details["version_id"], entry.details["judge_model"]) == (
            version.number, version.pk, version.judge_model)


def test_each_draft_rubric_edit_is_audited_with_the_item_and_a_refused_one_is_not(client, pm_project):
    pm, project = pm_project
    rubric_draft_start(project=project)
    draft_item = RubricItem.objects.get(version__rubric_id=project.rubric_id, version__status="draft",
                                        item_key="q0:1")
    published_item = RubricItem.objects.get(version__rubric_id=project.rubric_id, version__status="published",
                                            item_key="q0:1")
    client.force_login(pm)

    refused = client.post(reverse("rubric_item_edit", args=[project.pk, published_item.pk]),
                          {"content": "changed", "score": "2", "dimension": draft_item.dimension.code})
    published_item.refresh_from_db()
    assert (refused.status_code, published_item.content) == (422, draft_item.content)  # published: never changes
    assert not AuditEntry.objects.exists()
    edited = client.post(reverse("rubric_item_edit", args=[project.pk, draft_item.pk]),
                         {"content": "names the feeling", "score": "2", "dimension": draft_item.dimension.code},
                         HTTP_X_REQUEST_ID="req-rubric-1")
    added = rubric_draft_item_add(project=project, question_ref="q1", content="asks openly", score=1,
                                  dimension=draft_item.dimension.code, by=pm)
    rubric_draft_item_delete(project=project, item_id=added.pk, by=pm)
    rubric_draft_guidelines_update(project=project, guidelines="Mark a hit only when the reply says it.", by=pm)
    rubric_draft_guidelines_update(project=project, guidelines="Mark a hit only when the reply says it.", by=pm)

    assert edited.status_code == 302
    edit = _only("rubric_item.edit")
    assert (edit.actor_id, edit.project_id, edit.object_type, edit.object_ids, edit.request_id) == (
        pm.pk, project.pk, "rubrics.rubricitem", [draft_item.pk], "req-rubric-1")
    assert edit.details["changes"]["content"] == {"old": draft_item.content, "new": "names the feeling"}
    assert [(e.object_ids, e.details["item_key"]) for e in (_only("rubric_item.add"), _only("rubric_item.delete"))
            ] == [([added.pk], added.item_key)] * 2
    guidelines = _only("rubric_guidelines.edit")
    assert (guidelines.actor_id, guidelines.details["new"]) == (pm.pk, "Mark a hit only when the reply says it.")


def test_a_pm_opening_a_consultation_is_audited_once_and_another_projects_pm_writes_nothing():
    project, pm, _a, _b = _tied_case()
    task = Task.objects.get()
    item = RubricItem.objects.get(item_key="q0:3")
    other_pm = PMFactory()
    now = timezone.now()

    with pytest.raises(NotFound):
        consultation_open_by_pm(pm=other_pm, task_id=task.pk, rubric_item_id=item.pk, reason="", now=now)
    opened = consultation_open_by_pm(pm=pm, task_id=task.pk, rubric_item_id=item.pk, reason="spot check", now=now)
    again = consultation_open_by_pm(pm=pm, task_id=task.pk, rubric_item_id=item.pk, reason="again", now=now)

    assert opened.created and not again.created
    entry = _only("consultation.open")
    assert (entry.actor_id, entry.project_id, entry.object_type, entry.object_ids) == (
        pm.pk, project.pk, "annotation.consultation", [opened.consultation.pk])
    assert (entry.details["task"], entry.details["item_key"], entry.details["reason"]) == (
        task.pk, "q0:3", "spot check")
