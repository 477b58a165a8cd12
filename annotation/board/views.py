"""The PM's board of a project's tasks, and one task's history. PM of the project or admin only.

The board answers htmx (the filter form) with its `results` fragment and any other
request with the whole page; anyone but the project's PM gets the 404 of a page that
does not exist, for the board and for every task history.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from annotation.blind_test.services import blind_test_open_judge_only
from annotation.board.selectors import (
    STATES,
    BoardFilters,
    board_choices,
    board_page,
    search_unindexed_count,
    task_history,
)
from annotation.models import Assignment, ItemConsensus
from annotation.selectors import project_get_for_user
from core.pages import render_page
from experts.requests import SignedInRequest

PAGE = "annotation/board/page.html"
HISTORY = "annotation/board/history.html"



def state_names() -> dict[str, str]:
    return {"open": _("Open"), "in_progress": _("In progress"), "tied": _("Tied or in consultation"),
            "complete": _("Complete"), "golden": _("Golden"), "skipped": _("Skipped")}


@login_required
@require_GET
def board(request: SignedInRequest, project_id: int) -> HttpResponse:
    """Tasks by state with counts, the filters and search, 50 a page after `?after=<task id>`."""
    project = project_get_for_user(request.user, project_id, manage=True)
    filters = BoardFilters.from_query(request.GET)
    page = board_page(project, filters=filters, after=request.GET.get("after"))
    names = state_names()
    query = request.GET.copy()
    query.pop("after", None)
    without_state = query.copy()
    without_state.pop("state", None)
    context = {
        "project": project,
        "filters": filters.values,
        "choices": board_choices(project),
        "page": page,
        "states": [{"key": key, "name": names[key], "count": page.counts[key]} for key in STATES],
        "state_names": names,
        "all_count": sum(page.counts.values()),
        "query": query.urlencode(),
        "query_without_state": without_state.urlencode(),
        "first_page": "after" in request.GET,
        # Open tasks outside the blind-test sample wait for no expert (annotation.blind_test).
        "judge_only": blind_test_open_judge_only(project=project),
        # An import's questions reach the search a little after it (its follow-up task): say so.
        "search_unindexed": search_unindexed_count(project) if filters.values.get("q") else 0,
    }
    return render_page(request, PAGE, "results", context)


@login_required
@require_GET
def task_history_view(request: SignedInRequest, project_id: int, task_id: int) -> HttpResponse:
    """Who held the task and when, skips, each submission's labels, the consensus and consultations."""
    project = project_get_for_user(request.user, project_id, manage=True)
    history = task_history(project, task_id)
    rows = [{
        "item": item,
        "consensus": history.consensus.get(item.pk),
        "labels": [history.labels.get(a.pk, {}).get(item.pk) for a in history.submissions],
    } for item in history.items]
    context = {
        "project": project, "history": history, "task": history.task, "item_rows": rows,
        "state_name": state_names()[history.state],
        "statuses": dict(Assignment.Status.choices), "zones": dict(ItemConsensus.Zone.choices),
        "provenances": dict(ItemConsensus.Provenance.choices),
    }
    return render_page(request, HISTORY, "history", context)
