"""`manage.py import_responses PROJECT FILE [--model NAME]`: model responses into a project."""
from django.core.management.base import CommandParser

from annotation.exchange.command import ImportCommand
from annotation.exchange.responses import responses_import


class Command(ImportCommand):
    help = ("Import model responses (question_id, model, response per line, or HeartBench's answer file with "
            "--model), all or nothing; each new response gets a task.")
    file_help = "JSONL file, one response per line"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--model", default=None, help="model name for rows that carry none")

    def source(self, file):
        return file

    def run_import(self, *, project, data, now, source, options):
        return responses_import(project=project, data=data, model=options["model"], now=now, source=source)

    def summary(self, result, project_id: int) -> str:
        return (f"Imported {result.created} responses into project {project_id} "
                f"({result.tasks_created} new tasks); {result.skipped} skipped.")
