"""Projects at real scale, built with bulk_create: tens of thousands of tasks in seconds."""
import random

from annotation.models import Project, Question, Response, Task
from rubrics.models import RubricVersion
from tests.factories import make_project_with_tasks

BATCH = 5000


def project_at_scale(*, tasks: int, questions: int = 20, items: int = 3, overlap: int = 3,
                     seed: int = 14, **settings) -> Project:
    """A published project with `tasks` open regular tasks: `questions` questions of `items` rubric items,
    each answered by many models (one response and task per model)."""
    rng = random.Random(seed)
    project = make_project_with_tasks(n_questions=questions, items_per_question=items, overlap=overlap)
    if settings:
        Project.objects.filter(pk=project.pk).update(**settings)
        project.refresh_from_db()
    version = RubricVersion.objects.get(rubric=project.rubric, number=1)
    found = list(Question.objects.filter(project=project).order_by("pk"))
    extra = tasks - len(found)
    responses = Response.objects.bulk_create(
        (Response(project=project, question=found[i % len(found)], model_name=f"bulk-model-{i}",
                  text="听起来你最近压力很大。") for i in range(extra)), batch_size=BATCH)
    Task.objects.bulk_create(
        (Task(project=project, response=r, rubric_version=version, overlap=overlap,
              shuffle_key=rng.getrandbits(62)) for r in responses), batch_size=BATCH)
    return project
