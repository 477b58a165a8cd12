"""Invitation links: a PM creates and withdraws them; opening one joins the project, signing up first
without an account; an expired, withdrawn, used-up or tampered link says so and writes nothing."""
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone

from annotation import permissions
from annotation.models import Invitation, MembershipEvent
from annotation.projects.services import project_close
from annotation.roster.services import invitation_accept, invitation_create
from core.errors import Conflict, NotFound
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

User = get_user_model()
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
GOOD = {"username": "newbie", "email": "New.Person@example.org", "password": "calm-river-42x",
        "password2": "calm-river-42x"}


@pytest.fixture(autouse=True)
def _fresh_throttle():
    # Only this address's counter: clearing the whole cache (a FLUSHDB of the shared Redis
    # database) reset the counter of a throttle test running on the other xdist worker.
    cache.delete("rubrica:invite-signup:127.0.0.1")


@pytest.fixture
def project(pm):
    return make_project_with_tasks(n_questions=1, pm=pm)


def _invite(project, pm, **kw):
    values = {"role": "expert", "expires_in_days": 7, "max_uses": 1, **kw}
    return invitation_create(project=project, by=pm, now=timezone.now(), **values)


def _url(invitation):
    return reverse("invite", args=[invitation.token])


@pytest.mark.django_db
def test_a_pm_creates_a_link_on_the_members_page_and_it_is_listed_with_its_uses(client, pm, project):
    client.force_login(pm)
    page = client.post(reverse("invitation_create", args=[project.pk]),
                       {"role": "expert", "expires_in_days": "3", "max_uses": "5"}, **EN)
    invitation = Invitation.objects.get()
    assert page.status_code == 200
    assert f"/invite/{invitation.token}/" in page.content.decode()
    assert (invitation.max_uses, invitation.use_count, invitation.created_by) == (5, 0, pm)
    assert len(invitation.token) >= 40
    assert "0 / 5" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("values, field", [
    ({"expires_in_days": "0"}, "1 to 90 days"), ({"expires_in_days": "abc"}, "1 to 90 days"),
    ({"max_uses": "0"}, "1 to 500 times"), ({"role": "admin"}, "Unknown role"),
])
def test_bad_invitation_settings_are_refused_with_a_message_and_write_nothing(client, pm, project, values, field):
    client.force_login(pm)
    body = {"role": "expert", "expires_in_days": "7", "max_uses": "1", **values}
    page = client.post(reverse("invitation_create", args=[project.pk]), body, **EN)
    assert page.status_code == 422
    assert field in page.content.decode()
    assert not Invitation.objects.exists()


@pytest.mark.django_db
def test_signing_up_through_a_link_creates_an_expert_with_a_profile_joins_and_opens_the_profile(client, pm, project):
    invitation = _invite(project, pm)

    assert client.get(_url(invitation)).status_code == 200
    response = client.post(_url(invitation), GOOD)

    assert response.status_code == 302 and response["Location"] == reverse("my_profile")
    user = User.objects.get(username="newbie")
    assert user.is_expert and ExpertProfile.objects.filter(user=user).exists()
    assert permissions.can_annotate(user, project)
    assert client.get(reverse("my_profile")).status_code == 200  # signed in
    invitation.refresh_from_db()
    assert invitation.use_count == 1
    event = MembershipEvent.objects.get(user=user)
    assert (event.via, event.by) == ("invitation", pm)


@pytest.mark.django_db
@pytest.mark.parametrize("change, message", [
    ({"password": "short", "password2": "short"}, "too short"),
    ({"password": "password123", "password2": "password123"}, "too common"),
    ({"password2": "something-else-9"}, "The two passwords are not the same."),
    ({"email": "not-an-email"}, "Enter a valid email address."),
    ({"username": ""}, "This field is required."),
    ({"username": "two words"}, "no spaces"),
    ({"username": "x" * 151}, "no spaces"),
])
def test_a_bad_sign_up_is_refused_with_a_message_and_writes_nothing(client, pm, project, change, message):
    invitation = _invite(project, pm)
    response = client.post(_url(invitation), {**GOOD, **change}, **EN)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not User.objects.filter(username=GOOD["username"]).exists()
    invitation.refresh_from_db()
    assert invitation.use_count == 0


@pytest.mark.django_db
def test_a_second_sign_up_with_the_same_email_in_other_case_is_refused(client, pm, project):
    ExpertFactory(username="first", email="new.person@EXAMPLE.org")
    invitation = _invite(project, pm, max_uses=3)
    response = client.post(_url(invitation), GOOD, **EN)
    assert response.status_code == 409
    assert "An account with this email address already exists" in response.content.decode()
    assert not User.objects.filter(username="newbie").exists()


@pytest.mark.django_db
def test_a_taken_username_is_refused(client, pm, project):
    ExpertFactory(username="newbie")
    response = client.post(_url(_invite(project, pm)), GOOD, **EN)
    assert response.status_code == 409
    assert "already taken" in response.content.decode()


@pytest.mark.django_db
def test_a_signed_in_expert_joins_and_opening_the_link_again_uses_nothing(client, pm, project):
    expert = ExpertFactory()
    invitation = _invite(project, pm, max_uses=2)
    client.force_login(expert)

    assert client.post(_url(invitation)).status_code == 302
    assert client.post(_url(invitation)).status_code == 302

    invitation.refresh_from_db()
    assert permissions.can_annotate(expert, project)
    assert invitation.use_count == 1


@pytest.mark.django_db
def test_an_account_of_the_wrong_role_gets_a_clear_message_and_does_not_join(client, pm, project):
    other_pm = PMFactory()
    client.force_login(other_pm)
    response = client.post(_url(_invite(project, pm)), **EN)
    assert response.status_code == 403
    assert "This invitation is for experts" in response.content.decode()
    assert not permissions.can_manage(other_pm, project)

    expert = ExpertFactory()
    client.force_login(expert)
    response = client.post(_url(_invite(project, pm, role="pm")), **EN)
    assert response.status_code == 403
    assert "This invitation is for project managers" in response.content.decode()


@pytest.mark.django_db
def test_a_pm_invitation_adds_a_signed_in_pm_as_manager(client, pm, project):
    second = PMFactory()
    client.force_login(second)
    client.post(_url(_invite(project, pm, role="pm")))
    assert permissions.can_manage(second, project)


@pytest.mark.django_db
def test_expired_withdrawn_used_up_and_tampered_links_each_say_why(client, pm, project):
    expired = _invite(project, pm)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    withdrawn = _invite(project, pm)
    client.force_login(pm)
    client.post(reverse("invitation_revoke", args=[project.pk, withdrawn.pk]), {"confirmed": "yes"})
    used = _invite(project, pm)
    invitation_accept(invitation=used, user=ExpertFactory(), now=timezone.now())
    client.logout()

    cases = [(_url(expired), "has expired"), (_url(withdrawn), "was withdrawn"),
             (_url(used), "used as many times as it allows"),
             (reverse("invite", args=[used.token[:-2] + "xx"]), "is not valid"),
             (reverse("invite", args=["x"]), "is not valid")]
    for url, reason in cases:
        for response in (client.get(url, **EN), client.post(url, GOOD, **EN)):
            assert response.status_code == 404, url
            assert reason in response.content.decode()
    assert not User.objects.filter(username="newbie").exists()


@pytest.mark.django_db
def test_withdrawing_asks_first_and_keeps_who_joined(client, pm, project):
    invitation = _invite(project, pm, max_uses=3)
    joined = ExpertFactory()
    invitation_accept(invitation=invitation, user=joined, now=timezone.now())
    client.force_login(pm)
    url = reverse("invitation_revoke", args=[project.pk, invitation.pk])

    first = client.post(url, **EN)
    assert "It could still be used 2 times" in first.content.decode()
    invitation.refresh_from_db()
    assert invitation.revoked_at is None

    client.post(url, {"confirmed": "yes"})
    client.post(url, {"confirmed": "yes"})
    invitation.refresh_from_db()
    assert invitation.revoked_by == pm
    assert permissions.can_annotate(joined, project)


@pytest.mark.django_db
def test_another_projects_invitation_id_gives_404_to_a_pm(client, pm, project):
    stranger = PMFactory()
    own = make_project_with_tasks(n_questions=1, pm=stranger)
    theirs = _invite(project, pm)
    client.force_login(stranger)
    assert client.post(reverse("invitation_revoke", args=[own.pk, theirs.pk]), {"confirmed": "yes"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


@pytest.mark.django_db
def test_sign_ups_are_throttled_per_client_address(client, pm, project):
    # Addresses of this test's own: the counter lives in the shared cache (Redis), where other
    # tests running at the same time sign up from 127.0.0.1.
    busy, other_address = "10.77.0.1", "10.77.0.2"
    cache.delete_many([f"rubrica:invite-signup:{busy}", f"rubrica:invite-signup:{other_address}"])
    invitation = _invite(project, pm, max_uses=50)
    for _ in range(10):
        client.post(_url(invitation), {**GOOD, "password2": "different-123"}, REMOTE_ADDR=busy)
    response = client.post(_url(invitation), GOOD, REMOTE_ADDR=busy, **EN)
    assert response.status_code == 429
    assert "Too many sign-up attempts" in response.content.decode()
    assert not User.objects.filter(username="newbie").exists()
    other = client.post(_url(invitation), GOOD, REMOTE_ADDR=other_address)
    assert other.status_code == 302


@pytest.mark.django_db
def test_api_creates_lists_and_revokes_invitations(api, pm, project):
    api.force_authenticate(pm)
    base = f"/api/v1/projects/{project.pk}/invitations/"
    created = api.post(base, {"role": "pm", "expires_in_days": 2, "max_uses": 4}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["state"] == "live" and body["url"].endswith(f"/invite/{Invitation.objects.get().token}/")
    assert api.post(base, {"max_uses": 0}, format="json").status_code == 400
    assert api.get(base).json()[0]["max_uses"] == 4
    revoked = api.post(f"{base}{body['id']}/revoke/")
    assert revoked.json()["state"] == "revoked" and revoked.json()["url"] is None


@pytest.mark.django_db
def test_the_sign_in_page_links_to_the_invitation_help_and_a_pasted_link_opens(client, pm, project):
    assert reverse("invite_start") in client.get(reverse("login")).content.decode()
    invitation = _invite(project, pm)
    opened = client.get(reverse("invite_start"), {"link": f"http://testserver/invite/{invitation.token}/"})
    assert opened["Location"] == _url(invitation)


def _join(invitation_id, user, results):
    try:
        invitation = Invitation.objects.get(pk=invitation_id)
        results.append(invitation_accept(invitation=invitation, user=user, now=timezone.now()))
    except NotFound as exc:
        results.append(exc.code)
    finally:
        connections.close_all()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_people_racing_for_the_last_use_cannot_both_join():
    assert connection.vendor == "postgresql"
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    invitation = _invite(project, pm, max_uses=1)
    racers = [ExpertFactory() for _ in range(6)]
    results: list = []
    barrier = threading.Barrier(len(racers))

    def run(user):
        barrier.wait()
        _join(invitation.pk, user, results)

    threads = [threading.Thread(target=run, args=(u,)) for u in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert sorted(map(str, results)) == ["True"] + ["invitation_used_up"] * 5
    assert sum(permissions.can_annotate(u, project) for u in racers) == 1
    invitation.refresh_from_db()
    assert invitation.use_count == 1


@pytest.mark.django_db
def test_opening_a_link_with_the_wrong_kind_of_account_says_so_before_any_click(client, pm, project):
    client.force_login(PMFactory())
    page = client.get(_url(_invite(project, pm)), **EN)
    text = page.content.decode()
    assert page.status_code == 200
    assert "This invitation is for experts" in text
    assert "Join the project" not in text


@pytest.mark.django_db
def test_a_closed_project_takes_no_new_members_by_link_or_by_name(client, pm, project):
    invitation = _invite(project, pm, max_uses=5)
    newcomer = ExpertFactory()
    project_close(project=project, by=pm, now=timezone.now())

    client.force_login(newcomer)
    joined = client.post(_url(invitation), HTTP_ACCEPT_LANGUAGE="en")

    assert joined.status_code == 409 and "closed" in joined.content.decode()
    assert not permissions.is_member(newcomer, project)
    assert Invitation.objects.get().use_count == 0
    project.refresh_from_db()
    with pytest.raises(Conflict):
        invitation_create(project=project, role="expert", expires_in_days=7, max_uses=1, by=pm, now=timezone.now())
    client.force_login(pm)
    listed = client.post(f"/projects/{project.pk}/members/", {"users": newcomer.username}, HTTP_ACCEPT_LANGUAGE="en")
    assert listed.status_code == 422 and "closed" in listed.content.decode()
    assert not permissions.is_member(newcomer, project)
