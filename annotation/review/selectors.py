"""What the PM's review queue shows: flagged submissions of one project, grouped per submission."""
from dataclasses import dataclass, field

from django.db.models import Count

from annotation.models import Assignment, Project, ReviewFlag

# The queue shows this many submissions; the counts per status cover all of them.
QUEUE_LIMIT = 200


@dataclass
class FlaggedSubmission:
    assignment: Assignment
    flags: list[ReviewFlag] = field(default_factory=list)
    returned: bool = False

    @property
    def first_flagged_at(self):
        return min(f.created_at for f in self.flags)


def review_queue(project: Project, *, status: str = ReviewFlag.Status.OPEN) -> list[FlaggedSubmission]:
    """The project's flagged submissions in `status`, newest flag first, each with its flags."""
    flags = (ReviewFlag.objects.filter(project=project, status=status)
             .select_related("assignment__expert__expert_profile", "assignment__task__response__question",
                             "assignment__submission_return")
             .order_by("-created_at", "-pk"))
    rows: dict[int, FlaggedSubmission] = {}
    for flag in flags[:QUEUE_LIMIT * 3]:
        row = rows.get(flag.assignment_id)
        if row is None:
            if len(rows) >= QUEUE_LIMIT:
                continue
            row = rows[flag.assignment_id] = FlaggedSubmission(assignment=flag.assignment)
        row.flags.append(flag)
    for row in rows.values():
        row.returned = hasattr(row.assignment, "submission_return")
    return list(rows.values())


def review_counts(project: Project) -> dict[str, int]:
    """Flagged submissions per status (every status has an entry)."""
    counts = dict(ReviewFlag.objects.filter(project=project).values("status")
                  .annotate(n=Count("assignment_id", distinct=True)).order_by().values_list("status", "n"))
    return {status: counts.get(status, 0) for status in ReviewFlag.Status.values}
