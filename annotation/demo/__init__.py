"""The demo that `make run` serves: fixed accounts, one project and data written for it.

The twelve dialogues, their rubrics and the two models' responses in this folder were
written for Rubrica in HeartBench's row format; none of it comes from HeartBench. The
model names are anonymous on purpose: the demo is about judging responses, not brands.

The passwords below are public (the README lists them); they exist so that anyone can
sign in to a local demo, and must never be used on a reachable server.
"""
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.db import transaction

from annotation.models import Project, Question, Response, Task
from annotation.rubric_editing.services import rubric_draft_guidelines_update, rubric_version_publish_by_number
from annotation.services import project_add_member, project_create
from experts.models import ExpertProfile, Role, Tier, User
from experts.services import user_create
from rubrics.models import Dimension

DEMO_URL = "http://127.0.0.1:8000"
DEMO_PROJECT_NAME = "心理咨询回复评测（演示）"
DEMO_PROJECT_DESCRIPTION = (
    "十二段为演示编写的心理咨询对话，每段有两个匿名模型的回复；"
    "专家按每题的评分细则逐条判断命中与否。"
)
DEMO_OVERLAP = 3
QUESTIONS_FILE = Path(__file__).with_name("questions.jsonl")
RESPONSES_FILE = Path(__file__).with_name("responses.jsonl")
# Written for the demo, in Chinese, with a section per dimension (rubrics.guidelines).
GUIDELINES_FILE = Path(__file__).with_name("guidelines.md")
GUIDELINES_REASON = "加入标注指南"

PM_PASSWORD = "rubrica-demo-pm"
ADMIN_PASSWORD = "rubrica-demo-admin"
EXPERT_PASSWORD = "rubrica-demo-expert"


@dataclass(frozen=True)
class DemoExpert:
    """Profile fields of one demo expert; `specialties` are dimension codes."""

    credentials: str
    tier: str
    specialties: tuple[str, ...]
    languages: str = "zh"
    weekly_capacity: int = 200


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    password: str
    expert: DemoExpert | None = None


DEMO_ACCOUNTS: tuple[DemoAccount, ...] = (
    DemoAccount("pm", Role.PM, PM_PASSWORD),
    DemoAccount("admin", Role.ADMIN, ADMIN_PASSWORD),
    DemoAccount("expert1", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "临床心理学博士，国家二级心理咨询师，从业八年", Tier.GOLD,
        ("emotional-understanding", "emotional-perception", "morality"), languages="zh,en")),
    DemoAccount("expert2", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "心理学硕士，高校心理中心专职咨询师", Tier.GOLD,
        ("curiosity", "relationship-building", "proactivity"))),
    DemoAccount("expert3", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "国家二级心理咨询师，婚姻家庭方向", Tier.SILVER,
        ("warmth", "emotional-reaction", "autonomy"), weekly_capacity=150)),
    DemoAccount("expert4", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "临床心理学博士在读，医院心理科实习", Tier.SILVER,
        ("emotional-coping", "self-awareness", "motivation"), languages="zh,en")),
    DemoAccount("expert5", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "应用心理学硕士，企业员工帮助计划（EAP）咨询师", Tier.BRONZE,
        ("verbal-expression", "first-person", "humor"), weekly_capacity=120)),
    DemoAccount("expert6", Role.EXPERT, EXPERT_PASSWORD, DemoExpert(
        "社会工作硕士，心理援助热线志愿者督导", Tier.BRONZE,
        ("warmth", "emotional-perception", "relationship-building"), weekly_capacity=100)),
)


@dataclass
class DemoAccountStatus:
    account: DemoAccount
    created: bool
    actual_role: str

    @property
    def role_matches(self) -> bool:
        return self.actual_role == self.account.role


@dataclass
class DemoLoadResult:
    project: Project
    project_created: bool
    accounts: list[DemoAccountStatus] = field(default_factory=list)
    questions: int = 0
    responses: int = 0
    open_tasks: int = 0

    @property
    def changed(self) -> bool:
        return self.project_created or any(a.created for a in self.accounts)


@transaction.atomic
def demo_load(*, now: datetime) -> DemoLoadResult:
    """Create the demo accounts and project and import the demo data; safe to run again.

    An account whose username exists is kept as it is (password included), and a
    project named `DEMO_PROJECT_NAME` means the data was loaded already, so a second
    run writes nothing. Everything happens in one transaction: a failing import leaves
    no half-built demo behind.
    """
    # Imported here: the importers live in a sibling package that is built separately,
    # and this module must stay importable (for its constants) on its own.
    from annotation.exchange.questions import questions_import
    from annotation.exchange.responses import responses_import

    statuses = [_account_ensure(account) for account in DEMO_ACCOUNTS]
    users = {s.account.username: User.objects.get(username=s.account.username) for s in statuses}

    project = Project.objects.filter(name=DEMO_PROJECT_NAME).order_by("pk").first()
    project_created = project is None
    if project is None:
        pm = users["pm"] if users["pm"].is_pm else None
        project = project_create(name=DEMO_PROJECT_NAME, created_by=pm, overlap=DEMO_OVERLAP,
                                 description=DEMO_PROJECT_DESCRIPTION)
        questions_import(project=project, data=QUESTIONS_FILE.read_bytes(), now=now)
        responses_import(project=project, data=RESPONSES_FILE.read_bytes(), model=None, now=now)
        # The import published v1 without guidelines; v2 adds them (the items stay as they are,
        # so calibrations and tasks carry over).
        draft = rubric_draft_guidelines_update(project=project,
                                               guidelines=GUIDELINES_FILE.read_text(encoding="utf-8"))
        rubric_version_publish_by_number(project=project, number=draft.number, reason=GUIDELINES_REASON, now=now)
        if pm is not None and users["expert1"].is_expert:
            from annotation.demo.library import demo_library_load

            demo_library_load(project=project, pm=pm, asker=users["expert1"], now=now)
    # Membership grants are idempotent, so they are (re)applied on every run: an expert
    # account made before the project still ends up in it.
    for status in statuses:
        user = users[status.account.username]
        if status.account.role == Role.EXPERT and user.is_expert:
            project_add_member(project=project, user=user)

    return DemoLoadResult(
        project=project,
        project_created=project_created,
        accounts=statuses,
        questions=Question.objects.filter(project=project).count(),
        responses=Response.objects.filter(project=project).count(),
        open_tasks=Task.objects.filter(project=project, status=Task.Status.OPEN).count(),
    )


def _account_ensure(account: DemoAccount) -> DemoAccountStatus:
    existing = User.objects.filter(username=account.username).first()
    if existing is not None:
        return DemoAccountStatus(account=account, created=False, actual_role=existing.role)
    user, _token = user_create(username=account.username, role=account.role, password=account.password)
    if account.expert is not None:
        _expert_profile_fill(user, account.expert)
    return DemoAccountStatus(account=account, created=True, actual_role=user.role)


def _expert_profile_fill(user: User, expert: DemoExpert) -> None:
    profile = ExpertProfile.objects.get(user=user)
    profile.credentials = expert.credentials
    profile.tier = expert.tier
    profile.languages = expert.languages
    profile.weekly_capacity = expert.weekly_capacity
    profile.save(update_fields=["credentials", "tier", "languages", "weekly_capacity"])
    profile.specialties.set(Dimension.objects.filter(code__in=expert.specialties))
