"""Annotation guidelines: Markdown a PM writes, rendered into HTML that is safe to show experts.

Two layers, each enough on its own for the common attacks, together for the rest:

1. markdown-it-py parses CommonMark with raw HTML turned off (`html=False`): `<script>`,
   `<img onerror=...>` and any other tag typed into the text come out as escaped text,
   and its link validator already refuses `javascript:`, `vbscript:`, `file:` and
   `data:` (other than images) URLs.
2. nh3 (the Rust sanitizer Ammonia) then cleans the HTML against the allow-list below:
   only these tags and attributes survive, links may point only to http(s), mailto or
   a relative address and always carry rel="noopener noreferrer", and an `id` survives
   only as a dimension anchor this module put there.

Images are dropped, relative ones too: an expert reads the guidelines inside the
annotation page, where an image would only be a way to make their browser fetch
something; the strict CSP would block outside ones anyway.

Sections per dimension: a heading (any level) whose whole text is a dimension's Chinese
name, English name or code (case and surrounding spaces ignored) gets the anchor
`dim-<code>`, so `## 温暖` becomes `<h2 id="dim-warmth">`. Rubric items link their
dimension to that anchor.
"""
import difflib
import re
from dataclasses import dataclass

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from rubrics.models import Dimension

GUIDELINES_MAX = 50_000  # characters; the demo's guidelines are about 3,000

ALLOWED_TAGS = frozenset({
    "h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "blockquote", "pre", "code",
    "strong", "em", "del", "s", "ul", "ol", "li", "a",
    "table", "thead", "tbody", "tr", "th", "td",
})
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    **{f"h{level}": {"id"} for level in range(1, 7)},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer"
ANCHOR_PREFIX = "dim-"
_ANCHOR = re.compile(r"^dim-[a-z0-9-]{1,40}$")


def dimension_anchor(code: str) -> str:
    """The id of the guidelines section of the dimension with this code."""
    return f"{ANCHOR_PREFIX}{code}"


def _dimension_names() -> dict[str, str]:
    """{lower-cased Chinese name, English name or code: code} for every dimension."""
    names: dict[str, str] = {}
    for code, name_zh, name_en in Dimension.objects.values_list("code", "name_zh", "name_en"):
        for name in (code, name_zh, name_en):
            names[name.strip().lower()] = code
    return names


def _parser() -> MarkdownIt:
    # "commonmark" with html off; tables and ~~strike~~ are what a PM's guidelines use.
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _keep_attribute(tag: str, name: str, value: str) -> str | None:
    if name == "id":
        return value if _ANCHOR.match(value) else None
    if name == "href":
        # A colon before the first / ? or # names a scheme. nh3 checks real schemes, but lets
        # through what is no valid scheme (`java%EF%BF%BDscript:`) as a relative address;
        # browsers would too, harmlessly, yet such a link is never what the author meant.
        head = re.split(r"[/?#]", value, maxsplit=1)[0]
        if ":" in head and head.split(":", 1)[0].lower() not in URL_SCHEMES:
            return None
    return value


@dataclass(frozen=True)
class RenderedGuidelines:
    html: SafeString
    sections: frozenset[str]  # codes of the dimensions that have a section

    def __bool__(self) -> bool:
        return bool(self.html)


def guidelines_render(text: str) -> RenderedGuidelines:
    """The guidelines as sanitised HTML, with an anchor on each dimension's heading."""
    if not text or not text.strip():
        return RenderedGuidelines(html=mark_safe(""), sections=frozenset())
    parser = _parser()
    tokens = parser.parse(text)
    names = _dimension_names()
    sections: set[str] = set()
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or index + 1 >= len(tokens):
            continue
        code = names.get(tokens[index + 1].content.strip().lower())
        if code is not None and code not in sections:  # the first heading of a dimension wins
            token.attrSet("id", dimension_anchor(code))
            sections.add(code)
    raw = parser.renderer.render(tokens, parser.options, {})
    clean = nh3.clean(raw, tags=set(ALLOWED_TAGS), attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
                      url_schemes=set(URL_SCHEMES), link_rel=LINK_REL, attribute_filter=_keep_attribute,
                      strip_comments=True)
    # nh3 returns markup built only from the allow-list above, so it may be marked safe.
    return RenderedGuidelines(html=mark_safe(clean), sections=frozenset(sections))  # noqa: S308


def guidelines_line_diff(old: str, new: str) -> list[tuple[str, str]]:
    """A readable line diff of two guidelines texts: [(mark, line)], mark "+", "-" or " " (context).

    Unchanged lines far from a change are left out (two lines of context, like `diff -U2`),
    with ("…", "") where lines were skipped.
    """
    old_lines, new_lines = old.splitlines(), new.splitlines()
    result: list[tuple[str, str]] = []
    for group in difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_grouped_opcodes(2):
        if result:
            result.append(("…", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                result.extend((" ", line) for line in old_lines[i1:i2])
                continue
            result.extend(("-", line) for line in old_lines[i1:i2])
            result.extend(("+", line) for line in new_lines[j1:j2])
    return result
