"""The agreement report over the API: read the latest stored report, ask for a recompute.

Only the project's PM or an admin reaches these; anyone else (an expert, another
project's PM) gets the same 404 as for a project that does not exist. A project that
has no finished report yet answers 200 with ``"status": "none"`` and ``"report": null``
rather than 404, so a client can tell "nothing computed yet" from "not yours" and poll.
"""
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.agreement.selectors import (
    agreement_report_in_flight,
    agreement_report_latest,
    judge_run_get_for_project,
)
from annotation.agreement.services import agreement_report_request
from annotation.selectors import project_get_for_user

_NOT_FOUND = OpenApiResponse(description="No such project (or judge run), or not one you manage.")


class AgreementReportApi(APIView):
    """The latest agreement report of a project: the same figures the quality dashboard shows."""

    @extend_schema_serializer(component_name="AgreementReport")
    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["done", "none"],
                                         help_text='"none" while no report has been computed')
        id = serializers.IntegerField(allow_null=True)
        computed_at = serializers.DateTimeField(allow_null=True)
        duration_ms = serializers.IntegerField(allow_null=True)
        units = serializers.IntegerField()
        judge_run = serializers.IntegerField(allow_null=True)
        rubric_version = serializers.IntegerField(allow_null=True, help_text="the version number")
        recompute_pending = serializers.BooleanField(help_text="a newer report is queued or computing")
        report = serializers.JSONField(allow_null=True, help_text="the report payload (schema 1)")

    @extend_schema(
        operation_id="agreement_report",
        parameters=[OpenApiParameter("run", OpenApiTypes.INT, required=False,
                                     description="a judge run id; default: the newest report of any run")],
        responses={200: OutputSerializer, 404: _NOT_FOUND},
    )
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        run_id = request.query_params.get("run")
        run = judge_run_get_for_project(project, run_id) if run_id not in (None, "") else None
        report = agreement_report_latest(project, judge_run_id=run.pk if run else None)
        body = {
            "status": "done" if report else "none",
            "id": report.pk if report else None,
            "computed_at": report.computed_at if report else None,
            "duration_ms": report.duration_ms if report else None,
            "units": report.units if report else 0,
            "judge_run": report.judge_run_id if report else None,
            "rubric_version": report.rubric_version.number if report and report.rubric_version else None,
            "recompute_pending": agreement_report_in_flight(project) is not None,
            "report": report.payload if report else None,
        }
        return Response(self.OutputSerializer(body).data)


class AgreementRecomputeApi(APIView):
    """Recompute the report now, from every label in the database (a Celery worker does the work)."""

    @extend_schema_serializer(component_name="AgreementRecomputeRequest")
    class InputSerializer(serializers.Serializer):
        run = serializers.IntegerField(required=False, allow_null=True,
                                       help_text="a judge run id; default: the project's newest finished run")

    @extend_schema_serializer(component_name="AgreementRecompute")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField(help_text="the report row being computed")
        status = serializers.CharField()

    @extend_schema(operation_id="agreement_recompute", request=InputSerializer,
                   responses={202: OutputSerializer, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run_id = body.validated_data.get("run")
        run = judge_run_get_for_project(project, run_id) if run_id is not None else None
        report = agreement_report_request(project=project, judge_run=run, now=timezone.now(), debounce_s=0)
        report.refresh_from_db(fields=["status"])
        return Response(self.OutputSerializer({"id": report.pk, "status": report.status}).data,
                        status=status.HTTP_202_ACCEPTED)
