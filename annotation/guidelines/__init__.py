"""Reading a project's annotation guidelines: the page, the annotation-page panel, the links per dimension.

Rendering and the allowed tags live in `rubrics.guidelines`; editing lives with the rubric
draft (`annotation.rubric_editing`).
"""
