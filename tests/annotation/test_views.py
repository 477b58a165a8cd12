"""The htmx pages: each as a full page and as the fragment htmx swaps, scoped to their user."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import permissions
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Draft, Label, Question, Response, Task
from annotation.selectors import rubric_items_for_task, rubric_items_forget, task_progress_for_project
from annotation.services import project_add_member
from experts.models import ExpertProfile
from experts.notifications import notification_send
from tests.e2e.scenario import SECRET_MODEL, build_counselling_project
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks
from tests.support.quality import make_golden_project

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
# The expert home reads each project's calibration standing: current version, attempts,
# golden set, usable golden tasks.
PER_PROJECT_QUERIES = 4


@pytest.fixture
def project(pm, expert):
    project = build_counselling_project(pm=pm)
    project_add_member(project=project, user=expert)
    return project


@pytest.fixture
def assignment(project, expert):
    return assignment_claim_next(project=project, expert=expert, now=timezone.now())


@pytest.fixture
def expert_client(client, expert):
    client.force_login(expert)
    return client


@pytest.fixture
def pm_client(client, pm):
    client.force_login(pm)
    return client


def item_keys(assignment: Assignment) -> list[str]:
    return [item.item_key for item in rubric_items_for_task(assignment.task)]


def marks(keys: list[str], value: int = 1) -> dict[str, str]:
    return {f"label-{key}": str(value) for key in keys}


def html(response) -> str:
    return response.content.decode()


# --- Sign in ---------------------------------------------------------------------------

def test_pages_need_sign_in(client, assignment):
    for url in [reverse("home"), reverse("annotate", args=[assignment.pk]),
                reverse("project_detail", args=[assignment.task.project_id])]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_login_page_renders_in_chinese_by_default(client):
    response = client.get(reverse("login"))

    assert response.status_code == 200
    assert 'lang="zh-Hans"' in html(response)
    assert "登录 Rubrica" in html(response)


def test_login_signs_in_and_lands_on_home(client, expert):
    response = client.post(reverse("login"), {"username": expert.username, "password": "pass-word-123"})

    assert response.status_code == 302
    assert response["Location"] == reverse("home")


def test_repeated_failed_sign_ins_show_the_lockout_page(client, expert, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        client.post(reverse("login"), {"username": expert.username, "password": "wrong-password"})

    response = client.post(reverse("login"), {"username": expert.username, "password": "pass-word-123"})

    assert response.status_code == 429
    assert "登录已暂停" in html(response)
    assert reverse("login") in html(response)


def test_logout_is_a_post(expert_client):
    response = expert_client.post(reverse("logout"))

    assert response.status_code == 302
    assert expert_client.get(reverse("home")).status_code == 302


# --- Home ------------------------------------------------------------------------------

def test_expert_home_lists_projects_with_own_counts(expert_client, project, assignment):
    response = expert_client.get(reverse("home"))

    page = html(response)
    assert response.status_code == 200
    assert "<html" in page
    assert project.name in page
    assert "下一个任务" in page
    assert reverse("next_task", args=[project.pk]) in page


def test_expert_home_fragment(expert_client, project):
    response = expert_client.get(reverse("home"), **HTMX)

    page = html(response)
    assert response.status_code == 200
    assert "<html" not in page
    assert 'id="projects"' in page
    assert project.name in page


def test_pm_home_shows_progress_full_and_fragment(pm_client, project):
    full = pm_client.get(reverse("home"))
    fragment = pm_client.get(reverse("home"), **HTMX)

    assert reverse("project_detail", args=[project.pk]) in html(full)
    assert "<html" in html(full)
    assert "<html" not in html(fragment)
    assert reverse("project_detail", args=[project.pk]) in html(fragment)


def test_pm_home_hides_other_pms_projects(client, project):
    other_pm = PMFactory()
    client.force_login(other_pm)

    response = client.get(reverse("home"))

    assert project.name not in html(response)


def test_admin_sees_admin_link(client, admin_user, project):
    client.force_login(admin_user)

    response = client.get(reverse("home"))

    assert reverse("admin:index") in html(response)
    assert project.name in html(response)


# --- Next task -------------------------------------------------------------------------

def test_next_task_leases_and_opens_the_annotation_page(expert_client, project, expert):
    response = expert_client.post(reverse("next_task", args=[project.pk]))

    assignment = Assignment.objects.get(expert=expert)
    assert response.status_code == 302
    assert response["Location"] == reverse("annotate", args=[assignment.pk])


def test_next_task_over_htmx_redirects_the_client(expert_client, project, expert):
    response = expert_client.post(reverse("next_task", args=[project.pk]), **HTMX)

    assignment = Assignment.objects.get(expert=expert)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("annotate", args=[assignment.pk])


def test_next_task_when_none_is_left_says_so_at_home(expert_client, project, expert):
    for _ in range(2):
        leased = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        keys = item_keys(leased)
        expert_client.post(reverse("submit_view", args=[leased.pk]), marks(keys))

    response = expert_client.post(reverse("next_task", args=[project.pk]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("home")
    assert "暂时没有" in html(response)


def test_next_task_for_a_non_member_answers_404_like_every_page_of_a_project_not_yours(client, project):
    outsider = ExpertFactory()
    client.force_login(outsider)

    response = client.post(reverse("next_task", args=[project.pk]))
    missing = client.post(reverse("next_task", args=[project.pk + 10_000]))

    assert response.status_code == missing.status_code == 404
    assert project.name not in html(response)
    assert not Assignment.objects.filter(expert=outsider).exists()


def test_next_task_for_a_paused_expert_explains_why(expert_client, project, expert):
    ExpertProfile.objects.filter(user=expert).update(status=ExpertProfile.Status.PAUSED)

    response = expert_client.post(reverse("next_task", args=[project.pk]), follow=True)

    assert response.status_code == 200
    assert "已暂停" in html(response)
    assert not Assignment.objects.filter(expert=expert).exists()


def test_next_task_is_post_only(expert_client, project):
    assert expert_client.get(reverse("next_task", args=[project.pk])).status_code == 405


# --- Annotate --------------------------------------------------------------------------

def test_annotate_full_page_shows_dialogue_reply_and_items(expert_client, assignment):
    response = expert_client.get(reverse("annotate", args=[assignment.pk]))

    page = html(response)
    question = assignment.task.response.question
    assert response.status_code == 200
    assert "<html" in page
    assert question.final_user_turn in page
    assert "最后一轮" in page
    assert "待评回复" in page
    assert "来访者" in page and "咨询师" in page
    assert "已标注" in page
    assert f'name="label-{question.external_id}:1"' in page
    assert 'id="annotate-strings"' in page


def test_annotate_fragment(expert_client, assignment):
    response = expert_client.get(reverse("annotate", args=[assignment.pk]), **HTMX)

    page = html(response)
    assert response.status_code == 200
    assert "<html" not in page
    assert page.lstrip().startswith('<div id="workspace"')
    assert assignment.task.response.question.final_user_turn in page


def test_annotate_page_and_fragment_both_vary_on_hx_request(expert_client, assignment):
    url = reverse("annotate", args=[assignment.pk])

    full = expert_client.get(url)
    fragment = expert_client.get(url, **HTMX)

    assert "<html" in html(full) and 'id="workspace"' in html(full)
    assert html(fragment).lstrip().startswith('<div id="workspace"')
    assert "HX-Request" in full["Vary"] and "HX-Request" in fragment["Vary"]


def test_a_refused_submission_keeps_varying_on_hx_request(expert_client, assignment):
    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(item_keys(assignment)[:-1]),
                                  **HTMX)

    assert response.status_code == 422
    assert "HX-Request" in response["Vary"]


def test_annotate_shows_signed_scores_and_gate(expert_client, project, expert):
    leased = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    page = html(expert_client.get(reverse("annotate", args=[leased.pk])))

    assert "badge-negative" in page and "\u22123" in page
    assert "badge-positive" in page and "+3" in page
    assert "门槛" in page
    assert "言语表达" in page and "人格" in page


def test_annotate_never_shows_the_model_name(expert_client, assignment):
    keys = item_keys(assignment)
    urls = [reverse("annotate", args=[assignment.pk]), reverse("home")]
    pages = [expert_client.get(url) for url in urls]
    pages.append(expert_client.get(reverse("annotate", args=[assignment.pk]), **HTMX))
    pages.append(expert_client.post(reverse("draft_save_view", args=[assignment.pk]), marks(keys[:1]), **HTMX))
    pages.append(expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys[:2]), **HTMX))
    pages.append(expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys), **HTMX))
    pages.append(expert_client.get(reverse("annotate", args=[assignment.pk])))

    assert Response.objects.filter(model_name=SECRET_MODEL).exists()
    for response in pages:
        assert SECRET_MODEL not in html(response)


def test_expert_cannot_open_another_experts_assignment(client, assignment):
    other = ExpertFactory()
    project_add_member(project=assignment.task.project, user=other)
    client.force_login(other)

    assert client.get(reverse("annotate", args=[assignment.pk])).status_code == 404
    assert client.get(reverse("annotate", args=[assignment.pk]), **HTMX).status_code == 404
    assert client.post(reverse("draft_save_view", args=[assignment.pk]), {}).status_code == 404
    assert client.post(reverse("submit_view", args=[assignment.pk]), {}).status_code == 404


def test_pm_cannot_open_an_experts_assignment(pm_client, assignment):
    assert pm_client.get(reverse("annotate", args=[assignment.pk])).status_code == 404


def test_missing_assignment_is_404(expert_client):
    assert expert_client.get(reverse("annotate", args=[999999])).status_code == 404


# --- Drafts ----------------------------------------------------------------------------

def test_draft_saved_over_htmx_survives_a_reload(expert_client, assignment):
    keys = item_keys(assignment)
    data = {f"label-{keys[0]}": "1", f"label-{keys[1]}": "0", f"note-{keys[1]}": "语气很温和，但没有提问"}

    saved = expert_client.post(reverse("draft_save_view", args=[assignment.pk]), data, **HTMX)
    page = html(expert_client.get(reverse("annotate", args=[assignment.pk])))

    assert saved.status_code == 200
    assert "<html" not in html(saved)
    assert 'id="save-status"' in html(saved) and "已保存" in html(saved)
    assert Draft.objects.get(assignment=assignment).labels == {keys[0]: 1, keys[1]: 0}
    assert 'id="item-1-hit" checked' in page
    assert 'id="item-2-miss" checked' in page
    assert 'id="item-3-hit" checked' not in page and 'id="item-3-miss" checked' not in page
    assert "语气很温和，但没有提问" in page
    assert '<strong id="progress-done">2</strong>' in page


def test_draft_saved_without_htmx_redirects_back_with_a_message(expert_client, assignment):
    keys = item_keys(assignment)

    response = expert_client.post(reverse("draft_save_view", args=[assignment.pk]), marks(keys[:1]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("annotate", args=[assignment.pk])
    assert "草稿已保存" in html(response)
    assert 'id="item-1-hit" checked' in html(response)


def test_draft_refused_over_htmx_shows_the_reason_in_the_status(expert_client, assignment):
    keys = item_keys(assignment)

    response = expert_client.post(reverse("draft_save_view", args=[assignment.pk]),
                                  {f"note-{keys[0]}": "长" * 2001}, **HTMX)

    assert response.status_code == 422
    assert 'data-state="error"' in html(response)
    assert not Draft.objects.filter(assignment=assignment).exists()


# --- Submit ----------------------------------------------------------------------------

def test_submit_with_a_missing_label_shows_the_error_and_writes_nothing(expert_client, assignment):
    keys = item_keys(assignment)
    data = {**marks(keys[:-1], 1), f"note-{keys[0]}": "先记一下"}

    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), data, **HTMX)

    page = html(response)
    assignment.refresh_from_db()
    assert response.status_code == 422
    assert "<html" not in page
    assert "1 项尚未标注" in page
    assert f'id="item-{len(keys)}"' in page and "is-missing" in page
    assert 'id="item-1-hit" checked' in page and "先记一下" in page
    assert Label.objects.count() == 0
    assert assignment.status == Assignment.Status.LEASED


def test_submit_with_a_missing_label_as_full_page(expert_client, assignment):
    keys = item_keys(assignment)

    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys[:-2]))

    assert response.status_code == 422
    assert "<html" in html(response)
    assert "2 项尚未标注" in html(response)
    assert Label.objects.count() == 0


def test_submit_over_htmx_shows_done_and_a_focused_next_task(expert_client, assignment):
    keys = item_keys(assignment)
    data = {**marks(keys[:3], 1), **marks(keys[3:], 0), f"note-{keys[0]}": "很贴切"}

    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), data, **HTMX)

    page = html(response)
    assignment.refresh_from_db()
    assert response.status_code == 200
    assert "<html" not in page
    assert 'data-state="submitted"' in page
    assert "已提交" in page
    assert 'id="next-task" autofocus' in page
    assert assignment.status == Assignment.Status.SUBMITTED
    assert Label.objects.filter(assignment=assignment).count() == len(keys)
    assert Label.objects.get(assignment=assignment, rubric_item__item_key=keys[0]).note == "很贴切"


def test_submit_full_page_redirects_to_the_done_state(expert_client, assignment):
    keys = item_keys(assignment)

    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys, 0), follow=True)

    assert response.redirect_chain[-1][0] == reverse("annotate", args=[assignment.pk])
    assert 'data-state="submitted"' in html(response)
    assert "下一个任务" in html(response)


def test_resubmitting_different_marks_is_refused(expert_client, assignment):
    keys = item_keys(assignment)
    expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys, 1))

    response = expert_client.post(reverse("submit_view", args=[assignment.pk]), marks(keys, 0), **HTMX)

    assert response.status_code == 422
    assert set(Label.objects.filter(assignment=assignment).values_list("value", flat=True)) == {1}


# --- PM project page -------------------------------------------------------------------

def test_project_page_full_and_fragment(pm_client, project):
    full = pm_client.get(reverse("project_detail", args=[project.pk]))
    fragment = pm_client.get(reverse("project_detail", args=[project.pk]), **HTMX)

    assert full.status_code == 200 and fragment.status_code == 200
    assert "<html" in html(full)
    assert "<html" not in html(fragment)
    assert html(fragment).lstrip().startswith('<div id="project-main"')
    assert f"/api/v1/projects/{project.pk}/export/?format=jsonl" in html(full)
    assert f"/api/v1/projects/{project.pk}/export/?format=csv" in html(full)


def test_project_page_links_every_project_page(pm_client, project):
    page = html(pm_client.get(reverse("project_detail", args=[project.pk])))
    # The Quality group's tab opens its dashboard, whose second row names the group's other pages.
    quality = html(pm_client.get(reverse("quality_dashboard", args=[project.pk])))

    for name in ("quality_dashboard", "rubric_draft", "golden_import", "project_costs"):
        assert reverse(name, args=[project.pk]) in page
    for name in ("judge_runs", "quality"):
        assert reverse(name, args=[project.pk]) in quality


def test_pm_progress_leaves_golden_tasks_out(client):
    pm = PMFactory()
    project = make_golden_project(golden=2, regular=3, items=2, pm=pm)
    client.force_login(pm)

    page = html(client.get(reverse("project_detail", args=[project.pk])))

    row = task_progress_for_project(project)
    assert (row.tasks, row.golden) == (3, 2)
    assert "金标任务不计入进度" in page


def test_the_home_page_the_project_page_and_the_dashboard_read_one_progress(client):
    pm = PMFactory()
    project = make_golden_project(golden=2, regular=4, items=2, pm=pm)
    complete, full, started, waiting = Task.objects.filter(project=project, is_golden=False).order_by("pk")
    Task.objects.filter(pk=complete.pk).update(status=Task.Status.COMPLETE, live_count=3, submitted_count=3)
    Task.objects.filter(pk=full.pk).update(status=Task.Status.FULL, live_count=3, submitted_count=1)
    Task.objects.filter(pk=started.pk).update(live_count=1)
    # A golden task out as a control task is work under way, but never progress.
    Task.objects.filter(project=project, is_golden=True).update(live_count=1)
    client.force_login(pm)

    home = client.get(reverse("home"))
    detail = client.get(reverse("project_detail", args=[project.pk]))
    dashboard = client.get(reverse("quality_dashboard", args=[project.pk]))

    progress = task_progress_for_project(project)
    assert (progress.tasks, progress.open, progress.pending, progress.in_progress, progress.full,
            progress.complete, progress.golden, progress.submissions) == (4, 2, 1, 2, 1, 1, 2, 4)
    assert progress.percent_complete == 25
    assert home.context["managed_rows"] == [progress]
    assert detail.context["row"] == progress
    assert dashboard.context["progress"] == progress


def test_top_bar_shows_the_unread_notification_count(expert_client, expert, project):
    notification_send(users=[expert], kind="tier_changed",
                      params={"from_tier": "bronze", "to_tier": "silver", "reason": "ok"}, now=timezone.now())

    page = html(expert_client.get(reverse("home")))

    assert 'class="badge-count"' in page and "1 条未读" in page


def test_expert_home_shows_the_standing_card_per_project(expert_client, project):
    page = html(expert_client.get(reverse("home")))

    assert 'class="card home-card"' in page
    assert reverse("calibration", args=[project.pk]) in page or 'data-calibration="not_required"' in page


def test_expert_home_reads_a_fixed_number_of_queries_per_project(client):
    expert = ExpertFactory()
    client.force_login(expert)

    def home_queries(projects: int) -> int:
        for _ in range(projects):
            project_add_member(project=make_golden_project(golden=0, regular=1, items=1), user=expert)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("home")).status_code == 200
        return len(queries)

    with_one = home_queries(1)
    with_three = home_queries(2)

    assert with_three - with_one <= 2 * PER_PROJECT_QUERIES


def test_expert_cannot_open_a_project_page(expert_client, project):
    assert expert_client.get(reverse("project_detail", args=[project.pk])).status_code == 404


def test_pm_cannot_open_another_pms_project(client, project):
    client.force_login(PMFactory())

    assert client.get(reverse("project_detail", args=[project.pk])).status_code == 404
    assert client.post(reverse("project_import", args=[project.pk, "questions"]), {}).status_code == 404


def heartbench_row(question_id: str) -> dict:
    return {
        "question_id": question_id,
        "dialogue": [{"role": "A", "content": "我最近总是很焦虑。"},
                     {"role": "B", "content": "能说说是什么让你焦虑吗？"},
                     {"role": "A", "content": "快毕业了，工作还没有着落。"}],
        "rubric": [{"dimension": "温暖", "score": 2, "content": "AI 对用户的焦虑表达理解"},
                   {"dimension": "其他", "score": None, "content": "AI 扮演用户发言"}],
        "difficulty": "normal", "primary_scene": "学业", "secondary_scene": "求职",
    }


def upload(name: str, rows: list) -> SimpleUploadedFile:
    body = "\n".join(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows)
    return SimpleUploadedFile(name, body.encode(), content_type="application/jsonl")


def test_import_questions_over_htmx_shows_the_counts(pm_client, project):
    before = Question.objects.filter(project=project).count()

    response = pm_client.post(reverse("project_import", args=[project.pk, "questions"]),
                              {"file": upload("q.jsonl", [heartbench_row("new-q-1")])}, **HTMX)

    assert response.status_code == 200
    assert "<html" not in html(response)
    assert "导入完成" in html(response)
    assert Question.objects.filter(project=project).count() == before + 1


def test_import_line_errors_are_in_the_readers_language_and_the_api_keeps_english(pm_client, project, api, pm):
    bad = heartbench_row("bad-q")
    bad["rubric"][0]["score"] = "lots"
    bad["dialogue"] = "hello"
    rows = [heartbench_row("ok-q"), "{not json", bad]

    page = html(pm_client.post(reverse("project_import", args=[project.pk, "questions"]),
                               {"file": upload("q.jsonl", rows)}))
    api.force_authenticate(pm)
    body = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload("q.jsonl", rows)},
                    format="multipart", HTTP_ACCEPT_LANGUAGE="en").json()

    assert "第 2 行：不是有效的 JSON（第 2 列附近）" in page
    assert "应为对话轮次列表（不能为空），实际为 &quot;hello&quot;" in page
    assert "应为整数或 null，实际为 &quot;lots&quot;" in page
    assert "expected" not in page
    entry = next(e for e in body["errors"] if e["field"] == "dialogue")
    assert entry["code"] == "field_not_list" and entry["message"].startswith("expected a non-empty list of turns")


def test_import_with_errors_lists_them_and_writes_nothing(pm_client, project):
    before = Question.objects.filter(project=project).count()
    bad = heartbench_row("bad-q")
    bad["rubric"][0]["score"] = "lots"

    response = pm_client.post(reverse("project_import", args=[project.pk, "questions"]),
                              {"file": upload("q.jsonl", [heartbench_row("ok-q"), "{not json", bad])})

    page = html(response)
    assert response.status_code == 422
    assert "<html" in page
    assert "未导入" in page
    assert "<td class=\"num\">2</td>" in page
    assert Question.objects.filter(project=project).count() == before


def test_import_responses_with_a_default_model(pm_client, project):
    rows = [{"question_id": "family-02", "response": "我在这里听你说。"}]

    response = pm_client.post(reverse("project_import", args=[project.pk, "responses"]),
                              {"file": upload("r.jsonl", rows), "model": "another-model"}, **HTMX)

    assert response.status_code == 200
    assert "导入完成" in html(response)
    assert Response.objects.filter(project=project, model_name="another-model").count() == 1


def test_import_without_a_file_asks_for_one(pm_client, project):
    response = pm_client.post(reverse("project_import", args=[project.pk, "responses"]), {}, **HTMX)

    assert response.status_code == 422
    assert "请选择" in html(response)


# --- Language --------------------------------------------------------------------------

def test_language_switch_renders_english(expert_client, assignment):
    switched = expert_client.post(reverse("set_language"), {"language": "en", "next": reverse("home")})

    home = html(expert_client.get(reverse("home")))
    page = html(expert_client.get(reverse("annotate", args=[assignment.pk])))

    assert switched.status_code == 302
    assert 'lang="en"' in home
    assert "Next task" in home and "下一个任务" not in home
    assert "Reply to judge" in page and "Final user turn" in page
    assert "Verbal expression" in page or "Emotional perception" in page


# --- Query counts of the expert's loop ------------------------------------------------

def _lease_with_items(expert, items: int) -> Assignment:
    ExpertProfile.objects.filter(user=expert).update(max_concurrent_leases=2)  # one lease in each of two projects
    project = make_project_with_tasks(n_questions=1, items_per_question=items)
    project_add_member(project=project, user=expert)
    return assignment_claim_next(project=project, expert=expert, now=timezone.now())


def _queries(send) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert send().status_code == 200
    return len(queries)


def test_the_annotation_page_reads_the_same_queries_for_two_items_as_for_eight(client):
    expert = ExpertFactory()
    client.force_login(expert)
    few, many = _lease_with_items(expert, 2), _lease_with_items(expert, 8)
    client.get(reverse("annotate", args=[few.pk]))  # the process's caches (content types) filled

    def page(assignment: Assignment, **headers) -> int:
        rubric_items_forget()  # a process that has not kept the task's rubric items yet
        return _queries(lambda: client.get(reverse("annotate", args=[assignment.pk]), **headers))

    # Session, user, the assignment with its task, question and version, its draft, its return,
    # the rubric items, the case library, the unread count (the top bar: the full page only).
    assert page(few) == page(many) == 8
    assert page(few, **HTMX) == page(many, **HTMX) == 7
    # The items of a published version are kept by the process: the next page does not read them.
    client.get(reverse("annotate", args=[many.pk]))
    assert _queries(lambda: client.get(reverse("annotate", args=[many.pk]))) == 7


def test_the_draft_autosave_reads_the_same_queries_for_two_marks_as_for_eight(client):
    expert = ExpertFactory()
    client.force_login(expert)
    few, many = _lease_with_items(expert, 2), _lease_with_items(expert, 8)

    def save(assignment: Assignment) -> int:
        data = marks(item_keys(assignment))
        rubric_items_forget()  # the worst case: the process has not kept the task's rubric items
        return _queries(lambda: client.post(reverse("draft_save_view", args=[assignment.pk]), data, **HTMX))

    save(few)  # the first save creates the draft; later ones update it, as autosave does all day
    save(many)
    # Session, user, the assignment, the rubric items; in one transaction (its start and end count) the
    # draft, its update and the lease's extension.
    assert save(few) == save(many) == 9


def test_the_project_page_reads_the_same_queries_for_two_questions_as_for_twenty(client):
    pm = PMFactory()
    client.force_login(pm)
    small, large = make_project_with_tasks(n_questions=2, pm=pm), make_project_with_tasks(n_questions=20, pm=pm)
    for project in (small, large):
        permissions.grant_manage(pm, project)
    client.get(reverse("project_detail", args=[small.pk]))  # the process's caches (content types) filled

    def page(project, **headers) -> int:
        return _queries(lambda: client.get(reverse("project_detail", args=[project.pk]), **headers))

    # Session, user, the project, its permission, the current version, task progress, questions,
    # responses, the unread count (the top bar: the full page only).
    assert page(small) == page(large) == 9
    assert page(small, **HTMX) == page(large, **HTMX) == 8
