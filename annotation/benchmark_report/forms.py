"""The PM's form for the benchmark gate bars."""
from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.models import BenchmarkGates


class BenchmarkGatesForm(forms.ModelForm):
    """Five numbers between 0 and 100: score points for spread and saturation, percentages for the rest."""

    class Meta:
        model = BenchmarkGates
        fields = ["spread_min", "separation_min_pct", "gaps_significant_min_pct", "saturation_max",
                  "rank_stability_min_pct"]
        labels = {
            "spread_min": _("Spread: best minus worst score at least (points)"),
            "separation_min_pct": _("Separation: resamples keeping the full order at least (%)"),
            "gaps_significant_min_pct": _("Gaps: adjacent pairs with a significant gap at least (%)"),
            "saturation_max": _("Saturation: best score below (points)"),
            "rank_stability_min_pct": _("Stable ranks: every model within one place in at least (%) of resamples"),
        }
        help_texts = {
            "spread_min": _("Default 10 (ours: GrowLoop names the gate, not the number)."),
            "separation_min_pct": _("Default 95 (ours)."),
            "gaps_significant_min_pct": _("Default 100: every adjacent gap significant (ours)."),
            "saturation_max": _("Default 90 (ours)."),
            "rank_stability_min_pct": _("Default 95 (ours); the 1,000 resamples are GrowLoop's number."),
        }
        error_messages = {
            name: {"min_value": _("Enter a number from 0 to 100."), "max_value": _("Enter a number from 0 to 100."),
                   "invalid": _("Enter a number from 0 to 100."), "required": _("Enter a number from 0 to 100.")}
            for name in ["spread_min", "separation_min_pct", "gaps_significant_min_pct", "saturation_max",
                         "rank_stability_min_pct"]
        }
        widgets = {name: forms.NumberInput(attrs={"min": 0, "max": 100, "step": "any", "inputmode": "decimal"})
                   for name in ["spread_min", "separation_min_pct", "gaps_significant_min_pct", "saturation_max",
                                "rank_stability_min_pct"]}

