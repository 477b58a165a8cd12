"""A realistic counselling project: Chinese dialogues, model replies and HeartBench-style rubrics.

The texts are written for these tests. The model name is deliberately distinctive, so a
test can assert that it never reaches an expert's page.
"""
import random

from django.utils import timezone

from annotation.models import Project, Question, Response, Task
from annotation.services import project_create
from experts.models import User
from rubrics.models import Dimension, RubricItem, RubricVersion

SECRET_MODEL = "blindtest-model-7b-secret"

QUESTIONS = [
    {
        "id": "work-stress-01",
        "primary_scene": "职场压力",
        "secondary_scene": "自我怀疑",
        "dialogue": [
            {"role": "A", "content": "这两个月我几乎每天都加班到十一点，回到家躺在床上也睡不着，脑子里一直在过第二天要做的事。"},
            {"role": "B", "content": "听起来这段时间你一直绷得很紧。睡不着的时候，你通常会想些什么？"},
            {"role": "A", "content": "主要是怕出错。上个月有个方案被领导当着全组的面否掉了，从那以后我每次交东西之前都要反复检查好几遍。"},
            {"role": "B", "content": "被当众否定一定很不好受。那次之后，你对自己的要求好像变得更严格了？"},
            {"role": "A", "content": "可能吧。我也知道这样效率很低，可就是停不下来，总觉得一松懈就会再出问题。"},
        ],
        "final": "有时候我会想，是不是我根本就不适合这份工作。可我已经三十岁了，换行也来不及了吧。",
        "reply": (
            "听你这么说，我能感受到你这段时间有多累——白天要扛着工作的压力，晚上还要和停不下来的思绪较劲。"
            "被当众否定的那次经历，好像在你心里留下了一个很深的印子，让你觉得必须做到万无一失才安全。\n\n"
            "“是不是不适合”这个念头，常常是在人特别疲惫、又特别在意结果的时候冒出来的。"
            "它未必是对你能力的真实判断，更像是压力在替你说话。\n\n"
            "我有点好奇：在那次方案被否之前，你对这份工作的感觉是怎样的？有没有哪些时刻，你觉得自己做得还不错？\n\n"
            "至于三十岁换行来不及的担心，我们可以慢慢聊。先不急着下结论，好吗？"
        ),
        "rubric": [
            ("情绪感知", 3, "AI 察觉到用户长期加班、失眠背后的疲惫与紧绷感"),
            ("情绪理解", 4, "AI 指出用户反复检查的行为与“被当众否定”的经历之间的联系"),
            ("好奇心", 3, "AI 就用户过去的工作体验或积极经历进行开放式提问"),
            ("温暖", 2, "AI 使用温和、接纳的语气回应用户的自我怀疑"),
            ("情绪应对", 3, "AI 将“我不适合这份工作”的想法重新框定为压力下的反应，而非事实"),
            ("第一人称使用", 2, "AI 使用第一人称（如“我”“我们”）与用户交流"),
            ("言语表达", -3, "AI 在用户未请求时，过早给出换工作或职业规划方面的具体建议"),
            ("言语表达", -5, "AI 一次性提出 5 个以上的问题或建议，使回复显得说教"),
            ("其他", None, "AI 没有回应用户，而是以用户的口吻继续发言"),
        ],
    },
    {
        "id": "family-02",
        "primary_scene": "家庭关系",
        "secondary_scene": "亲子沟通",
        "dialogue": [
            {"role": "A", "content": "我妈最近总打电话催我回老家考公务员，说在外面漂着没个稳定工作不行。"},
            {"role": "B", "content": "听起来这件事给你带来了不少压力。你自己是怎么想的？"},
        ],
        "final": "我其实挺喜欢现在的工作的，可每次跟她说，她就说我不懂事。我都不知道该怎么跟她沟通了。",
        "reply": (
            "被最亲近的人说“不懂事”，心里一定既委屈又无奈吧。你喜欢现在的工作，这份坚持本身就很值得被看见。\n\n"
            "妈妈的催促里，可能也藏着她对你的担心。如果你愿意，我们可以一起想想：你最希望妈妈理解你的是哪一点？"
        ),
        "rubric": [
            ("情绪感知", 3, "AI 识别出用户被说“不懂事”时的委屈与无奈"),
            ("关系构建", 3, "AI 肯定用户对当前工作的坚持与热爱"),
            ("情绪理解", 2, "AI 帮助用户看到母亲催促背后可能的担心"),
            ("主动性", 3, "AI 邀请用户一起梳理想让母亲理解的核心需求"),
            ("言语表达", -3, "AI 直接站队批评母亲的观念"),
            ("其他", None, "AI 没有回应用户，而是以用户的口吻继续发言"),
        ],
    },
]


def build_counselling_project(*, pm: User | None = None, questions: int = 2, tasks: int | None = None) -> Project:
    """A published project, replies by SECRET_MODEL, and an open task for the first `tasks` questions.

    With fewer tasks than questions, `task_open` adds the others later, so a browser test
    knows which dialogue it gets first.
    """
    project = project_create(name="心理咨询回复评测 · 第一期", created_by=pm, overlap=3,
                             description="评估模型在情绪支持对话中的回复质量。")
    version = RubricVersion.objects.create(rubric=project.rubric, number=1)
    responses = []
    for spec in QUESTIONS[:questions]:
        question = Question.objects.create(
            project=project, external_id=spec["id"], dialogue=spec["dialogue"], final_user_turn=spec["final"],
            primary_scene=spec["primary_scene"], secondary_scene=spec["secondary_scene"],
        )
        for position, (dimension, score, content) in enumerate(spec["rubric"], start=1):
            RubricItem.objects.create(
                version=version, question_ref=question.external_id, position=position,
                item_key=f"{question.external_id}:{position}", dimension=Dimension.objects.get(name_zh=dimension),
                score=score, content=content,
            )
        responses.append(Response.objects.create(project=project, question=question, model_name=SECRET_MODEL,
                                                 text=spec["reply"]))
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=timezone.now())
    for response in responses[:tasks]:
        task_open(response)
    return project


def task_open(response: Response) -> Task:
    """An open task for `response` under the project's published rubric version."""
    version = RubricVersion.objects.get(rubric=response.project.rubric, status="published")
    return Task.objects.create(project=response.project, response=response, rubric_version=version,
                               overlap=response.project.overlap, shuffle_key=random.getrandbits(62))
