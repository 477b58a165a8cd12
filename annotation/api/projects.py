"""Projects over the API: create, read and change settings, the lifecycle, clone, setting history."""
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.api.serializers import ErrorOut
from annotation.models import Project
from annotation.models.project import LEASE_TIMEOUT_S, OVERLAP
from annotation.projects.fields import BY_NAME, FIELDS, setting_label
from annotation.projects.selectors import setting_changes_for_project
from annotation.projects.services import (
    LifecycleResult,
    project_archive,
    project_clone,
    project_close,
    project_pause,
    project_resume,
    project_settings_update,
)
from annotation.selectors import project_get_for_user
from annotation.services import project_create
from core.api import body_not_object
from experts.models import Tier

_REFUSED = OpenApiResponse(ErrorOut, description="One entry per bad field; nothing was changed.")
_CONFLICT = OpenApiResponse(ErrorOut, description="Refused in the project's state (code project_closed, ...).")


@extend_schema_serializer(component_name="ProjectOut")
class ProjectOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    overlap = serializers.IntegerField()
    lease_timeout_s = serializers.IntegerField()
    due_date = serializers.DateField(allow_null=True)
    state = serializers.CharField(help_text="active, paused or closed")
    archived_at = serializers.DateTimeField(allow_null=True)
    calibration_threshold_pct = serializers.IntegerField()
    calibration_size = serializers.IntegerField()
    calibration_retry_delay_s = serializers.IntegerField()
    control_rate_pct = serializers.IntegerField()
    control_pause_below_pct = serializers.IntegerField()
    control_window = serializers.IntegerField()
    hard_min_tier = serializers.CharField()
    fill_order = serializers.CharField(help_text="finish_started (tasks others began come first) or spread_evenly")
    tie_extra_experts = serializers.BooleanField(help_text="draw one more expert for a tied item")
    tie_extra_cap = serializers.IntegerField(help_text="most extra experts per task for ties")
    appeal_window_days = serializers.IntegerField(
        help_text="days an expert has to contest a rejection or a statement line")
    judge_reveal = serializers.BooleanField(help_text="experts see the judge's labels after they submit")
    consensus_labels = serializers.CharField(help_text="first (as submitted) or revised (after the reveal)")


class ProjectCreateApi(APIView):
    """Create a project with its empty rubric; the PM who creates it manages it."""

    # The ranges and defaults are the model's (`annotation.models.project`), which the
    # service and the database check too; the serializer only names a bad field early.
    @extend_schema_serializer(component_name="ProjectIn")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        overlap = serializers.IntegerField(required=False, default=OVERLAP.default, min_value=OVERLAP.low,
                                           max_value=OVERLAP.high)
        lease_timeout_s = serializers.IntegerField(required=False, default=LEASE_TIMEOUT_S.default,
                                                   min_value=LEASE_TIMEOUT_S.low, max_value=LEASE_TIMEOUT_S.high)
        due_date = serializers.DateField(required=False, allow_null=True, default=None)

    OutputSerializer = ProjectOut

    @extend_schema(request=InputSerializer, responses={201: ProjectOut})
    def post(self, request: Request) -> Response:
        if not (request.user.is_pm or request.user.is_platform_admin):
            raise PermissionDenied("Only project managers create projects.")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        project = project_create(created_by=request.user, **body.validated_data)
        return Response(ProjectOut(project).data, status=status.HTTP_201_CREATED)


def _setting_serializer_field(name: str) -> serializers.Field:
    field = BY_NAME[name]
    if field.kind == "int" and field.range is not None:
        return serializers.IntegerField(required=False, min_value=field.range.low, max_value=field.range.high)
    if field.kind == "tier":
        return serializers.ChoiceField(choices=Tier.choices, required=False)
    if field.kind == "choice":
        return serializers.ChoiceField(choices=list(field.choices), required=False)
    if field.kind == "date":
        return serializers.DateField(required=False, allow_null=True)
    if field.kind == "bool":
        return serializers.BooleanField(required=False)
    return serializers.CharField(required=False, allow_blank=name != "name")


class ProjectDetailApi(APIView):
    """Read or change a project's settings (its PM or an admin). PATCH is partial; a bad or
    unknown field changes nothing (400, one entry per field)."""

    # Describes the body only; `project_settings_update` checks it, so that this API and the
    # settings page refuse the same values with the same messages.
    InputSerializer = extend_schema_serializer(component_name="ProjectSettingsIn")(type(
        "InputSerializer", (serializers.Serializer,), {
            **{f.name: _setting_serializer_field(f.name) for f in FIELDS},
            "apply_to_existing": serializers.BooleanField(
                required=False, default=False,
                help_text="give a raised overlap to the current version's open, full and complete tasks"),
        },
    ))

    @extend_schema(operation_id="project_get", responses={200: ProjectOut, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return Response(ProjectOut(project).data)

    @extend_schema(operation_id="project_update", request=InputSerializer,
                   responses={200: ProjectOut, 400: _REFUSED, 404: _NOT_FOUND, 409: _CONFLICT})
    def patch(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        if not isinstance(request.data, dict):
            raise body_not_object()
        values: dict[str, Any] = dict(request.data)
        apply = values.pop("apply_to_existing", False) in (True, "true", "1", 1)
        result = project_settings_update(project=project, values=values, changed_by=request.user,
                                         now=timezone.now(), apply_to_existing=apply)
        return Response(ProjectOut(result.project).data)


@extend_schema_serializer(component_name="ProjectLifecycleOut")
class LifecycleOut(serializers.Serializer):
    project = ProjectOut()
    changed = serializers.BooleanField(help_text="false when the project already was in that state")
    leases_ended = serializers.IntegerField()


def _lifecycle_response(result: LifecycleResult) -> Response:
    return Response(LifecycleOut({"project": result.project, "changed": result.changed,
                                  "leases_ended": result.leases_ended}).data)


class ProjectPauseApi(APIView):
    """Stop handing out new leases; open leases can still be submitted. Pausing twice is harmless."""

    @extend_schema(operation_id="project_pause", request=None,
                   responses={200: LifecycleOut, 404: _NOT_FOUND, 409: _CONFLICT})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return _lifecycle_response(project_pause(project=project, by=request.user, now=timezone.now()))


class ProjectResumeApi(APIView):
    """Hand out leases again."""

    @extend_schema(operation_id="project_resume", request=None,
                   responses={200: LifecycleOut, 404: _NOT_FOUND, 409: _CONFLICT})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return _lifecycle_response(project_resume(project=project, by=request.user, now=timezone.now()))


class ProjectCloseApi(APIView):
    """Make the project read-only: open leases end (drafts kept), no leases, submissions, imports or
    edits; exports and reports still work. There is no reopening; clone instead."""

    @extend_schema(operation_id="project_close", request=None, responses={200: LifecycleOut, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return _lifecycle_response(project_close(project=project, by=request.user, now=timezone.now()))


class ProjectArchiveApi(APIView):
    """Hide a closed project from the project lists (409 project_not_closed otherwise)."""

    @extend_schema(operation_id="project_archive", request=None,
                   responses={200: LifecycleOut, 404: _NOT_FOUND, 409: _CONFLICT})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return _lifecycle_response(project_archive(project=project, by=request.user, now=timezone.now()))


class ProjectCloneApi(APIView):
    """A new project with the current rubric version, golden set, settings and prices; no work,
    and no members unless `copy_members`."""

    @extend_schema_serializer(component_name="ProjectCloneIn")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
        copy_members = serializers.BooleanField(required=False, default=False)

    @extend_schema(operation_id="project_clone", request=InputSerializer,
                   responses={201: ProjectOut, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        clone = project_clone(source=project, by=request.user, now=timezone.now(), **body.validated_data)
        return Response(ProjectOut(clone).data, status=status.HTTP_201_CREATED)


@extend_schema_serializer(component_name="ProjectSettingChange")
class SettingChangeOut(serializers.Serializer):
    setting = serializers.CharField(help_text="the setting's key, or state / archived for the lifecycle")
    label = serializers.CharField(help_text="the setting's name in the caller's language")
    old_value = serializers.CharField()
    new_value = serializers.CharField()
    changed_by = serializers.CharField(source="changed_by.username", allow_null=True, default=None)
    changed_at = serializers.DateTimeField()


class ProjectSettingsHistoryApi(APIView):
    """Every setting and lifecycle change of the project, newest first."""

    @extend_schema(operation_id="project_settings_history", responses={200: SettingChangeOut(many=True),
                                                                        404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project: Project = project_get_for_user(request.user, project_id, manage=True)
        changes = setting_changes_for_project(project)
        for change in changes:
            change.label = setting_label(change.setting)  # type: ignore[attr-defined]
        return Response(SettingChangeOut(changes, many=True).data)
