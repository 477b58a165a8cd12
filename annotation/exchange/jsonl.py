"""Reading uploaded JSONL: the size cap, per-line decoding, and line errors a PM can act on.

Every import validates the whole file, one line at a time, and commits nothing unless every
line is good, so problems are collected rather than raised one by one: a PM fixes the file
once, not once per error.
A field path names where in the row the problem is, JSON-path style with 0-based
indexes: `rubric[2].score` is the third rubric item's score, as `jq '.rubric[2].score'`
would find it.
"""
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.error_codes import ErrorCode
from core.errors import DomainError, field_error_message
from core.input_guard import upload_too_large_error

# What an import reads: the bytes of a small file, or a file opened in binary mode (an upload
# Django spooled to disk, a file named on the command line), read line by line.
ImportSource = bytes | BinaryIO
# One line is held whole while it is parsed; a "line" longer than this is not a row of any format.
MAX_LINE_BYTES = 16 * 1024 * 1024

MAX_LISTED_ERRORS = 50
INT32 = 2**31 - 1


@dataclass(frozen=True)
class ImportResult:
    """What an import wrote.

    `created` counts questions or responses written, `skipped` the rows already present
    with identical content; `version` is the rubric version number the rows now belong
    to (None when a question import found nothing new and published nothing).
    """

    created: int
    skipped: int
    items_created: int = 0
    tasks_created: int = 0
    version: int | None = None
    # New questions left judge-only because a blind test's sample is active (not in the sample).
    judge_only: int = 0


def import_size_check(*, size: int) -> None:
    """Refuse an upload over RUBRICA_MAX_IMPORT_BYTES before anything parses it."""
    if size > settings.RUBRICA_MAX_IMPORT_BYTES:
        raise upload_too_large_error(size=size)


def upload_open(upload: UploadedFile) -> BinaryIO:
    """The uploaded file to read line by line, refused by size before anything parses it.

    Django keeps an upload over FILE_UPLOAD_MAX_MEMORY_SIZE in a temporary file on disk;
    the importers iterate it line by line and never hold it whole.
    """
    import_size_check(size=upload.size or 0)
    file = cast(BinaryIO, upload.file)
    file.seek(0)
    return file


def source_size(source: "ImportSource") -> int:
    """The size in bytes of an import's bytes or file."""
    if isinstance(source, bytes | bytearray | memoryview):
        return len(source)
    position = source.tell()
    size = source.seek(0, os.SEEK_END)
    source.seek(position)
    return size


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def describe(value: Any) -> str:
    """A short rendering of a bad value for an error message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    if _unstorable(text):
        text = json.dumps(value)  # escaped, so the message itself can be rendered and stored
    return text if len(text) <= 60 else text[:57] + "..."


class LineErrors:
    """Errors found in a file, in line order, listed up to MAX_LISTED_ERRORS."""

    def __init__(self) -> None:
        self.listed: list[dict[str, Any]] = []
        self.total = 0

    def __bool__(self) -> bool:
        return self.total > 0

    def add(self, line: int | None, field: str | None, message: str, *, code: str = "",
            params: dict[str, Any] | None = None) -> None:
        """Record one problem; `code` and `params` let a page say it in the reader's language."""
        self.total += 1
        if len(self.listed) < MAX_LISTED_ERRORS:
            entry: dict[str, Any] = {"line": line, "field": field, "message": message}
            if code:
                entry |= {"code": code, "params": params or {}}
            self.listed.append(entry)

    def raise_if_any(self, *, source: str) -> None:
        """Raise one DomainError carrying every listed error; the summary quotes the first."""
        if not self.total:
            return
        first = format_line_error(self.listed[0])
        if self.total > len(self.listed):
            first += f" ({len(self.listed)} errors listed, {self.total - len(self.listed)} more not shown)"
        noun = "error" if self.total == 1 else "errors"
        summary = f"{source}: {self.total} {noun}, nothing was imported. First: {first}"
        raise DomainError(summary, code=ErrorCode.INVALID_FILE, errors=list(self.listed),
                          params={"source": source, "count": self.total,
                                  "first": _FirstError(self.listed[0], self.total - len(self.listed))})


class _FirstError:
    """The first problem of a file, rendered when the summary is: in the reader's language."""

    def __init__(self, error: dict[str, Any], unlisted: int) -> None:
        self.error = error
        self.unlisted = unlisted

    def __str__(self) -> str:
        text = line_error_sentence(self.error)
        if self.unlisted:
            text += gettext(" (%(more)d more not shown)") % {"more": self.unlisted}
        return text


# Words the messages put in their params, shown in the reader's language.
PARAM_WORDS = {
    "an object": _("an object"), "a list": _("a list"),
    "rubric items": _("rubric items"), "rubrics": _("rubric items"), "turns": _("dialogue turns"),
}


def line_error_text(error: dict[str, Any]) -> str:
    """One line error's problem in the active language (the English message for uncoded ones)."""
    params = {key: str(PARAM_WORDS[value]) if isinstance(value, str) and value in PARAM_WORDS else value
              for key, value in dict(error.get("params") or {}).items()}
    return field_error_message({**error, "params": params})


def line_error_sentence(error: dict[str, Any]) -> str:
    """`第 3 行，字段 dialogue：应为……` / `line 3, field dialogue: expected ...` in the active language."""
    text = line_error_text(error)
    line, field = error.get("line"), error.get("field")
    if line is not None and field:
        return gettext("line %(line)s, field %(field)s: %(problem)s") % {"line": line, "field": field,
                                                                        "problem": text}
    if line is not None:
        return gettext("line %(line)s: %(problem)s") % {"line": line, "problem": text}
    if field:
        return gettext("field %(field)s: %(problem)s") % {"field": field, "problem": text}
    return text


def format_line_error(error: dict[str, Any]) -> str:
    """`line 3: field "rubric[2].score": expected ...`, the form the CLI prints."""
    parts = []
    if error.get("line") is not None:
        parts.append(f"line {error['line']}")
    if error.get("field"):
        parts.append(f'field "{error["field"]}"')
    return ": ".join([*parts, error["message"]])


def jsonl_lines(source: ImportSource, errors: LineErrors) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, bytes without the newline) for each line of `source`, one at a time.

    Lines end at "\\n" only, as `bytes.split(b"\\n")` would cut them. A UTF-8 byte-order mark
    at the start is dropped: spreadsheet tools on Windows write one. A line over
    MAX_LINE_BYTES is recorded in `errors` and skipped without being held.
    """
    file = io.BytesIO(source) if isinstance(source, bytes | bytearray | memoryview) else source
    file.seek(0)
    number = 0
    while raw := file.readline(MAX_LINE_BYTES + 1):
        number += 1
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := file.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            errors.add(number, None, f"longer than {_megabytes(MAX_LINE_BYTES)}; expected one JSON object per line")
            continue
        yield number, raw[:-1] if raw.endswith(b"\n") else raw


def jsonl_objects(source: ImportSource, errors: LineErrors) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line that is a JSON object, one line at a time.

    Lines that are not UTF-8, not JSON or not an object are recorded in `errors` and
    skipped, so the caller still validates the rest of the file.
    """
    for number, row, _storable in jsonl_rows(source, errors):
        yield number, row


# The only ways a JSON text decoded from UTF-8 can hold what a text column refuses: the escapes
# of NUL and of a UTF-16 surrogate (a raw control character inside a string is not valid JSON).
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
# orjson reads an integer past 64 bits as a float; the standard library keeps it exact. A line with a
# run of 19 digits goes to the standard path: found by mapping every digit to "0" and everything else
# to a space, then a substring search (both in C; a regular expression without a literal to look for
# first was a fifth of the parse).
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _object_fast(raw: bytes) -> dict[str, Any] | None:
    """The line's object through orjson (a third of the standard decoder's time), or None to take the slow path.

    orjson is strict JSON on strict UTF-8, a subset of what the standard path accepts (which also
    takes NaN, lone surrogate escapes, nesting past 1,024 and Unicode-blank lines), and where both
    accept a line they give the same object, except for integers of 19 digits or more, which go to
    the standard path. So a line orjson refuses, or that is not an object, takes the standard path:
    the row, or the error a PM reads, is the same as before.
    """
    if _LONG_DIGITS in raw.translate(_DIGIT_MAP):
        return None
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return row if type(row) is dict else None


def jsonl_rows(source: ImportSource, errors: LineErrors) -> Iterator[tuple[int, dict[str, Any], bool]]:
    """As `jsonl_objects`, with whether every string of the row is known storable (`RowReader(storable=)`).

    One scan of the line for the two escapes replaces a check of each string (a third of
    a 10,000-question import's validation); a line that has one is checked string by string.
    """
    for number, raw in jsonl_lines(source, errors):
        fast = _object_fast(raw)
        if fast is not None:
            yield number, fast, _UNSTORABLE_ESCAPE.search(raw) is None
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.add(number, None, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} "
                                     "of the line); save the file as UTF-8", code=ErrorCode.LINE_BAD_ENCODING,
                       params={"byte": f"0x{raw[exc.start]:02x}", "position": exc.start + 1})
            continue
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            errors.add(number, None, f"not valid JSON ({exc.msg} at column {exc.colno})",
                       code=ErrorCode.LINE_NOT_JSON, params={"column": exc.colno})
            continue
        except (ValueError, RecursionError) as exc:
            # Python's own limits: integers of thousands of digits, arrays nested thousands deep.
            errors.add(number, None, f"not valid JSON ({exc.__class__.__name__}: {str(exc)[:80]})")
            continue
        if not isinstance(row, dict):
            errors.add(number, None, f"expected a JSON object, got {describe(row)}", code=ErrorCode.LINE_NOT_OBJECT,
                       params={"got": describe(row)})
            continue
        yield number, row, _UNSTORABLE_ESCAPE.search(raw) is None


def _unstorable(value: str) -> str | None:
    """Why PostgreSQL would refuse this text (JSON can say what its text columns cannot), or None."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which the database cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate escape (\\ud800-\\udfff), which is not valid Unicode text"
    return None


class RowReader:
    """Typed reads of one row's fields; a bad field becomes a line error and reads as None."""

    def __init__(self, errors: LineErrors, line: int, *, storable: bool = False) -> None:
        self.errors = errors
        self.line = line
        self.failed = False
        # True when the line holds no escape of NUL or of a surrogate: no string needs checking.
        self.storable = storable

    def error(self, field: str | None, message: str, *, code: str = "", params: dict[str, Any] | None = None) -> None:
        self.failed = True
        self.errors.add(self.line, field, message, code=code, params=params)

    def text(self, obj: dict[str, Any], key: str, path: str, *, required: bool = True,
             max_length: int | None = None, blank: bool = False) -> str | None:
        """A string field. `blank=False` refuses empty and whitespace-only text."""
        if key not in obj or (obj[key] is None and not required):
            if required:
                self.error(path, "missing; expected a string", code=ErrorCode.FIELD_MISSING_TEXT)
            return None
        value = obj[key]
        if not isinstance(value, str) or (not blank and not value.strip()):
            self.error(path, f"expected a non-empty string, got {describe(value)}", code=ErrorCode.FIELD_NOT_TEXT,
                       params={"got": describe(value)})
            return None
        if max_length is not None and len(value) > max_length:
            self.error(path, f"expected at most {max_length} characters, got {len(value)}",
                       code=ErrorCode.FIELD_TOO_LONG, params={"max": max_length, "length": len(value)})
            return None
        problem = None if self.storable else _unstorable(value)
        if problem:
            self.error(path, problem)
            return None
        return value

    def integer_or_null(self, obj: dict[str, Any], key: str, path: str) -> tuple[bool, int | None]:
        """(ok, value) for a field that must be present and hold an integer or null."""
        if key not in obj:
            self.error(path, "missing; expected an integer or null", code=ErrorCode.FIELD_MISSING_INTEGER_OR_NULL)
            return False, None
        value = obj[key]
        if value is None:
            return True, None
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"expected an integer or null, got {describe(value)}",
                       code=ErrorCode.FIELD_NOT_INTEGER_OR_NULL, params={"got": describe(value)})
            return False, None
        return self._in_range(value, path), value

    def integer(self, obj: dict[str, Any], key: str, path: str) -> int | None:
        if key not in obj:
            self.error(path, "missing; expected an integer", code=ErrorCode.FIELD_MISSING_INTEGER)
            return None
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"expected an integer, got {describe(value)}", code=ErrorCode.FIELD_NOT_INTEGER,
                       params={"got": describe(value)})
            return None
        return value if self._in_range(value, path) else None

    def _in_range(self, value: int, path: str) -> bool:
        if abs(value) > INT32:
            self.error(path, f"expected an integer between {-INT32} and {INT32}, got {describe(value)}",
                       code=ErrorCode.FIELD_OUT_OF_RANGE, params={"min": -INT32, "max": INT32, "got": describe(value)})
            return False
        return True

    def object_list(self, obj: dict[str, Any], key: str, path: str, *, what: str) -> list[dict[str, Any]] | None:
        """A non-empty list whose members are all objects; `what` names the members for the message."""
        if key not in obj:
            self.error(path, f"missing; expected a non-empty list of {what}", code=ErrorCode.FIELD_MISSING_LIST,
                       params={"what": what})
            return None
        value = obj[key]
        if not isinstance(value, list) or not value:
            self.error(path, f"expected a non-empty list of {what}, got {describe(value)}",
                       code=ErrorCode.FIELD_NOT_LIST, params={"what": what, "got": describe(value)})
            return None
        bad = [i for i, member in enumerate(value) if not isinstance(member, dict)]
        for i in bad:
            self.error(f"{path}[{i}]", f"expected an object, got {describe(value[i])}", code=ErrorCode.FIELD_NOT_OBJECT,
                       params={"got": describe(value[i])})
        return None if bad else value

    def string_list(self, obj: dict[str, Any], key: str, path: str) -> list[str] | None:
        """An optional list of strings (tags); absent or null reads as []."""
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(path, f"expected a list of strings, got {describe(value)}",
                       code=ErrorCode.FIELD_NOT_STRING_LIST, params={"got": describe(value)})
            return None
        problem = None if self.storable else next(filter(None, map(_unstorable, value)), None)
        if problem:
            self.error(path, problem)
            return None
        return value
