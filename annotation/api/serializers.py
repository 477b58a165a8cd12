"""Serializers that API modules import: the refused request, and the shapes the work, calibration
and project APIs answer with.

An operation's own input and output otherwise live nested in its API class, as in
`exchange.py`. What an expert sees never includes model names or peers' labels.
"""
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from annotation.assignment.selectors import assignment_state, lease_seconds_left
from annotation.models import Assignment, Draft
from annotation.selectors import rubric_items_for_task


@extend_schema_serializer(component_name="DomainError")
class ErrorOut(serializers.Serializer):
    """A request the domain refused, as `core.api.exception_handler` answers it."""

    detail = serializers.CharField(help_text="what went wrong, in the caller's language")
    code = serializers.CharField(help_text="a stable code from core.error_codes, for programs to match on")
    # DRF's metaclass takes declared fields off the class, so `Serializer.errors` stays intact.
    errors = serializers.ListField(  # type: ignore[assignment]
        child=serializers.DictField(), required=False,
        help_text='one entry per problem where there were several: [{"line": 3, "field": "rubric[2].score", '
                  '"message": "..."}]; line only in imports',
    )


class DimensionOut(serializers.Serializer):
    code = serializers.CharField()
    name_zh = serializers.CharField()
    name_en = serializers.CharField()
    category = serializers.CharField()


class RubricItemOut(serializers.Serializer):
    id = serializers.CharField(source="item_key")
    position = serializers.IntegerField()
    dimension = DimensionOut()
    score = serializers.IntegerField(allow_null=True)
    content = serializers.CharField()


class TurnOut(serializers.Serializer):
    role = serializers.ChoiceField(choices=["A", "B"])
    content = serializers.CharField()


class SceneOut(serializers.Serializer):
    primary = serializers.CharField()
    secondary = serializers.CharField()


class AssignmentDraftOut(serializers.Serializer):
    labels = serializers.DictField(child=serializers.IntegerField(), help_text='{"<rubric_item_id>": 0 or 1}')
    notes = serializers.DictField(child=serializers.CharField(), help_text='{"<rubric_item_id>": "note"}')


def _rubric_items_out(items) -> list[dict]:
    """`RubricItemOut(items, many=True).data`, written out: DRF copies every declared field of every
    nested serializer on each call, a third of a "next task" request's CPU for ten items."""
    return [{"id": str(i.item_key), "position": int(i.position),
             "dimension": {"code": str(i.dimension.code), "name_zh": str(i.dimension.name_zh),
                           "name_en": str(i.dimension.name_en), "category": str(i.dimension.category)},
             "score": None if i.score is None else int(i.score), "content": str(i.content)} for i in items]


_INSTANT = serializers.DateTimeField()


class AssignmentOut(serializers.Serializer):
    """A leased task as the expert sees it: blind to the model and to other experts.

    The fields below are the contract (and the OpenAPI schema); `to_representation` writes the
    same answer directly, as it is on every "next task" (tests/annotation/test_api_work.py checks
    it against DRF's own rendering of these fields).
    """

    id = serializers.IntegerField()
    status = serializers.CharField()
    # Reads `now` from the serializer context: the time of the request, passed in.
    state = serializers.SerializerMethodField(
        help_text="leased, expired (past expires_at, even before the lease sweep) or submitted, as the page shows it")
    expires_at = serializers.DateTimeField()
    seconds_left = serializers.SerializerMethodField(help_text="seconds until the lease expires; 0 once it has")
    project = serializers.IntegerField(source="task.project_id")
    difficulty = serializers.CharField(source="task.response.question.difficulty")
    scene = serializers.SerializerMethodField()
    dialogue = serializers.SerializerMethodField()
    final_user_turn = serializers.CharField(source="task.response.question.final_user_turn")
    response = serializers.CharField(source="task.response.text")
    rubric_items = serializers.SerializerMethodField()
    draft = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField())
    def get_state(self, obj: Assignment) -> str:
        return assignment_state(obj, now=self.context["now"])

    @extend_schema_field(serializers.IntegerField())
    def get_seconds_left(self, obj: Assignment) -> int:
        return lease_seconds_left(obj, now=self.context["now"])

    @extend_schema_field(SceneOut)
    def get_scene(self, obj: Assignment) -> dict:
        q = obj.task.response.question
        return {"primary": q.primary_scene, "secondary": q.secondary_scene}

    @extend_schema_field(TurnOut(many=True))
    def get_dialogue(self, obj: Assignment) -> list[dict]:
        return TurnOut(obj.task.response.question.dialogue, many=True).data

    @extend_schema_field(RubricItemOut(many=True))
    def get_rubric_items(self, obj: Assignment) -> list[dict]:
        return RubricItemOut(rubric_items_for_task(obj.task), many=True).data

    @extend_schema_field(AssignmentDraftOut)
    def get_draft(self, obj: Assignment) -> dict:
        if self.context.get("new_lease"):
            return {"labels": {}, "notes": {}}  # leased by this very request: nothing saved on it yet
        draft = Draft.objects.filter(assignment=obj).first()
        return {"labels": draft.labels, "notes": draft.notes} if draft else {"labels": {}, "notes": {}}

    def to_representation(self, instance: Assignment) -> dict:
        question = instance.task.response.question
        return {
            "id": int(instance.pk), "status": str(instance.status), "state": self.get_state(instance),
            "expires_at": _INSTANT.to_representation(instance.expires_at),
            "seconds_left": self.get_seconds_left(instance), "project": int(instance.task.project_id),
            "difficulty": str(question.difficulty), "scene": self.get_scene(instance),
            "dialogue": [{"role": turn["role"], "content": str(turn["content"])} for turn in question.dialogue],
            "final_user_turn": str(question.final_user_turn), "response": str(instance.task.response.text),
            "rubric_items": _rubric_items_out(rubric_items_for_task(instance.task)),
            "draft": self.get_draft(instance),
        }


class SubmitIn(serializers.Serializer):
    labels = serializers.JSONField()
    notes = serializers.JSONField(required=False)


class SubmitOut(serializers.Serializer):
    assignment = serializers.IntegerField()
    status = serializers.CharField()
    submitted_at = serializers.DateTimeField()
    task_complete = serializers.BooleanField()
