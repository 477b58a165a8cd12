"""`manage.py import_questions PROJECT FILE`: HeartBench or HealthBench JSONL into a project."""
from annotation.exchange.command import ImportCommand
from annotation.exchange.questions import questions_import


class Command(ImportCommand):
    help = "Import questions and rubric items (HeartBench or HealthBench JSONL), all or nothing, and publish them."
    file_help = "JSONL file, one question per line"

    def source(self, file):
        return file

    def run_import(self, *, project, data, now, source, options):
        return questions_import(project=project, data=data, now=now, source=source)

    def summary(self, result, project_id: int) -> str:
        if result.version is None:
            return f"Nothing new: all {result.skipped} questions are already in project {project_id}."
        return (f"Imported {result.created} questions ({result.items_created} rubric items) into "
                f"project {project_id} as rubric version {result.version}; {result.skipped} skipped.")
