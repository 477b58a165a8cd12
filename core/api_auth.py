"""Token authentication that brings the expert's profile along with the user.

DRF's `TokenAuthentication` reads the token with its user in one query; nearly every API
call an expert makes (next task, autosave, submit) then reads their profile (active or
paused, tier, lease limit) in a second. This subclass joins the profile into the first.
The query is compiled once per process (`core.prepared`): every API call pays it.
"""
from typing import Any

from django.db.models import QuerySet
from rest_framework import authentication
from rest_framework.authtoken.models import Token

from core.prepared import Prepared


def _token_query(*, key: str) -> QuerySet[Any]:
    return Token.objects.select_related("user__expert_profile").filter(key=key)


_TOKEN = Prepared(_token_query)


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        token = _TOKEN.first(key=key)
        if token is None or not token.user.is_active:
            # DRF's own refusal, in the user's language (one more query, only for a bad token).
            return super().authenticate_credentials(key)
        return (token.user, token)
