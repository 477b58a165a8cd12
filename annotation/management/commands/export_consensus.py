"""`manage.py export_consensus PROJECT --format jsonl|csv|parquet [--output F]`."""
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.exchange.export import FORMATS, consensus_export, consensus_rows
from annotation.models import Project


class Command(BaseCommand):
    help = "Export the consensus dataset of a project: one row per complete task and rubric item."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("--format", dest="fmt", choices=list(FORMATS), required=True)
        parser.add_argument("--output", type=Path, default=None,
                            help="file to write; standard output when absent (not for parquet)")

    def handle(self, *args, project: int, fmt: str, output: Path | None, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        if fmt == "parquet" and output is None:
            raise CommandError("Parquet is binary: name a file with --output.")
        counter = _Counter(consensus_rows(project=target))
        chunks = consensus_export(rows=counter, fmt=fmt)
        if output is None:
            for chunk in chunks:
                self.stdout.write(chunk.decode(), ending="")
            # The data owns standard output; the summary goes where it cannot corrupt it.
            self.stderr.write(f"Exported {counter.count} rows of project {project} as {fmt}.")
            return
        try:
            with output.open("wb") as sink:
                for chunk in chunks:
                    sink.write(chunk)
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        self.stdout.write(f"Exported {counter.count} rows of project {project} as {fmt} to {output}.")


class _Counter:
    """Counts the rows the encoder pulls, for the summary line."""

    def __init__(self, rows: Iterable[dict[str, Any]]) -> None:
        self._rows = rows
        self.count = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self._rows:
            self.count += 1
            yield row
