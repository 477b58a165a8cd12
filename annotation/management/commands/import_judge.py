"""`manage.py import_judge PROJECT FILE --run NAME [--judge-model M] [--prompt-version V]`: judge labels."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.errors import DomainError
from annotation.exchange.jsonl import format_line_error, import_size_check
from annotation.judging.imports import judge_labels_import
from annotation.models import Project


class Command(BaseCommand):
    help = ("Import judge labels (question_id, model, detail [0/1 per rubric position], optional reason per "
            "line) under a named judge run, all or nothing.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("file", type=Path, help="JSONL file, one judged response per line")
        parser.add_argument("--run", required=True, help="judge run name (labels are added to it if it exists)")
        parser.add_argument("--judge-model", default=None, help="the judge model that produced the labels")
        parser.add_argument("--prompt-version", default=None, help="the judge prompt version used")

    def handle(self, *args, project: int, file: Path, run: str, judge_model: str | None,
               prompt_version: str | None, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        try:
            import_size_check(size=file.stat().st_size)
            result = judge_labels_import(project=target, data=file.read_bytes(), run_name=run,
                                         judge_model=judge_model, prompt_version=prompt_version,
                                         now=timezone.now(), source=file.name)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except DomainError as exc:
            for error in exc.errors:
                self.stderr.write(format_line_error(error))
            raise CommandError(exc.message) from None
        self.stdout.write(f"Imported {result.created} judged responses ({result.labels_created} labels) into "
                          f"judge run {result.run.name!r} (id {result.run.pk}); {result.skipped} skipped.")
