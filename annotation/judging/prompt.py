"""The judge prompt and the strict parser for the judge's answer.

The prompt follows the *structure* of HeartBench's judge prompt (a strict
psychology scoring expert; role B is not the model under test; positive items
hit only when fully met, negative items on any trace; count the rubric lines;
then the dialogue, the reply, the rubric lines, the rubric count and a JSON
output format) in our own Chinese wording, so that judge labels stay
comparable with HeartBench's while the text is ours.

Rendering choices, fixed by ``PROMPT_VERSION`` (change the version whenever
the rendered text changes, because stored judge runs record it):

* Dialogue turns are rendered one per line as ``A: ...`` / ``B: ...``.  A
  newline inside a turn is written as the two characters ``\\n`` (as
  HeartBench's Python ``repr`` of the dialogue does), so that one line is
  always one turn and a turn can never forge a section header.
* Rubric items are rendered exactly as ``[dimension][score] text``.  A null
  score renders as ``None``: that is what HeartBench's f-string produces, and
  judges tuned on HeartBench have seen it.  Integral float scores (``3.0``)
  render as ``3``.
* The reply is rendered verbatim (it has its own section and may be multi-line).

No Django import here: this module is pure Python and unit-testable.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PROMPT_VERSION",
    "JudgeAnswer",
    "JudgeParseError",
    "render_judge_prompt",
    "render_rubric_line",
    "parse_judge_answer",
]

PROMPT_VERSION = "heartbench-judge-v1"

# Section headers.  Other code (the fake LLM server, log readers) locates the
# rubric count by the ``rubric条数：`` header on a line of its own.
_H_DIALOGUE = "对话历史："
_H_RESPONSE = "待测AI回复："
_H_RUBRIC = "rubric："
_H_COUNT = "rubric条数："

_INSTRUCTIONS = """\
你是一名专业且极其严格的心理学评分专家。下面给出一段对话历史（它是考题的上文）以及待测AI针对这段对话给出的回复，请逐条对照rubric，判断待测AI的回复是否命中每一条。
评分须知：
1. 对话历史中的角色B并不是待测AI，它只用来构造考题的上文；你只评价「待测AI回复」这一部分。
2. 判定要从严：加分项（分值为正）只有在回复完全做到所描述的内容时才算命中；扣分项（分值为负）只要回复沾到一点所描述的情形就算命中；分值为None的条目按扣分项的标准判定。
3. 先通读对话历史、待测AI回复和全部rubric，再按顺序逐条给出命中结果；务必数清rubric一共有几条，输出的命中结果个数必须与rubric条数完全相同，输出前请反复核对这一点。
4. 分值只用来区分加分项和扣分项，不需要计算总分。"""

_OUTPUT_FORMAT = """\
输出要求：直接输出一个JSON对象，不要输出markdown代码块，也不要输出其他任何内容。格式如下：
{{"reason": "具体的评分过程（文本中需要引用时请使用「」，不要使用英文引号，以免解析失败）", "detail": [1, 0, 1, ...]}}
其中 reason 为字符串；detail 为整数数组，按rubric的顺序给出每一条的命中情况，命中为1，未命中为0，用英文逗号分隔，元素个数必须等于rubric条数（本题为{count}条）。"""

_NEWLINES = re.compile(r"\r\n|\r|\n")


def _one_line(text: str) -> str:
    """Escape line breaks so that a multi-line field stays on one prompt line."""
    return _NEWLINES.sub(r"\\n", text)


def _render_score(score: Any) -> str:
    """Render a rubric score the way HeartBench's f-string would (``None`` for null)."""
    if score is None:
        return "None"
    if isinstance(score, bool):
        # bool is an int subclass; a True score is certainly a data error.
        raise ValueError(f"rubric score must be a number or None, got {score!r}")
    if isinstance(score, int):
        return str(score)
    if isinstance(score, float):
        return str(int(score)) if score.is_integer() else repr(score)
    raise ValueError(f"rubric score must be a number or None, got {type(score).__name__}")


def render_rubric_line(item: dict[str, Any]) -> str:
    """Render one rubric item as ``[dimension][score] text``.

    The text is taken from ``content`` (HeartBench's field name) or, failing
    that, ``text``.
    """
    if not isinstance(item, dict):
        raise ValueError(f"rubric item must be a dict, got {type(item).__name__}")
    dimension = item.get("dimension")
    if not isinstance(dimension, str) or not dimension.strip():
        raise ValueError(f"rubric item has no dimension: {item!r}")
    text = item.get("content", item.get("text"))
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"rubric item has no content/text: {item!r}")
    score = _render_score(item.get("score"))
    return f"[{_one_line(dimension.strip())}][{score}] {_one_line(text.strip())}"


def _render_turn(index: int, turn: dict[str, Any]) -> str:
    """Render one dialogue turn as ``ROLE: content`` on a single line."""
    if not isinstance(turn, dict):
        raise ValueError(f"dialogue turn {index} must be a dict, got {type(turn).__name__}")
    role = turn.get("role")
    content = turn.get("content")
    if not isinstance(role, str) or not role.strip():
        raise ValueError(f"dialogue turn {index} has no role")
    if not isinstance(content, str):
        raise ValueError(f"dialogue turn {index} has no string content")
    return f"{_one_line(role.strip())}: {_one_line(content)}"


def render_judge_prompt(
    dialogue: list[dict[str, Any]],
    response: str,
    rubric: list[dict[str, Any]],
) -> str:
    """Render the judge prompt for one (dialogue, reply, rubric) triple.

    ``dialogue`` is HeartBench's list of ``{"role": "A"|"B", "content": str}``;
    ``rubric`` is a list of ``{"dimension", "score", "content"}`` in rubric
    position order (the judge's ``detail`` follows this order).  Raises
    ``ValueError`` on malformed input rather than sending a broken prompt.
    """
    turns, lines, count = _prompt_parts(dialogue, response, rubric)
    return "\n".join(
        [
            _INSTRUCTIONS,
            "",
            _H_DIALOGUE,
            turns,
            _H_RESPONSE,
            response,
            _H_RUBRIC,
            lines,
            _H_COUNT,
            str(count),
            "",
            _OUTPUT_FORMAT.format(count=count),
        ]
    )


def _prompt_parts(dialogue: list[dict[str, Any]], response: str, rubric: list[dict[str, Any]]) -> tuple[str, str, int]:
    """The rendered dialogue, the rubric lines and the item count; ValueError on malformed input."""
    if not isinstance(response, str):
        raise ValueError(f"response must be a string, got {type(response).__name__}")
    if not rubric:
        # A judge asked to return zero labels has nothing to do; this is a bug upstream.
        raise ValueError("rubric is empty: nothing to judge")
    turns = "\n".join(_render_turn(i, turn) for i, turn in enumerate(dialogue))
    lines = "\n".join(render_rubric_line(item) for item in rubric)
    return turns, lines, len(rubric)


def render_judge_prompt_from(
    template: str,
    dialogue: list[dict[str, Any]],
    response: str,
    rubric: list[dict[str, Any]],
) -> str:
    """Fill a judge configuration's template (`{dialogue}`, `{response}`, `{rubric}`, `{count}`).

    The parts are rendered as for the built-in prompt, so the built-in template filled here
    is exactly `render_judge_prompt`'s text. ValueError on malformed input or template.
    """
    turns, lines, count = _prompt_parts(dialogue, response, rubric)
    try:
        return template.format(dialogue=turns, response=response, rubric=lines, count=count)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the prompt template cannot be filled: {exc}") from None


class JudgeParseError(ValueError):
    """The judge's answer is not a well-formed ``{"reason", "detail"}`` object.

    ``answer_text`` keeps the raw answer so that a caller can store it for audit.
    """

    def __init__(self, message: str, answer_text: str = "") -> None:
        super().__init__(message)
        self.answer_text = answer_text


@dataclass(frozen=True)
class JudgeAnswer:
    """A parsed judge answer: one 0/1 per rubric position, and the judge's reasoning."""

    detail: list[int]
    reason: str
    raw: str = field(default="", repr=False, compare=False)


# A whole-answer code fence: ```json ... ``` (language tag optional).
_FENCE = re.compile(r"\A```[ \t]*(?:json|JSON|python)?[ \t]*\r?\n(.*?)\r?\n?```\Z", re.DOTALL)
# Reasoning models (R1, Qwen3) prefix their answer with a think block; it is
# not part of the answer, so it is dropped before strict parsing.
_THINK = re.compile(r"\A<think>.*?</think>\s*", re.DOTALL)
# literal_eval on a huge string can exhaust memory or the parser's recursion;
# a genuine answer is a few KB at most.
_MAX_ANSWER_CHARS = 200_000


def _excerpt(text: str, limit: int = 80) -> str:
    """Return a short one-line excerpt of ``text`` for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _load_object(text: str) -> Any:
    """Decode ``text`` as JSON, or else as a Python literal (single-quoted dicts)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        # literal_eval only builds literals: no names, calls or attribute access.
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise JudgeParseError(
            f"judge answer is not a JSON object or Python dict literal: {_excerpt(text)!r}",
            text,
        ) from None


def parse_judge_answer(text: str, n_items: int) -> JudgeAnswer:
    """Parse a judge answer strictly into a ``JudgeAnswer`` of exactly ``n_items`` labels.

    Accepted: a JSON object, optionally wrapped in a ```json fence, or a Python
    dict literal with single quotes (HeartBench judges often answer that way),
    optionally preceded by a ``<think>`` block.  ``detail`` must be a list of
    exactly ``n_items`` values, each 0 or 1 (booleans are accepted as 0/1).
    A wrong-length ``detail`` is never padded or cut: a label at the wrong
    position is worse than no label.  ``reason`` may be absent (empty string)
    but if present must be a string.  Anything else raises ``JudgeParseError``
    saying what was wrong.
    """
    if n_items < 1:
        raise ValueError(f"n_items must be at least 1, got {n_items}")
    if not isinstance(text, str):
        raise JudgeParseError(f"judge answer must be a string, got {type(text).__name__}")
    raw = text
    body = _THINK.sub("", text.strip(), count=1).strip()
    if not body:
        raise JudgeParseError("judge answer is empty", raw)
    if len(body) > _MAX_ANSWER_CHARS:
        raise JudgeParseError(f"judge answer is too long ({len(body)} characters)", raw)
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()

    obj = _load_object(body)
    if not isinstance(obj, dict):
        raise JudgeParseError(
            f"judge answer is a {type(obj).__name__}, expected an object with 'reason' and 'detail'",
            raw,
        )
    if "detail" not in obj:
        keys = ", ".join(sorted(map(str, obj))) or "none"
        raise JudgeParseError(f"judge answer has no 'detail' key (keys: {keys})", raw)

    detail = obj["detail"]
    if not isinstance(detail, list):
        raise JudgeParseError(f"'detail' must be a list, got {type(detail).__name__}", raw)
    if len(detail) != n_items:
        raise JudgeParseError(
            f"'detail' has length {len(detail)}, expected {n_items} (one 0/1 per rubric item)",
            raw,
        )
    labels: list[int] = []
    for position, value in enumerate(detail):
        # bool first: True/False are valid labels; other ints only if 0 or 1.
        # Floats (1.0) and strings ("1") are rejected: a judge that cannot
        # follow the format is not trusted to follow the rubric order either.
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            labels.append(int(value))
        else:
            raise JudgeParseError(
                f"'detail' value {value!r} at position {position} (0-based) is not 0 or 1",
                raw,
            )

    reason = obj.get("reason", "")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise JudgeParseError(f"'reason' must be a string, got {type(reason).__name__}", raw)
    return JudgeAnswer(detail=labels, reason=reason, raw=raw)
