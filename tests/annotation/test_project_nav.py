"""The project tabs: seven groups on one row, the current group's pages on a second."""
import re

import pytest
from django.urls import reverse

from annotation.templatetags.project_nav import GROUPS
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _rows(html: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(href, aria-current or "", text) of the group row and of the pages row."""
    link = r'<a href="([^"]+)"(?: aria-current="(\w+)")?>([^<]+)</a>'
    groups = re.search(r'<nav class="subnav project-tabs"[^>]*>(.*?)</nav>', html, re.S)
    pages = re.search(r'<nav class="subnav-pages"[^>]*>(.*?)</nav>', html, re.S)
    assert groups is not None
    return re.findall(link, groups.group(1)), re.findall(link, pages.group(1)) if pages else []


@pytest.fixture
def pm_project(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=1, models=1, pm=pm)
    client.force_login(pm)
    return project


def test_the_groups_fit_one_row_and_every_page_is_one_click_from_its_group(client, pm_project):
    html = client.get(reverse("project_detail", args=[pm_project.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    groups, pages = _rows(html)
    assert [text for _, _, text in groups] == ["概览", "任务看板", "质量", "人员", "细则与指引", "成本", "设置"]
    assert groups[0][1] == "page" and all(not current for _, current, _ in groups[1:])
    assert pages == []  # the overview is a group of one page: no second row
    every_page = {reverse(tab.url_name, args=[pm_project.pk]) for group in GROUPS for tab in group.tabs}
    # The seventeen pages the tabs used to list, none lost, and the judge's convergence and blind test.
    assert len(every_page) == 19


def test_a_page_of_a_group_marks_the_group_and_lists_its_siblings(client, pm_project):
    html = client.get(reverse("webhooks", args=[pm_project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    groups, pages = _rows(html)
    settings_group = [g for g in groups if g[2] == "Settings"]
    assert settings_group == [(reverse("project_settings", args=[pm_project.pk]), "true", "Settings")]
    assert [(text, current) for _, current, text in pages] == [("General", ""), ("Webhooks", "page"),
                                                               ("Audit log", "")]
    assert 'aria-label="Pages of Settings"' in html


def test_a_page_inside_a_tab_keeps_its_tab_current(client, pm_project):
    """The rubric's version list is reached from the rubric tab."""
    html = client.get(reverse("rubric_versions", args=[pm_project.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    groups, pages = _rows(html)
    assert [g[2] for g in groups if g[1]] == ["细则与指引"]
    assert [(text, current) for _, current, text in pages] == [("评分细则", "page"), ("案例库", ""), ("常见问题", "")]


def test_the_board_is_a_top_tab(client, pm_project):
    html = client.get(reverse("board", args=[pm_project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    groups, pages = _rows(html)
    assert [(g[2], g[1]) for g in groups if g[1]] == [("Board", "page")] and pages == []
