"""One range per project setting: the database, the services, the API and the settings form agree on it."""
import re

import pytest
from django.db import IntegrityError, transaction
from django.utils import translation
from rest_framework.authtoken.models import Token

from annotation.api.projects import ProjectCreateApi
from annotation.models import Project
from annotation.models.project import (
    CALIBRATION_SIZE,
    CALIBRATION_THRESHOLD_PCT,
    CONTROL_PAUSE_BELOW_PCT,
    CONTROL_RATE_PCT,
    CONTROL_WINDOW,
    LEASE_TIMEOUT_S,
    OVERLAP,
    QUALITY_SETTINGS,
    SettingRange,
)
from annotation.quality.project_settings import project_quality_update
from annotation.services import project_create
from core.errors import DomainError
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _outside(setting: SettingRange) -> list[int]:
    return [setting.low - 1] + ([setting.high + 1] if setting.high is not None else [])


def _edges(setting: SettingRange) -> list[int]:
    return [setting.low] + ([setting.high] if setting.high is not None else [])


@pytest.mark.parametrize("setting", QUALITY_SETTINGS, ids=lambda s: s.name)
def test_the_quality_service_accepts_each_range_edge_and_refuses_one_past_it(setting):
    project = make_project_with_tasks(n_questions=1)

    for value in _edges(setting):
        assert getattr(project_quality_update(project=project, values={setting.name: value}), setting.name) == value
    for value in _outside(setting):
        with pytest.raises(DomainError) as refused:
            project_quality_update(project=project, values={setting.name: value})
        assert [e["field"] for e in refused.value.errors] == [setting.name]


@pytest.mark.parametrize("setting", [OVERLAP, LEASE_TIMEOUT_S], ids=lambda s: s.name)
def test_project_create_accepts_each_range_edge_and_refuses_one_past_it(setting):
    for value in _edges(setting):
        assert getattr(project_create(name="p", created_by=None, **{setting.name: value}), setting.name) == value
    for value in _outside(setting):
        with pytest.raises(DomainError) as refused:
            project_create(name="p", created_by=None, **{setting.name: value})
        assert [e["field"] for e in refused.value.errors] == [setting.name]


def test_a_new_project_starts_at_every_settings_default():
    project = project_create(name="p", created_by=None)

    for setting in (OVERLAP, LEASE_TIMEOUT_S, *QUALITY_SETTINGS):
        assert getattr(project, setting.name) == setting.default, setting.name


# Each bound the database checks: a check constraint reading the same range, or for a
# lower bound of 0 the unsigned column's own check.
DATABASE_CHECKS = [
    (OVERLAP, OVERLAP.low - 1), (OVERLAP, OVERLAP.high + 1), (LEASE_TIMEOUT_S, LEASE_TIMEOUT_S.low - 1),
    (CALIBRATION_THRESHOLD_PCT, -1), (CALIBRATION_THRESHOLD_PCT, CALIBRATION_THRESHOLD_PCT.high + 1),
    (CALIBRATION_SIZE, CALIBRATION_SIZE.low - 1), (CALIBRATION_SIZE, CALIBRATION_SIZE.high + 1),
    (CONTROL_RATE_PCT, -1), (CONTROL_RATE_PCT, CONTROL_RATE_PCT.high + 1),
    (CONTROL_PAUSE_BELOW_PCT, -1), (CONTROL_PAUSE_BELOW_PCT, CONTROL_PAUSE_BELOW_PCT.high + 1),
    (CONTROL_WINDOW, CONTROL_WINDOW.low - 1),
]


@pytest.mark.parametrize(("setting", "value"), DATABASE_CHECKS, ids=lambda v: getattr(v, "name", str(v)))
def test_the_database_refuses_a_value_past_the_same_range(setting, value):
    project = make_project_with_tasks(n_questions=1)

    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(**{setting.name: value})


def test_the_api_serializer_bounds_are_the_models():
    fields = ProjectCreateApi.InputSerializer().fields

    assert (fields["overlap"].min_value, fields["overlap"].max_value, fields["overlap"].default) == (
        OVERLAP.low, OVERLAP.high, OVERLAP.default)
    assert (fields["lease_timeout_s"].min_value, fields["lease_timeout_s"].max_value) == (
        LEASE_TIMEOUT_S.low, LEASE_TIMEOUT_S.high)


def test_the_api_refuses_an_overlap_past_the_range_and_names_the_field(api):
    pm = PMFactory()
    token, _ = Token.objects.get_or_create(user=pm)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    refused = api.post("/api/v1/projects/", {"name": "p", "overlap": OVERLAP.high + 1}, format="json")
    created = api.post("/api/v1/projects/", {"name": "p", "overlap": OVERLAP.high}, format="json")

    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
    assert [(e["field"], e["code"]) for e in refused.json()["errors"]] == [("overlap", "max_value")]
    assert created.status_code == 201 and created.json()["overlap"] == OVERLAP.high


def test_the_settings_form_offers_the_same_ranges(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/quality/").content.decode()

    for setting in QUALITY_SETTINGS:
        tag = re.search(rf'<input type="number"[^>]*name="{setting.name}"[^>]*>', page).group(0)
        assert f'min="{setting.low}"' in tag, setting.name
        high = re.search(r'max="(\d+)"', tag)
        assert high is None or int(high.group(1)) == setting.high, setting.name


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("setting", [CALIBRATION_THRESHOLD_PCT, CALIBRATION_SIZE, CONTROL_RATE_PCT],
                         ids=lambda s: s.name)
def test_a_help_text_that_states_a_range_states_the_models(setting, language):
    with translation.override(language):
        help_text = str(Project._meta.get_field(setting.name).help_text)

    assert f"{setting.low}–{setting.high}" in help_text


def test_the_fill_order_is_a_setting_of_the_settings_page_and_the_api(client, api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)
    token, _ = Token.objects.get_or_create(user=pm)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    page = client.get(f"/projects/{project.pk}/settings/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    saved = client.post(f"/projects/{project.pk}/settings/", {"fill_order": "spread_evenly"})
    after_page = Project.objects.get(pk=project.pk).fill_order
    refused = client.post(f"/projects/{project.pk}/settings/", {"fill_order": "by_hand"})
    refused_api = api.patch(f"/api/v1/projects/{project.pk}/", {"fill_order": "by_hand"}, format="json")
    patched = api.patch(f"/api/v1/projects/{project.pk}/", {"fill_order": "finish_started"}, format="json")

    assert 'name="fill_order"' in page and "Finish started tasks first" in page
    assert saved.status_code in (200, 302) and after_page == "spread_evenly"
    assert refused.status_code == 422
    assert refused_api.status_code == 400
    assert patched.status_code == 200 and patched.json()["fill_order"] == "finish_started"
    assert Project.objects.get(pk=project.pk).fill_order == "finish_started"
