"""The PM's form for drawing a blind-test sample."""
from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.blind_test.services import SEED_MAX
from annotation.models.blind_test import BLIND_SHARE, PASS_BAR_PCT

SHARE_MESSAGE = _("Enter a share more than 0 and at most 1, such as 0.4.")
# SEED_MAX written out: a lazy message cannot be interpolated at import time.
SEED_MESSAGE = _("Enter a whole number from 0 to 9007199254740992, or leave it empty for a random seed.")
BAR_MESSAGE = _("Enter a number from 0 to 100.")


class BlindTestForm(forms.Form):
    share = forms.FloatField(
        label=_("Share of the questions (0–1)"), initial=BLIND_SHARE, max_value=1,
        help_text=_("Default 0.4: four questions in ten, drawn in proportion within each scene and difficulty."),
        error_messages={"max_value": SHARE_MESSAGE, "invalid": SHARE_MESSAGE, "required": SHARE_MESSAGE},
        widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "any", "inputmode": "decimal"}))
    seed = forms.IntegerField(
        label=_("Seed"), required=False, min_value=0, max_value=SEED_MAX,
        help_text=_("The same seed draws the same sample; empty: a random seed, recorded with the sample."),
        error_messages={"min_value": SEED_MESSAGE, "max_value": SEED_MESSAGE, "invalid": SEED_MESSAGE},
        widget=forms.NumberInput(attrs={"min": 0, "step": 1, "inputmode": "numeric"}))
    pass_bar_pct = forms.FloatField(
        label=_("Pass bar: human–judge agreement at least (%)"), initial=f"{PASS_BAR_PCT:g}", min_value=0,
        max_value=100,
        help_text=_("Default 75."),
        error_messages={"min_value": BAR_MESSAGE, "max_value": BAR_MESSAGE, "invalid": BAR_MESSAGE,
                        "required": BAR_MESSAGE},
        widget=forms.NumberInput(attrs={"min": 0, "max": 100, "step": "any", "inputmode": "decimal"}))

    def __init__(self, *args: Any, has_questions: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.has_questions = has_questions

    def clean(self) -> dict[str, Any] | None:
        data = super().clean()
        if not self.has_questions:
            raise forms.ValidationError(_("The project has no questions to sample yet: import them first. "
                                          "Nothing was drawn."))
        return data

    def clean_share(self) -> float:
        value: float = self.cleaned_data["share"]
        if value <= 0:
            raise forms.ValidationError(SHARE_MESSAGE)
        return value

    def cleaned(self) -> dict[str, Any]:
        return {"share": self.cleaned_data["share"], "seed": self.cleaned_data["seed"],
                "pass_bar_pct": self.cleaned_data["pass_bar_pct"]}
