"""Agreement statistics for expert and judge labels, as vectorised numpy functions.

Conventions shared by every function here:

* A *label vector* is a 1-D integer array of category codes (0/1 for rubric hits).
  Negative values mean "missing"; pairwise statistics drop a pair in which either
  side is missing.
* A *label matrix* is an ``(n_items, n_raters)`` integer array, one row per rubric
  item (label unit) and one column per rater slot, with ``-1`` for a missing label.
  Columns are slots, not people: in Rubrica the three labels of a task come from
  three randomly chosen experts, so per-person aggregation is left to the caller.
* Statistics that are mathematically undefined return ``float('nan')`` rather than
  raising, so that a report over many slices (dimension, model, zone) never stops
  on one degenerate slice. Malformed input (wrong shapes) raises ``ValueError``.

Nothing here imports Django; the module is safe to use in Celery workers, notebooks
and tests alike.

The package splits by kind of statistic (`raters`, `drift`, `bootstrap`, `paired`); callers import
from the package, whose `__all__` names the public functions.
"""

from annotation.agreement.stats.bootstrap import (
    AgreementKappaBootstrap,
    PanelBootstrap,
    bootstrap_agreement_kappa,
    bootstrap_alpha_ac1,
    bootstrap_ci,
    bootstrap_replicates,
    cluster_weights,
    percentile_interval,
)
from annotation.agreement.stats.drift import DriftResult, rolling_drift
from annotation.agreement.stats.intervals import (
    cluster_jackknife_kappa_interval,
    cluster_wilson_interval,
    student_t_upper_quantile,
)
from annotation.agreement.stats.paired import McNemarResult, mcnemar_exact, within_expert_range
from annotation.agreement.stats.raters import (
    AlternativeAnnotatorResult,
    MajorityResult,
    alternative_annotator_test,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha_nominal,
    leave_one_out_agreement,
    majority,
    observed_agreement_multi,
    percent_agreement,
    ratings_to_counts,
)

__all__ = [
    "AlternativeAnnotatorResult",
    "AgreementKappaBootstrap",
    "PanelBootstrap",
    "DriftResult",
    "MajorityResult",
    "McNemarResult",
    "alternative_annotator_test",
    "bootstrap_agreement_kappa",
    "bootstrap_alpha_ac1",
    "bootstrap_ci",
    "bootstrap_replicates",
    "cluster_jackknife_kappa_interval",
    "cluster_weights",
    "cluster_wilson_interval",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha_nominal",
    "leave_one_out_agreement",
    "majority",
    "mcnemar_exact",
    "observed_agreement_multi",
    "percent_agreement",
    "percentile_interval",
    "ratings_to_counts",
    "rolling_drift",
    "student_t_upper_quantile",
    "within_expert_range",
]
