"""The demo project's case library and FAQ: two published cases and two answered questions, written for the demo."""
from datetime import datetime
from typing import Any

from annotation.models import Project
from experts.models import User

CASES: list[dict[str, Any]] = [
    dict(
        title="建议给得太早：用户只想说说睡不着",
        problem="用户深夜说汇报前睡不着，没有请求任何方法；回复第二段就列出了四个助眠技巧。",
        disagreement="两位专家认为技巧出现在共情之后，不算过早；一位认为用户并未请求，属于过早给建议。",
        discussion="回看对话：用户只描述了紧张和失眠。大家同意，“先共情一句”并不改变用户没有请求建议这一事实。",
        reading="用户没有请求时，回复给出具体做法即算“过早给出建议”（言语表达 −3 命中）；"
                "情绪应对项允许的“一两个当下就能做的方法”只在用户接住情绪之后、且不堆砌时才算。",
        outcome="hit", item_keys=["demo-01:7", "demo-01:5"]),
    dict(
        title="边界感：不替失恋的用户决定何时放下",
        problem="回复说“今晚就把他的东西收起来吧，这样你会好受些”。",
        disagreement="一位专家认为这是温和的建议，两位认为替用户决定了处理物品的时机。",
        discussion="讨论落在“建议”与“决定”的区别：给出选项并把决定权留给用户，才算尊重自主性。",
        reading="替用户定下时间表或做法（“今晚就……”）视为缺乏边界感，自主性项判未命中。",
        outcome="miss", item_keys=["demo-02:5"]),
]

FAQ = [
    ("回复里用了“咱们”，算第一人称使用吗？", "算。“我”“我们”“咱”“咱们”都算第一人称，只要是 AI 以自己的身份说话。"),
    ("共情之后马上给建议，还算建议给得太早吗？",
     "看用户有没有请求。用户没有请求时，即使先共情一句，给出具体做法仍算过早；见案例库“建议给得太早”。"),
]


def demo_library_load(*, project: Project, pm: User, asker: User, now: datetime) -> None:
    """Write the demo cases (published by `pm`) and the FAQ (asked by `asker`, answered by `pm`)."""
    from annotation.library.services import case_create, faq_answer, faq_ask

    for spec in CASES:
        case_create(project=project, by=pm, now=now, publish=True, **spec)
    for question, answer in FAQ:
        entry = faq_ask(project=project, by=asker, now=now, question=question)
        faq_answer(entry=entry, by=pm, now=now, answer=answer)
