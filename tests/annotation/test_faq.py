"""The FAQ: experts ask from the annotation page, senior experts and PMs answer, the asker hears of it;
a question close to an answered one meets the answer first; search works in Chinese; outsiders get 404."""
import pytest
from django.urls import reverse
from django.utils import timezone, translation

from annotation.assignment.services import assignment_claim_next
from annotation.library.selectors import faq_list, faq_similar, library_access
from annotation.library.services import faq_answer, faq_ask
from annotation.models import FaqEntry
from annotation.models.library import FAQ_QUESTION_MAX
from annotation.services import project_add_member
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import ExpertProfile, Notification, Tier
from experts.notifications import notification_text
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory
from tests.support.library import FAQ, seed_faq

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
def senior(project):
    senior = ExpertFactory()
    ExpertProfile.objects.filter(user=senior).update(tier=Tier.GOLD)
    project_add_member(project=project, user=senior)
    return senior


@pytest.fixture
def seeded(project, expert, pm):
    return seed_faq(project, expert, pm)


def _ask(project, user, text="怎样判断回复是否缺乏边界感？", **extra) -> FaqEntry:
    return faq_ask(project=project, by=user, now=timezone.now(), question=text, **extra)


# --- Asking and answering ----------------------------------------------------------------

def test_a_question_asked_from_an_item_is_tagged_by_its_dimension_and_scenes(project, expert):
    entry = _ask(project, expert, source_question="work-stress-01", item_key="work-stress-01:7")

    assert [d.code for d in entry.dimensions.all()] == ["verbal-expression"]
    assert entry.scenes == ["职场压力", "自我怀疑"] and not entry.is_answered


@pytest.mark.parametrize("text, code", [("   ", ErrorCode.LIBRARY_FIELD_REQUIRED),
                                        ("问" * (FAQ_QUESTION_MAX + 1), ErrorCode.LIBRARY_FIELD_TOO_LONG)])
def test_an_empty_or_too_long_question_is_refused_and_nothing_is_written(project, expert, text, code):
    with pytest.raises(DomainError) as refused:
        _ask(project, expert, text)

    assert refused.value.code == code and FaqEntry.objects.count() == 0


def test_a_senior_answer_notifies_the_asker_once_in_their_language(project, expert, senior):
    entry = _ask(project, expert)

    faq_answer(entry=entry, by=senior, now=timezone.now(), answer="看是否替用户做决定。",
               dimension_codes=["autonomy"], scenes=["职场压力"])
    faq_answer(entry=entry, by=senior, now=timezone.now(), answer="看是否替用户做重大决定。")

    entry.refresh_from_db()
    note = Notification.objects.get(user=expert)
    assert (entry.answer, entry.answered_by) == ("看是否替用户做重大决定。", senior)
    assert [d.code for d in entry.dimensions.all()] == ["autonomy"] and entry.scenes == ["职场压力"]
    assert note.kind == "faq_answered" and note.link == reverse("faq_detail", args=[project.pk, entry.pk])
    with translation.override("zh-hans"):
        assert "边界感" in notification_text(note) and "回答" in notification_text(note)


def test_an_empty_answer_is_refused_and_the_question_stays_open(project, expert, pm):
    entry = _ask(project, expert)

    with pytest.raises(DomainError):
        faq_answer(entry=entry, by=pm, now=timezone.now(), answer="  ")

    entry.refresh_from_db()
    assert not entry.is_answered and not Notification.objects.filter(kind="faq_answered").exists()


@pytest.mark.parametrize("tier, may", [(Tier.BRONZE, False), (Tier.SILVER, False), (Tier.GOLD, True),
                                       (Tier.PLATINUM, True)])
def test_only_gold_and_platinum_experts_answer_on_the_page(client, project, expert, tier, may):
    entry = _ask(project, ExpertFactory())
    ExpertProfile.objects.filter(user=expert).update(tier=tier)
    client.force_login(expert)

    response = client.post(reverse("faq_answer", args=[project.pk, entry.pk]), {"answer": "答复"})

    entry.refresh_from_db()
    assert entry.is_answered is may
    assert response.status_code == (302 if may else 404)  # an open question of someone else: not theirs to see


def test_a_silver_expert_cannot_answer_an_answered_question_either(client, project, expert, seeded):
    client.force_login(expert)
    entry = seeded["boundary"]

    response = client.post(reverse("faq_answer", args=[project.pk, entry.pk]), {"answer": "改掉"})

    entry.refresh_from_db()
    assert response.status_code == 403 and entry.answer == FAQ["boundary"][1]


def test_the_open_list_shows_every_open_question_to_answerers_and_only_their_own_to_others(project, expert, senior,
                                                                                        pm):
    mine = _ask(project, expert, "我的问题？")
    theirs = _ask(project, ExpertFactory(), "别人的问题？")

    for_answerer = list(faq_list(library_access(senior, project.pk), unanswered=True))
    for_pm = list(faq_list(library_access(pm, project.pk), unanswered=True))
    for_asker = list(faq_list(library_access(expert, project.pk), unanswered=True))

    assert for_answerer == for_pm == [mine, theirs]
    assert for_asker == [mine]


# --- Similar questions -------------------------------------------------------------------

def test_typing_a_question_close_to_an_answered_one_shows_its_answer(client, project, expert, seeded):
    client.force_login(expert)

    url = reverse("faq_similar", args=[project.pk])
    fragment = client.get(url, {"question": "没请求建议就给建议，算建议给得太早吗"}, **HTMX).content.decode()
    unrelated = client.get(reverse("faq_similar", args=[project.pk]), {"question": "今天天气怎么样"},
                           **HTMX).content.decode()

    assert FAQ["early_advice"][1] in fragment
    assert 'id="faq-similar"' in unrelated and "faq-similar-list" not in unrelated


def test_posting_a_question_close_to_an_answered_one_asks_first_then_posts_anyway(client, project, expert, seeded):
    client.force_login(expert)
    url = reverse("faq_ask", args=[project.pk])
    text = "用户没有请求建议时给出建议，算建议给得太早吗？"

    first = client.post(url, {"question": text})
    anyway = client.post(url, {"question": text, "confirmed": "1"})

    page = first.content.decode()
    assert first.status_code == 200 and 'id="faq-confirm"' in page and FAQ["early_advice"][1] in page
    assert text in page  # what was typed is kept
    assert anyway.status_code == 302 and FaqEntry.objects.filter(question=text).count() == 1


def test_a_new_kind_of_question_posts_at_once(client, project, expert, seeded):
    client.force_login(expert)

    response = client.post(reverse("faq_ask", args=[project.pk]), {"question": "第一人称用“我们”算不算？",
                                                                     "item": "work-stress-01:6",
                                                                     "source": "work-stress-01"})

    entry = FaqEntry.objects.get(question="第一人称用“我们”算不算？")
    assert response.status_code == 302 and entry.item_key == "work-stress-01:6"
    assert [d.code for d in entry.dimensions.all()] == ["first-person"]


def test_an_empty_question_on_the_page_says_so_and_writes_nothing(client, project, expert):
    client.force_login(expert)

    response = client.post(reverse("faq_ask", args=[project.pk]), {"question": "  "}, **HTMX)

    assert response.status_code == 422 and 'id="form-error"' in response.content.decode()
    assert FaqEntry.objects.count() == 0


@postgres_only
def test_faq_search_orders_answers_as_a_reader_expects(project, expert, seeded):
    access = library_access(expert, project.pk)

    def questions(q):
        return [e.question for e in faq_list(access, query=q)]

    assert questions("边界感")[0] == FAQ["boundary"][0]
    assert questions("共情")[0] == FAQ["empathy"][0]
    assert questions("建议给得太早")[0] == FAQ["early_advice"][0]
    assert faq_similar(project, "回复很长的话会不会扣分")[0].question == FAQ["length"][0]


def test_the_faq_page_lists_answers_and_searches(client, project, expert, seeded):
    client.force_login(expert)
    url = reverse("faq", args=[project.pk])

    page = client.get(url).content.decode()
    found = client.get(url, {"q": "边界感"}, **HTMX).content.decode()

    assert all(q in page for q, _ in FAQ.values())
    assert FAQ["boundary"][0] in found and FAQ["empathy"][0] not in found


# --- Escaping and links ------------------------------------------------------------------

def test_a_question_with_a_script_shows_as_text(client, project, expert, pm):
    entry = _ask(project, expert, "<script>alert('x')</script> 这样算不算？")
    faq_answer(entry=entry, by=pm, now=timezone.now(), answer="<img src=x onerror=alert(1)>不算")
    client.force_login(expert)

    pages = [client.get(reverse("faq_detail", args=[project.pk, entry.pk])).content.decode(),
             client.get(reverse("faq", args=[project.pk])).content.decode()]

    for page in pages:
        assert "<script>alert('x')</script>" not in page and "&lt;script&gt;" in page
        assert "<img src=x" not in page


def test_the_annotation_page_and_the_guidelines_link_the_faq(client, project, expert):
    assignment = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(expert)

    annotate = client.get(reverse("annotate", args=[assignment.pk])).content.decode()
    guidelines = client.get(reverse("project_guidelines", args=[project.pk])).content.decode()

    ask = reverse("faq_ask", args=[project.pk])
    assert f'{ask}?source={assignment.task.response.question.external_id}' in annotate
    assert 'target="_blank"' in annotate.split('id="ask-link"')[1][:400]  # the draft stays in its own tab
    assert reverse("faq", args=[project.pk]) in guidelines


# --- Permissions -------------------------------------------------------------------------

def _faq_urls(project, entry) -> list[tuple[str, str]]:
    return [("get", reverse("faq", args=[project.pk])), ("get", reverse("faq_ask", args=[project.pk])),
            ("post", reverse("faq_ask", args=[project.pk])), ("get", reverse("faq_similar", args=[project.pk])),
            ("get", reverse("faq_detail", args=[project.pk, entry.pk])),
            ("post", reverse("faq_answer", args=[project.pk, entry.pk])),
            ("get", reverse("api-faq", args=[project.pk])),
            ("get", reverse("api-faq-entry", args=[project.pk, entry.pk]))]


@pytest.mark.parametrize("who", ["other_pm", "other_gold_expert", "expert_of_no_project"])
def test_another_projects_users_get_404_on_every_faq_url(client, project, seeded, who):
    other = build_counselling_project(pm=PMFactory())
    user = other.created_by if who == "other_pm" else ExpertFactory()
    if who == "other_gold_expert":
        ExpertProfile.objects.filter(user=user).update(tier=Tier.GOLD)
        project_add_member(project=other, user=user)
    client.force_login(user)

    codes = {url: getattr(client, method)(url, {"question": "问题", "answer": "答"}, **HTMX).status_code
             for method, url in _faq_urls(project, seeded["boundary"])}

    assert set(codes.values()) == {404}, codes
    assert FaqEntry.objects.count() == len(FAQ)
    assert FaqEntry.objects.get(pk=seeded["boundary"].pk).answer == FAQ["boundary"][1]


def test_someone_elses_open_question_is_404_for_an_expert_who_does_not_answer(client, project, expert):
    entry = _ask(project, ExpertFactory())
    client.force_login(expert)

    assert client.get(reverse("faq_detail", args=[project.pk, entry.pk])).status_code == 404
    assert client.get(reverse("api-faq-entry", args=[project.pk, entry.pk])).status_code == 404


def test_the_api_lists_searches_and_details_the_faq(api, project, expert, seeded):
    api.force_authenticate(expert)

    listed = api.get(reverse("api-faq", args=[project.pk]), {"q": "共情"}).json()
    detail = api.get(reverse("api-faq-entry", args=[project.pk, seeded["empathy"].pk])).json()

    assert listed[0]["question"] == FAQ["empathy"][0]
    assert detail["answer"] == FAQ["empathy"][1] and detail["answered_at"]


def test_the_projects_pms_hear_of_a_new_question_and_the_asker_does_not(project, expert, pm):
    other_pm = PMFactory()  # manages another project only
    build_counselling_project(pm=other_pm)

    entry = _ask(project, expert)

    notes = Notification.objects.filter(kind="faq_asked")
    assert [n.user for n in notes] == [pm]
    assert notes[0].link == reverse("faq_detail", args=[project.pk, entry.pk])
