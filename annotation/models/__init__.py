"""Annotation models, split by sub-domain; import them from here."""
from .audit import AuditAction, AuditEntry
from .batch import BatchJob
from .benchmark import BenchmarkGates, BenchmarkReport
from .blind_test import BlindTest, BlindTestQuestion, ConvergenceSettings, JudgeDriftAlert
from .consultations import (
    Adjudication,
    Consultation,
    ConsultationParticipant,
    ConsultationPost,
    ConsultationVote,
    Outcome,
    RubricItemSuggestion,
)
from .exports import ExportJob
from .judge_items import AgreementItemStat, JudgeConfig, JudgeConfigVersion
from .judging import AgreementReport, JudgeKeyGrant, JudgeLabel, JudgeRun, JudgeTaskResult
from .library import Case, CaseItem, CaseOutcome, CaseRead, CaseStatus, FaqEntry
from .project import (
    ConsensusLabels,
    Difficulty,
    FillOrder,
    Project,
    ProjectSettingChange,
    ProjectState,
    Question,
    QuestionSearch,
    Response,
)
from .quality import (
    CalibrationAnswer,
    CalibrationAttempt,
    CalibrationTask,
    ControlResult,
    GoldenReference,
    GoldenTally,
    PeerTally,
)
from .reveal import LabelRevision, RevealRound
from .review import ReviewFlag, SentReminder, SubmissionReturn
from .roster import Invitation, MembershipEvent
from .skips import CalibrationDraft, TaskSkip
from .webhooks import WebhookAttempt, WebhookEndpoint, WebhookEvent, WebhookMessage
from .work import Assignment, Draft, IdempotencyRecord, ItemConsensus, Label, Task

__all__ = [
    "AuditAction",
    "AuditEntry",
    "BatchJob",
    "WebhookAttempt",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookMessage",
    "Adjudication",
    "Consultation",
    "ConsultationParticipant",
    "ConsultationPost",
    "ConsultationVote",
    "Outcome",
    "RubricItemSuggestion",
    "AgreementItemStat",
    "AgreementReport",
    "BenchmarkGates",
    "BlindTest",
    "BlindTestQuestion",
    "ConvergenceSettings",
    "JudgeDriftAlert",
    "BenchmarkReport",
    "JudgeConfig",
    "JudgeConfigVersion",
    "ExportJob",
    "JudgeKeyGrant",
    "JudgeLabel",
    "JudgeRun",
    "JudgeTaskResult",
    "Assignment",
    "Case",
    "CaseItem",
    "CaseOutcome",
    "CaseRead",
    "CaseStatus",
    "CalibrationAnswer",
    "CalibrationAttempt",
    "CalibrationDraft",
    "CalibrationTask",
    "ControlResult",
    "GoldenReference",
    "GoldenTally",
    "ConsensusLabels",
    "PeerTally",
    "Difficulty",
    "LabelRevision",
    "RevealRound",
    "FillOrder",
    "Draft",
    "FaqEntry",
    "IdempotencyRecord",
    "Invitation",
    "ItemConsensus",
    "Label",
    "MembershipEvent",
    "Project",
    "ProjectSettingChange",
    "ProjectState",
    "Question",
    "QuestionSearch",
    "Response",
    "ReviewFlag",
    "SentReminder",
    "SubmissionReturn",
    "Task",
    "TaskSkip",
]
