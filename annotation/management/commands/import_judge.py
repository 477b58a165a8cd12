"""`manage.py import_judge PROJECT FILE --run NAME [--judge-model M] [--prompt-version V]`: judge labels."""
from django.core.management.base import CommandParser

from annotation.exchange.command import ImportCommand
from annotation.exchange.judge_labels import judge_labels_import


class Command(ImportCommand):
    help = ("Import judge labels (question_id, model, detail [0/1 per rubric position], optional reason per "
            "line) under a named judge run, all or nothing.")
    file_help = "JSONL file, one judged response per line"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--run", required=True, help="judge run name (labels are added to it if it exists)")
        parser.add_argument("--judge-model", default=None, help="the judge model that produced the labels")
        parser.add_argument("--prompt-version", default=None, help="the judge prompt version used")

    def run_import(self, *, project, data, now, source, options):
        return judge_labels_import(project=project, data=data, run_name=options["run"],
                                   judge_model=options["judge_model"], prompt_version=options["prompt_version"],
                                   now=now, source=source)

    def summary(self, result, project_id: int) -> str:
        return (f"Imported {result.created} judged responses ({result.labels_created} labels) into "
                f"judge run {result.run.name!r} (id {result.run.pk}); {result.skipped} skipped.")
