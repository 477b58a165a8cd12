"""Each PM or admin action that changes data leaves one audit entry (who, what, which project, which
rows, the request id); a refused action leaves none."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from guardian.models import UserObjectPermission

from annotation import permissions
from annotation.assignment.manual import assignments_create_by_hand, leases_hand_over, tasks_set_priority
from annotation.assignment.services import assignment_claim_next
from annotation.models import AuditEntry, Project, Task
from annotation.quality.control import expert_resume
from annotation.review.services import review_accept, submission_return
from annotation.services import project_add_member
from annotation.workload.batch import batch_experts_pause
from core.errors import DomainError
from experts.models import ExpertProfile
from tests.annotation.test_review_flags import _submit
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks
from tests.payments.factories import make_expert, make_paid_project

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


def test_a_project_membership_granted_and_revoked_in_the_admin_is_audited_with_its_project(client, pm_project):
    _pm, project = pm_project
    admin = AdminFactory()
    expert = ExpertFactory()
    client.force_login(admin)
    perm = Permission.objects.get(codename="annotate_project")
    content_type = ContentType.objects.get_for_model(Project)

    added = client.post("/admin/guardian/userobjectpermission/add/",
                        {"permission": perm.pk, "content_type": content_type.pk, "object_pk": str(project.pk),
                         "user": expert.pk})
    assert added.status_code == 302, added.content.decode()[:2000]
    assert permissions.can_annotate(expert, project)
    row = UserObjectPermission.objects.get(user=expert)
    removed = client.post(f"/admin/guardian/userobjectpermission/{row.pk}/delete/", {"post": "yes"})

    assert removed.status_code == 302
    granted, revoked = AuditEntry.objects.filter(action="permission.change").order_by("id")
    assert (granted.actor_id, granted.project_id, granted.object_ids) == (admin.pk, project.pk, [row.pk])
    assert granted.details["created"] is True and granted.details["changes"]["user"]["new"] == expert.pk
    assert (revoked.project_id, revoked.details["deleted"]) == (project.pk, True)
