"""The roster: a PM adds and removes members on the Members page, the API and the CLI; removal ends
the leaver's leases at once (slots return, drafts kept), keeps their work and is recorded."""
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from annotation import permissions
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Draft, MembershipEvent, Task
from annotation.roster.services import member_add, member_remove, members_add_lines
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import draft_save, labels_submit
from core.errors import Conflict, DomainError
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}


@pytest.fixture
def project(pm):
    return make_project_with_tasks(n_questions=1, items_per_question=2, overlap=1, pm=pm)


def _members_url(project):
    return reverse("members", args=[project.pk])


def _labels(assignment):
    return {i.item_key: 1 for i in rubric_items_for_task(assignment.task)}


# --- Adding ----------------------------------------------------------------------------

def test_a_pasted_list_reports_every_line_and_adds_the_known_accounts_despite_an_unknown_one(client, pm, project):
    e1, e2 = ExpertFactory(username="li"), ExpertFactory(username="wang", email="Wang@Example.org")
    pm2 = PMFactory(username="zhao")
    client.force_login(pm)

    page = client.post(_members_url(project), {"users": "li\n\n  wang@example.ORG \nnobody\nli\nzhao\n"}, **EN)

    assert page.status_code == 200
    text = page.content.decode()
    assert "3 people added." in text
    assert "1 line matched no account and added nobody" in text
    assert "repeats an earlier line" in text
    assert permissions.can_annotate(e1, project) and permissions.can_annotate(e2, project)
    assert permissions.can_manage(pm2, project)
    # The unknown line is left in the box to correct; nothing was written for it.
    assert ">nobody</textarea>" in text
    assert MembershipEvent.objects.filter(project=project, action="added").count() == 3


def test_adding_someone_twice_changes_nothing_the_second_time(pm, project):
    expert = ExpertFactory()
    now = timezone.now()

    assert member_add(project=project, user=expert, by=pm, via="page", now=now) is True
    assert member_add(project=project, user=expert, by=pm, via="api", now=now) is False

    assert [r.status for r in members_add_lines(project=project, text=expert.username, by=pm, via="page", now=now)] \
        == ["already"]
    assert MembershipEvent.objects.filter(user=expert).count() == 1


def test_an_admin_is_never_added_as_a_member(pm, project):
    admin = AdminFactory(username="root")
    with pytest.raises(DomainError) as refused:
        member_add(project=project, user=admin, by=pm, via="page", now=timezone.now())
    assert refused.value.code == "member_admin"
    assert [r.status for r in members_add_lines(project=project, text="root", by=pm, via="page",
                                                now=timezone.now())] == ["admin"]
    assert not MembershipEvent.objects.exists()


def test_an_empty_list_is_refused_with_a_message_and_writes_nothing(client, pm, project):
    client.force_login(pm)
    page = client.post(_members_url(project), {"users": " \n\n"}, **EN)
    assert page.status_code == 422
    assert "This field is required." in page.content.decode()
    assert not MembershipEvent.objects.exists()


# --- The members page -------------------------------------------------------------------

def test_the_members_page_shows_role_profile_leases_submitted_work_and_who_added_them(client, pm, project):
    expert = ExpertFactory(username="chen")
    expert.expert_profile.credentials = "心理学硕士, 国家二级咨询师"
    expert.expert_profile.save()
    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(pm)

    page = client.get(_members_url(project), **EN)

    text = page.content.decode()
    assert page.status_code == 200
    assert "心理学硕士, 国家二级咨询师" in text
    assert f'data-member="{expert.pk}"' in text and f'data-member="{pm.pk}"' in text
    assert f"by {pm.username}" in text
    assert "chen added by" in text  # the history


def test_the_members_page_is_a_fixed_number_of_queries_whatever_the_number_of_members(
        client, pm, project, django_assert_max_num_queries):
    client.force_login(pm)
    for _ in range(2):
        member_add(project=project, user=ExpertFactory(), by=pm, via="page", now=timezone.now())
    client.get(_members_url(project))  # warm caches (content types, sessions)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get(_members_url(project))
    for _ in range(8):
        member_add(project=project, user=ExpertFactory(), by=pm, via="page", now=timezone.now())

    with django_assert_max_num_queries(len(few.captured_queries)):
        page = client.get(_members_url(project))
    assert page.content.decode().count("data-member=") == 11


def test_the_members_page_renders_as_an_htmx_fragment_too(client, pm, project):
    client.force_login(pm)
    page = client.get(_members_url(project), HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    assert 'id="roster"' in page.content.decode()
    assert "<html" not in page.content.decode()


def test_a_pm_of_another_project_gets_404_on_every_roster_page_even_with_its_members_ids(client, pm, project):
    member = ExpertFactory()
    project_add_member(project=project, user=member)
    stranger = PMFactory()
    own = make_project_with_tasks(n_questions=1, pm=stranger)
    client.force_login(stranger)
    invitation_url = reverse("invitation_revoke", args=[project.pk, 1])

    assert client.get(_members_url(project)).status_code == 404
    assert client.post(_members_url(project), {"users": member.username}).status_code == 404
    assert client.post(reverse("member_remove", args=[project.pk, member.pk]), {"confirmed": "yes"}).status_code == 404
    assert client.post(reverse("invitation_create", args=[project.pk]), {"role": "expert"}).status_code == 404
    assert client.post(invitation_url, {"confirmed": "yes"}).status_code == 404
    # Their own project with the other project's member id: not a member here, so 404 too.
    assert client.post(reverse("member_remove", args=[own.pk, member.pk]), {"confirmed": "yes"}).status_code == 404
    assert permissions.can_annotate(member, project)


def test_an_expert_gets_404_on_the_members_page_and_an_admin_reaches_it(client, expert, admin_user, project):
    project_add_member(project=project, user=expert)
    client.force_login(expert)
    assert client.get(_members_url(project)).status_code == 404
    client.force_login(admin_user)
    assert client.get(_members_url(project)).status_code == 200


# --- Removing ---------------------------------------------------------------------------

def test_removal_asks_first_and_says_what_happens_to_leases_and_submitted_work(client, pm, project):
    expert = ExpertFactory()
    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(pm)

    first = client.post(reverse("member_remove", args=[project.pk, expert.pk]), **EN)

    text = first.content.decode()
    assert first.status_code == 200
    assert "1 open lease ends now and its slot returns to the pool" in text
    assert "0 submitted tasks and their pay stay." in text
    assert permissions.can_annotate(expert, project)
    assert Assignment.objects.get().status == "leased"

    second = client.post(reverse("member_remove", args=[project.pk, expert.pk]), {"confirmed": "yes"})

    assert second.status_code == 302
    assert not permissions.can_annotate(expert, project)
    assert Assignment.objects.get().status == "released"


def test_a_removed_experts_lease_returns_to_the_pool_and_another_expert_gets_the_task(pm, project):
    leaver, other = ExpertFactory(), ExpertFactory()
    for e in (leaver, other):
        member_add(project=project, user=e, by=pm, via="page", now=timezone.now())
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=leaver, now=now)
    draft_save(expert=leaver, assignment_id=lease.pk, labels={next(iter(_labels(lease))): 1}, now=now)
    assert assignment_claim_next(project=project, expert=other, now=now) is None  # overlap 1: the slot is taken

    removal = member_remove(project=project, user=leaver, by=pm, via="page", now=now)

    assert removal.leases_ended == 1
    assert Draft.objects.filter(assignment=lease).exists()
    with pytest.raises(Conflict):
        labels_submit(expert=leaver, assignment_id=lease.pk, labels=_labels(lease), now=now)
    taken = assignment_claim_next(project=project, expert=other, now=now)
    assert taken is not None and taken.task_id == lease.task_id
    event = MembershipEvent.objects.filter(user=leaver, action="removed").get()
    assert (event.by, event.via) == (pm, "page")


def test_removal_keeps_submitted_work(pm):
    project = make_project_with_tasks(n_questions=2, items_per_question=2, overlap=1, pm=pm)
    expert = ExpertFactory()
    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    now = timezone.now()
    done = assignment_claim_next(project=project, expert=expert, now=now)
    labels_submit(expert=expert, assignment_id=done.pk, labels=_labels(done), now=now)
    assignment_claim_next(project=project, expert=expert, now=now)

    member_remove(project=project, user=expert, by=pm, via="page", now=now)

    statuses = sorted(Assignment.objects.values_list("status", flat=True))
    assert statuses == ["released", "submitted"]
    assert Task.objects.filter(status="complete").count() == 1


def test_removing_a_non_member_is_404_and_removing_twice_changes_nothing(client, pm, project):
    expert = ExpertFactory()
    member_add(project=project, user=expert, by=pm, via="page", now=timezone.now())
    client.force_login(pm)
    url = reverse("member_remove", args=[project.pk, expert.pk])

    assert client.post(url, {"confirmed": "yes"}).status_code == 302
    assert client.post(url, {"confirmed": "yes"}).status_code == 404
    assert MembershipEvent.objects.filter(action="removed").count() == 1


def test_the_last_pm_cannot_remove_themselves_but_an_admin_can_remove_them(client, pm, project, admin_user):
    client.force_login(pm)
    response = client.post(reverse("member_remove", args=[project.pk, pm.pk]), {"confirmed": "yes"}, **EN)
    assert response.status_code == 302
    assert permissions.can_manage(pm, project)
    assert "last project manager" in client.get(_members_url(project), **EN).content.decode()

    second = PMFactory()
    member_add(project=project, user=second, by=pm, via="page", now=timezone.now())
    member_remove(project=project, user=pm, by=pm, via="page", now=timezone.now())
    assert not permissions.can_manage(pm, project)

    member_remove(project=project, user=second, by=admin_user, via="page", now=timezone.now())
    assert not permissions.can_manage(second, project)


# --- API --------------------------------------------------------------------------------

def test_api_lists_adds_with_a_per_line_report_and_removes_by_id_or_username(api, pm, project):
    e1, e2 = ExpertFactory(username="api-a"), ExpertFactory(username="api-b")
    api.force_authenticate(pm)
    url = f"/api/v1/projects/{project.pk}/members/"

    added = api.post(url, {"users": ["api-a", "ghost", "api-b", "api-a"]}, format="json")

    assert added.status_code == 200
    assert [(r["text"], r["status"]) for r in added.json()] == [
        ("api-a", "added"), ("ghost", "unknown"), ("api-b", "added"), ("api-a", "duplicate")]
    listed = api.get(url).json()
    assert {m["username"] for m in listed} == {pm.username, "api-a", "api-b"}
    assert api.delete(f"{url}{e1.pk}/").json()["leases_ended"] == 0
    assert api.delete(f"{url}api-b/").status_code == 200
    assert api.delete(f"{url}api-b/").status_code == 404
    assert not permissions.can_annotate(e1, project) and not permissions.can_annotate(e2, project)
    assert set(MembershipEvent.objects.values_list("via", flat=True)) == {"api"}


def test_api_refuses_an_empty_list_and_the_last_pm_leaving(api, pm, project):
    api.force_authenticate(pm)
    url = f"/api/v1/projects/{project.pk}/members/"
    assert api.post(url, {"users": []}, format="json").status_code == 400
    assert api.post(url, {"users": ["", " "]}, format="json").status_code == 400
    last = api.delete(f"{url}{pm.pk}/")
    assert last.status_code == 409 and last.json()["code"] == "last_pm"


def test_api_gives_another_projects_pm_404_on_every_roster_endpoint(api, pm, project):
    member = ExpertFactory()
    project_add_member(project=project, user=member)
    stranger = PMFactory()
    api.force_authenticate(stranger)
    base = f"/api/v1/projects/{project.pk}"
    assert api.get(f"{base}/members/").status_code == 404
    assert api.post(f"{base}/members/", {"users": [member.username]}, format="json").status_code == 404
    assert api.delete(f"{base}/members/{member.pk}/").status_code == 404
    assert api.get(f"{base}/invitations/").status_code == 404
    assert api.post(f"{base}/invitations/", {}, format="json").status_code == 404
    assert api.post(f"{base}/invitations/1/revoke/").status_code == 404
    assert permissions.can_annotate(member, project)


# --- Commands ---------------------------------------------------------------------------

def test_add_member_and_remove_member_commands_record_cli(project):
    expert = ExpertFactory(username="cli-e")
    call_command("add_member", str(project.pk), "cli-e")
    call_command("add_member", str(project.pk), "cli-e")
    assert permissions.can_annotate(expert, project)
    call_command("remove_member", str(project.pk), "cli-e")
    assert not permissions.can_annotate(expert, project)
    assert list(MembershipEvent.objects.order_by("pk").values_list("action", "via")) == [
        ("added", "cli"), ("removed", "cli")]


def test_member_commands_name_an_unknown_project_or_user(project):
    ExpertFactory(username="known")
    with pytest.raises(CommandError, match="No project with id '999999'"):
        call_command("add_member", "999999", "known")
    with pytest.raises(CommandError, match="No account with the username 'nobody'"):
        call_command("add_member", str(project.pk), "nobody")
    with pytest.raises(CommandError, match="not a member"):
        call_command("remove_member", str(project.pk), "known")
    with pytest.raises(CommandError):
        call_command("add_member", str(project.pk), AdminFactory().username)


def test_admins_see_the_membership_history_in_the_django_admin_and_cannot_change_it(client, admin_user, pm,
                                                                                      project):
    member_add(project=project, user=ExpertFactory(), by=pm, via="page", now=timezone.now())
    client.force_login(admin_user)
    assert client.get(reverse("admin:annotation_membershipevent_changelist")).status_code == 200
    assert client.get(reverse("admin:annotation_membershipevent_add")).status_code == 403
    assert client.get(reverse("admin:annotation_invitation_changelist")).status_code == 200
