"""`jsonl_rows` reads every line as the standard library's decoder would, whichever decoder ran.

The fast path (orjson) accepts a strict subset of what `json.loads` accepts; these tests try
lines where the two differ and random JSON objects, and compare with `json.loads`.
"""
import json
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.exchange.jsonl import LineErrors, jsonl_rows

ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def rows(content: bytes) -> tuple[list, list]:
    errors = LineErrors()
    return list(jsonl_rows(content, errors)), errors.listed


def test_an_integer_past_64_bits_keeps_every_digit():
    (line, row, storable), = rows(b'{"a": 123456789012345678901234567890, "b": -9223372036854775809}\n')[0]

    assert row == {"a": 123456789012345678901234567890, "b": -9223372036854775809}
    assert isinstance(row["a"], int) and storable


def test_the_standard_decoders_extensions_still_read_as_before():
    got, errors = rows(b'{"a": NaN, "b": 1e400}\n{"s": "\\ud800"}\n' + "\u3000\u3000\n".encode() + b"[1]\n")

    assert math.isnan(got[0][1]["a"]) and got[0][1]["b"] == math.inf
    # A lone surrogate escape decodes, and the row is marked for the per-string check.
    assert got[1][1:] == ({"s": "\ud800"}, False)
    # A line of ideographic spaces is blank; a line that is not an object is named.
    assert len(got) == 2
    assert errors == [{"line": 4, "field": None, "message": "expected a JSON object, got a list",
                       "code": "line_not_object", "params": {"got": "a list"}}]


def test_a_bad_line_gets_the_standard_decoders_message():
    _rows, errors = rows(b'{"a": 1} x\n{"a": [1,]}\n')

    assert [(e["line"], e["message"]) for e in errors] == [
        (1, "not valid JSON (Extra data at column 10)"), (2, "not valid JSON (Expecting value at column 10)")]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON, max_size=6), st.booleans())
def test_any_object_reads_as_json_loads_reads_it(obj, ascii_only):
    line = json.dumps(obj, ensure_ascii=ascii_only)

    got, errors = rows(line.encode("utf-8") + b"\n")

    assert errors == []
    assert got == [(1, json.loads(line), ESCAPE.search(line) is None)]
    assert json.dumps(got[0][1]) == json.dumps(json.loads(line))  # ints stay ints, floats stay floats
