"""The reveal page: after submitting, the expert compares their labels with the judge's and may revise once.

Only the expert's own submitted work assignment, in a project that reveals the judge (404 for
anything else, through `reveal_get_for_expert`). A refused revision comes back as the same page
with every tick and reason kept (422); a closed round is read-only.
"""
from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods

from annotation.reveal.selectors import Reveal, reveal_get_for_expert
from annotation.reveal.services import reveal_revise
from core.errors import DomainError, NotFound, error_message, field_error_message
from core.pages import render_page
from experts.models import User

PAGE = "annotation/reveal/page.html"
UNPROCESSABLE = 422


def _posted_changes(request: HttpRequest) -> dict[str, str]:
    """{item key: reason} for every ticked `change-<key>` box; the reason is `reason-<key>`."""
    return {name.removeprefix("change-"): request.POST.get(f"reason-{name.removeprefix('change-')}", "")
            for name in request.POST if name.startswith("change-")}


def _context(reveal: Reveal, *, posted: dict[str, str] | None = None, error: DomainError | None = None,
             ) -> dict[str, Any]:
    field_errors = {str(e.get("field", "")).removeprefix("reasons."): field_error_message(e)
                    for e in (error.errors if error else [])}
    posted = posted or {}
    rows = [{"row": row, "key": row.item.item_key, "checked": row.item.item_key in posted,
             "reason": posted.get(row.item.item_key, ""), "error": field_errors.get(row.item.item_key, "")}
            for row in reveal.rows]
    return {"reveal": reveal, "project": reveal.project, "assignment": reveal.assignment,
            "question": reveal.task.response.question, "rows": rows,
            "revised": sum(1 for row in reveal.rows if row.revision is not None),
            "error": error_message(error) if error else ""}


@login_required
@require_http_methods(["GET", "POST"])
def reveal_page(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """GET: the items where the expert and the judge differ. POST: the one revision round."""
    if request.method == "GET":
        reveal = reveal_get_for_expert(expert=cast(User, request.user), assignment_id=assignment_id)
        return render_page(request, PAGE, "reveal", _context(reveal))
    changes = _posted_changes(request)
    try:
        result = reveal_revise(expert=cast(User, request.user), assignment_id=assignment_id, changes=changes,
                               now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        reveal = reveal_get_for_expert(expert=cast(User, request.user), assignment_id=assignment_id)
        if reveal.closed:
            raise  # already revised: the error page says so
        return render_page(request, PAGE, "reveal", _context(reveal, posted=changes, error=exc),
                           status=UNPROCESSABLE)
    if result.revised:
        messages.success(request, ngettext("%(n)d label revised. Your first labels are kept too.",
                                           "%(n)d labels revised. Your first labels are kept too.",
                                           result.revised) % {"n": result.revised})
    else:
        messages.success(request, _("Done: you kept all your labels."))
    return redirect("reveal", assignment_id)
