"""The PM's assignment modes over the API: assign tasks by hand, set their priority, hand an expert's leases over.

Each view resolves the project for its PM (404 for anyone else, before any input is read),
then calls one service of `annotation.assignment.manual`.
"""
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND
from annotation.assignment.manual import (
    assignments_create_by_hand,
    experts_named,
    leases_hand_over,
    tasks_set_priority,
)
from annotation.models.work import PRIORITY_MAX
from annotation.selectors import project_get_for_user


@extend_schema_serializer(component_name="ManualLeaseOut")
class ManualLeaseOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    task = serializers.IntegerField(source="task_id")
    expert = serializers.CharField(source="expert.username")
    slot = serializers.IntegerField()
    expires_at = serializers.DateTimeField()


class AssignByHandApi(APIView):
    """Lease tasks of the project to named experts (urgent work): all of them, or nothing with the reason."""

    @extend_schema_serializer(component_name="AssignByHandIn")
    class InputSerializer(serializers.Serializer):
        tasks = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=5000)
        experts = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1, max_length=50,
                                        help_text="usernames")

    @extend_schema_serializer(component_name="AssignByHandOut")
    class OutputSerializer(serializers.Serializer):
        assignments = ManualLeaseOut(many=True)

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer, 404: NOT_FOUND})
    def post(self, request, project_id: int):
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = assignments_create_by_hand(project=project, task_ids=body.validated_data["tasks"],
                                            experts=experts_named(body.validated_data["experts"]),
                                            by=request.user, now=timezone.now())
        return Response(self.OutputSerializer(result).data, status=201)


class TaskPriorityApi(APIView):
    """Set the priority of tasks of the project: the claim draws the highest first, at random among equals."""

    @extend_schema_serializer(component_name="TaskPriorityIn")
    class InputSerializer(serializers.Serializer):
        tasks = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=5000)
        priority = serializers.IntegerField(help_text=f"0 (default) to {PRIORITY_MAX}")

    @extend_schema_serializer(component_name="TaskPriorityOut")
    class OutputSerializer(serializers.Serializer):
        changed = serializers.IntegerField()
        priority = serializers.IntegerField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 404: NOT_FOUND})
    def post(self, request, project_id: int):
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        changed = tasks_set_priority(project=project, task_ids=data["tasks"], priority=data["priority"],
                                     by=request.user)
        return Response(self.OutputSerializer({"changed": changed, "priority": data["priority"]}).data)


class HandOverApi(APIView):
    """Move an expert's open leases to named experts, drafts included; a lease none of them may take
    returns to the pool. One transaction."""

    @extend_schema_serializer(component_name="HandOverIn")
    class InputSerializer(serializers.Serializer):
        expert = serializers.CharField(max_length=150, help_text="username of the expert whose leases move")
        to = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1, max_length=50,
                                   help_text="usernames, taken in turn")

    @extend_schema_serializer(component_name="HandOverOut")
    class OutputSerializer(serializers.Serializer):
        moved = serializers.IntegerField()
        returned = serializers.IntegerField()
        assignments = ManualLeaseOut(many=True)

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 404: NOT_FOUND})
    def post(self, request, project_id: int):
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        (expert,) = experts_named([body.validated_data["expert"]])
        result = leases_hand_over(project=project, expert=expert, to=experts_named(body.validated_data["to"]),
                                  by=request.user, now=timezone.now())
        return Response(self.OutputSerializer({"moved": len(result.moved), "returned": len(result.returned),
                                               "assignments": result.moved}).data)
