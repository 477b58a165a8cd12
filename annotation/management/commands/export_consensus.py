"""`manage.py export_consensus PROJECT --format jsonl|csv|parquet|heartbench|hf [--output F] [filters]`."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.exchange.export import COMPLETION, FILTER_NAMES, ZONES, export_filters_parse
from annotation.exchange.export_formats import FORMATS
from annotation.exchange.export_jobs import export_stream_start
from annotation.models import Project
from core.errors import DomainError
from experts.models import User

BINARY = ("parquet", "hf")


class Command(BaseCommand):
    help = "Export the consensus dataset of a project: one row per task and rubric item, filtered."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", type=int, help="project id")
        parser.add_argument("--format", dest="fmt", choices=list(FORMATS), required=True)
        parser.add_argument("--output", type=Path, default=None,
                            help="file to write; standard output when absent (not for parquet or hf)")
        parser.add_argument("--rubric-version", dest="rubric_version", help="rubric version number")
        parser.add_argument("--zone", help=f"one of {', '.join(ZONES)}")
        parser.add_argument("--dimension", help="dimension code or Chinese name")
        parser.add_argument("--model", help="model name")
        parser.add_argument("--completion", help=f"one of {', '.join(COMPLETION)} (default complete)")
        parser.add_argument("--submitted-after", dest="submitted_after", help="a date such as 2026-03-01")
        parser.add_argument("--as-user", dest="as_user", default=None,
                            help="username recorded as the export's owner (default: the first superuser)")

    def handle(self, *args, project: int, fmt: str, output: Path | None, **options) -> None:
        target = Project.objects.filter(pk=project).first()
        if target is None:
            raise CommandError(f"No project with id {project}.")
        if fmt in BINARY and output is None:
            raise CommandError(f"{fmt} is binary: name a file with --output.")
        owner = self._owner(options.get("as_user"), target)
        try:
            filters = export_filters_parse(project=target, raw={name: options.get(name) for name in FILTER_NAMES})
        except DomainError as exc:
            raise CommandError(exc.message) from None
        job, chunks = export_stream_start(project=target, owner=owner, fmt=fmt, filters=filters, now=timezone.now())
        rows_word = "questions" if fmt == "heartbench" else "rows"

        def summary() -> str:
            job.refresh_from_db()
            return f"Exported {job.row_count} {rows_word} of project {project} as {fmt}"

        if output is None:
            for chunk in chunks:
                self.stdout.write(chunk.decode(), ending="")
            # The data owns standard output; the summary goes where it cannot corrupt it.
            self.stderr.write(f"{summary()} (snapshot {job.snapshot_id}).")
            return
        try:
            with output.open("wb") as sink:
                for chunk in chunks:
                    sink.write(chunk)
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        self.stdout.write(f"{summary()} to {output} (snapshot {job.snapshot_id}).")

    def _owner(self, username: str | None, project: Project) -> User:
        if username:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"No user named {username}.")
            return user
        user = (User.objects.filter(is_superuser=True).order_by("pk").first()
                or project.created_by or User.objects.order_by("pk").first())
        if user is None:
            raise CommandError("No user to record as the export's owner; pass --as-user.")
        return user
