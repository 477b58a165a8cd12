"""Annotation guidelines: rendered safely, edited in the draft, published with it and frozen, read by members only."""
import re

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import calibration_start, calibration_state
from annotation.demo import demo_load
from annotation.rubric_editing.diff import rubric_version_diff
from annotation.rubric_editing.publishing import rubric_version_publish
from annotation.rubric_editing.services import rubric_draft_guidelines_update, rubric_draft_start
from annotation.selectors import rubric_version_current
from annotation.services import project_add_member
from core.errors import DomainError
from rubrics.guidelines import GUIDELINES_MAX, guidelines_line_diff, guidelines_render
from rubrics.models import RubricVersion
from tests.factories import AdminFactory, ExpertFactory, PMFactory, make_project_with_tasks
from tests.support.quality import answer_attempt, make_golden_project

pytestmark = pytest.mark.django_db

GUIDE = "# 指南\n\n## 温暖\n\n语气友善。\n\n## Curiosity\n\nAsks open questions.\n\n## 不是维度\n\n其他说明。"


def _html(text: str) -> str:
    return str(guidelines_render(text).html)


# ---- Rendering: raw HTML off, an allow-list of tags and attributes ----------------------------

@pytest.mark.parametrize("attack", [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<scr<script>ipt>alert(1)</scr</script>ipt>",
    "<img src=x onerror=alert(1)>",
    '<a href="https://ok.example" onclick="alert(1)">x</a>',
    '<p style="position:fixed;inset:0">cover</p>',
    "<iframe src=https://evil.example></iframe>",
    "<!-- <script>alert(1)</script> -->",
    "<svg><script>alert(1)</script></svg>",
    '<div><a href="javascript:alert(1)">x</a></div>',
])
def test_raw_html_is_shown_as_text_never_as_markup(attack):
    html = _html(f"Before\n\n{attack}\n\nafter")

    assert "<script" not in html.lower() and "<img" not in html and "<iframe" not in html
    assert "<svg" not in html and "<div" not in html and "<a " not in html
    assert not re.search(r"<[^>]+\s(on\w+|style)=", html)
    assert "Before" in html and "after" in html


@pytest.mark.parametrize("link", [
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\u0000script:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](javascript&colon;alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](file:///etc/passwd)",
    "<javascript:alert(1)>",
    "[x][r]\n\n[r]: javascript:alert(1)",
])
def test_links_other_than_http_mailto_and_relative_lose_their_address(link):
    html = _html(link)

    hrefs = re.findall(r'href="([^"]*)"', html)
    assert all(re.match(r"(https?:|mailto:|[^:]*$)", href) for href in hrefs), hrefs
    assert not any(scheme in href.lower() for href in hrefs for scheme in ("javascript", "vbscript", "data:", "file:"))


def test_allowed_links_keep_their_address_and_get_noopener_noreferrer():
    html = _html("[site](https://example.org/a?b=1) [mail](mailto:pm@example.org) [faq](/faq/) [top](#dim-warmth)")

    assert html.count('rel="noopener noreferrer"') == 4
    assert 'href="https://example.org/a?b=1"' in html and 'href="mailto:pm@example.org"' in html
    assert 'href="/faq/"' in html and 'href="#dim-warmth"' in html


def test_images_are_dropped_even_relative_ones():
    html = _html("![x](https://evil.example/track.png) ![y](/static/local.png)")

    assert "<img" not in html and "evil.example" not in html and "local.png" not in html


def test_markdown_structure_survives_headings_lists_tables_code_quotes():
    html = _html("## 温暖\n\n- a\n- **b**\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n`code` and ~~old~~\n\n> quote")

    for tag in ("<h2", "<ul>", "<li>", "<strong>", "<table>", "<td>", "<code>", "<s>", "<blockquote>"):
        assert tag in html
    assert "style=" not in html  # the table's alignment would be a style attribute: dropped


def test_a_heading_named_after_a_dimension_gets_its_anchor_and_only_those_have_ids():
    rendered = guidelines_render(GUIDE)

    assert '<h2 id="dim-warmth">温暖</h2>' in rendered.html
    assert '<h2 id="dim-curiosity">Curiosity</h2>' in rendered.html
    assert "<h2>不是维度</h2>" in rendered.html and "<h1>指南</h1>" in rendered.html
    assert rendered.sections == {"warmth", "curiosity"}


def test_an_id_cannot_be_smuggled_in_by_the_author():
    html = _html('## warmth {#evil}\n\n<h2 id="x" onmouseover="alert(1)">温暖</h2>\n\n## 温暖\n\n## 温暖')

    assert not re.search(r"<[a-z0-9]+[^>]*\s(id=\"(?!dim-)|onmouseover=)", html)
    assert "&lt;h2 id=" in html  # the typed tag is shown as text
    assert html.count('id="dim-warmth"') == 1  # the first heading of a dimension wins; ids stay unique


def test_empty_guidelines_render_as_nothing():
    assert not guidelines_render("  \n ")


def test_the_line_diff_marks_added_and_removed_lines_with_context():
    old = "\n".join(f"line {n}" for n in range(1, 21))
    new = old.replace("line 3", "line three") + "\nline 21"

    diff = guidelines_line_diff(old, new)

    assert ("-", "line 3") in diff and ("+", "line three") in diff and ("+", "line 21") in diff
    assert ("…", "") in diff and (" ", "line 10") not in diff


# ---- Belonging to the rubric version ------------------------------------------------------------

@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def project(pm):
    return make_golden_project(golden=12, regular=2, pm=pm, control_rate_pct=0)


def _publish(project, reason="guidelines"):
    draft = RubricVersion.objects.get(rubric_id=project.rubric_id, status="draft")
    return rubric_version_publish(project=project, version=draft, reason=reason, now=timezone.now())


def test_publishing_carries_the_guidelines_and_a_new_draft_starts_from_them(project):
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)

    v2 = _publish(project)
    v3 = rubric_draft_start(project=project)

    assert rubric_version_current(project) == v2 and v2.guidelines == GUIDE.strip()
    assert v3.number == 3 and v3.guidelines == v2.guidelines


def test_a_guidelines_only_change_publishes_without_sending_experts_back_to_calibration(project):
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    answer_attempt(calibration_start(project=project, expert=expert, now=timezone.now()))
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)

    diff = rubric_version_diff(old=rubric_version_current(project),
                               new=RubricVersion.objects.get(rubric_id=project.rubric_id, status="draft"))
    _publish(project)

    assert diff.guidelines_changed and not diff.is_empty and not diff.changes_standard
    assert calibration_state(project=project, expert=expert, now=timezone.now()).status == "calibrated"


def test_an_unchanged_draft_is_still_refused(project):
    rubric_draft_guidelines_update(project=project, guidelines="")

    with pytest.raises(DomainError) as refused:
        _publish(project)

    assert refused.value.code == "no_changes"


def test_the_guidelines_of_a_published_version_never_change(project):
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)
    published = _publish(project)

    with pytest.raises(IntegrityError), transaction.atomic():
        RubricVersion.objects.filter(pk=published.pk).update(guidelines="rewritten")

    rubric_draft_guidelines_update(project=project, guidelines="a new draft")
    published.refresh_from_db()
    assert published.guidelines == GUIDE.strip()
    assert RubricVersion.objects.get(rubric_id=project.rubric_id, status="draft").guidelines == "a new draft"


def test_too_long_guidelines_are_refused_and_nothing_is_written(project):
    rubric_draft_guidelines_update(project=project, guidelines="kept")

    with pytest.raises(DomainError) as refused:
        rubric_draft_guidelines_update(project=project, guidelines="x" * (GUIDELINES_MAX + 1))

    assert refused.value.code == "guidelines_too_long"
    assert RubricVersion.objects.get(rubric_id=project.rubric_id, status="draft").guidelines == "kept"


def test_the_diff_shows_a_guidelines_change_on_the_draft_page(client, project, pm):
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)
    client.force_login(pm)

    page = client.get(reverse("rubric_draft", args=[project.pk])).content.decode()

    assert 'class="guidelines-diff"' in page
    assert '<span class="diff-added">+ ## 温暖</span>' in page
    assert "dim-warmth" in page  # the convention is documented on the editing page


def test_the_draft_page_saves_guidelines_and_a_refusal_keeps_the_text(client, project, pm):
    client.force_login(pm)
    url = reverse("rubric_guidelines_save", args=[project.pk])

    saved = client.post(url, {"guidelines": GUIDE})
    refused = client.post(url, {"guidelines": "y" * (GUIDELINES_MAX + 1)})

    assert saved.status_code == 302
    assert RubricVersion.objects.get(rubric_id=project.rubric_id, status="draft").guidelines == GUIDE.strip()
    assert refused.status_code == 422 and "y" * 100 in refused.content.decode()
    assert "标注指南超过" in refused.content.decode()


def test_another_pm_cannot_save_guidelines(client, project):
    client.force_login(PMFactory())

    response = client.post(reverse("rubric_guidelines_save", args=[project.pk]), {"guidelines": "mine"})

    assert response.status_code == 404
    assert not RubricVersion.objects.filter(rubric_id=project.rubric_id, status="draft").exists()


# ---- The API --------------------------------------------------------------------------------------

def _api(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def test_the_api_round_trips_the_guidelines_and_publishes_them(api, project, pm):
    client = _api(api, pm)
    url = f"/api/v1/projects/{project.pk}/rubric-versions/draft/"

    patched = client.patch(url, {"guidelines": GUIDE}, format="json")
    read = client.get(url).json()
    published = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/2/publish/", {"reason": "guide"},
                            format="json")

    assert patched.status_code == 200 and patched.json()["guidelines"] == GUIDE.strip()
    assert read["guidelines"] == GUIDE.strip() and read["draft"] == 2
    assert read["diff"]["guidelines_changed"] is True and "+ ## 温暖" in read["diff"]["guidelines_diff"]
    assert published.status_code == 200
    assert RubricVersion.objects.get(rubric_id=project.rubric_id, number=2).guidelines == GUIDE.strip()


def test_the_api_refuses_bad_guidelines_and_other_pms(api, project, pm):
    url = f"/api/v1/projects/{project.pk}/rubric-versions/draft/"
    too_long = _api(api, pm).patch(url, {"guidelines": "x" * (GUIDELINES_MAX + 1)}, format="json")
    not_text = _api(api, pm).patch(url, {"guidelines": {"a": 1}}, format="json")
    other = _api(api, PMFactory()).patch(url, {"guidelines": "mine"}, format="json")

    assert too_long.status_code == 400 and too_long.json()["code"] == "guidelines_too_long"
    assert not_text.status_code == 400
    assert other.status_code == 404
    assert not RubricVersion.objects.filter(rubric_id=project.rubric_id, status="draft").exists()


# ---- Reading them --------------------------------------------------------------------------------

@pytest.fixture
def guided(pm):
    """A project whose published v2 has guidelines, an expert member with a task leased on it."""
    project = make_project_with_tasks(n_questions=2, items_per_question=3, pm=pm)
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)
    _publish(project)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    return project, expert


def test_members_and_admins_read_the_guidelines_page(client, guided, pm):
    project, expert = guided
    url = reverse("project_guidelines", args=[project.pk])
    for user in (expert, pm, AdminFactory()):
        client.force_login(user)

        page = client.get(url)

        assert page.status_code == 200
        assert '<h2 id="dim-warmth">温暖</h2>' in page.content.decode()


@pytest.mark.parametrize("who", ["outsider_expert", "other_pm"])
def test_the_guidelines_page_is_404_for_non_members(client, guided, who):
    project, _ = guided
    client.force_login(ExpertFactory() if who == "outsider_expert" else PMFactory())

    assert client.get(reverse("project_guidelines", args=[project.pk])).status_code == 404
    assert client.get(reverse("project_guidelines", args=[project.pk + 999])).status_code == 404


def test_an_expert_never_reads_a_draft_but_the_pm_previews_it(client, guided, pm):
    project, expert = guided
    rubric_draft_guidelines_update(project=project, guidelines="## 温暖\n\nunpublished wording")
    url = reverse("project_guidelines", args=[project.pk]) + "?version=3"

    client.force_login(expert)
    as_expert = client.get(url)
    bad = client.get(reverse("project_guidelines", args=[project.pk]) + "?version=abc")
    client.force_login(pm)
    as_pm = client.get(url)

    assert as_expert.status_code == 404 and bad.status_code == 404
    assert as_pm.status_code == 200 and "unpublished wording" in as_pm.content.decode()


def test_the_annotation_page_has_the_panel_of_the_tasks_version_and_dimension_links(client, guided):
    project, expert = guided
    assignment = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    rubric_draft_guidelines_update(project=project, guidelines="## 温暖\n\nnot yet published")
    client.force_login(expert)

    page = client.get(reverse("annotate", args=[assignment.pk])).content.decode()

    assert 'id="guidelines-panel"' in page and '<h2 id="dim-warmth">温暖</h2>' in page
    assert "not yet published" not in page
    assert f'href="/projects/{project.pk}/guidelines/?version=2#dim-warmth"' in page
    assert 'data-guidelines-section="dim-curiosity"' in page
    assert "js/guidelines.js" in page


def test_the_calibration_page_asks_to_read_the_guidelines_first(client, pm):
    project = make_golden_project(golden=12, regular=2, pm=pm, control_rate_pct=0)
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)
    _publish(project)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    client.force_login(expert)

    page = client.get(reverse("calibration", args=[project.pk])).content.decode()

    assert 'id="guidelines-prompt"' in page and "请先阅读标注指南" in page
    assert f'href="/projects/{project.pk}/guidelines/?version=2"' in page


def test_the_demo_project_has_chinese_guidelines_with_a_section_per_dimension(settings):
    result = demo_load(now=timezone.now())
    version = rubric_version_current(result.project)

    rendered = guidelines_render(version.guidelines)

    assert version.number == 2 and "## 温暖" in version.guidelines
    assert len(rendered.sections) == 16


def test_each_item_on_a_calibration_task_links_its_dimension_to_the_guidelines(client, pm):
    project = make_golden_project(golden=12, regular=2, pm=pm, control_rate_pct=0)
    rubric_draft_guidelines_update(project=project, guidelines=GUIDE)
    _publish(project)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())
    client.force_login(expert)

    page = client.get(reverse("calibration_task", args=[attempt.pk, 1])).content.decode()

    links = re.findall(r'<a class="dim dim-link" href="([^"]+)"', page)
    assert links and all(link.startswith(f"/projects/{project.pk}/guidelines/?version=2#dim-") for link in links)
