"""`load_demo`: the demo accounts, project and data of `make run`; a second run changes nothing."""
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotation.demo import DEMO_URL, demo_load
from core.errors import DomainError


class Command(BaseCommand):
    help = ("Create the demo accounts (pm, admin, expert1..expert6) and the demo project with its "
            "questions, responses and tasks, then print how to sign in. Safe to run again.")

    def handle(self, *args, **options) -> None:
        try:
            result = demo_load(now=timezone.now())
        except DomainError as exc:
            raise CommandError(f"The demo data was refused: {exc.message}") from exc

        state = "created" if result.project_created else "already loaded"
        self.stdout.write(
            f"Demo project {result.project.name!r} (id {result.project.pk}, {state}): "
            f"{result.questions} questions, {result.responses} responses, {result.open_tasks} open tasks."
        )
        if not result.changed:
            self.stdout.write("Nothing changed.")
        self.stdout.write(f"\nOpen {DEMO_URL} and sign in with one of these accounts:\n")
        self.stdout.write(f"  {'username':<10} {'role':<7} password")
        for status in result.accounts:
            account = status.account
            line = f"  {account.username:<10} {account.role:<7} {account.password}"
            if not status.created:
                line += "  (already existed; left unchanged by this run)"
            self.stdout.write(line)
            if not status.role_matches:
                self.stderr.write(
                    f"Warning: the existing account {account.username!r} has role {status.actual_role!r}, "
                    f"not {account.role!r}; the demo did not change it."
                )
        self.stdout.write("\nThese passwords are public; use the demo only on your own machine.")
