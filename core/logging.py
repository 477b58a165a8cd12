"""One logging style: a constant message saying what happened, the facts as `extra` fields.

`logger.info("judge run started", extra={"run_id": 7, "tasks": 120})` keeps the message
searchable as one string, and `KeyValueFormatter` prints the facts after it
(`judge run started run_id=7 tasks=120`) so the console shows them as well as a log
collector that reads the fields.

`RUBRICA_LOG_FORMAT=json` swaps it for `JsonFormatter`: the same fields, one JSON object a line.
"""
import json
import logging
from datetime import UTC, datetime

# Attributes every LogRecord has; anything else on a record came in through `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{key}={value}" for key, value in sorted(vars(record).items()) if key not in _STANDARD]
        if not extras:
            return line
        head, sep, rest = line.partition("\n")  # a traceback stays below the first line
        return f"{head} {' '.join(extras)}{sep}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (RUBRICA_LOG_FORMAT=json), for a log collector.

    Always `time` (UTC, ISO 8601), `level`, `logger`, `message` and `request_id` ("" outside a
    request); then the record's `extra` fields (a request's `method`, `path`, `status`,
    `duration_ms`; a task's `task_id` and `task_name`) and, for an exception, `exception`.
    """

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", ""),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in body:
                body[key] = value
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            body["exception"] = record.exc_text
        return json.dumps(body, ensure_ascii=False, default=str)


class TaskContextFilter(logging.Filter):
    """Adds `task_id` and `task_name` to every record logged while a Celery task runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        from celery._state import get_current_task

        task = get_current_task()
        if task is not None and task.request.id and not hasattr(record, "task_id"):
            record.task_id = task.request.id
            record.task_name = task.name
        return True
