"""The shared shape of the `import_*` management commands: PROJECT FILE, all or nothing."""
from pathlib import Path
from typing import BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.exchange.jsonl import ImportSource, format_line_error, import_size_check
from annotation.models import Project
from core.errors import DomainError


class ImportCommand(BaseCommand):
    """Reads FILE into project PROJECT with `run_import`; line errors go to stderr, then a CommandError."""

    file_help = "JSONL file"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("file", type=Path, help=self.file_help)

    def source(self, file: BinaryIO) -> ImportSource:
        """What `run_import` reads: the open file (line by line) where the importer streams, else its bytes."""
        return file.read()

    def run_import(self, *, project: Project, data: ImportSource, now, source: str, options: dict):
        """Import `data` into `project`; each concrete command defines it."""
        raise TypeError(f"{type(self).__name__} must define run_import")

    def summary(self, result, project_id: int) -> str:
        return f"Imported into project {project_id}."

    def handle(self, *args, project: int, file: Path, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        try:
            import_size_check(size=file.stat().st_size)
            with file.open("rb") as opened:
                result = self.run_import(project=target, data=self.source(opened), now=timezone.now(),
                                         source=file.name, options=options)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except DomainError as exc:
            for error in exc.errors:
                self.stderr.write(format_line_error(error))
            raise CommandError(exc.message) from None
        self.stdout.write(self.summary(result, project))
