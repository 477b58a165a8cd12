"""Judge drift: a finished run that labels the units an earlier run labelled differently tells the PM, once.

When a run finishes (a live run's walker, or an import), its labels are compared with
those of the newest earlier finished run of the project that shares at least
:data:`MIN_SHARED_UNITS` units (task x rubric item) with it. When they differ on more
than the project's drift threshold (default 10% of the shared units,
`ConvergenceSettings.drift_threshold_pct`), the project's PMs get a `judge_drift`
notification linking to the comparison of the two runs. The alert row is unique per run,
so a run notifies at most once however often it is checked (a later import into the
same run, a redelivered task).

Why 10% and 20 units: two runs of one configuration at temperature 0 differ on a few
percent of units (provider-side nondeterminism); a prompt or model change that moves
more than one label in ten is what a PM must look at before trusting the new numbers.
Fewer than 20 shared units say nothing either way.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.urls import reverse

from annotation.convergence.services import convergence_targets
from annotation.models import JudgeDriftAlert, JudgeLabel, JudgeRun
from annotation.selectors import project_managers
from experts.notifications import notification_send

logger = logging.getLogger(__name__)

MIN_SHARED_UNITS = 20
# Earlier runs looked at, newest first, for one sharing enough units.
EARLIER_RUNS_MAX = 5


def judge_runs_shared_labels(*, run: JudgeRun, earlier: JudgeRun) -> tuple[int, int]:
    """(units both runs labelled, units where their labels differ), in one query."""
    other = JudgeLabel.objects.filter(run=earlier, task=OuterRef("task"),
                                      rubric_item=OuterRef("rubric_item")).values("value")[:1]
    counts = (JudgeLabel.objects.filter(run=run).annotate(other=Subquery(other))
              .aggregate(shared=Count("pk", filter=Q(other__isnull=False)),
                         differing=Count("pk", filter=Q(other__isnull=False) & ~Q(other=F("value")))))
    return int(counts["shared"] or 0), int(counts["differing"] or 0)


def judge_drift_check(*, run_id: int, now: datetime) -> JudgeDriftAlert | None:
    """Compare finished run `run_id` with the newest earlier run sharing its units; notify the PMs on drift.

    Returns the alert written, or None (no such finished run, already alerted, no earlier
    run sharing enough units, or labels within the threshold).
    """
    run = JudgeRun.objects.select_related("project").filter(pk=run_id, status=JudgeRun.Status.DONE).first()
    if run is None or JudgeDriftAlert.objects.filter(run=run).exists():
        return None
    earlier_runs = (JudgeRun.objects.filter(project_id=run.project_id, status=JudgeRun.Status.DONE)
                    .filter(Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk))
                    .order_by("-created_at", "-pk")[:EARLIER_RUNS_MAX])
    for earlier in earlier_runs:
        shared, differing = judge_runs_shared_labels(run=run, earlier=earlier)
        if shared < MIN_SHARED_UNITS:
            continue
        threshold = convergence_targets(project=run.project).drift_pct
        if 100 * differing / shared <= threshold:
            return None
        return _alert(run=run, earlier=earlier, shared=shared, differing=differing, threshold=threshold, now=now)
    return None


def _alert(*, run: JudgeRun, earlier: JudgeRun, shared: int, differing: int, threshold: float,
           now: datetime) -> JudgeDriftAlert | None:
    project = run.project
    try:
        with transaction.atomic():
            alert = JudgeDriftAlert.objects.create(run=run, earlier_run=earlier, shared_units=shared,
                                                   differing=differing, threshold_pct=threshold, created_at=now)
            link = f"{reverse('judge_runs_compare', args=[project.pk])}?a={earlier.pk}&b={run.pk}"
            notification_send(users=project_managers(project), kind="judge_drift", now=now, link=link, params={
                "project": project.name, "run": run.name, "earlier": earlier.name, "shared": shared,
                "share": f"{100 * differing / shared:.1f}%", "threshold": f"{threshold:g}%"})
    except IntegrityError:
        # Another check of the same run got there first: it notified.
        return None
    logger.info("judge drift", extra={"run_id": run.pk, "earlier_run_id": earlier.pk, "shared": shared,
                                      "differing": differing})
    return alert
