"""`{{ error|line_error }}`: one import line error's problem in the reader's language."""
from typing import Any

from django import template

from annotation.exchange.jsonl import line_error_text

register = template.Library()


@register.filter
def line_error(error: dict[str, Any]) -> str:
    return line_error_text(error)
