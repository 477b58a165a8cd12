"""Annotation models, split by sub-domain; import them from here."""
from .project import Difficulty, Project, Question, Response
from .work import Assignment, Draft, IdempotencyRecord, ItemConsensus, Label, Task

__all__ = [
    "Assignment",
    "Difficulty",
    "Draft",
    "IdempotencyRecord",
    "ItemConsensus",
    "Label",
    "Project",
    "Question",
    "Response",
    "Task",
]
