"""`manage.py import_golden PROJECT FILE`: golden reference labels into a project, all or nothing."""
from annotation.exchange.command import ImportCommand
from annotation.exchange.golden import golden_import


class Command(ImportCommand):
    help = ("Import golden reference labels (JSONL: question_id, model, labels [0/1 per rubric position], "
            "optional rationale [text per position]) for the current rubric version, all or nothing.")
    file_help = "JSONL file, one golden task per line"

    def run_import(self, *, project, data, now, source, options):
        return golden_import(project=project, data=data, now=now, source=source)

    def summary(self, result, project_id: int) -> str:
        return (f"Imported {result.references} reference labels for {result.tasks} golden tasks of "
                f"project {project_id}, rubric version {result.version}.")
