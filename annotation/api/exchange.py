"""API for imports (questions, responses, golden references, judge labels) and the consensus
export: thin views over `annotation.exchange`.

Only the project's PM or an admin reaches these; anyone else gets the same 404 as for
a project that does not exist.
"""
from django.http import FileResponse, StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.serializers import ErrorOut
from annotation.exchange.export import COMPLETION, FILTER_NAMES, ZONES, export_filters_parse
from annotation.exchange.export_formats import FORMATS, export_format_check
from annotation.exchange.export_jobs import (
    export_job_create,
    export_job_file,
    export_job_get_for_user,
    export_stream_start,
)
from annotation.exchange.golden import golden_import
from annotation.exchange.jsonl import upload_open
from annotation.exchange.judge_labels import judge_labels_import
from annotation.exchange.questions import questions_import
from annotation.exchange.responses import responses_import
from annotation.selectors import project_get_for_user

_REFUSED = OpenApiResponse(ErrorOut, description="The file was refused (every bad line listed); nothing was written.")
_TOO_LARGE = OpenApiResponse(ErrorOut, description="The file is larger than the upload limit.")
_NOT_FOUND = OpenApiResponse(description="No such project, or not one you manage.")


class QuestionsImportApi(APIView):
    """Import questions and rubric items from HeartBench or HealthBench JSONL, all or nothing."""

    parser_classes = [MultiPartParser]

    @extend_schema_serializer(component_name="QuestionsImportInput")
    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="JSONL, one question per line (HeartBench or HealthBench rows)")

    @extend_schema_serializer(component_name="QuestionsImportOutput")
    class OutputSerializer(serializers.Serializer):
        questions_created = serializers.IntegerField()
        items_created = serializers.IntegerField()
        judge_only = serializers.IntegerField(help_text="New questions left judge-only: a blind test is active.")
        skipped = serializers.IntegerField(help_text="questions already present with identical content")
        version = serializers.IntegerField(allow_null=True,
                                           help_text="the rubric version published, null when nothing was new")

    @extend_schema(
        operation_id="questions_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 413: _TOO_LARGE},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        result = questions_import(project=project, data=upload_open(upload), now=timezone.now(),
                                  source=upload.name, by=request.user)
        body = {"questions_created": result.created, "items_created": result.items_created,
                "skipped": result.skipped, "version": result.version, "judge_only": result.judge_only}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class ResponsesImportApi(APIView):
    """Import model responses (or HeartBench's answer file with `model`), all or nothing."""

    parser_classes = [MultiPartParser]

    @extend_schema_serializer(component_name="ResponsesImportInput")
    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="JSONL: question_id, model, response per line")
        model = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                      help_text="model name for rows without a model field")

    @extend_schema_serializer(component_name="ResponsesImportOutput")
    class OutputSerializer(serializers.Serializer):
        responses_created = serializers.IntegerField()
        tasks_created = serializers.IntegerField()
        skipped = serializers.IntegerField(help_text="responses already present with identical text")
        version = serializers.IntegerField(allow_null=True, help_text="the rubric version the new tasks use")

    @extend_schema(
        operation_id="responses_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 413: _TOO_LARGE},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        result = responses_import(project=project, data=upload_open(upload),
                                  model=serializer.validated_data.get("model"), now=timezone.now(),
                                  source=upload.name, by=request.user)
        body = {"responses_created": result.created, "tasks_created": result.tasks_created,
                "skipped": result.skipped, "version": result.version}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class _FormatIsTheFileFormat(DefaultContentNegotiation):
    """Here `?format=` names the export's file format, not a DRF renderer; errors render as JSON."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


_FILTER_PARAMETERS = [
    OpenApiParameter("rubric_version", int, description="only tasks of this rubric version number"),
    OpenApiParameter("zone", str, enum=list(ZONES), description="only rubric items whose consensus is in this zone"),
    OpenApiParameter("dimension", str, description="only rubric items of this dimension (code or Chinese name)"),
    OpenApiParameter("model", str, description="only replies of this model"),
    OpenApiParameter("completion", str, enum=list(COMPLETION), default="complete",
                     description="complete: tasks with consensus only; all: unfinished tasks too (no votes yet)"),
    OpenApiParameter("submitted_after", OpenApiTypes.DATE,
                     description="only tasks with a counted submission on or after this date"),
]
_BAD_FILTER = OpenApiResponse(ErrorOut, description="Not a format the export writes, or an unknown filter value "
                                                    "(the filter and the values it accepts are named).")


class ConsensusExportApi(APIView):
    """Stream the consensus dataset, filtered: one row per task and rubric item.

    JSONL and CSV stream row by row; Parquet and the Hugging Face zip one row group at a
    time. Every download is recorded (snapshot id, filters, row count); the snapshot id
    comes back in the `X-Rubrica-Snapshot` header.
    """

    renderer_classes = [JSONRenderer]
    content_negotiation_class = _FormatIsTheFileFormat

    @extend_schema(
        operation_id="consensus_export",
        parameters=[OpenApiParameter("format", str, enum=list(FORMATS), default="jsonl",
                                     description="file format of the dataset"), *_FILTER_PARAMETERS],
        responses={
            (200, "application/x-ndjson"): OpenApiTypes.STR,
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            (200, "application/zip"): OpenApiTypes.BINARY,
            400: _BAD_FILTER,
            404: _NOT_FOUND,
        },
    )
    def get(self, request: Request, project_id: int) -> StreamingHttpResponse:
        project = project_get_for_user(request.user, project_id, manage=True)
        fmt = request.query_params.get("format", "jsonl")
        content_type, extension = export_format_check(fmt=fmt)
        filters = export_filters_parse(project=project, raw=request.query_params)
        job, chunks = export_stream_start(project=project, owner=request.user, fmt=fmt, filters=filters,
                                          now=timezone.now())
        response = StreamingHttpResponse(chunks, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="project-{project.pk}-consensus.{extension}"'
        response["X-Rubrica-Snapshot"] = str(job.snapshot_id)
        return response


@extend_schema_serializer(component_name="ExportJob")
class ExportJobOut(serializers.Serializer):
    id = serializers.IntegerField()
    snapshot_id = serializers.UUIDField()
    format = serializers.CharField(source="fmt")
    filters = serializers.DictField()
    status = serializers.CharField()
    progress_done = serializers.IntegerField(help_text="tasks written so far")
    progress_total = serializers.IntegerField(help_text="tasks the export covers")
    row_count = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField()


class ExportJobCreateApi(APIView):
    """Queue a large export as a file built by a worker; poll the job, then download it (owner only)."""

    @extend_schema_serializer(component_name="ExportJobCreateInput")
    class InputSerializer(serializers.Serializer):
        format = serializers.CharField(default="jsonl")
        rubric_version = serializers.CharField(required=False, allow_blank=True)
        zone = serializers.CharField(required=False, allow_blank=True)
        dimension = serializers.CharField(required=False, allow_blank=True)
        model = serializers.CharField(required=False, allow_blank=True)
        completion = serializers.CharField(required=False, allow_blank=True)
        submitted_after = serializers.CharField(required=False, allow_blank=True)

    @extend_schema(operation_id="export_job_create", request=InputSerializer,
                   responses={202: ExportJobOut, 400: _BAD_FILTER, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fmt = body.validated_data["format"]
        export_format_check(fmt=fmt)
        filters = export_filters_parse(project=project, raw={k: body.validated_data.get(k) for k in FILTER_NAMES})
        job = export_job_create(project=project, owner=request.user, fmt=fmt, filters=filters, now=timezone.now())
        job.refresh_from_db()
        return Response(ExportJobOut(job).data, status=status.HTTP_202_ACCEPTED)


class ExportJobApi(APIView):
    """One of your export jobs: status and progress."""

    @extend_schema(operation_id="export_job_get", responses={200: ExportJobOut, 404: _NOT_FOUND})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(ExportJobOut(export_job_get_for_user(request.user, job_id)).data)


class ExportJobDownloadApi(APIView):
    """The file of one of your finished export jobs; 410 once it has expired."""

    renderer_classes = [JSONRenderer]

    @extend_schema(operation_id="export_job_download",
                   responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 404: _NOT_FOUND,
                              409: OpenApiResponse(ErrorOut, description="Not built yet."),
                              410: OpenApiResponse(ErrorOut, description="Expired.")})
    def get(self, request: Request, job_id: int) -> FileResponse:
        job = export_job_get_for_user(request.user, job_id)
        path = export_job_file(job=job, now=timezone.now())
        content_type, extension = FORMATS[job.fmt]
        return FileResponse(path.open("rb"), as_attachment=True, content_type=content_type,
                            filename=f"project-{job.project_id}-{job.snapshot_id}.{extension}")


class GoldenImportApi(APIView):
    """Import golden reference labels (JSONL: question_id, model, labels [0/1 per rubric position],
    optional rationale [text per position]) for tasks of the current rubric version, all or nothing."""

    parser_classes = [MultiPartParser]

    @extend_schema_serializer(component_name="GoldenImportInput")
    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="JSONL: question_id, model, labels [0/1 per rubric position], "
                                               "optional rationale")

    @extend_schema_serializer(component_name="GoldenImportOutput")
    class OutputSerializer(serializers.Serializer):
        tasks = serializers.IntegerField(help_text="golden tasks written")
        references = serializers.IntegerField(help_text="reference labels written")
        version = serializers.IntegerField(help_text="the rubric version they belong to")

    @extend_schema(
        operation_id="golden_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 413: _TOO_LARGE},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        result = golden_import(project=project, data=upload_open(upload), now=timezone.now(), source=upload.name,
                               by=request.user)
        out = {"tasks": result.tasks, "references": result.references, "version": result.version}
        return Response(self.OutputSerializer(out).data, status=status.HTTP_201_CREATED)


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
        config_version = serializers.IntegerField(
            required=False, allow_null=True, min_value=1,
            help_text="id of the project's judge configuration version the labels were produced with")

    @extend_schema_serializer(component_name="JudgeLabelsImportOutput")
    class OutputSerializer(serializers.Serializer):
        run = serializers.IntegerField(help_text="the judge run id")
        created = serializers.IntegerField(help_text="judged responses added")
        labels_created = serializers.IntegerField()
        skipped = serializers.IntegerField(help_text="rows the run already held as they are")

    @extend_schema(
        operation_id="judge_labels_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 413: _TOO_LARGE},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data["file"]
        result = judge_labels_import(project=project, data=upload_open(upload), run_name=data["run"],
                                     judge_model=data.get("judge_model"), prompt_version=data.get("prompt_version"),
                                     created_by=request.user, now=timezone.now(), source=upload.name,
                                     config_version=data.get("config_version"))
        body = {"run": result.run.pk, "created": result.created, "labels_created": result.labels_created,
                "skipped": result.skipped}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)
