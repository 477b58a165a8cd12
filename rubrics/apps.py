from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RubricsConfig(AppConfig):
    name = "rubrics"
    verbose_name = _("Rubrics")
