"""`manage.py import_golden PROJECT FILE`: golden reference labels into a project, all or nothing."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.calibration.golden import golden_import
from annotation.errors import DomainError
from annotation.exchange.jsonl import format_line_error, import_size_check
from annotation.models import Project


class Command(BaseCommand):
    help = ("Import golden reference labels (JSONL: question_id, model, labels [0/1 per rubric position], "
            "optional rationale [text per position]) for the current rubric version, all or nothing.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("file", type=Path, help="JSONL file, one golden task per line")

    def handle(self, *args, project: int, file: Path, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        try:
            import_size_check(size=file.stat().st_size)
            result = golden_import(project=target, data=file.read_bytes(), now=timezone.now(), source=file.name)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except DomainError as exc:
            for error in exc.errors:
                self.stderr.write(format_line_error(error))
            raise CommandError(exc.message) from None
        self.stdout.write(f"Imported {result.references} reference labels for {result.tasks} golden tasks of "
                          f"project {project}, rubric version {result.version}.")
