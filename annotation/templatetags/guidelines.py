"""Template helpers for the guidelines: the panel's content and the prompt before calibration.

Tags rather than view context, so the pages that show them (the annotation and calibration
pages) need no change to their views.
"""
from django import template

from annotation.models import Project
from annotation.selectors import rubric_version_current
from rubrics.guidelines import RenderedGuidelines, guidelines_render
from rubrics.models import RubricVersion

register = template.Library()


@register.simple_tag
def guidelines_of(version: RubricVersion | None) -> RenderedGuidelines:
    """The rendered guidelines of `version` (empty without one)."""
    return guidelines_render(version.guidelines if version is not None else "")


@register.simple_tag
def guidelines_current(project: Project) -> RubricVersion | None:
    """The project's current published rubric version, whose guidelines calibration follows."""
    return rubric_version_current(project)
