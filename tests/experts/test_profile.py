"""The expert's own profile page: credentials, specialties, languages, weekly capacity; PMs see it."""
import pytest
from django.urls import reverse

from experts.models import ExpertProfile
from rubrics.models import Dimension
from tests.factories import PMFactory

pytestmark = pytest.mark.django_db
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
URL = "/me/profile/"


def test_the_profile_page_is_at_me_profile_and_linked_from_the_expert_menu(client, expert):
    client.force_login(expert)
    assert reverse("my_profile") == URL
    assert f'href="{URL}"' in client.get(reverse("home")).content.decode()


def test_an_expert_saves_credentials_specialties_languages_and_capacity(client, expert):
    dims = list(Dimension.objects.filter(is_gate=False)[:2])
    client.force_login(expert)

    response = client.post(URL, {"credentials": " 心理学硕士,  国家二级咨询师 ", "specialties": [d.pk for d in dims],
                                 "languages": ["en", "zh"], "weekly_capacity": "40"})

    assert response.status_code == 302
    profile = ExpertProfile.objects.get(user=expert)
    assert profile.credentials == "心理学硕士, 国家二级咨询师"
    assert set(profile.specialties.all()) == set(dims)
    assert (profile.languages, profile.weekly_capacity) == ("zh,en", 40)
    page = client.get(URL).content.decode()
    assert "心理学硕士, 国家二级咨询师" in page and 'value="40"' in page


@pytest.mark.parametrize("change, message", [
    ({"weekly_capacity": "0"}, "from 1 to 1000"),
    ({"weekly_capacity": "5000"}, "from 1 to 1000"),
    ({"weekly_capacity": "many"}, "from 1 to 1000"),
    ({"languages": ["klingon"]}, "Unknown language: klingon."),
    ({"specialties": ["999999"]}, "Unknown specialty"),
    ({"credentials": "x" * 201}, "too long"),
])
def test_bad_profile_input_is_refused_with_a_message_keeps_the_input_and_changes_nothing(client, expert, change,
                                                                                        message):
    client.force_login(expert)
    values = {"credentials": "MSc", "languages": ["zh"], "weekly_capacity": "30", **change}

    response = client.post(URL, values, **EN)

    assert response.status_code == 422
    assert message in response.content.decode()
    profile = ExpertProfile.objects.get(user=expert)
    assert (profile.credentials, profile.weekly_capacity) == ("", 200)


def test_a_gate_dimension_is_not_a_specialty(client, expert):
    gate = Dimension.objects.filter(is_gate=True).first()
    client.force_login(expert)
    response = client.post(URL, {"specialties": [gate.pk], "weekly_capacity": "10"})
    assert response.status_code == 422
    assert not ExpertProfile.objects.get(user=expert).specialties.exists()


def test_a_pm_has_no_expert_profile_page(client):
    client.force_login(PMFactory())
    assert client.get(URL).status_code == 404


def test_a_new_expert_without_projects_is_told_how_to_join_and_pointed_to_the_profile(client, expert):
    client.force_login(expert)
    page = client.get(reverse("home"), **EN).content.decode()
    assert "invitation link" in page
    assert "will add you" not in page
    assert f'href="{URL}"' in page
