"""`{% project_tabs %}`: a managed project's pages, grouped so that they fit one row.

Seven top tabs (Overview, Board, Quality, People, Rubric & guidance, Costs, Settings); a
group's tab opens its first page, and the group holding the current page shows its pages
on a second row. Every page a PM reaches from the tabs, and the pages one level inside
them, mark their tab and group as current.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

register = template.Library()


@dataclass(frozen=True)
class Tab:
    url_name: str
    label: Any
    # The other pages that belong to this tab (forms and details reached from it).
    also: tuple[str, ...] = ()

    def covers(self, current: str) -> bool:
        return current == self.url_name or current in self.also


@dataclass(frozen=True)
class Group:
    key: str
    label: Any
    tabs: tuple[Tab, ...]


GROUPS: tuple[Group, ...] = (
    Group("overview", _("Overview"), (
        Tab("project_detail", _("Overview"), ("project_import", "exports", "export_job_start", "project_pause",
                                              "project_resume", "project_clone")),
    )),
    Group("board", _("Board"), (Tab("board", _("Board"), ("task_history",)),)),
    Group("quality", _("Quality"), (
        Tab("quality_dashboard", _("Quality dashboard"), ("quality_items", "quality_status", "quality_recompute",
                                                                    "benchmark_report", "benchmark_report_recompute",
                                                                    "benchmark_gates_edit")),
        Tab("judge_runs", _("Judge runs"), ("judge_labels_import", "judge_run")),
        Tab("judge_convergence", _("Convergence"), ("judge_convergence_targets",)),
        Tab("blind_test", _("Blind test"), ("blind_test_create",)),
        Tab("quality", _("Calibration & golden set"), ("golden_import", "quality_experts", "quality_expert",
                                                                  "quality_expert_resume", "quality_expert_evaluate",
                                                                  "calibration", "calibration_start")),
        Tab("review_queue", _("Review"), ("review_accept", "review_return", "review_reject")),
    )),
    Group("people", _("People"), (
        Tab("workload", _("Workload"), ("batch", "batch_tasks", "batch_experts", "batch_job")),
        Tab("members", _("Members"), ("member_remove", "invitation_create", "invitation_revoke")),
        Tab("project_skips", _("Skips")),
        Tab("consultation_list", _("Consultations"), ("consultation_detail", "consultation_open_pm")),
    )),
    Group("guidance", _("Rubric & guidance"), (
        Tab("rubric_draft", _("Rubric"), ("rubric_draft_start", "rubric_item_add", "rubric_item_edit",
                                          "rubric_item_delete", "rubric_publish", "rubric_versions",
                                          "rubric_versions_compare", "rubric_guidelines_save", "project_guidelines",
                                          "rubric_suggestion_take", "rubric_suggestion_dismiss")),
        Tab("cases", _("Case library"), ("case_new", "case_detail", "case_edit", "case_publish", "case_unpublish")),
        Tab("faq", _("FAQ"), ("faq_ask", "faq_detail", "faq_similar", "faq_answer")),
    )),
    Group("costs", _("Costs"), (
        Tab("project_costs", _("Costs"), ("period_close", "submission_reject", "submissions_reject_batch",
                                                  "project_appeals")),
    )),
    Group("settings", _("Settings"), (
        Tab("project_settings", _("General"), ("project_close", "project_archive", "project_overlap_preview")),
        Tab("webhooks", _("Webhooks"), ("webhook_disable", "webhook_resend")),
        Tab("project_audit", _("Audit log")),
    )),
)


@register.inclusion_tag("partials/project_tabs_nav.html", takes_context=True)
def project_tabs(context: template.Context, project: Any) -> dict[str, Any]:
    match = getattr(context.get("request"), "resolver_match", None)
    current = match.url_name if match else ""
    groups, pages = [], []
    for group in GROUPS:
        links = [{"url": reverse(tab.url_name, args=[project.pk]), "label": tab.label,
                  "current": tab.covers(current)} for tab in group.tabs]
        active = any(link["current"] for link in links)
        groups.append({"key": group.key, "label": group.label, "url": links[0]["url"], "active": active,
                       "single": len(links) == 1})
        if active and len(links) > 1:
            pages = links
    active_group = next((g for g in groups if g["active"]), None)
    return {"groups": groups, "pages": pages, "active_group": active_group}
