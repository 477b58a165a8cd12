"""Filters of the judge pages: a proportion, its interval and a p-value as a PM reads them."""
from __future__ import annotations

import math
from typing import Any

from django import template

from annotation.dashboard.context import DASH, pct, span

register = template.Library()


@register.filter
def percent(value: float | None) -> str:
    return pct(value)


@register.filter
def interval(pair: Any) -> str:
    if pair is None:
        return DASH
    return span([x if x is not None and math.isfinite(x) else None for x in pair])


@register.filter
def pvalue(p: float | None) -> str:
    """Three significant digits; very small values as "< 0.001" (more digits would be noise)."""
    if p is None or not math.isfinite(p):
        return DASH
    if p < 0.001:
        return "< 0.001"
    return f"{p:.3g}"
