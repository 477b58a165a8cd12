"""`create_user` and `create_project`: what scripts capture from stdout, and what a refusal leaves."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils.translation import override
from rest_framework.authtoken.models import Token

from annotation import permissions
from annotation.models import Project
from core.errors import DomainError
from experts.models import ExpertProfile, Role, User
from experts.services import user_create

pytestmark = pytest.mark.django_db


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def test_create_user_prints_only_a_token_that_authenticates(api):
    out = run("create_user", "--role", "expert", "--username", "lin", "--password", "calm-river-42")

    key = out.strip()
    response = api.get("/api/schema/", HTTP_AUTHORIZATION=f"Token {key}")
    assert out.count("\n") == 1
    assert Token.objects.get(key=key).user.username == "lin"
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "lin"


def test_a_token_that_was_never_issued_is_refused(api):
    run("create_user", "--role", "expert", "--username", "lin")

    response = api.get("/api/schema/", HTTP_AUTHORIZATION="Token " + "0" * 40)

    assert response.status_code == 401


def test_create_user_expert_gets_a_profile_and_the_given_password():
    run("create_user", "--role", "expert", "--username", "lin", "--password", "calm-river-42")

    user = User.objects.get(username="lin")
    assert user.role == Role.EXPERT
    assert user.check_password("calm-river-42")
    assert ExpertProfile.objects.filter(user=user).exists()
    assert not user.is_staff


def test_create_user_admin_is_staff_and_superuser_without_a_profile():
    run("create_user", "--role", "admin", "--username", "root", "--password", "calm-river-42")

    user = User.objects.get(username="root")
    assert (user.role, user.is_staff, user.is_superuser) == (Role.ADMIN, True, True)
    assert not ExpertProfile.objects.filter(user=user).exists()


def test_create_user_pm_has_no_profile_and_no_admin_rights():
    run("create_user", "--role", "pm", "--username", "wang", "--password", "calm-river-42")

    user = User.objects.get(username="wang")
    assert (user.role, user.is_staff, user.is_superuser) == (Role.PM, False, False)
    assert not ExpertProfile.objects.filter(user=user).exists()


def test_create_user_without_password_sets_a_random_usable_one():
    first, _ = user_create(username="a", role=Role.EXPERT)
    second, _ = user_create(username="b", role=Role.EXPERT)

    assert first.has_usable_password()
    assert first.password != second.password


def test_create_user_with_unknown_role_fails_and_creates_nothing():
    users_before = User.objects.count()

    with pytest.raises(CommandError, match="Unknown role 'boss'"):
        run("create_user", "--role", "boss", "--username", "lin")

    assert User.objects.count() == users_before
    assert Token.objects.count() == 0


def test_create_user_with_taken_username_fails_and_keeps_the_first_account():
    first_key = run("create_user", "--role", "pm", "--username", "lin").strip()

    with pytest.raises(CommandError, match="already taken"):
        run("create_user", "--role", "expert", "--username", "lin")

    assert User.objects.get(username="lin").role == Role.PM
    assert list(Token.objects.values_list("key", flat=True)) == [first_key]
    assert ExpertProfile.objects.count() == 0


def test_create_user_with_a_weak_password_fails_and_creates_nothing():
    users_before = User.objects.count()

    with pytest.raises(CommandError, match="too short"):
        run("create_user", "--role", "expert", "--username", "lin", "--password", "abc")

    assert User.objects.count() == users_before
    assert Token.objects.count() == 0


@pytest.mark.parametrize("username", ["", "   "])
def test_user_create_refuses_an_empty_username(username):
    users_before = User.objects.count()

    with pytest.raises(DomainError, match="username is required"):
        user_create(username=username, role=Role.EXPERT)

    assert User.objects.count() == users_before


def test_create_project_prints_the_id_of_the_new_project():
    out = run("create_project", "睡眠与压力", "--overlap", "2")

    project = Project.objects.get(pk=int(out.strip()))
    assert out.count("\n") == 1
    assert (project.name, project.overlap, project.created_by) == ("睡眠与压力", 2, None)


def test_create_project_with_pm_lets_that_pm_manage_it(pm):
    other_pm = User.objects.create_user(username="other", role=Role.PM)

    project = Project.objects.get(pk=int(run("create_project", "睡眠与压力", "--pm", pm.username)))

    assert project.overlap == 3
    assert permissions.can_manage(pm, project)
    assert not permissions.can_manage(other_pm, project)


def test_create_project_with_an_unknown_or_non_pm_account_fails_and_creates_nothing(expert):
    with pytest.raises(CommandError, match="No PM account named 'nobody'"):
        run("create_project", "睡眠与压力", "--pm", "nobody")
    with pytest.raises(CommandError, match="No PM account"):
        run("create_project", "睡眠与压力", "--pm", expert.username)

    assert Project.objects.count() == 0


def test_create_project_with_overlap_out_of_range_fails_and_creates_nothing():
    # In English whatever language an earlier test's request left active in this thread.
    expected = r"overlap: Overlap \(experts per task\) must be a whole number from 1 to 9"
    with override("en"), pytest.raises(CommandError, match=expected):
        run("create_project", "睡眠与压力", "--overlap", "12")

    assert Project.objects.count() == 0


@pytest.mark.parametrize("username", ["lin wei", "lin<script>", "林\u0000", "a" * 151, "tab\tname", "semi;colon"])
def test_a_username_outside_djangos_rule_is_refused_and_nothing_is_created(username):
    from core.errors import DomainError
    from experts.models import User
    from experts.services import user_create

    before = User.objects.count()
    with pytest.raises(DomainError) as refused:
        user_create(username=username, role="expert", password="a-long-password-123")

    assert refused.value.code == "invalid_username"
    assert User.objects.count() == before


@pytest.mark.parametrize("username", ["lin.wei", "lin_wei-2", "lin+pm@example.org", "林伟"])
def test_usernames_within_the_rule_are_accepted(username):
    from experts.services import user_create

    user, _ = user_create(username=username, role="expert", password="a-long-password-123")

    assert user.username == username
