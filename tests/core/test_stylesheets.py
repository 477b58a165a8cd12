"""The stylesheets parse as intended: every block closes, and no media query hides inside another.

A lost closing brace is not an error to a browser: it silently nests every later rule in
the open `@media` block, so desktop styles apply only on phones (found by the team-journey
browser test, where the phone menu button showed at 1440 px)."""
import re
from pathlib import Path

import pytest

STATIC_CSS = Path(__file__).resolve().parents[2] / "static" / "css"
COMMENT = re.compile(r"/\*.*?\*/", re.S)
STRING = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def _code(path: Path) -> str:
    """The stylesheet without comments and strings (a brace in either is not structure)."""
    return STRING.sub('""', COMMENT.sub(" ", path.read_text(encoding="utf-8")))


def _problems(css: str) -> list[str]:
    problems = []
    stack: list[str] = []
    for number, line in enumerate(css.split("\n"), 1):
        for match in re.finditer(r"[{}]", line):
            if match.group() == "{":
                prelude = line[:match.start()].rsplit("}", 1)[-1].strip()
                if prelude.startswith("@media") and "@media" in stack:
                    problems.append(f"line {number}: @media inside an open @media block")
                stack.append("@media" if prelude.startswith("@media") else "rule")
            elif stack:
                stack.pop()
            else:
                problems.append(f"line {number}: a closing brace without an open block")
    if stack:
        problems.append(f"{len(stack)} block(s) still open at the end of the file")
    return problems


@pytest.mark.parametrize("path", sorted(STATIC_CSS.glob("*.css")), ids=lambda p: p.name)
def test_every_block_of_the_stylesheet_closes(path):
    assert _problems(_code(path)) == []


def test_the_check_finds_a_media_block_left_open():
    css = "@media (max-width: 640px) {\n  .a { color: red; }\n.topbar-menu { display: none; }\n"

    assert _problems(css) == ["1 block(s) still open at the end of the file"]
    assert _problems(css + "@media print {\n  .b { color: blue; }\n}\n}\n") == [
        "line 4: @media inside an open @media block"]
