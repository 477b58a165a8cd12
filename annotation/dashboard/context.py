"""Turn a stored agreement report into what the quality dashboard shows.

Pure presentation over the stored payload (never raw labels): display strings, the
link behind every figure (the items page, filtered), and the series the charts draw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _

from annotation.models import AgreementReport, Project
from annotation.rubric_editing.pricing import PeriodSpend
from experts.models import ExpertProfile, Tier
from rubrics.models import Category

DASH = "—"
DISAGREEMENTS_SHOWN = 100


def pct(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{100 * value:.{digits}f}%"


def dec(value: float | None, digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def span(pair: list[float | None] | None, as_pct: bool = True) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return DASH
    fmt = pct if as_pct else dec
    return f"{fmt(pair[0])} – {fmt(pair[1])}"


@dataclass(frozen=True)
class AgreementRow:
    """One slice of judge-vs-majority agreement, with its CI and the link to its units."""

    key: str
    name: str
    n: int
    questions: int
    agreement: str
    agreement_ci: str
    kappa: str
    kappa_ci: str
    judge_hit: str
    human_hit: str
    link: str
    disagree_link: str
    extra: dict[str, Any]
    thin: bool = False


class ReportView:
    """The dashboard's reading of one stored report."""

    def __init__(self, *, project: Project, report: AgreementReport) -> None:
        self.project = project
        self.report = report
        self.payload: dict[str, Any] = report.payload or {}
        self.run_id = report.judge_run_id
        self.english = (get_language() or "").startswith("en")
        self.dims = {d["code"]: d for d in self.payload.get("dimensions", [])}
        self.items_url = reverse("quality_items", args=[project.pk])

    # --- links and names -------------------------------------------------------------

    def link(self, **filters: Any) -> str:
        params = {k: v for k, v in filters.items() if v not in (None, "")}
        if self.run_id:
            params["run"] = self.run_id
        return f"{self.items_url}?{urlencode(params)}"

    def dim_name(self, code: str) -> str:
        dim = self.dims.get(code)
        if dim is None:
            return code
        return dim["name_en"] if self.english else dim["name_zh"]

    @staticmethod
    def category_name(code: str) -> str:
        return str(Category(code).label) if code in Category.values else code

    @staticmethod
    def zone_name(code: str) -> str:
        return {"unanimous": _("Unanimous"), "split": _("Split"), "tied": _("Tied"),
                "single": _("Single label")}.get(code, code)

    @staticmethod
    def difficulty_name(code: str) -> str:
        return {"normal": _("Normal"), "hard": _("Hard")}.get(code, code)

    # --- sections ----------------------------------------------------------------------

    @property
    def judge(self) -> dict[str, Any] | None:
        return self.payload.get("judge")

    def _rows(self, rows: list[dict[str, Any]], name, filter_name: str) -> list[AgreementRow]:
        return [
            AgreementRow(
                key=r["key"], name=name(r["key"]), n=r["n"], questions=r["questions"],
                agreement=pct(r["agreement"]), agreement_ci=span(r["agreement_ci"]),
                kappa=dec(r["kappa"]), kappa_ci=span(r["kappa_ci"], as_pct=False),
                judge_hit=pct(r["judge_hit_rate"]), human_hit=pct(r["human_hit_rate"]),
                link=self.link(**({filter_name: r["key"]} if filter_name else {})),
                disagree_link=self.link(**({filter_name: r["key"]} if filter_name else {}), disagree=1),
                extra={k: v for k, v in r.items() if k == "zones"},
                thin=bool(r.get("thin")),
            )
            for r in rows
        ]

    def labels_used(self) -> str:
        """Which expert labels the report read, in words (reports before the reveal existed read first labels)."""
        if self.payload.get("labels_used") == "revised":
            return _("This report uses the experts' revised labels (after the judge's reveal) where they revised, "
                     "their first labels elsewhere.")
        return _("This report uses the experts' first labels, as submitted before any reveal of the judge's labels.")

    def reveal(self) -> dict[str, Any] | None:
        """Agreement before and after the reveal, side by side; None while nobody revised a label."""
        section = self.payload.get("reveal")
        if not section:
            return None

        def side(name: str, headline: dict[str, Any] | None) -> dict[str, Any]:
            row = (headline or {}).get("overall") or {}
            return {"name": name, "n": row.get("n", 0), "agreement": pct(row.get("agreement")),
                    "agreement_ci": span(row.get("agreement_ci")), "kappa": dec(row.get("kappa"))}

        return {**section,
                "sides": [side(_("First labels (before the reveal)"), section.get("before")),
                          side(_("Revised labels (after the reveal)"), section.get("after"))]}

    def zone_aware(self) -> dict[str, Any] | None:
        """Zone-aware agreement (GrowLoop): its own figures, never folded into the strict ones."""
        section = (self.judge or {}).get("zone_aware")
        if not section or not section.get("overall"):
            return None

        def text(r: dict[str, Any], name: str) -> dict[str, Any]:
            return {"key": r["key"], "name": name, "n": r["n"], "acceptable": r["acceptable"],
                    "agreement": pct(r["agreement"]), "agreement_ci": span(r["agreement_ci"])}

        return {"overall": text(section["overall"], _("All units")),
                "by_dimension": [text(r, self.dim_name(r["key"])) for r in section.get("by_dimension", [])]}

    def overall(self) -> AgreementRow | None:
        """The headline: every judged unit outside the gate dimension."""
        judge = self.judge
        if not judge or not judge.get("overall"):
            return None
        return self._rows([judge["overall"]], lambda _key: _("All units"), "")[0]

    def gate_line(self) -> AgreementRow | None:
        """The gate items on their own (left out of the headline)."""
        judge = self.judge or {}
        if not judge.get("gate"):
            return None
        gate_code = next((code for code, d in self.dims.items() if d.get("is_gate")), "")
        row = self._rows([judge["gate"]], lambda _key: _("Gate items"), "")[0]
        return replace(row, link=self.link(dimension=gate_code),
                       disagree_link=self.link(dimension=gate_code, disagree=1))

    def overall_with_gate(self) -> AgreementRow | None:
        judge = self.judge or {}
        if not judge.get("overall_with_gate"):
            return None
        return self._rows([judge["overall_with_gate"]], lambda _key: _("All units, gate included"), "")[0]

    def by_dimension(self) -> list[AgreementRow]:
        return self._rows(self.judge["by_dimension"], self.dim_name, "dimension") if self.judge else []

    def by_category(self) -> list[AgreementRow]:
        return self._rows(self.judge["by_category"], self.category_name, "category") if self.judge else []

    def by_model(self) -> list[AgreementRow]:
        return self._rows(self.judge["by_model"], str, "model") if self.judge else []

    def by_difficulty(self) -> list[AgreementRow]:
        return self._rows(self.judge["by_difficulty"], self.difficulty_name, "difficulty") if self.judge else []

    def by_zone(self) -> list[AgreementRow]:
        return self._rows(self.judge["by_zone"], self.zone_name, "zone") if self.judge else []

    def zone_breakdown(self) -> list[dict[str, Any]]:
        """Per dimension: how many units were unanimous or split, and the judge's agreement on each."""
        judged = {r.key: r.extra.get("zones", {}) for r in self.by_dimension()}
        rows = []
        for r in self.payload.get("panel", {}).get("by_dimension", []):
            total = r["unanimous"] + r["split"] + r.get("tied", 0) + r.get("single", 0)
            zones = judged.get(r["key"], {})
            rows.append({
                "name": self.dim_name(r["key"]),
                "unanimous": r["unanimous"], "split": r["split"], "tied": r.get("tied", 0),
                "tied_link": self.link(dimension=r["key"], zone="tied"),
                "split_share": pct(r["split"] / total if total else None),
                "unanimous_agreement": pct(zones.get("unanimous", {}).get("agreement")),
                "split_agreement": pct(zones.get("split", {}).get("agreement")),
                "unanimous_link": self.link(dimension=r["key"], zone="unanimous"),
                "split_link": self.link(dimension=r["key"], zone="split"),
            })
        return rows

    def panel(self) -> dict[str, Any]:
        panel = self.payload.get("panel", {})
        overall = panel.get("overall", {})
        rows = [{
            "name": self.dim_name(r["key"]), "n": r["n"], "percent": pct(r["percent_agreement"]),
            "fleiss": dec(r["fleiss_kappa"]), "alpha": dec(r["krippendorff_alpha"]), "ac1": dec(r["gwet_ac1"]),
            "link": self.link(dimension=r["key"], zone="split"),
        } for r in panel.get("by_dimension", [])]
        return {
            "n": overall.get("n", 0), "percent": pct(overall.get("percent_agreement")),
            "fleiss": dec(overall.get("fleiss_kappa")), "alpha": dec(overall.get("krippendorff_alpha")),
            "ac1": dec(overall.get("gwet_ac1")), "unanimous": overall.get("unanimous", 0),
            "split": overall.get("split", 0), "tied": overall.get("tied", 0), "single": overall.get("single", 0),
            "rows": rows, "unanimous_link": self.link(zone="unanimous"), "split_link": self.link(zone="split"),
            "tied_link": self.link(zone="tied"), "single_link": self.link(zone="single"),
        }

    def experts(self) -> list[dict[str, Any]]:
        tiers = dict(Tier.choices)
        statuses = dict(ExpertProfile.Status.choices)
        rows = []
        for r in self.payload.get("experts", []):
            peer, golden = r.get("peer") or {}, r.get("golden") or {}
            alerts = (peer.get("alert_count", 0) or 0) + (golden.get("alert_count", 0) or 0)
            rows.append({
                "user_id": r["user_id"], "pseudonym": r["pseudonym"],
                "tier": tiers.get(r["tier"], r["tier"] or DASH),
                "status": statuses.get(r["status"], r["status"] or DASH),
                "paused": r["status"] == ExpertProfile.Status.PAUSED,
                "tasks": r["tasks"], "per_day": dec(r["tasks_per_day"], 1),
                "seconds": dec(r["median_seconds_per_item"], 0),
                "golden": pct(golden.get("mean")), "golden_n": golden.get("n", 0),
                "peer": pct(peer.get("mean")), "peer_n": peer.get("n", 0),
                "baseline": pct(peer.get("baseline")),
                "alert_active": bool(peer.get("alert_active") or golden.get("alert_active")),
                "alert_count": alerts,
                "alerts": [{"kind": _("peer agreement"), **a} for a in peer.get("alerts", [])]
                + [{"kind": _("golden accuracy"), **a} for a in golden.get("alerts", [])],
                "link": self.link(expert=r["user_id"]),
            })
        return rows

    def leaderboard(self) -> dict[str, Any]:
        board = self.payload.get("leaderboard", {})
        rows = []
        for r in board.get("models", []):
            human, judge = r["human"], r.get("judge")
            rows.append({
                "model": r["model"], "questions": r["questions"],
                "human_score": dec(human["score"]), "human_rank": human["rank"],
                "human_keep": pct(human["keep_share"], 0),
                "judge_score": dec(judge["score"]) if judge else DASH,
                "judge_rank": judge["rank"] if judge else DASH,
                "judge_keep": pct(judge["keep_share"], 0) if judge else DASH,
                "moved": bool(judge) and judge["rank"] != human["rank"],
                "link": self.link(model=r["model"]),
            })
        return {"rows": rows, "judge": board.get("judge", False), "tau": dec(board.get("tau")),
                "tau_ci": span(board.get("tau_ci"), as_pct=False), "questions": board.get("n_questions", 0),
                "tasks": board.get("tasks", {}),
                "sides": [
                    {"title": _("Human consensus on every complete task"),
                     "basis": _("Every task all of whose items have a full panel, judged or not."),
                     "board": self._own_board(board.get("human_all"))},
                    {"title": _("Judge on every task it labelled"),
                     "basis": _("Every task the judge run labelled in full, whether or not the panel is complete."),
                     "board": self._own_board(board.get("judge_all"))},
                ]}

    def _own_board(self, side: dict[str, Any] | None) -> dict[str, Any] | None:
        """One side's own leaderboard (all its data) with the scorer quirks counted on it."""
        if not side:
            return None
        quirks = side.get("quirks", {})
        notes = [
            {"count": quirks.get("gate_hits_not_zeroing", 0),
             "text": _("questions where a gate item was hit and the score still stood (HeartBench's gate "
                       "never zeroes a score)")},
            {"count": quirks.get("penalty_only_untouched", 0),
             "text": _("abilities holding only penalty items that scored 100 because none was hit "
                       "(of %(cells)s such abilities)") % {"cells": quirks.get("penalty_only_cells", 0)}},
        ]
        if "failed_calls_dropped" in quirks:
            notes.append({"count": quirks["failed_calls_dropped"],
                          "text": _("tasks dropped because the judge labelled them only in part (failed judge calls)")})
        return {"rows": [{**r, "score_text": dec(r["score"]), "link": self.link(model=r["model"])}
                         for r in side.get("models", [])],
                "quirks": notes}

    def alternative(self) -> dict[str, Any] | None:
        alt = (self.judge or {}).get("alternative_annotator")
        if not alt:
            return None
        return {
            "advantage": pct(alt["advantage_probability"], 0), "win_rate": pct(alt["average_win_rate"]),
            "judge_mean": pct(alt["judge_mean"]), "expert_mean": pct(alt["expert_mean"]), "passes": alt["passes"],
            "rows": [{**r, "judge_mean_text": pct(r["judge_mean"]), "expert_mean_text": pct(r["expert_mean"]),
                      "win_rate_text": pct(r["win_rate"])} for r in alt["experts"]],
        }

    def disagreements(self) -> dict[str, Any]:
        listed = (self.judge or {}).get("unanimous_disagreements") or {"count": 0, "items": []}
        return {
            "count": listed["count"],
            "all_link": self.link(zone="unanimous", disagree=1),
            "rows": [{**r, "dimension_name": self.dim_name(r["dimension"]),
                      "link": self.link(task=r["task_id"]) + f"#item-{r['task_id']}-{r['position']}"}
                     for r in listed["items"][:DISAGREEMENTS_SHOWN]],
            "shown": min(DISAGREEMENTS_SHOWN, len(listed["items"])),
        }

    def charts(self) -> dict[str, Any]:
        """Everything dashboard.js draws, passed through json_script (never inline script)."""
        progress = self.payload.get("progress", {})
        days = progress.get("labels_per_day", [])

        def agreement_series(rows: list[AgreementRow], raw: list[dict[str, Any]]) -> dict[str, Any]:
            return {"names": [r.name for r in rows], "value": [x["agreement"] for x in raw],
                    "low": [x["agreement_ci"][0] for x in raw], "high": [x["agreement_ci"][1] for x in raw],
                    "n": [x["n"] for x in raw], "links": [r.link for r in rows]}

        judge = self.judge or {}
        board = self.payload.get("leaderboard", {}).get("models", [])
        return {
            "strings": {"agreement": _("Agreement with the panel majority"),
                        # Not a format string: the percent sign is literal.
                        # xgettext:no-python-format
                        "ci": _("95% interval"),
                        "labels": _("Labels"), "submissions": _("Submissions"), "human": _("Human consensus"),
                        "judge": _("Judge"), "peer": _("Peer agreement"), "rolling": _("Rolling window"),
                        "baseline": _("Baseline"), "units": _("units")},
            "labels_per_day": {"dates": [d["date"] for d in days], "labels": [d["labels"] for d in days],
                               "submissions": [d["submissions"] for d in days]},
            "by_dimension": agreement_series(self.by_dimension(), judge.get("by_dimension", [])),
            "by_model": agreement_series(self.by_model(), judge.get("by_model", [])),
            "leaderboard": {"models": [r["model"] for r in board],
                            "human": [r["human"]["score"] for r in board],
                            "judge": [(r.get("judge") or {}).get("score") for r in board],
                            "links": [self.link(model=r["model"]) for r in board]},
            "curves": {str(r["user_id"]): _curve(r) for r in self.payload.get("experts", [])},
        }


def _curve(row: dict[str, Any]) -> dict[str, Any]:
    """One expert's sparkline: peer-agreement buckets, rolling mean, alerts, baseline; golden buckets."""
    peer = (row.get("peer") or {}).get("curve") or {}
    golden = (row.get("golden") or {}).get("curve") or {}
    return {"points": peer.get("value", []), "rolling": peer.get("rolling", []), "dates": peer.get("date", []),
            "alerts": peer.get("alert", []), "baseline": (row.get("peer") or {}).get("baseline"),
            "golden": golden.get("value", [])}


TABS = ("overview", "judge", "experts", "zones", "leaderboard", "disagreements")
THROUGHPUT_DAYS = 7


def tab_links(project: Project, run_id: int | None) -> list[dict[str, str]]:
    """The dashboard's tabs: the first screen, then one page per long section."""
    names = {"overview": _("Overview"), "judge": _("Judge"), "experts": _("Experts"),
             "zones": _("Unanimous and split"), "leaderboard": _("Leaderboard"),
             "disagreements": _("Disagreements")}
    base = reverse("quality_dashboard", args=[project.pk])
    return [{"key": key, "name": names[key],
             "url": f"{base}?{urlencode({'tab': key, **({'run': run_id} if run_id else {})})}"}
            for key in TABS]


@dataclass(frozen=True)
class Forecast:
    done: int
    total: int
    per_day: float
    finish: date | None
    late: bool | None  # None without a due date or a forecast


def forecast_finish(*, done: int, total: int, completed_recently: int, today: date,
                    due: date | None) -> Forecast:
    """The finish date if the last days' pace holds: remaining tasks over tasks completed per day."""
    per_day = completed_recently / THROUGHPUT_DAYS
    remaining = max(total - done, 0)
    if remaining == 0:
        finish: date | None = today
    elif per_day > 0:
        finish = today + timedelta(days=math.ceil(remaining / per_day))
    else:
        finish = None
    late = None if (finish is None or due is None) else finish > due
    return Forecast(done=done, total=total, per_day=per_day, finish=finish, late=late)


def headline_cards(*, project: Project, view: ReportView | None, forecast: Forecast,
                   spend: PeriodSpend | None, links: dict[str, str]) -> list[dict[str, Any]]:
    """The four questions a PM opens the dashboard with, each answered by one card with its link."""
    bar = project.judge_agreement_bar_pct / 100
    overall = ((view.judge or {}).get("overall") if view else None) or {}
    agreement = overall.get("agreement")
    judge_pass = None if agreement is None else agreement >= bar
    panel = (view.payload.get("panel", {}).get("overall", {}) if view else {}) or {}
    experts = view.payload.get("experts", []) if view else []
    alerts = sum(bool((r.get("peer") or {}).get("alert_active")) + bool((r.get("golden") or {}).get("alert_active"))
                 for r in experts)
    ac1, alpha = panel.get("gwet_ac1"), panel.get("krippendorff_alpha")
    return [
        {"key": "judge", "title": _("Can the judge be trusted?"), "link": links["judge"],
         "value": pct(agreement), "detail": span(overall.get("agreement_ci")),
         "note": _("bar %(bar)s") % {"bar": f"{project.judge_agreement_bar_pct}%"},
         "status": None if judge_pass is None else ("pass" if judge_pass else "fail"),
         "status_text": "" if judge_pass is None else (_("passes") if judge_pass else _("below the bar"))},
        {"key": "experts", "title": _("Are the experts consistent?"), "link": links["experts"],
         "value": f"AC1 {dec(ac1)}" if ac1 is not None else f"α {dec(alpha)}",
         "detail": span(panel.get("gwet_ac1_ci") if ac1 is not None else panel.get("krippendorff_alpha_ci"),
                        as_pct=False),
         "note": f"α {dec(alpha)} {span(panel.get('krippendorff_alpha_ci'), as_pct=False)}",
         "status": "fail" if alerts else ("pass" if experts else None),
         "status_text": ngettext("%(n)s open alert", "%(n)s open alerts", alerts) % {"n": alerts}},
        {"key": "time", "title": _("Is the work on time?"), "link": links["time"],
         "value": f"{forecast.done} / {forecast.total}",
         "detail": (_("finish %(date)s") % {"date": forecast.finish.isoformat()}) if forecast.finish
         else _("no pace yet"),
         "note": (_("due %(date)s") % {"date": project.due_date.isoformat()}) if project.due_date
         else _("no due date"),
         "status": None if forecast.late is None else ("fail" if forecast.late else "pass"),
         "status_text": "" if forecast.late is None else (_("late") if forecast.late else _("on time"))},
        {"key": "cost", "title": _("What does it cost?"), "link": links["cost"],
         "value": f"{spend.amount} {spend.currency}" if spend else DASH,
         "detail": (_("%(amount)s per consensus label") % {"amount": spend.per_label}) if spend and spend.per_label
         else _("no consensus label this period"),
         "note": _("this period") if spend else _("no pay period yet"),
         "status": None, "status_text": ""},
    ]
