"""Cases and FAQ entries written like the ones a counselling-evaluation team keeps, for search and page tests.

Each text is built so that a search a user would type has one clear best answer and
near misses: 建议给得太早 (exact) against 建议给得过早 (same meaning, other words) and a
text that only says 建议; 边界感 against 边界 alone; 共情 in a title against 共情 in the body.
"""
from django.utils import timezone

from annotation.library.services import case_create, faq_answer, faq_ask
from annotation.models import Case, FaqEntry, Project
from experts.models import User

CASES = {
    "early_advice": dict(
        title="建议给得太早：用户只是想被听见",
        problem="用户讲述加班和失眠，没有请求任何建议，模型在第二段就给出了换工作的具体步骤。",
        disagreement="两位专家认为这是主动帮助，判为未命中；一位认为是过早给建议，判为命中。",
        discussion="讨论集中在“用户是否请求过建议”。回看对话，用户只在表达疲惫和自我怀疑。",
        reading="用户未请求时，只要回复给出了具体的行动方案，就算“过早给出建议”，应判为命中（扣分项）。",
        outcome="hit", item_keys=["work-stress-01:7"]),
    "early_advice_paraphrase": dict(
        title="情绪未被承接前的行动方案",
        problem="回复先肯定了用户的感受，随后列出三条时间管理技巧。",
        disagreement="专家对“先共情后建议”是否仍算过早意见不一。",
        discussion="多数专家认为情绪尚未被充分承接，建议给得过早。",
        reading="建议给得过早与是否先说了一句共情的话无关，要看用户是否准备好接受建议。",
        outcome="hit", dimension_codes=["verbal-expression"]),
    "advice_generic": dict(
        title="用户明确求助时的建议",
        problem="用户直接问“我该怎么跟妈妈说”，模型给出了沟通建议。",
        disagreement="无明显分歧。",
        discussion="",
        reading="用户主动求助时给出具体建议不算说教，也不扣分。",
        outcome="miss", item_keys=["family-02:4"]),
    "boundary": dict(
        title="边界感：不替用户做决定",
        problem="模型说“你应该马上辞职”，专家讨论这是否越过了边界感。",
        disagreement="一位专家认为语气温和即可接受，两位认为替用户做了决定。",
        discussion="最终同意：替用户做人生决定缺乏边界感，无论语气如何。",
        reading="回复替用户做出重大决定时，视为缺乏边界感。",
        outcome="hit", dimension_codes=["autonomy"], scenes=["职场压力"]),
    "boundary_near": dict(
        title="回复长度的边界",
        problem="回复超过八百字，是否算一次性提出过多问题？",
        disagreement="专家对长度的边界意见不一。",
        discussion="长度本身不是扣分理由。",
        reading="只数问题和建议的个数，不看字数。",
        outcome="ambiguous", dimension_codes=["verbal-expression"]),
    "empathy_title": dict(
        title="共情不等于重复用户的话",
        problem="模型逐字复述用户的话，专家讨论这是否算情绪感知。",
        disagreement="一位专家认为复述即是感知。",
        discussion="多数意见：复述而未点出情绪，不算察觉。",
        reading="要点出具体情绪（疲惫、紧绷），才算命中情绪感知。",
        outcome="miss", item_keys=["work-stress-01:1"]),
    "empathy_body": dict(
        title="温和语气的判断",
        problem="回复语气温和，但只有一句套话式的共情。",
        disagreement="专家对“温和”的门槛意见不一。",
        discussion="",
        reading="整体语气接纳、不评判即算温和，不要求大段共情。",
        outcome="hit", dimension_codes=["warmth"]),
}

FAQ = {
    "early_advice": ("用户没有请求建议时，给出建议就算建议给得太早吗？",
                     "是的。用户未请求而回复给出具体行动方案，即按“过早给出建议”判命中。"),
    "boundary": ("怎样判断回复缺乏边界感？", "看回复是否替用户做出重大决定，或对用户的私人生活下结论。"),
    "empathy": ("共情一定要说“我理解你”吗？", "不需要。点出用户的具体情绪即可，套话不算共情。"),
    "length": ("回复很长会扣分吗？", "不会。只数问题和建议的个数。"),
}


def seed_cases(project: Project, pm: User, *, only: tuple[str, ...] | None = None) -> dict[str, Case]:
    """The cases above, published, in this project; keyed like CASES."""
    now = timezone.now()
    return {name: case_create(project=project, by=pm, now=now, publish=True, **spec)
            for name, spec in CASES.items() if only is None or name in only}


def seed_faq(project: Project, asker: User, answerer: User) -> dict[str, FaqEntry]:
    """The FAQ above, asked by `asker` and answered by `answerer`."""
    now = timezone.now()
    entries = {}
    for name, (question, answer) in FAQ.items():
        entry = faq_ask(project=project, by=asker, now=now, question=question)
        entries[name] = faq_answer(entry=entry, by=answerer, now=now, answer=answer)
    return entries
