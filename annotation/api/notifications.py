"""The caller's notifications."""
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from experts.models import Notification
from experts.notifications import notification_list_for_user, notification_text


class NotificationsApi(APIView):
    """The caller's latest notifications, newest first, in their language."""

    @extend_schema_serializer(component_name="Notification")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        kind = serializers.CharField()
        message = serializers.SerializerMethodField()
        link = serializers.CharField()
        created_at = serializers.DateTimeField()
        read_at = serializers.DateTimeField(allow_null=True)

        def get_message(self, obj: Notification) -> str:
            return notification_text(obj)

    @extend_schema(operation_id="notification_list", responses={200: OutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer(notification_list_for_user(request.user)[:100], many=True).data)
