"""API for judge labels and judge runs: thin views over `annotation.judging`.

Only the project's PM or an admin reaches these; anyone else gets the same 404 as for
an id that does not exist. No response carries a run's API key or anything derived
from it.
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.exchange.jsonl import upload_read
from annotation.judging.imports import judge_labels_import
from annotation.judging.selectors import judge_run_get_for_user
from annotation.judging.services import judge_run_progress
from annotation.selectors import project_get_for_user

_ERROR = inline_serializer("JudgeImportError", fields={
    "detail": serializers.CharField(),
    "code": serializers.CharField(),
    "errors": serializers.ListField(child=serializers.DictField(), required=False,
                                    help_text='[{"line": 7, "field": "detail", "message": "..."}]'),
})


class JudgeLabelsImportApi(APIView):
    """Import judge labels (question_id, model, detail, reason per line) under a named run, all or nothing."""

    parser_classes = [MultiPartParser]

    @extend_schema_serializer(component_name="JudgeLabelsImportInput")
    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="JSONL: question_id, model, detail [0/1 per rubric position], "
                                               "optional reason")
        run = serializers.CharField(max_length=100, help_text="judge run name; labels are added if it exists")
        judge_model = serializers.CharField(max_length=200, required=False, allow_blank=True)
        prompt_version = serializers.CharField(max_length=100, required=False, allow_blank=True)

    @extend_schema_serializer(component_name="JudgeLabelsImportOutput")
    class OutputSerializer(serializers.Serializer):
        run = serializers.IntegerField(help_text="the judge run id")
        created = serializers.IntegerField(help_text="judged responses added")
        labels_created = serializers.IntegerField()
        skipped = serializers.IntegerField(help_text="rows the run already held as they are")

    @extend_schema(
        operation_id="judge_labels_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 400: _ERROR, 404: OpenApiResponse(description="No such project."),
                   413: _ERROR},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data["file"]
        result = judge_labels_import(project=project, data=upload_read(upload), run_name=data["run"],
                                     judge_model=data.get("judge_model"), prompt_version=data.get("prompt_version"),
                                     created_by=request.user, now=timezone.now(), source=upload.name)
        body = {"run": result.run.pk, "created": result.created, "labels_created": result.labels_created,
                "skipped": result.skipped}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class JudgeRunProgressApi(APIView):
    """A judge run's settings (never its key) and progress: done, failed, pending of total."""

    @extend_schema_serializer(component_name="JudgeRunProgress")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        project = serializers.IntegerField()
        name = serializers.CharField()
        source = serializers.CharField()
        status = serializers.CharField()
        judge_model = serializers.CharField()
        prompt_version = serializers.CharField()
        rubric_version = serializers.IntegerField(help_text="the rubric version number")
        requests_per_second = serializers.FloatField()
        done = serializers.IntegerField()
        failed = serializers.IntegerField()
        pending = serializers.IntegerField()
        total = serializers.IntegerField()
        started_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema(operation_id="judge_run_progress",
                   responses={200: OutputSerializer, 404: OpenApiResponse(description="No such judge run.")})
    def get(self, request: Request, run_id: int) -> Response:
        run = judge_run_get_for_user(request.user, run_id)
        progress = judge_run_progress(run)
        run.refresh_from_db(fields=["status", "started_at", "finished_at"])
        body = {
            "id": run.pk, "project": run.project_id, "name": run.name, "source": run.source,
            "judge_model": run.judge_model, "prompt_version": run.prompt_version,
            "rubric_version": run.rubric_version.number, "requests_per_second": run.requests_per_second,
            "started_at": run.started_at, "finished_at": run.finished_at, **progress,
        }
        return Response(self.OutputSerializer(body).data)
