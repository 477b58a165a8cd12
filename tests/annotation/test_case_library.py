"""The case library: PMs write and publish cases, experts read them beside the rubric items they judge,
before calibration, and by searching in Chinese; nobody outside the project reaches any of it."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.library.search import search_query_parse
from annotation.library.selectors import case_list, cases_for_items, library_access
from annotation.library.services import case_create, case_read_record, case_update
from annotation.models import Case, CaseItem, CaseRead, Question
from annotation.models.library import TEXT_MAX
from annotation.services import project_add_member
from core.error_codes import ErrorCode
from core.errors import DomainError
from rubrics.models import RubricItem, RubricVersion
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory
from tests.support.library import CASES, seed_cases

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
# pg_trgm ranking and real threads need PostgreSQL (CI always runs on it; see tests/conftest.py).
postgres_only = pytest.mark.postgres


@pytest.fixture
def project(pm, expert):
    project = build_counselling_project(pm=pm)
    project_add_member(project=project, user=expert)
    return project


@pytest.fixture
def outsider_pm(db):
    other = build_counselling_project(pm=PMFactory())
    return other.created_by


@pytest.fixture
def seeded(project, pm):
    return seed_cases(project, pm)


def _titles(cases) -> list[str]:
    return [c.title for c in cases]


def _search(project, user, q: str) -> list[str]:
    return _titles(case_list(library_access(user, project.pk), query=q))


# --- Writing a case --------------------------------------------------------------------

def test_a_case_links_items_by_key_and_takes_question_dimensions_and_scenes_from_them(project, pm):
    case = case_create(project=project, by=pm, now=timezone.now(), title="建议给得太早", problem="p", disagreement="",
                       discussion="", reading="r", item_keys=["work-stress-01:7"])

    assert list(case.items.values_list("item_key", "question_ref")) == [("work-stress-01:7", "work-stress-01")]
    assert case.question.external_id == "work-stress-01"
    assert [d.code for d in case.dimensions.all()] == ["verbal-expression"]
    assert case.scenes == ["职场压力", "自我怀疑"]
    assert not case.is_published and case.read_count == 0


def test_a_case_keeps_its_item_when_a_new_rubric_version_is_published(project, pm, expert):
    case = case_create(project=project, by=pm, now=timezone.now(), title="t", problem="p", disagreement="",
                       discussion="", reading="r", item_keys=["work-stress-01:7"], publish=True)
    v1 = RubricVersion.objects.get(rubric=project.rubric)
    v2 = RubricVersion.objects.create(rubric=project.rubric, number=2)
    for item in RubricItem.objects.filter(version=v1):
        RubricItem.objects.create(version=v2, question_ref=item.question_ref, position=item.position,
                                  item_key=item.item_key, dimension=item.dimension, score=item.score,
                                  content=item.content + "（修订）")
    question = Question.objects.get(project=project, external_id="work-stress-01")

    beside = cases_for_items(project=project, question=question, items=list(RubricItem.objects.filter(version=v2)))

    assert [rc.case.pk for rc in beside["work-stress-01:7"]][:1] == [case.pk]
    assert beside["work-stress-01:7"][0].reason == "item"


@pytest.mark.parametrize("field", ["title", "problem", "reading"])
def test_an_empty_required_field_is_refused_and_nothing_is_written(project, pm, field):
    values = {"title": "t", "problem": "p", "reading": "r", field: "   "}

    with pytest.raises(DomainError) as refused:
        case_create(project=project, by=pm, now=timezone.now(), disagreement="", discussion="", **values)

    assert refused.value.code == ErrorCode.LIBRARY_FIELD_REQUIRED
    assert [e["field"] for e in refused.value.errors] == [field]
    assert Case.objects.count() == 0


def test_too_long_text_an_unknown_item_or_dimension_is_refused_and_nothing_is_written(project, pm):
    base = dict(project=project, by=pm, now=timezone.now(), title="t", problem="p", disagreement="",
                discussion="", reading="r")
    attempts = [dict(problem="长" * (TEXT_MAX + 1)), dict(item_keys=["work-stress-01:7", "nope:1"]),
                dict(dimension_codes=["no-such"]), dict(outcome="maybe"), dict(question="nope")]
    codes = []
    for extra in attempts:
        with pytest.raises(DomainError) as refused:
            case_create(**{**base, **extra})
        codes.append(refused.value.code)

    assert codes == [ErrorCode.LIBRARY_FIELD_TOO_LONG, ErrorCode.LIBRARY_ITEM_UNKNOWN,
                     ErrorCode.LIBRARY_DIMENSION_UNKNOWN, ErrorCode.LIBRARY_OUTCOME_UNKNOWN,
                     ErrorCode.LIBRARY_QUESTION_UNKNOWN]
    assert (Case.objects.count(), CaseItem.objects.count()) == (0, 0)


def test_an_item_of_another_project_cannot_be_linked(project, pm, outsider_pm):
    other = build_counselling_project(pm=outsider_pm)
    draft = RubricVersion.objects.create(rubric=other.rubric, number=2)
    source = RubricItem.objects.filter(version__rubric=other.rubric).first()
    RubricItem.objects.create(version=draft, question_ref="only-there", position=1, item_key="only-there:1",
                              dimension=source.dimension, score=1, content="只在另一个项目")

    with pytest.raises(DomainError) as refused:
        case_create(project=project, by=pm, now=timezone.now(), title="t", problem="p", disagreement="",
                    discussion="", reading="r", item_keys=["only-there:1"])

    assert refused.value.code == ErrorCode.LIBRARY_ITEM_UNKNOWN


def test_an_update_replaces_text_and_links_but_keeps_status_and_readers(project, pm, expert, seeded):
    case = seeded["early_advice"]
    case_read_record(case=case, user=expert, now=timezone.now())

    case_update(case=case, by=pm, now=timezone.now(), title="新标题", problem="p", disagreement="", discussion="",
                reading="r", item_keys=["work-stress-01:8"])

    case.refresh_from_db()
    assert (case.title, case.is_published, case.read_count) == ("新标题", True, 1)
    assert list(case.items.values_list("item_key", flat=True)) == ["work-stress-01:8"]


# --- Reads -----------------------------------------------------------------------------

def test_a_reader_counts_once_however_often_they_open_the_case(client, project, expert, seeded):
    case = seeded["boundary"]
    client.force_login(expert)
    url = reverse("case_detail", args=[project.pk, case.pk])

    for _ in range(3):
        assert client.get(url).status_code == 200
    client.force_login(ExpertFactory())  # not a member: no read, a 404
    assert client.get(url).status_code == 404

    case.refresh_from_db()
    assert case.read_count == 1 and CaseRead.objects.filter(case=case).count() == 1


def test_opening_a_draft_counts_no_read(client, project, pm, expert):
    case = case_create(project=project, by=pm, now=timezone.now(), title="t", problem="p", disagreement="",
                       discussion="", reading="r")
    client.force_login(pm)

    client.get(reverse("case_detail", args=[project.pk, case.pk]))

    case.refresh_from_db()
    assert case.read_count == 0


@pytest.mark.postgres
@postgres_only  # real threads and transactions; SQLite's in-memory test database is one connection
@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_first_reads_by_one_reader_count_once(project, pm, expert):
    from concurrent.futures import ThreadPoolExecutor

    case = seed_cases(project, pm, only=("boundary",))["boundary"]

    def read(_):
        try:
            return case_read_record(case=Case.objects.get(pk=case.pk), user=expert, now=timezone.now())
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(read, range(4)))

    case.refresh_from_db()
    assert results.count(True) == 1 and case.read_count == 1


# --- Beside the rubric item ------------------------------------------------------------

def test_cases_beside_items_of_one_task_rank_as_an_expert_expects(project, pm, expert, seeded):
    case_read_record(case=seeded["early_advice_paraphrase"], user=expert, now=timezone.now())
    question = Question.objects.get(project=project, external_id="work-stress-01")
    items = list(RubricItem.objects.filter(question_ref="work-stress-01").select_related("dimension"))

    beside = cases_for_items(project=project, question=question, items=items)

    advice = beside["work-stress-01:7"]
    assert [rc.case.title for rc in advice] == [
        CASES["early_advice"]["title"],  # links this very item
        CASES["early_advice_paraphrase"]["title"], CASES["boundary_near"]["title"],  # same dimension, most read first
    ]
    assert [rc.reason for rc in advice] == ["item", "dimension", "dimension"]
    # The case of item 1 (another dimension) stays beside item 1; item 6 has no case of its own or its dimension.
    assert [rc.case.title for rc in beside["work-stress-01:1"]] == [CASES["empathy_title"]["title"]]
    assert "work-stress-01:6" not in beside
    assert CASES["boundary"]["title"] not in [rc.case.title for rc in beside["work-stress-01:7"]]


def test_an_unpublished_case_is_never_shown_beside_an_item(project, pm, seeded):
    case_create(project=project, by=pm, now=timezone.now(), title="草稿案例", problem="p", disagreement="",
                discussion="", reading="r", item_keys=["work-stress-01:7"])
    question = Question.objects.get(project=project, external_id="work-stress-01")
    items = list(RubricItem.objects.filter(question_ref="work-stress-01"))

    beside = cases_for_items(project=project, question=question, items=items)

    assert "草稿案例" not in [rc.case.title for rows in beside.values() for rc in rows]


def _annotate_queries(client, assignment) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("annotate", args=[assignment.pk]))
    assert response.status_code == 200
    return len(queries)


def test_the_annotation_page_shows_cases_beside_items_in_a_fixed_number_of_queries(client, pm, expert):
    project = build_counselling_project(pm=pm, tasks=1)  # the work-stress task, nine items
    project_add_member(project=project, user=expert)
    assignment = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(expert)
    without = _annotate_queries(client, assignment)
    seed_cases(project, pm)
    for n in range(12):  # many cases, on many items: still the same queries
        case_create(project=project, by=pm, now=timezone.now(), title=f"案例{n}", problem="p", disagreement="",
                    discussion="", reading="r", item_keys=[f"work-stress-01:{1 + n % 9}"], publish=True)

    with_cases = _annotate_queries(client, assignment)
    page = client.get(reverse("annotate", args=[assignment.pk])).content.decode()

    # The cases, their item links and their dimensions: three queries, whatever the counts.
    assert with_cases - without <= 3
    assert page.count('class="item-cases"') == 9
    assert CASES["early_advice"]["title"] in page
    assert reverse("case_detail", args=[project.pk, Case.objects.get(title=CASES["early_advice"]["title"]).pk]) \
        in page


def test_the_annotation_page_keeps_its_shortcut_help_and_links_the_faq(client, project, expert, seeded):
    assignment = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(expert)

    page = client.get(reverse("annotate", args=[assignment.pk])).content.decode()
    fragment = client.get(reverse("annotate", args=[assignment.pk]), **HTMX).content.decode()

    for key in ("h", "m", "n", "w", "s", "g", "?"):
        assert f'<kbd>{key}</kbd>' in page.lower()
    assert reverse("faq", args=[project.pk]) in page and reverse("faq_ask", args=[project.pk]) in page
    assert 'class="item-cases"' in fragment


# --- Before calibration ------------------------------------------------------------------

def test_the_calibration_page_shows_the_most_read_cases_to_a_new_expert(client, project, pm, expert, seeded):
    readers = [ExpertFactory() for _ in range(3)]
    for reader in readers:
        project_add_member(project=project, user=reader)
        case_read_record(case=seeded["boundary"], user=reader, now=timezone.now())
    case_read_record(case=seeded["empathy_title"], user=readers[0], now=timezone.now())
    newcomer = ExpertFactory()
    project_add_member(project=project, user=newcomer)
    client.force_login(newcomer)

    page = client.get(reverse("calibration", args=[project.pk])).content.decode()

    assert 'id="cases-first"' in page
    first, second = page.index(CASES["boundary"]["title"]), page.index(CASES["empathy_title"]["title"])
    assert first < second


# --- Search ------------------------------------------------------------------------------

def test_the_query_is_split_into_phrases_and_chinese_bigrams():
    parsed = search_query_parse("  建议给得太早，   共情 ")

    assert parsed.phrases == ("建议给得太早，", "共情")
    assert parsed.bigrams == (("建议", "议给", "给得", "得太", "太早"), ())
    assert not search_query_parse("   ")


def test_search_matches_chinese_phrases_inside_sentences_on_every_vendor(project, expert, seeded):
    assert _search(project, expert, "边界感")[0] == CASES["boundary"]["title"]
    assert CASES["empathy_title"]["title"] in _search(project, expert, "共情")
    assert _search(project, expert, "建议给得太早")[0] == CASES["early_advice"]["title"]
    assert _search(project, expert, "量子力学") == []
    assert _search(project, expert, "没有这个词语") == []  # shares one pair (没有) with a text: not enough


@postgres_only
def test_search_orders_results_the_way_a_reader_expects_on_postgresql(project, expert, seeded):
    early = _search(project, expert, "建议给得太早")
    boundary = _search(project, expert, "边界感")
    empathy = _search(project, expert, "共情")
    advice = _search(project, expert, "建议")

    # The exact phrase first, then the paraphrase (建议给得过早: most of its pairs), then texts that only share 建议.
    assert early[:2] == [CASES["early_advice"]["title"], CASES["early_advice_paraphrase"]["title"]]
    assert CASES["advice_generic"]["title"] not in early  # it only says 建议: one pair of five
    # 边界感 in the title and the text beats 边界 alone.
    assert boundary[0] == CASES["boundary"]["title"]
    assert boundary.index(CASES["boundary_near"]["title"]) > 0
    # 共情 in the title first.
    assert empathy[0] == CASES["empathy_title"]["title"]
    assert set(empathy[1:]) >= {CASES["empathy_body"]["title"], CASES["early_advice_paraphrase"]["title"]}
    # The short query finds every text with 建议, those with it in the title first.
    assert set(advice[:2]) == {CASES["early_advice"]["title"], CASES["advice_generic"]["title"]}
    assert CASES["early_advice_paraphrase"]["title"] in advice[2:]


@postgres_only
def test_the_trigram_indexes_exist_and_serve_a_chinese_substring_search(project, expert, seeded):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s", ["annotation_case_%_trgm"])
        names = {row[0] for row in cursor.fetchall()}
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN SELECT id FROM annotation_case WHERE UPPER(title::text) LIKE UPPER(%s)",
                       ["%边界感%"])
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert names == {f"annotation_case_{c}_trgm" for c in ("title", "problem", "disagreement", "discussion",
                                                           "reading")}
    assert "annotation_case_title_trgm" in plan


def test_the_library_page_searches_and_its_fragment_swaps_only_the_results(client, project, expert, seeded):
    client.force_login(expert)
    url = reverse("cases", args=[project.pk])

    page = client.get(url, {"q": "边界感"}).content.decode()
    fragment = client.get(url, {"q": "边界感"}, **HTMX).content.decode()

    assert CASES["boundary"]["title"] in page and "<html" in page
    assert fragment.lstrip().startswith('<section id="library-results"') and CASES["boundary"]["title"] in fragment


def test_experts_never_see_drafts_and_pms_filter_by_status(client, project, pm, expert, seeded):
    draft = case_create(project=project, by=pm, now=timezone.now(), title="草稿：尚未发布", problem="p",
                        disagreement="", discussion="", reading="r")
    client.force_login(expert)
    expert_list = client.get(reverse("cases", args=[project.pk])).content.decode()
    expert_detail = client.get(reverse("case_detail", args=[project.pk, draft.pk]))
    client.force_login(pm)
    drafts = client.get(reverse("cases", args=[project.pk]), {"status": "draft"}).content.decode()

    assert "草稿：尚未发布" not in expert_list and expert_detail.status_code == 404
    assert "草稿：尚未发布" in drafts and CASES["boundary"]["title"] not in drafts


# --- The PM's pages ------------------------------------------------------------------------

def test_the_new_case_form_is_prefilled_from_get_parameters(client, project, pm):
    client.force_login(pm)

    page = client.get(reverse("case_new", args=[project.pk]), {
        "title": "来自会商的案例", "problem": "问题描述", "item_keys": ["work-stress-01:7", "work-stress-01:8"],
        "scenes": "职场压力", "dimensions": "verbal-expression", "outcome": "hit"}).content.decode()

    assert 'value="来自会商的案例"' in page and "问题描述</textarea>" in page
    assert "work-stress-01:7\nwork-stress-01:8</textarea>" in page
    assert 'value="verbal-expression" checked' in page and '<option value="hit" selected>' in page


def test_a_pm_creates_edits_unpublishes_and_publishes_a_case_through_the_pages(client, project, pm, expert):
    client.force_login(pm)
    response = client.post(reverse("case_new", args=[project.pk]), {
        "title": "边界感案例", "problem": "问题", "reading": "解读", "item_keys": "work-stress-01:7",
        "dimensions": ["autonomy"], "publish": "1"})
    case = Case.objects.get()
    assert response.status_code == 302 and case.is_published
    assert [d.code for d in case.dimensions.all()] == ["autonomy"]

    client.post(reverse("case_edit", args=[project.pk, case.pk]), {
        "title": "边界感案例（修订）", "problem": "问题", "reading": "解读", "item_keys": ""})
    client.post(reverse("case_unpublish", args=[project.pk, case.pk]))
    case.refresh_from_db()
    assert (case.title, case.is_published, case.items.count()) == ("边界感案例（修订）", False, 0)

    client.post(reverse("case_publish", args=[project.pk, case.pk]))
    case.refresh_from_db()
    assert case.is_published and case.published_by == pm


def test_a_refused_case_form_keeps_what_was_typed_and_says_what_is_wrong(client, project, pm):
    client.force_login(pm)

    response = client.post(reverse("case_new", args=[project.pk]), {
        "title": "有标题", "problem": "", "reading": "", "item_keys": "work-stress-01:7", "scenes": "职场压力"},
        **HTMX)

    page = response.content.decode()
    assert response.status_code == 422 and Case.objects.count() == 0
    assert 'value="有标题"' in page and "work-stress-01:7</textarea>" in page
    assert page.count('aria-invalid="true"') == 2 and 'id="form-error"' in page


def test_the_case_text_is_escaped(client, project, pm, expert):
    case = case_create(project=project, by=pm, now=timezone.now(), title="<script>alert(1)</script>",
                       problem="<img src=x onerror=alert(1)>", disagreement="", discussion="", reading="<b>r</b>",
                       item_keys=["work-stress-01:7"], publish=True)
    assignment = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(expert)

    pages = [client.get(reverse("case_detail", args=[project.pk, case.pk])).content.decode(),
             client.get(reverse("cases", args=[project.pk])).content.decode(),
             client.get(reverse("annotate", args=[assignment.pk])).content.decode()]

    for page in pages[:2]:
        assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in pages[0] and "<b>r</b>" not in pages[1]


# --- Permissions ---------------------------------------------------------------------------

def _case_urls(project, case) -> list[tuple[str, str]]:
    return [("get", reverse("cases", args=[project.pk])), ("get", reverse("case_new", args=[project.pk])),
            ("post", reverse("case_new", args=[project.pk])),
            ("get", reverse("case_detail", args=[project.pk, case.pk])),
            ("get", reverse("case_edit", args=[project.pk, case.pk])),
            ("post", reverse("case_edit", args=[project.pk, case.pk])),
            ("post", reverse("case_publish", args=[project.pk, case.pk])),
            ("post", reverse("case_unpublish", args=[project.pk, case.pk])),
            ("get", reverse("api-cases", args=[project.pk])),
            ("get", reverse("api-case", args=[project.pk, case.pk]))]


@pytest.mark.parametrize("who", ["other_pm", "other_expert", "expert_of_no_project"])
def test_another_projects_users_get_404_on_every_case_url(client, project, seeded, outsider_pm, who):
    other = build_counselling_project(pm=outsider_pm)
    user = {"other_pm": outsider_pm, "expert_of_no_project": ExpertFactory()}.get(who)
    if user is None:
        user = ExpertFactory()
        project_add_member(project=other, user=user)
    client.force_login(user)

    codes = {url: getattr(client, method)(url, {"title": "x", "problem": "x", "reading": "x"}).status_code
             for method, url in _case_urls(project, seeded["boundary"])}

    assert set(codes.values()) == {404}, codes
    assert Case.objects.filter(project=project).count() == len(CASES)


def test_a_case_of_another_project_is_404_under_this_projects_url(client, project, pm, outsider_pm):
    other = build_counselling_project(pm=outsider_pm)
    foreign = case_create(project=other, by=outsider_pm, now=timezone.now(), title="t", problem="p",
                          disagreement="", discussion="", reading="r", publish=True)
    client.force_login(pm)

    assert client.get(reverse("case_detail", args=[project.pk, foreign.pk])).status_code == 404
    assert client.post(reverse("case_unpublish", args=[project.pk, foreign.pk])).status_code == 404


def test_experts_read_cases_but_only_pms_write_them(client, project, expert, seeded):
    case = seeded["boundary"]
    client.force_login(expert)

    reads = [client.get(reverse("cases", args=[project.pk])).status_code,
             client.get(reverse("case_detail", args=[project.pk, case.pk])).status_code]
    writes = [client.get(reverse("case_new", args=[project.pk])).status_code,
              client.post(reverse("case_new", args=[project.pk]), {"title": "x", "problem": "x", "reading": "x"})
              .status_code,
              client.post(reverse("case_unpublish", args=[project.pk, case.pk])).status_code]

    assert reads == [200, 200] and writes == [404, 404, 404]
    assert Case.objects.count() == len(CASES) and Case.objects.get(pk=case.pk).is_published


def test_an_admin_reads_and_writes_any_projects_cases(client, project, admin_user, seeded):
    client.force_login(admin_user)

    assert client.get(reverse("case_detail", args=[project.pk, seeded["boundary"].pk])).status_code == 200
    assert client.get(reverse("case_new", args=[project.pk])).status_code == 200


def test_the_pm_tabs_and_the_expert_home_link_the_library(client, project, pm, expert):
    client.force_login(pm)
    # The "Rubric & guidance" group opens on the rubric draft, whose second row names the library and the FAQ.
    pm_page = client.get(reverse("rubric_draft", args=[project.pk])).content.decode()
    client.force_login(expert)
    home = client.get(reverse("home")).content.decode()

    for page in (pm_page, home):
        assert reverse("cases", args=[project.pk]) in page and reverse("faq", args=[project.pk]) in page


# --- The API -------------------------------------------------------------------------------

def test_the_api_lists_searches_and_details_cases_and_counts_the_read(api, project, expert, seeded):
    api.force_authenticate(expert)

    listed = api.get(reverse("api-cases", args=[project.pk]), {"q": "边界感"}).json()
    detail = api.get(reverse("api-case", args=[project.pk, seeded["boundary"].pk])).json()

    assert listed[0]["title"] == CASES["boundary"]["title"] and listed[0]["dimensions"] == ["autonomy"]
    assert detail["reading"] == CASES["boundary"]["reading"] and detail["read_count"] == 1
    assert set(detail) >= {"problem", "disagreement", "discussion", "item_keys", "scenes", "outcome", "question_id"}


def test_among_cases_of_the_items_dimension_those_of_the_questions_scene_come_first(project, pm, expert):
    other_scene = case_create(project=project, by=pm, now=timezone.now(), title="家庭场景的温暖", problem="p",
                              disagreement="", discussion="", reading="r", dimension_codes=["warmth"],
                              scenes=["家庭关系"], publish=True)
    same_scene = case_create(project=project, by=pm, now=timezone.now(), title="职场场景的温暖", problem="p",
                             disagreement="", discussion="", reading="r", dimension_codes=["warmth"],
                             scenes=["职场压力"], publish=True)
    case_read_record(case=other_scene, user=expert, now=timezone.now())  # more read, other scene
    question = Question.objects.get(project=project, external_id="work-stress-01")
    items = list(RubricItem.objects.filter(question_ref="work-stress-01"))

    warmth = cases_for_items(project=project, question=question, items=items)["work-stress-01:4"]

    assert [(rc.case, rc.same_scene) for rc in warmth] == [(same_scene, True), (other_scene, False)]


def test_an_admin_lists_cases_and_faq_entries(client, admin_user, project, seeded):
    client.force_login(admin_user)

    assert client.get("/admin/annotation/case/").status_code == 200
    assert client.get(f"/admin/annotation/case/{seeded['boundary'].pk}/change/").status_code == 200
    assert client.get("/admin/annotation/faqentry/").status_code == 200


def test_the_demo_project_has_cases_beside_its_items_and_answered_questions():
    from annotation.demo import demo_load
    from annotation.models import FaqEntry

    project = demo_load(now=timezone.now()).project

    cases = Case.objects.filter(project=project, status="published")
    assert cases.count() == 2 and CaseItem.objects.filter(case__in=cases, item_key="demo-01:7").exists()
    assert FaqEntry.objects.filter(project=project, answered_at__isnull=False).count() == 2


def test_a_pm_or_admin_reading_a_case_is_not_counted_as_a_reader(client, project, pm, admin_user, seeded):
    case = seeded["boundary"]
    for user in (pm, admin_user):
        client.force_login(user)
        client.get(reverse("case_detail", args=[project.pk, case.pk]))

    case.refresh_from_db()
    assert case.read_count == 0


def test_the_library_filters_by_dimension_and_by_scene(project, expert, seeded):
    access = library_access(expert, project.pk)

    by_dimension = _titles(case_list(access, dimension="autonomy"))
    by_scene = _titles(case_list(access, scene="家庭关系"))
    both = _titles(case_list(access, query="建议", dimension="proactivity"))

    assert by_dimension == [CASES["boundary"]["title"]]
    assert by_scene == [CASES["advice_generic"]["title"]]
    assert both == [CASES["advice_generic"]["title"]]


def test_a_case_about_the_question_as_a_whole_shows_beside_each_of_its_items_after_their_own(project, pm, seeded):
    general = case_create(project=project, by=pm, now=timezone.now(), title="这道题的整体读法", problem="p",
                          disagreement="", discussion="", reading="r", question="work-stress-01", publish=True)
    question = Question.objects.get(project=project, external_id="work-stress-01")
    items = list(RubricItem.objects.filter(question_ref="work-stress-01"))

    beside = cases_for_items(project=project, question=question, items=items)

    assert all(general in [rc.case for rc in beside[i.item_key]] for i in items)
    assert [(rc.case.title, rc.reason) for rc in beside["work-stress-01:7"]][:2] == [
        (CASES["early_advice"]["title"], "item"), ("这道题的整体读法", "question")]
