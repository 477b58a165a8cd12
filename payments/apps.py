from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PaymentsConfig(AppConfig):
    name = "payments"
    verbose_name = _("Payments")

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: annotation sends
        # "payments.ledger_post_earning" by name, and in the embedded mode (eager Celery) a
        # task the process does not know would go to the in-memory broker and be lost.
        # The rubric impact prices re-annotation through a hook annotation offers (it cannot import us).
        # The review queue rejects through payments for the same reason (the earning is reversed),
        # and the quality dashboard's cost card reads the current period's spend through another.
        from annotation.review.rejecting import rejection_earnings_register, review_rejecter_register
        from annotation.rubric_editing.pricing import period_spend_register, reannotation_pricer_register
        from payments import receivers, tasks  # noqa: F401
        from payments.pricing import reannotation_price
        from payments.selectors import earnings_of_assignments, project_period_spend
        from payments.services import submission_reject_for_review

        reannotation_pricer_register(reannotation_price)
        review_rejecter_register(submission_reject_for_review)
        rejection_earnings_register(earnings_of_assignments)
        period_spend_register(project_period_spend)
