"""The page messages ("Quality settings saved.") are stored only by requests that use them: an API call builds
no message storage and sets no cookie, and a page's message still reaches the next page."""
import pytest
from django.contrib.messages.storage.fallback import FallbackStorage
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotation.services import project_add_member
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


BUILT: list[str] = []


class CountedStorage(FallbackStorage):
    """The deployed storage, which notes the path of each request it is built for."""

    def __init__(self, request, *args, **kwargs):
        BUILT.append(request.path)
        super().__init__(request, *args, **kwargs)


@pytest.fixture
def storages(settings):
    settings.MESSAGE_STORAGE = f"{__name__}.CountedStorage"
    BUILT.clear()
    yield BUILT
    BUILT.clear()


def test_an_api_call_builds_no_message_storage_and_sets_no_cookie(api, storages):
    project = make_project_with_tasks(n_questions=1, items_per_question=2)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=expert).key}")

    answer = api.post(reverse("api-next-task", args=[project.pk]))

    assert answer.status_code == 200
    assert storages == []
    assert "messages" not in answer.cookies


def test_a_saved_setting_says_so_on_the_next_page_and_only_once(client, storages):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=2, pm=pm)
    client.force_login(pm)
    client.cookies["django_language"] = "en"
    url = reverse("quality", args=[project.pk])

    saved = client.post(url, {"calibration_threshold_pct": "85"})
    shown = client.get(saved["Location"])
    again = client.get(url)

    assert saved.status_code == 302
    assert "Quality settings saved." in shown.content.decode()
    assert "Quality settings saved." not in again.content.decode()
    assert url in storages
