"""`python manage.py reconcile_ledger`: check the books; exit 1 and list the problems when they disagree."""
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from payments.reconciliation import ledger_reconcile


class Command(BaseCommand):
    help = ("Check that every statement equals the sum of its ledger entries, every submitted assignment "
            "has exactly one earning (or an earning and a reversal), and no entry is orphaned.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--grace-seconds", type=int, default=0,
            help="Do not expect an earning yet for work submitted this recently (its task may be in flight).")

    def handle(self, *args, grace_seconds: int, **options) -> None:
        problems = ledger_reconcile(now=timezone.now(), grace=timedelta(seconds=max(grace_seconds, 0)))
        if problems:
            for problem in problems:
                self.stderr.write(str(problem))
            raise CommandError(f"the ledger does not reconcile: {len(problems)} problem(s)", returncode=1)
        self.stdout.write(self.style.SUCCESS("The ledger reconciles."))
