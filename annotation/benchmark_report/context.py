"""Turn a stored benchmark report into what its page shows: display strings, gate verdicts, chart geometry.

Pure presentation over the stored payload and the project's current gate bars: a PM who
changes a bar sees the verdicts change at once, without a recompute (the figures do not
depend on the bars).
"""
from __future__ import annotations

import math
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext as _

from annotation.agreement.benchmark import RANK_TOLERANCE, Thresholds, gates_evaluate

DASH = "—"
SIDES = ("human", "judge")
# Chart geometry, in SVG user units: the plot is drawn on a 0-100 score axis.
BOX_WIDTH = 200
ABILITY_LABEL_H = 16
ABILITY_BAR_H = 9
ABILITY_ROW_H = 44
ABILITY_WIDTH = 320
ABILITY_PLOT = 270


def dec(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def pct(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{100 * value:.{digits}f}%"


def span(pair: list[float | None] | None, digits: int = 1) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return DASH
    return f"{pair[0]:.{digits}f} – {pair[1]:.{digits}f}"


def _svg(value: float) -> str:
    return f"{value:.2f}"


def _mean(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None and math.isfinite(v)]
    return sum(real) / len(real) if real else None


class BenchmarkView:
    """The page's reading of one stored report under the project's current gate bars."""

    def __init__(self, *, payload: dict[str, Any], thresholds: Thresholds) -> None:
        self.payload = payload
        self.thresholds = thresholds
        self.english = (get_language() or "").startswith("en")
        self.models: list[str] = payload.get("models", [])
        self.dims = {d["code"]: d for d in payload.get("dimensions", [])}
        raw = payload.get("sides") or {}
        self.sides: dict[str, dict[str, Any]] = {k: raw[k] for k in SIDES if raw.get(k)}

    @property
    def has_judge(self) -> bool:
        return "judge" in self.sides

    @property
    def empty(self) -> bool:
        return not self.sides

    def side_name(self, side: str) -> str:
        return _("Human consensus") if side == "human" else _("Judge")

    def dim_name(self, code: str) -> str:
        dim = self.dims.get(code)
        if dim is None:
            return code
        return dim["name_en"] if self.english else dim["name_zh"]

    @staticmethod
    def layer_name(code: str) -> str:
        return {"normal": _("Normal"), "hard": _("Hard")}.get(code, code)

    # --- gates -----------------------------------------------------------------------

    def gates(self) -> list[dict[str, Any]]:
        """GrowLoop's five gates, one row each, with each side's figure and verdict."""
        t = self.thresholds
        meta = {
            "spread": (_("Spread"), _("Best minus worst model score"), f"≥ {dec(t.spread_min)}", False),
            "separation": (_("Separation of tiers"), _("Share of the resamples that keep the full order of the models"),
                           f"≥ {pct(t.separation_min)}", True),
            "gaps": (_("Significant gaps"),
                     # Not a format string: the percent sign is literal.
                     # xgettext:no-python-format
                     _("Share of adjacent pairs whose gap has a 95% interval excluding 0"),
                     f"≥ {pct(t.gaps_significant_min)}", True),
            "saturation": (_("No saturation"), _("Score of the best model, out of 100"), f"< {dec(t.saturation_max)}",
                           False),
            "stability": (_("Stable ranks"),
                          _("Lowest share, over the models, of resamples with the rank within %(n)s place of "
                            "the full-data rank") % {"n": RANK_TOLERANCE},
                          f"≥ {pct(t.rank_stability_min)}", True),
        }
        verdicts = {side: {g.key: g for g in self._gates(side)} for side in self.sides}
        rows = []
        for key, (name, what, bar, share) in meta.items():
            cells = []
            for side in self.sides:
                g = verdicts[side][key]
                cells.append({"side": side, "value": (pct(g.value) if share else dec(g.value))
                              if g.value is not None else DASH,
                              "passed": g.passed})
            rows.append({"key": key, "name": name, "what": what, "bar": bar, "cells": cells})
        return rows

    def _gates(self, side: str) -> list[Any]:
        s = self.sides[side]
        return gates_evaluate(overall=[x for x in s["overall"] if x is not None],
                              order_keep_share=s["order_keep_share"],
                              gap_significant=[g["significant"] for g in s["gaps"]],
                              rank_near_share=[x for x in s["rank_near_share"] if x is not None],
                              thresholds=self.thresholds)

    def passed_count(self) -> list[dict[str, Any]]:
        """Per side: gates passed out of five (None when too few models to tell)."""
        out = []
        for side in self.sides:
            gates = self._gates(side)
            told = [g for g in gates if g.passed is not None]
            out.append({"side": side, "name": self.side_name(side), "passed": sum(bool(g.passed) for g in told),
                        "told": len(told), "all": bool(told) and all(g.passed for g in told)})
        return out

    # --- scores ----------------------------------------------------------------------

    def scoreboard(self) -> list[dict[str, Any]]:
        """One row per model, in the human consensus order: score, interval, rank and rank kept, per side."""
        human = self.sides.get("human")
        if not human:
            return []
        rows = []
        for k in human["order"]:
            cells = []
            for s in self.sides.values():
                cells.append({"score": dec(s["overall"][k], 2), "ci": span(s["overall_ci"][k]),
                              "rank": s["rank"][k], "kept": pct(s["rank_keep_share"][k], 0),
                              "near": pct(s["rank_near_share"][k], 0)})
            moved = self.has_judge and self.sides["judge"]["rank"][k] != human["rank"][k]
            rows.append({"model": self.models[k], "cells": cells, "moved": moved})
        return rows

    def separation(self) -> list[dict[str, Any]]:
        return [{"side": side, "name": self.side_name(side), "share": pct(s["order_keep_share"]),
                 "n_boot": s["n_boot"]} for side, s in self.sides.items()]

    def gaps(self) -> list[dict[str, Any]]:
        """Per side, the adjacent pairs in that side's score order, with the gap, its interval and significance."""
        out = []
        for side, s in self.sides.items():
            rows = [{"upper": self.models[g["upper"]], "lower": self.models[g["lower"]], "gap": dec(g["gap"], 2),
                     "ci": span(g["ci"], 2), "significant": g["significant"]} for g in s["gaps"]]
            out.append({"side": side, "name": self.side_name(side), "rows": rows,
                        "significant": sum(r["significant"] for r in rows), "total": len(rows)})
        return out

    def saturation(self) -> list[dict[str, Any]]:
        out = []
        for side, s in self.sides.items():
            top = s["order"][0]
            score = s["overall"][top]
            out.append({"side": side, "name": self.side_name(side), "model": self.models[top], "score": dec(score, 2),
                        "headroom": dec(None if score is None else 100 - score, 2),
                        "saturated": score is not None and score >= self.thresholds.saturation_max})
        return out

    def distribution(self) -> list[dict[str, Any]]:
        """Per model: question-score summaries per side, and the box-plot geometry (x in 0..BOX_WIDTH)."""
        human = self.sides.get("human")
        if not human:
            return []
        rows = []
        scale = BOX_WIDTH / 100
        for k in human["order"]:
            cells, boxes = [], []
            for i, (side, s) in enumerate(self.sides.items()):
                d = s["distribution"]
                q = d["quantiles"][k]
                cells.append({"n": d["n"][k], "mean": dec(d["mean"][k]), "median": dec(q[2]),
                              "iqr": span([q[1], q[3]]), "range": span([q[0], q[4]])})
                if None not in q:
                    y = 4 + 12 * i
                    # Coordinates as text: the template then prints them without number formatting.
                    boxes.append({"side": side, "y": str(y), "y_end": str(y + 8), "mid": str(y + 4),
                                  "low": _svg(q[0] * scale), "q1": _svg(q[1] * scale),
                                  "box": _svg(max(0.5, (q[3] - q[1]) * scale)), "median": _svg(q[2] * scale),
                                  "high": _svg(q[4] * scale), "mean": _svg((d["mean"][k] or 0) * scale)})
            rows.append({"model": self.models[k], "cells": cells, "boxes": boxes,
                         "height": 8 + 12 * len(self.sides)})
        return rows

    def layers(self) -> dict[str, Any]:
        """Normal vs hard (every difficulty the questions carry, normal first): scores per model and side."""
        human = self.sides.get("human")
        if not human:
            return {"names": [], "heads": [], "rows": [], "two": False}
        names = human["layers"]["names"]
        # Normal first, hard last, any other difficulty between: the drop reads "normal minus hard".
        rank = {"normal": 0, "hard": 2}
        shown = sorted(range(len(names)), key=lambda x: (rank.get(names[x], 1), names[x]))
        pair = (names.index("normal"), names.index("hard")) if {"normal", "hard"} <= set(names) else None
        rows = []
        for k in human["order"]:
            cells = []
            for s in self.sides.values():
                scores = [layer[k] for layer in s["layers"]["scores"]]
                drop = None
                if pair and scores[pair[0]] is not None and scores[pair[1]] is not None:
                    drop = scores[pair[0]] - scores[pair[1]]
                cells.append({"scores": [dec(scores[x], 2) for x in shown], "drop": dec(drop, 2)})
            rows.append({"model": self.models[k], "cells": cells})
        return {"names": [self.layer_name(names[x]) for x in shown],
                "heads": [{"name": self.layer_name(names[x]), "questions": human["layers"]["questions"][x]}
                          for x in shown],
                "rows": rows, "two": pair is not None}

    def abilities(self) -> dict[str, Any]:
        """The abilities (rubric dimensions), averaged over the models, per side; chart geometry; per-model detail."""
        human = self.sides.get("human")
        if not human:
            return {"rows": [], "chart": None}
        codes = list(human["abilities"])
        scale = ABILITY_PLOT / 100
        rows, bars = [], []
        for i, code in enumerate(codes):
            means = {side: _mean(s["abilities"].get(code, [])) for side, s in self.sides.items()}
            per_model = human["abilities"][code]
            real = [v for v in per_model if v is not None]
            judge_mean = means.get("judge")
            rows.append({
                "code": code, "name": self.dim_name(code), "human": dec(means["human"]),
                "judge": dec(judge_mean),
                "diff": dec(None if judge_mean is None or means["human"] is None else judge_mean - means["human"]),
                "spread": dec(max(real) - min(real) if real else None),
                "models": [{"model": self.models[k],
                            "cells": [dec(s["abilities"].get(code, [None] * len(self.models))[k])
                                      for s in self.sides.values()]} for k in human["order"]],
            })
            y = i * ABILITY_ROW_H
            bar: dict[str, Any] = {"name": self.dim_name(code), "label_y": y + 12, "bars": []}
            for j, side in enumerate(self.sides):
                value = means[side]
                width = max(0.0, (value or 0) * scale)
                bar["bars"].append({"side": side, "y": str(y + ABILITY_LABEL_H + j * (ABILITY_BAR_H + 2)),
                                    "width": _svg(width), "text": dec(value), "text_x": _svg(width + 4),
                                    "text_y": str(y + ABILITY_LABEL_H + j * (ABILITY_BAR_H + 2) + ABILITY_BAR_H - 1)})
            bars.append(bar)
        height = max(1, len(codes)) * ABILITY_ROW_H
        ticks = [{"x": _svg(v * scale), "label": str(v)} for v in (0, 25, 50, 75, 100)]
        return {"rows": rows, "chart": {"width": ABILITY_WIDTH, "height": height + 14, "axis_y": height,
                                        "rows": bars, "ticks": ticks, "plot": ABILITY_PLOT}}

    def constant(self) -> list[dict[str, Any]]:
        """Per side: rubric items every model hits, and items every model misses (they tell no model apart)."""
        out = []
        for side, s in self.sides.items():
            c = s["constant"]

            def rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
                return [{**r, "dimension_name": self.dim_name(r["dimension"])} for r in items]

            out.append({"side": side, "name": self.side_name(side), "compared": c["items_compared"],
                        "all_hit": c["all_hit"], "all_miss": c["all_miss"],
                        "hit_rows": rows(c["all_hit_items"]), "miss_rows": rows(c["all_miss_items"])})
        return out
