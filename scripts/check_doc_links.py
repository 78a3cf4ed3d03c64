#!/usr/bin/env python3
"""Check the links of the README and the book (docs/src) without mdBook.

Run from anywhere: `python3 scripts/check_doc_links.py` (exit status 1 on a
problem, each printed as `file:line: what`). It checks:

- every relative link and image (inline `[t](x)`, and reference-style
  `[t][label]` with its `[label]: x` definition) resolves to a file of the
  repository, and a `#anchor` to a heading of the target (mdBook and
  GitHub rules: lower-case, spaces to `-`, punctuation dropped, `-1`,
  `-2`... for repeated headings);
- a book page's links stay inside `docs/src` (mdBook renders nothing else);
- mdBook's `{{#include path:anchor}}` finds its file and its
  `ANCHOR: name` / `ANCHOR_END: name` pair; the included text's links are
  checked relative to the page that includes it, as mdBook renders them;
- `docs/src/SUMMARY.md` lists every page under `docs/src`, and only pages
  that exist.

Files checked: README.md, every page under docs/src, and every other
Markdown file git tracks (their relative links only). Links inside fenced
code blocks and code spans are not links and are skipped.
"""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOK = REPO / "docs" / "src"

FENCE = re.compile(r"^\s*(```|~~~)")
INCLUDE = re.compile(r"\{\{#include\s+([^}:\s]+)(?::([\w-]+))?\s*\}\}")
INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_USE = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])+)\]\[([^\]]*)\]")
REF_DEF = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*(\S+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def anchor_of(heading: str) -> str:
    """The id mdBook and GitHub give a heading."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def section(path: Path, name: str):
    """The lines between `ANCHOR: name` and `ANCHOR_END: name` of a file,
    without any anchor lines (as mdBook includes them), or None."""
    lines = path.read_text().split("\n")
    start = re.compile(rf"ANCHOR:\s*{re.escape(name)}\b")
    end = re.compile(rf"ANCHOR_END:\s*{re.escape(name)}\b")
    for i, line in enumerate(lines):
        if start.search(line):
            for j in range(i + 1, len(lines)):
                if end.search(lines[j]):
                    return [l for l in lines[i + 1:j] if not re.search(r"ANCHOR(_END)?:", l)]
            return None
    return None


def expand(path: Path, problems: list, depth: int = 0):
    """The file's lines as (text, origin) after mdBook's includes; origin
    says where the line came from, for messages."""
    out = []
    for n, line in enumerate(path.read_text().split("\n"), 1):
        m = INCLUDE.search(line)
        if not m or path.suffix != ".md" or not path.is_relative_to(BOOK):
            out.append((line, f"{rel(path)}:{n}"))
            continue
        target = (path.parent / m.group(1)).resolve()
        if not target.is_file():
            problems.append(f"{rel(path)}:{n}: include of a missing file {m.group(1)}")
            continue
        if m.group(2):
            lines = section(target, m.group(2))
            if lines is None:
                problems.append(f"{rel(path)}:{n}: no ANCHOR {m.group(2)} ... ANCHOR_END in {rel(target)}")
                continue
        else:
            lines = target.read_text().split("\n")
        for k, inc in enumerate(lines):
            out.append((inc, f"{rel(path)}:{n} (included from {rel(target)})"))
    return out


def without_code(lines):
    """Lines with fenced blocks blanked and code spans removed."""
    fence = None
    for text, origin in lines:
        m = FENCE.match(text)
        if fence:
            if m and m.group(1) == fence:
                fence = None
            yield "", origin
            continue
        if m:
            fence = m.group(1)
            yield "", origin
            continue
        yield CODE_SPAN.sub("", text), origin


def anchors(path: Path, cache: dict, problems: list) -> set:
    if path not in cache:
        seen: dict = {}
        ids = set()
        lines = expand(path, []) if path.is_relative_to(BOOK) else [(l, "") for l in path.read_text().split("\n")]
        fence = None
        for text, _ in lines:
            m = FENCE.match(text)
            if fence or m:
                if fence and m and m.group(1) == fence:
                    fence = None
                elif not fence:
                    fence = m.group(1)
                continue
            h = HEADING.match(text)
            if h:
                base = anchor_of(h.group(2))
                k = seen.get(base, 0)
                ids.add(base if k == 0 else f"{base}-{k}")
                seen[base] = k + 1
            for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
                ids.add(a)
        cache[path] = ids
    return cache[path]


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def check_target(page: Path, target: str, origin: str, cache: dict, problems: list):
    if not target or SCHEME.match(target) or target.startswith("//"):
        return
    file_part, _, frag = target.partition("#")
    dest = page if not file_part else (page.parent / file_part).resolve()
    if file_part and not dest.exists():
        problems.append(f"{origin}: {target}: no such file")
        return
    if page.is_relative_to(BOOK) and not dest.is_relative_to(BOOK):
        problems.append(f"{origin}: {target}: leaves docs/src (mdBook renders only the book)")
    if frag:
        if dest.suffix != ".md":
            problems.append(f"{origin}: {target}: an anchor into a file that is not Markdown")
        elif frag not in anchors(dest, cache, problems):
            problems.append(f"{origin}: {target}: no heading #{frag} in {rel(dest)}")


def check_page(page: Path, cache: dict, problems: list):
    lines = list(without_code(expand(page, problems)))
    defs = {}
    for text, origin in lines:
        m = REF_DEF.match(text)
        if m:
            defs[m.group(1).lower()] = (m.group(2), origin)
    for label, (target, origin) in defs.items():
        check_target(page, target.strip("<>"), origin, cache, problems)
    for text, origin in lines:
        if REF_DEF.match(text):
            continue
        for m in INLINE.finditer(text):
            check_target(page, m.group(2), origin, cache, problems)
        for m in REF_USE.finditer(INLINE.sub("", text)):
            label = (m.group(2) or m.group(1)).lower()
            if label not in defs:
                problems.append(f"{origin}: [{m.group(1)}][{m.group(2)}]: no definition of [{label}]")


def check_summary(problems: list):
    summary = BOOK / "SUMMARY.md"
    if not summary.is_file():
        problems.append("docs/src/SUMMARY.md: missing")
        return
    listed = set()
    for n, line in enumerate(summary.read_text().split("\n"), 1):
        for m in INLINE.finditer(line):
            if m.group(2):
                listed.add((BOOK / m.group(2)).resolve())
    for page in sorted(BOOK.rglob("*.md")):
        if page.name != "SUMMARY.md" and page.resolve() not in listed:
            problems.append(f"{rel(page)}: not listed in docs/src/SUMMARY.md")


def main() -> int:
    tracked = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True)
    pages = {(REPO / p).resolve() for p in tracked.stdout.split()}
    pages |= {p.resolve() for p in BOOK.rglob("*.md")}
    pages.add((REPO / "README.md").resolve())
    problems: list = []
    cache: dict = {}
    for page in sorted(pages):
        if page.is_file() and "node_modules" not in page.parts:
            check_page(page, cache, problems)
    check_summary(problems)
    for p in problems:
        print(p)
    print(f"{len(pages)} Markdown files checked, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
