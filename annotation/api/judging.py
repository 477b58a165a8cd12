"""API for judge runs: thin views over `annotation.judging` (judge-label imports are in `exchange`).

Only the project's PM or an admin reaches these; anyone else gets the same 404 as for
an id that does not exist. No response carries a run's API key or anything derived
from it.
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.judging.runs import judge_run_progress
from annotation.judging.selectors import judge_run_get_for_user


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
        superseded = serializers.IntegerField(help_text="tasks whose question changed in a later rubric version the "
                                                        "run was carried to; not in the total")
        total = serializers.IntegerField(help_text="done + failed + pending")
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
