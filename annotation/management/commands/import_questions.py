"""`manage.py import_questions PROJECT FILE`: HeartBench or HealthBench JSONL into a project."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.errors import DomainError
from annotation.exchange.jsonl import format_line_error, import_size_check
from annotation.exchange.questions import questions_import
from annotation.models import Project


class Command(BaseCommand):
    help = "Import questions and rubric items (HeartBench or HealthBench JSONL), all or nothing, and publish them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("file", type=Path, help="JSONL file, one question per line")

    def handle(self, *args, project: int, file: Path, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        try:
            import_size_check(size=file.stat().st_size)
            result = questions_import(project=target, data=file.read_bytes(), now=timezone.now(), source=file.name)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except DomainError as exc:
            for error in exc.errors:
                self.stderr.write(format_line_error(error))
            raise CommandError(exc.message) from None
        if result.version is None:
            self.stdout.write(f"Nothing new: all {result.skipped} questions are already in project {project}.")
        else:
            self.stdout.write(f"Imported {result.created} questions ({result.items_created} rubric items) into "
                              f"project {project} as rubric version {result.version}; {result.skipped} skipped.")
