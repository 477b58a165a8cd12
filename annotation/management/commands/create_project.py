"""`create_project NAME [--overlap N] [--pm USERNAME]`: prints the new project's id."""
from django.core.management.base import BaseCommand, CommandError

from annotation.models.project import OVERLAP
from annotation.services import project_create
from core.errors import DomainError
from experts.models import Role, User


class Command(BaseCommand):
    help = "Create a project (with its empty rubric) and print its id (only the id)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--overlap", type=int, default=OVERLAP.default,
                            help=f"distinct experts per task, {OVERLAP.low}..{OVERLAP.high} "
                                 f"(default {OVERLAP.default})")
        parser.add_argument("--pm", metavar="USERNAME", default=None,
                            help="the project manager who manages the project")

    def handle(self, *args, **options) -> None:
        pm = None
        if options["pm"] is not None:
            pm = User.objects.filter(username=options["pm"], role=Role.PM).first()
            if pm is None:
                raise CommandError(f"No PM account named {options['pm']!r}.")
        try:
            project = project_create(name=options["name"], created_by=pm, overlap=options["overlap"])
        except DomainError as exc:
            details = [f"{entry['field']}: {entry['message']}" for entry in exc.errors if entry.get("field")]
            raise CommandError(" ".join([exc.message, *details])) from exc
        self.stdout.write(str(project.pk))
