"""`remove_member PROJECT USERNAME`: take a member out; their open leases end, their submitted work stays."""
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotation.management.commands.add_member import project_and_user
from annotation.models import MembershipEvent
from annotation.roster.services import member_remove
from core.errors import DomainError, error_message


class Command(BaseCommand):
    help = "Remove a member from a project: open leases end now and return to the pool; submitted work and pay stay."

    def add_arguments(self, parser) -> None:
        parser.add_argument("project", help="the project id")
        parser.add_argument("username")

    def handle(self, *args, **options) -> None:
        project, user = project_and_user(options["project"], options["username"])
        try:
            removal = member_remove(project=project, user=user, by=None, via=MembershipEvent.Via.CLI,
                                    now=timezone.now())
        except DomainError as exc:
            raise CommandError(error_message(exc)) from exc
        self.stdout.write(f"Removed {user.username} from project {project.pk}; "
                          f"{removal.leases_ended} open lease(s) returned to the pool.")
