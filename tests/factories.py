"""factory_boy factories for the core models."""
import random

import factory
from django.utils import timezone

from annotation.models import Project, Question, Response, Task
from experts.models import ExpertProfile, Role, User
from rubrics.models import Dimension, Rubric, RubricItem, RubricVersion


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    role = Role.EXPERT
    password = factory.PostGenerationMethodCall("set_password", "pass-word-123")

    @factory.post_generation
    def _save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save(update_fields=["password"])


class ExpertFactory(UserFactory):
    username = factory.Sequence(lambda n: f"expert{n}")
    role = Role.EXPERT
    profile = factory.RelatedFactory("tests.factories.ExpertProfileFactory", factory_related_name="user")


class ExpertProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ExpertProfile


class PMFactory(UserFactory):
    username = factory.Sequence(lambda n: f"pm{n}")
    role = Role.PM


class AdminFactory(UserFactory):
    username = factory.Sequence(lambda n: f"admin{n}")
    role = Role.ADMIN
    is_staff = True
    is_superuser = True


class RubricFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Rubric

    name = factory.Sequence(lambda n: f"rubric {n}")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    name = factory.Sequence(lambda n: f"project {n}")
    rubric = factory.SubFactory(RubricFactory)
    overlap = 3


class RubricVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RubricVersion

    rubric = factory.SubFactory(RubricFactory)
    number = factory.Sequence(lambda n: n + 1)


class QuestionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Question

    project = factory.SubFactory(ProjectFactory)
    external_id = factory.Sequence(lambda n: f"Q{n:05d}")
    dialogue = factory.LazyFunction(lambda: [{"role": "A", "content": "最近总是睡不着。"},
                                             {"role": "B", "content": "能多说说是什么让你睡不着吗？"}])
    final_user_turn = "工作压力很大，一闭眼就想到明天的汇报。"


class ResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Response

    question = factory.SubFactory(QuestionFactory)
    project = factory.SelfAttribute("question.project")
    model_name = factory.Sequence(lambda n: f"model-{n}")
    text = "听起来你最近压力很大，我能感觉到你的紧张。"


def dimension(code: str = "warmth") -> Dimension:
    return Dimension.objects.get(code=code)


def make_project_with_tasks(*, n_questions: int = 2, items_per_question: int = 3, models: int = 1,
                            overlap: int = 3, pm: User | None = None) -> Project:
    """A project with a published rubric version and one open task per (question, model)."""
    from annotation.services import project_create

    # A fixture, not a PM's action: it leaves the audit log empty for the test to read.
    project = project_create(name="test project", created_by=pm, overlap=overlap, audited=False)
    version = RubricVersion.objects.create(rubric=project.rubric, number=1)
    dims = list(Dimension.objects.filter(is_gate=False)[:4])
    responses = []
    for q in range(n_questions):
        question = QuestionFactory(project=project, external_id=f"q{q}")
        for pos in range(1, items_per_question + 1):
            RubricItem.objects.create(
                version=version, question_ref=question.external_id, position=pos,
                item_key=f"{question.external_id}:{pos}", dimension=dims[pos % len(dims)],
                score=pos if pos % 3 else -pos, content=f"criterion {pos} of {question.external_id}",
            )
        for m in range(models):
            responses.append(ResponseFactory(question=question, project=project, model_name=f"model-{m}"))
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=timezone.now())
    Task.objects.bulk_create(
        Task(project=project, response=r, rubric_version=version, overlap=project.overlap,
             shuffle_key=random.getrandbits(62))
        for r in responses
    )
    return project
