"""Reading the documentation as data, for the tests that hold the docs to
the binary: the Markdown pages (README.md and the book under docs/src),
their fenced blocks with the line they start on and the marker before
them, and a small TOML writer (Python reads TOML, it cannot write it) for
the configs built from fragments."""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "src").rglob("*.md"))]

# `<!-- check-config: WORDS[; reason] -->` on the line before a ```toml block.
MARKER = re.compile(r"^\s*<!--\s*check-config:\s*(?P<words>[a-z\- ]+?)\s*(?:;\s*(?P<reason>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[A-Za-z0-9_+-]*)\s*$")


@dataclass
class Block:
    """One fenced block of a page: its language, text, where it starts
    (the fence's line, 1-based) and the check-config marker before it."""
    page: Path
    line: int
    lang: str
    text: str
    marks: frozenset = frozenset()
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of `page`, in order."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening or not opening["lang"]:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{i + 1}: a ```{opening['lang']} block that never closes"
        indent = len(opening["indent"])
        text = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.match(before)
        marks = frozenset(mark["words"].split()) if mark else frozenset()
        out.append(Block(page, i + 1, opening["lang"], text, marks, (mark["reason"] or "") if mark else ""))
        i = end + 1
    return out


def all_blocks(lang: str) -> list[Block]:
    return [b for page in DOC_PAGES for b in blocks(page) if b.lang == lang]


def markers_without_a_block() -> list[str]:
    """`page:line` of each check-config marker not followed by a ```toml block."""
    lost = []
    for page in DOC_PAGES:
        lines = page.read_text().splitlines()
        for n, line in enumerate(lines):
            if line.lstrip().startswith("<!--") and "check-config:" in line:
                after = next((lines[j] for j in range(n + 1, len(lines)) if lines[j].strip()), "")
                if not MARKER.match(line) or after.strip() != "```toml":
                    lost.append(f"{page.relative_to(REPO)}:{n + 1}")
    return lost


def merge(base: dict, fragment: dict) -> dict:
    """`fragment` laid over `base`: tables merge key by key (the fragment's
    keys win); in arrays of tables an entry replaces the base's entry of
    the same `name` and the others are appended."""
    out = dict(base)
    for key, value in fragment.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge(old, value)
        elif isinstance(old, list) and isinstance(value, list) and all(isinstance(v, dict) for v in old + value):
            names = {v.get("name") for v in value}
            out[key] = [v for v in old if v.get("name") not in names] + value
        else:
            out[key] = value
    return out


def toml_value(value) -> str:
    """`value` as a TOML value (tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's string escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def to_toml(doc: dict) -> str:
    """A parsed config written back as TOML: tables as `[name]`, arrays of
    tables as `[[name]]`, everything below them inline."""
    scalars = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items()
               if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(e, dict) for e in v))]
    sections = []
    for key, value in doc.items():
        if isinstance(value, dict):
            sections.append(f"[{json.dumps(key)}]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n"
                                                               for k, v in value.items()))
        elif isinstance(value, list) and value and all(isinstance(e, dict) for e in value):
            for entry in value:
                sections.append(f"[[{json.dumps(key)}]]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n"
                                                                     for k, v in entry.items()))
    return "\n".join(scalars) + "\n\n" + "\n".join(sections)
