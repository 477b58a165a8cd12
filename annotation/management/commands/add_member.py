"""`add_member PROJECT USERNAME`: make an account a member of a project, in its own role."""
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotation.models import MembershipEvent, Project
from annotation.roster.services import member_add
from core.errors import DomainError, error_message
from experts.models import User


def project_and_user(project_id: str, username: str) -> tuple[Project, User]:
    """The project with this id and the account with this username, or a CommandError naming which is missing."""
    project = Project.objects.filter(pk=int(project_id)).first() if project_id.isdigit() else None
    if project is None:
        raise CommandError(f"No project with id {project_id!r}.")
    user = User.objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"No account with the username {username!r}.")
    return project, user


class Command(BaseCommand):
    help = "Add an account to a project: an expert annotates in it, a PM manages it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("project", help="the project id")
        parser.add_argument("username")

    def handle(self, *args, **options) -> None:
        project, user = project_and_user(options["project"], options["username"])
        try:
            added = member_add(project=project, user=user, by=None, via=MembershipEvent.Via.CLI, now=timezone.now())
        except DomainError as exc:
            raise CommandError(error_message(exc)) from exc
        role = "project manager" if user.is_pm else "expert"
        if added:
            self.stdout.write(f"Added {user.username} to project {project.pk} as {role}.")
        else:
            self.stdout.write(f"{user.username} is already a member of project {project.pk}; nothing changed.")
