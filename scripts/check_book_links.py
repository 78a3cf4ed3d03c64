#!/usr/bin/env python3
"""Check the links of the rendered book (what `mdbook build` wrote).

    python3 scripts/check_book_links.py target/book

scripts/check_doc_links.py reads the Markdown sources; this reads the
HTML mdBook made of them, so it also sees what only the renderer decides:
the sidebar, the pages' `.md` -> `.html` links, the ids it gives headings,
included parts of README.md, and the print page. For every `.html` file
(but `404.html`, whose links are absolute to the site's root), each
`href` and `src` without a scheme must name a file of the output, and a
`#fragment` must be an `id` (or `<a name>`) of the page it points to.
Exit status 1 on a problem, each printed as `page: link: what`.
"""

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

SKIP = {"404.html"}


class Page(HTMLParser):
    """The links and the ids of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list = []
        self.ids: set = set()

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if values.get(key):
                self.ids.add(values[key])
        for key in ("href", "src"):
            if values.get(key) is not None and tag != "base":
                self.links.append(values[key])


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(errors="replace"))
    return page


def check(root: Path) -> list:
    root = root.resolve()
    pages = {p: parse(p) for p in sorted(root.rglob("*.html")) if p.name not in SKIP}
    problems = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or not (parts.path or parts.fragment):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(root)}: {link}"
            if not target.is_relative_to(root):
                problems.append(f"{where}: leaves the book")
            elif not target.is_file():
                problems.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{where}: no id {parts.fragment!r} in {target.relative_to(root)}")
    if not pages:
        problems.append(f"{root}: no HTML pages (was the book built?)")
    return problems


def main(argv: list) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(Path(argv[0]))
    for p in problems:
        print(p)
    print(f"rendered book at {argv[0]}: {len(problems)} broken link(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
