"""API for judge runs: thin views over `annotation.judging` (judge-label imports are in `exchange`).

Only the project's PM or an admin reaches these; anyone else gets the same 404 as for
an id that does not exist. No response carries a run's API key or anything derived
from it, and a failed task says its error class and HTTP status, never what the
endpoint answered.
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.judging.runs import MAX_RPS, MODEL_MAX, NAME_MAX, URL_MAX, judge_run_progress, judge_run_start
from annotation.judging.selectors import judge_run_failures, judge_run_get_for_user
from annotation.models import JudgeRun
from annotation.selectors import project_get_for_user


@extend_schema_serializer(component_name="JudgeTaskFailure")
class _FailureSerializer(serializers.Serializer):
    task = serializers.IntegerField(source="task_id")
    question_id = serializers.CharField(source="task.response.question.external_id")
    model = serializers.CharField(source="task.response.model_name")
    attempts = serializers.IntegerField()
    error_class = serializers.CharField(help_text="http_status, refused, timeout, connect, dns, tls, protocol, "
                                                  "too_many_redirects, not_chat_completion, no_content, "
                                                  "unparseable_answer, key, bad_rubric or internal")
    http_status = serializers.IntegerField(allow_null=True, help_text="the endpoint's last HTTP status, if any")
    error = serializers.CharField(help_text="what went wrong, in words; never the endpoint's answer")


@extend_schema_serializer(component_name="JudgeRunProgress")
class _ProgressSerializer(serializers.Serializer):
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
    superseded = serializers.IntegerField(help_text="tasks whose question changed in a later rubric version the "
                                                    "run was carried to; not in the total")
    total = serializers.IntegerField(help_text="done + failed + pending")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    failures = _FailureSerializer(many=True, help_text="the first 200 failed tasks, first failed first")


def _progress_body(run: JudgeRun) -> dict:
    progress = judge_run_progress(run)
    run.refresh_from_db(fields=["status", "started_at", "finished_at"])
    return {
        "id": run.pk, "project": run.project_id, "name": run.name, "source": run.source,
        "judge_model": run.judge_model, "prompt_version": run.prompt_version,
        "rubric_version": run.rubric_version.number, "requests_per_second": run.requests_per_second,
        "started_at": run.started_at, "finished_at": run.finished_at, **progress,
        "failures": judge_run_failures(run) if progress["failed"] else [],
    }


class JudgeRunProgressApi(APIView):
    """A judge run's settings (never its key) and progress: done, failed, pending of total."""

    OutputSerializer = _ProgressSerializer

    @extend_schema(operation_id="judge_run_progress",
                   responses={200: OutputSerializer, 404: OpenApiResponse(description="No such judge run.")})
    def get(self, request: Request, run_id: int) -> Response:
        run = judge_run_get_for_user(request.user, run_id)
        return Response(self.OutputSerializer(_progress_body(run)).data)


class JudgeRunStartApi(APIView):
    """Start a live judge run over the project's non-golden tasks of its current rubric version.

    Give `api_key` (stored encrypted, never returned). `api_key_env` names an environment
    variable of the workers instead: admins only, on a project with a grant for it.
    """

    @extend_schema_serializer(component_name="JudgeRunStart")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=NAME_MAX)
        base_url = serializers.CharField(max_length=URL_MAX, required=False, allow_blank=True,
                                         help_text="OpenAI-compatible, ending in the API version, e.g. "
                                                   "https://api.openai.com/v1; may be left out when the "
                                                   "configuration version names one")
        judge_model = serializers.CharField(max_length=MODEL_MAX, required=False, allow_blank=True,
                                            help_text="may be left out when the configuration version names one")
        config_version = serializers.IntegerField(
            required=False, allow_null=True, min_value=1,
            help_text="id of a judge configuration version of this project: its prompt template, temperature "
                      "and parameters are sent (without it, the built-in prompt at temperature 0)")
        api_key = serializers.CharField(max_length=1000, required=False, allow_blank=True, write_only=True)
        api_key_env = serializers.CharField(max_length=100, required=False, allow_blank=True,
                                            help_text="admins only, on a project granted the variable")
        requests_per_second = serializers.FloatField(required=False, default=2.0, min_value=0.001,
                                                     max_value=MAX_RPS)

    @extend_schema(operation_id="judge_run_start", request=InputSerializer,
                   responses={201: _ProgressSerializer,
                              404: OpenApiResponse(description="No such project, or not one you manage.")})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run = judge_run_start(project=project, name=data["name"], base_url=data.get("base_url", ""),
                              judge_model=data.get("judge_model", ""), config_version=data.get("config_version"),
                              api_key=data.get("api_key") or None,
                              api_key_env=data.get("api_key_env") or None,
                              requests_per_second=data["requests_per_second"], created_by=request.user)
        return Response(_ProgressSerializer(_progress_body(run)).data, status=status.HTTP_201_CREATED)
