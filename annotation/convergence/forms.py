"""The PM's form for the convergence targets, the drift threshold and the safety dimensions."""
from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from rubrics.models import Dimension

PCT_MESSAGE = _("Enter a number from 0 to 100.")


def _pct_field(label: Any, help_text: Any, *, minimum: float = 0) -> forms.FloatField:
    return forms.FloatField(
        label=label, help_text=help_text, min_value=minimum, max_value=100,
        error_messages={"min_value": PCT_MESSAGE, "max_value": PCT_MESSAGE, "invalid": PCT_MESSAGE,
                        "required": PCT_MESSAGE},
        widget=forms.NumberInput(attrs={"min": minimum, "max": 100, "step": "any", "inputmode": "decimal"}))


class ConvergenceTargetsForm(forms.Form):
    safety_target_pct = _pct_field(_("Target on safety dimensions (%)"), _("Default 90 (GrowLoop)."))
    other_target_pct = _pct_field(_("Target on the other dimensions (%)"), _("Default 85 (GrowLoop)."))
    drift_threshold_pct = _pct_field(
        _("Judge drift: tell me when a run's labels differ from an earlier run's on more than (%)"),
        _("Default 10, of the units both runs labelled (at least 20 units)."))
    safety_dimensions = forms.MultipleChoiceField(label=_("Safety dimensions"), required=False,
                                                  widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, english: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["safety_dimensions"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(code, en if english else zh) for code, zh, en in
                         Dimension.objects.order_by("sort_order", "code").values_list("code", "name_zh", "name_en")]

    def clean_drift_threshold_pct(self) -> float:
        value: float = self.cleaned_data["drift_threshold_pct"]
        if value <= 0:
            raise forms.ValidationError(_("Enter a number more than 0 and at most 100."))
        return value
