"""One logging style: a constant message saying what happened, the facts as `extra` fields.

`logger.info("judge run started", extra={"run_id": 7, "tasks": 120})` keeps the message
searchable as one string, and `KeyValueFormatter` prints the facts after it
(`judge run started run_id=7 tasks=120`) so the console shows them as well as a log
collector that reads the fields.
"""
import logging

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
