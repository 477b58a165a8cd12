"""The caller's notifications.
"""
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from experts.notifications import notification_list_for_user, notification_text


class NotificationOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    message = serializers.SerializerMethodField()
    link = serializers.CharField()
    created_at = serializers.DateTimeField()
    read_at = serializers.DateTimeField(allow_null=True)

    def get_message(self, obj) -> str:
        return notification_text(obj)


class NotificationsApi(APIView):
    """The caller's latest notifications, newest first, in their language."""

    @extend_schema(responses={200: NotificationOut(many=True)})
    def get(self, request: Request) -> Response:
        return Response(NotificationOut(notification_list_for_user(request.user)[:100], many=True).data)
