"""The demo data files and `load_demo`: what `make run` shows a first-time visitor."""
import json
from io import StringIO

import pytest
from django.core.management import call_command
from guardian.conf import settings as guardian_settings
from rest_framework.authtoken.models import Token

from annotation import permissions
from annotation.demo import (
    ADMIN_PASSWORD,
    DEMO_ACCOUNTS,
    DEMO_PROJECT_NAME,
    DEMO_URL,
    EXPERT_PASSWORD,
    PM_PASSWORD,
    QUESTIONS_FILE,
    RESPONSES_FILE,
)
from annotation.models import Project, Question, Response, Task
from experts.models import ExpertProfile, Role, User
from rubrics.models import RubricItem, RubricVersion
from rubrics.taxonomy import DIMENSIONS, GATE_NAME_ZH

HEARTBENCH_KEYS = {"question_id", "dialogue", "rubric", "difficulty", "primary_scene", "secondary_scene"}
GATE_CONTENT = "AI没有回应用户发言，而是扮演用户本身进行发言"
DIMENSION_NAMES = {zh for _code, zh, _en, _category in DIMENSIONS}


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_demo() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out, stderr=StringIO())
    return out.getvalue()


def accounts():
    """Every account except the row django-guardian keeps for anonymous visitors."""
    return User.objects.exclude(username=guardian_settings.ANONYMOUS_USER_NAME)


def counts() -> dict[str, int]:
    return {
        "users": accounts().count(), "profiles": ExpertProfile.objects.count(),
        "tokens": Token.objects.count(), "projects": Project.objects.count(),
        "questions": Question.objects.count(), "responses": Response.objects.count(),
        "tasks": Task.objects.count(), "versions": RubricVersion.objects.count(),
        "items": RubricItem.objects.count(),
    }


QUESTIONS = read_jsonl(QUESTIONS_FILE)
RESPONSES = read_jsonl(RESPONSES_FILE)


def test_demo_has_twelve_questions_with_unique_ids():
    ids = [row["question_id"] for row in QUESTIONS]

    assert ids == [f"demo-{n:02d}" for n in range(1, 13)]


@pytest.mark.parametrize("row", QUESTIONS, ids=lambda row: row["question_id"])
def test_demo_question_is_a_heartbench_row(row):
    dialogue, rubric = row["dialogue"], row["rubric"]

    assert set(row) == HEARTBENCH_KEYS
    assert row["difficulty"] in {"normal", "hard"}
    assert row["primary_scene"] and row["secondary_scene"]
    assert 1 <= len(dialogue) <= 7
    assert [turn["role"] for turn in dialogue] == ["A" if i % 2 == 0 else "B" for i in range(len(dialogue))]
    assert dialogue[-1]["role"] == "A"
    assert all(set(turn) == {"role", "content"} and turn["content"].strip() for turn in dialogue)
    assert 6 <= len(rubric) <= 10
    assert all(set(item) == {"dimension", "score", "content"} and item["content"].strip() for item in rubric)
    assert {item["dimension"] for item in rubric} <= DIMENSION_NAMES
    assert [item for item in rubric if item["score"] is None] == [
        {"dimension": GATE_NAME_ZH, "score": None, "content": GATE_CONTENT}]
    assert all(1 <= item["score"] <= 6 or item["score"] < 0 for item in rubric if item["score"] is not None)
    assert any(item["score"] is not None and item["score"] < 0 for item in rubric)


def test_demo_mixes_difficulties_and_covers_every_ability():
    difficulties = [row["difficulty"] for row in QUESTIONS]
    used = {item["dimension"] for row in QUESTIONS for item in row["rubric"]}

    assert difficulties.count("hard") == 4
    assert used == DIMENSION_NAMES


def test_demo_has_two_anonymous_responses_per_question_of_the_right_length():
    pairs = sorted((row["question_id"], row["model"]) for row in RESPONSES)

    assert pairs == sorted((row["question_id"], model) for row in QUESTIONS
                           for model in ("model-alpha", "model-beta"))
    assert all(set(row) == {"question_id", "model", "response"} for row in RESPONSES)
    assert all(80 <= len(row["response"]) <= 250 for row in RESPONSES)


@pytest.mark.django_db
def test_load_demo_creates_accounts_project_and_open_tasks():
    load_demo()

    project = Project.objects.get(name=DEMO_PROJECT_NAME)
    pm = User.objects.get(username="pm")
    admin = User.objects.get(username="admin")
    experts = list(accounts().filter(role=Role.EXPERT).order_by("username"))
    assert accounts().count() == 8
    assert [e.username for e in experts] == [f"expert{n}" for n in range(1, 7)]
    assert project.overlap == 3
    assert Question.objects.filter(project=project).count() == 12
    assert Response.objects.filter(project=project).count() == 24
    assert Task.objects.filter(project=project, status=Task.Status.OPEN).count() == 24
    # v1 from the question import, v2 adds the demo's guidelines; every task is on v2.
    assert [(v.number, v.is_published, bool(v.guidelines)) for v in RubricVersion.objects.filter(
        rubric=project.rubric).order_by("number")] == [(1, True, False), (2, True, True)]
    assert set(Task.objects.filter(project=project).values_list("rubric_version__number", flat=True)) == {2}
    assert pm.role == Role.PM and permissions.can_manage(pm, project)
    assert admin.is_superuser and admin.is_staff and admin.role == Role.ADMIN
    assert all(permissions.can_annotate(e, project) for e in experts)
    assert all(e.expert_profile.credentials for e in experts)
    assert Token.objects.count() == 8


@pytest.mark.django_db
def test_load_demo_accounts_sign_in_with_the_printed_passwords():
    out = load_demo()

    passwords = {"pm": PM_PASSWORD, "admin": ADMIN_PASSWORD,
                 **{f"expert{n}": EXPERT_PASSWORD for n in range(1, 7)}}
    assert {a.username: a.password for a in DEMO_ACCOUNTS} == passwords
    assert all(User.objects.get(username=u).check_password(p) for u, p in passwords.items())
    assert DEMO_URL in out
    assert all(f"{a.username:<10} {a.role:<7} {a.password}" in out for a in DEMO_ACCOUNTS)


@pytest.mark.django_db
def test_load_demo_twice_changes_nothing():
    load_demo()
    before = counts()
    tokens_before = set(Token.objects.values_list("key", flat=True))

    out = load_demo()

    assert counts() == before
    assert set(Token.objects.values_list("key", flat=True)) == tokens_before
    assert before["users"] == 8 and before["tasks"] == 24
    assert "Nothing changed." in out


@pytest.mark.django_db
def test_load_demo_keeps_an_existing_account_and_its_password():
    User.objects.create_user(username="expert1", role=Role.EXPERT, password="my-own-secret-9")

    load_demo()

    expert1 = User.objects.get(username="expert1")
    project = Project.objects.get(name=DEMO_PROJECT_NAME)
    assert expert1.check_password("my-own-secret-9")
    assert permissions.can_annotate(expert1, project)
    assert accounts().count() == 8
