"""`manage.py import_responses PROJECT FILE [--model NAME]`: model responses into a project."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.errors import DomainError
from annotation.exchange.jsonl import format_line_error, import_size_check
from annotation.exchange.responses import responses_import
from annotation.models import Project


class Command(BaseCommand):
    help = ("Import model responses (question_id, model, response per line, or HeartBench's answer file with "
            "--model), all or nothing; each new response gets a task.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("file", type=Path, help="JSONL file, one response per line")
        parser.add_argument("--model", default=None, help="model name for rows that carry none")

    def handle(self, *args, project: int, file: Path, model: str | None, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        try:
            import_size_check(size=file.stat().st_size)
            result = responses_import(project=target, data=file.read_bytes(), model=model, now=timezone.now(),
                                      source=file.name)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except DomainError as exc:
            for error in exc.errors:
                self.stderr.write(format_line_error(error))
            raise CommandError(exc.message) from None
        self.stdout.write(f"Imported {result.created} responses into project {project} "
                          f"({result.tasks_created} new tasks); {result.skipped} skipped.")
