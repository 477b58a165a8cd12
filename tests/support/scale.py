"""Projects at real scale, built with bulk_create: tens of thousands of tasks in seconds."""
import random
import zlib
from datetime import timedelta

from django.db.models import F
from django.utils import timezone

from annotation.exchange.golden import golden_import
from annotation.models import Assignment, CalibrationTask, GoldenReference, Label, Project, Question, Response, Task
from annotation.quality.golden_tally import golden_tally_rebuild
from annotation.quality.peer_tally import peer_tally_rebuild
from experts.models import User
from rubrics.models import RubricItem, RubricVersion
from tests.factories import make_project_with_tasks
from tests.support.quality import calibrated, golden_file

BATCH = 5000


def project_at_scale(*, tasks: int, questions: int = 20, items: int = 3, overlap: int = 3,
                     seed: int = 14, **settings) -> Project:
    """A published project with `tasks` open regular tasks: `questions` questions of `items` rubric items,
    each answered by many models (one response and task per model and question: each model answers every
    question, as the models a project compares do; a model of its own for every response made the
    agreement report's leaderboard rank one model per task)."""
    rng = random.Random(seed)
    project = make_project_with_tasks(n_questions=questions, items_per_question=items, overlap=overlap)
    if settings:
        Project.objects.filter(pk=project.pk).update(**settings)
        project.refresh_from_db()
    version = RubricVersion.objects.get(rubric=project.rubric, number=1)
    found = list(Question.objects.filter(project=project).order_by("pk"))
    extra = tasks - len(found)
    responses = Response.objects.bulk_create(
        (Response(project=project, question=found[i % len(found)], model_name=f"bulk-model-{i // len(found)}",
                  text="听起来你最近压力很大。") for i in range(extra)), batch_size=BATCH)
    Task.objects.bulk_create(
        (Task(project=project, response=r, rubric_version=version, overlap=overlap,
              shuffle_key=rng.getrandbits(62)) for r in responses), batch_size=BATCH)
    return project


def agreeing_label(item_key: str, rng: random.Random) -> int:
    """The label of an expert of a panel that mostly agrees: each rubric item has one answer (fixed by its
    key, the `id` the API gives it) and one label in ten is the other. The veterans' history and
    bench/assignment.py's clients label alike, so a task one started and the clients finish splits as
    often as a real panel's would (random history labels split more than half of the items and opened
    consultations on nearly every task)."""
    return (zlib.crc32(item_key.encode()) % 2) ^ (rng.random() < 0.1)


def veteran_world(*, tasks: int, labels: int = 4000, golden: int = 200, control: int = 150,
                  seed: int = 14, items: int = 3, veterans: int = 1, **settings) -> tuple[Project, User]:
    """A project of `tasks` tasks (`golden` of them golden, with references) and a veteran expert of it:
    a passed calibration, `control` submitted control tasks (a fifth of the items wrong) and regular
    submissions up to about `labels` labels in all. The history is written with bulk_create (as if
    submitted over months); the golden and peer tallies are counted from it, as the migrations' backfills
    would. `veterans` > 1 makes that many such experts, each on tasks of their own; the first is returned."""
    rng = random.Random(seed)
    project = project_at_scale(tasks=tasks, seed=seed, items=items, **settings)
    golden_tasks = list(Task.objects.filter(project=project).select_related("response__question")
                        .order_by("pk")[:golden])
    golden_import(project=project, data=golden_file(project, golden_tasks), now=timezone.now())
    by_question: dict[str, list[RubricItem]] = {}
    for item in RubricItem.objects.filter(version__rubric=project.rubric).order_by("position"):
        by_question.setdefault(item.question_ref, []).append(item)
    references = {(r.task_id, r.rubric_item_id): r.value for r in GoldenReference.objects.filter(task__project=project)}
    first = None
    for k in range(veterans):
        expert = calibrated(project)
        _history(project=project, expert=expert, k=k, labels=labels, golden_tasks=golden_tasks, control=control,
                 items=by_question, references=references, rng=rng)
        first = first or expert
    golden_tally_rebuild(project_id=project.pk)
    peer_tally_rebuild()
    return project, first


def _history(*, project: Project, expert: User, k: int, labels: int, golden_tasks: list[Task], control: int,
             items: dict[str, list[RubricItem]], references: dict, rng: random.Random) -> None:
    """The k-th veteran's months of work: control tasks in slot k + 1, regular tasks no other veteran took."""
    seen = set(CalibrationTask.objects.filter(attempt__expert=expert).values_list("task_id", flat=True))
    controls = [t for t in golden_tasks if t.pk not in seen][:control]
    golden_ids = {t.pk for t in golden_tasks}  # the objects were read before the import made them golden
    per_task = len(next(iter(items.values())))
    regular_n = max(0, (labels - len(seen) * per_task - len(controls) * per_task) // per_task)
    # By id, which says nothing of a task's place on the draw's ring (its random shuffle key): the tasks
    # the veterans started lie all round the ring, as tasks drawn over months do. Taken in ring order,
    # they were one arc of it, and every claim's random points past that arc wrapped round to its first
    # task (every concurrent claim drew the same task).
    regular = list(Task.objects.filter(project=project, is_golden=False).select_related("response__question")
                   .order_by("pk")[k * regular_n:(k + 1) * regular_n])
    start = timezone.now() - timedelta(days=120)
    worked = controls + regular
    assignments = Assignment.objects.bulk_create(
        (Assignment(task=t, expert=expert, slot=k + 1 if t.pk in golden_ids else 1, status=Assignment.Status.SUBMITTED,
                    kind=Assignment.Kind.WORK, leased_at=start + timedelta(minutes=10 * n),
                    expires_at=start + timedelta(minutes=10 * n + 45),
                    submitted_at=start + timedelta(minutes=10 * n + 5), tier_at_submission="bronze")
         for n, t in enumerate(worked)), batch_size=BATCH)
    rows = []
    for assignment, task in zip(assignments, worked, strict=True):
        for item in items[task.response.question.external_id]:
            reference = references.get((task.pk, item.pk))
            if reference is not None:
                value = reference if rng.random() < 0.8 else 1 - reference
            else:
                value = agreeing_label(item.item_key, rng)
            rows.append(Label(assignment=assignment, task=task, rubric_item=item, value=value))
    Label.objects.bulk_create(rows, batch_size=BATCH)
    Task.objects.filter(pk__in=[t.pk for t in worked]).update(live_count=F("live_count") + 1,
                                                              submitted_count=F("submitted_count") + 1)


def strengths_from_history(profile, expert: User) -> dict[int, float]:
    """Matching's strengths as they were computed before the golden tally: from the expert's whole
    golden history on every claim (the reference the tally's strengths must equal)."""
    from annotation.assignment import matching
    from annotation.quality.portrait import golden_counts_by_dimension

    strengths = {dim_id: matching.SPECIALTY_SHARE for dim_id in profile.specialties.values_list("pk", flat=True)}
    for dim_id, (total, correct) in golden_counts_by_dimension(expert).items():
        if total >= matching.MIN_GOLDEN_ITEMS:
            term = min(1.0, max(0.0, (correct / total - 0.5) / 0.5))
            if term > 0:
                strengths[dim_id] = strengths.get(dim_id, 0.0) + (1 - matching.SPECIALTY_SHARE) * term
    return strengths
