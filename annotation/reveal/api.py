"""The reveal over the token API: the same comparison and the same one revision round as the page."""
from __future__ import annotations

from typing import Any, cast

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.reveal.selectors import Reveal, reveal_get_for_expert
from annotation.reveal.services import reveal_revise
from experts.models import User


@extend_schema_serializer(component_name="RevealItemOut")
class RevealItemOut(serializers.Serializer):
    rubric_item_id = serializers.CharField(help_text="the item key, as in a submission")
    first = serializers.IntegerField(help_text="your label as submitted (kept for ever)")
    judge = serializers.IntegerField(help_text="the judge's label")
    revised = serializers.IntegerField(allow_null=True, help_text="your revised label; null when kept or not yet")
    reason = serializers.CharField(allow_null=True, help_text="your reason for the revision")


@extend_schema_serializer(component_name="RevealOut")
class RevealOut(serializers.Serializer):
    judge_run = serializers.CharField(allow_null=True, help_text="null: the judge has not judged the task yet")
    judge_reason = serializers.CharField(allow_blank=True)
    agreeing = serializers.IntegerField(help_text="items where you and the judge agree")
    closed = serializers.BooleanField(help_text="true once you have revised (or kept every label): read-only")
    items = RevealItemOut(many=True, help_text="the items where you and the judge differ")


def _out(reveal: Reveal) -> dict[str, Any]:
    items = [{"rubric_item_id": row.item.item_key, "first": row.first, "judge": row.judge,
              "revised": row.revision.value if row.revision else None,
              "reason": row.revision.reason if row.revision else None} for row in reveal.rows]
    return dict(RevealOut({"judge_run": reveal.run.name if reveal.run else None, "judge_reason": reveal.reason,
                           "agreeing": reveal.agreeing, "closed": reveal.closed, "items": items}).data)


class RevealApi(APIView):
    """GET: where your submitted labels and the judge's differ. POST: your one revision round
    (`{"changes": {"<item key>": "reason", ...}}`; an empty object keeps every label). A repeat of the
    same round answers 200 and changes nothing; another round is refused (409)."""

    @extend_schema_serializer(component_name="RevealIn")
    class InputSerializer(serializers.Serializer):
        changes = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                        help_text="item key -> why you change it to the judge's label")

    @extend_schema(operation_id="reveal_get", responses={200: RevealOut, 404: OpenApiResponse(description="Not yours, "
                   "not submitted work, or the project does not reveal the judge.")})
    def get(self, request: Request, assignment_id: int) -> Response:
        return Response(_out(reveal_get_for_expert(expert=cast(User, request.user), assignment_id=assignment_id)))

    @extend_schema(operation_id="reveal_revise", request=InputSerializer,
                   responses={201: RevealOut, 200: RevealOut, 400: OpenApiResponse(description="A change needs a "
                              "reason, or names an item where you agree with the judge; nothing was saved."),
                              409: OpenApiResponse(description="Already revised, rejected, or not judged yet.")})
    def post(self, request: Request, assignment_id: int) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = reveal_revise(expert=cast(User, request.user), assignment_id=assignment_id,
                               changes=body.validated_data["changes"], now=timezone.now())
        reveal = reveal_get_for_expert(expert=cast(User, request.user), assignment_id=assignment_id)
        return Response(_out(reveal), status=201 if result.created else 200)
