"""Expert-quality API: the project's quality settings (PM) and capability portraits."""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.api.common import require_expert as _require_expert
from annotation.api.serializers import ErrorOut
from annotation.models.project import QUALITY_SETTINGS
from annotation.quality.portrait import own_view_cutoff, portrait_for
from annotation.quality.project_settings import project_quality_update
from annotation.selectors import project_expert_get, project_get_for_user
from core.api import body_not_object
from experts.models import Tier


class QualitySettingsApi(APIView):
    """Read or change the project's quality settings; a bad value changes nothing (400 with per-field errors)."""

    @extend_schema_serializer(component_name="QualitySettings")
    class OutputSerializer(serializers.Serializer):
        calibration_threshold_pct = serializers.IntegerField()
        calibration_size = serializers.IntegerField()
        calibration_retry_delay_s = serializers.IntegerField()
        control_rate_pct = serializers.IntegerField()
        control_pause_below_pct = serializers.IntegerField()
        control_window = serializers.IntegerField()
        hard_min_tier = serializers.CharField()

    # Describes the body only, built from the service's own ranges: `project_quality_update`
    # checks it, so that this API and the settings page refuse the same values with the same
    # per-field messages.
    InputSerializer = extend_schema_serializer(component_name="QualitySettingsIn")(type(
        "InputSerializer", (serializers.Serializer,), {
            **{s.name: serializers.IntegerField(required=False, min_value=s.low, max_value=s.high)
               for s in QUALITY_SETTINGS},
            "hard_min_tier": serializers.ChoiceField(choices=Tier.choices, required=False),
        },
    ))

    @extend_schema(operation_id="quality_settings", responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return Response(self.OutputSerializer(project).data)

    @extend_schema(
        operation_id="quality_settings_update", request=InputSerializer,
        responses={200: OutputSerializer, 404: _NOT_FOUND,
                   400: OpenApiResponse(ErrorOut, description="One entry per bad field; nothing was changed.")},
    )
    def patch(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        if not isinstance(request.data, dict):
            raise body_not_object()
        values = request.data
        project = project_quality_update(project=project, values={k: values[k] for k in values},
                                         changed_by=request.user)
        return Response(self.OutputSerializer(project).data)


class PortraitRowOut(serializers.Serializer):
    key = serializers.CharField(help_text="dimension code, category, or 'all'")
    category = serializers.CharField()
    labelled = serializers.IntegerField()
    golden_items = serializers.IntegerField(source="golden_total")
    golden_accuracy_pct = serializers.FloatField(source="golden_pct", allow_null=True)
    peer_items = serializers.IntegerField(source="peer_total")
    peer_agreement_pct = serializers.FloatField(source="peer_pct", allow_null=True,
                                                help_text="agreement with the majority of the other experts")


class PortraitOut(serializers.Serializer):
    """A capability portrait; an expert's own and a PM's view of one expert answer the same shape."""

    dimensions = PortraitRowOut(many=True)
    categories = PortraitRowOut(many=True)
    overall = PortraitRowOut()


class MyPortraitApi(APIView):
    """The expert's own capability portrait across their projects (control tasks show after a day)."""

    OutputSerializer = PortraitOut

    @extend_schema(operation_id="my_portrait",
                   responses={200: OutputSerializer, 403: OpenApiResponse(description="Only experts have one.")})
    def get(self, request: Request) -> Response:
        _require_expert(request)
        portrait = portrait_for(request.user, control_before=own_view_cutoff(timezone.now()))
        return Response(self.OutputSerializer(portrait).data)


class ExpertPortraitApi(APIView):
    """An expert's portrait over the project's work (the project's PM and admins)."""

    OutputSerializer = PortraitOut

    @extend_schema(operation_id="expert_portrait", responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int, user_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        expert = project_expert_get(project, user_id)
        return Response(self.OutputSerializer(portrait_for(expert, projects=[project])).data)
