#!/usr/bin/env bash
# Builds the book under docs/ with mdBook into OUT (default target/book)
# and fails on anything mdBook warns about (a missing include, a page that
# cannot be read, a bad SUMMARY.md) or a broken link in the rendered HTML
# (scripts/check_book_links.py) or in the sources (scripts/check_doc_links.py,
# which also finds an include whose ANCHOR is missing). `make docs` runs it; `make test` too.
#
#   scripts/build_book.sh [OUT]
#
# mdBook comes from `scripts/setup.sh docs` (.cache/mdbook; MDBOOK= to use
# another binary).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-target/book}")"
MDBOOK="${MDBOOK:-.cache/mdbook/bin/mdbook}"
[ -x "$MDBOOK" ] || { echo "mdbook missing at $MDBOOK: run scripts/setup.sh docs" >&2; exit 1; }
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$MDBOOK" build docs --dest-dir "$OUT" >"$log" 2>&1; then
    cat "$log" >&2
    echo "mdbook build failed" >&2
    exit 1
fi
if grep -E '\b(WARN|ERROR)\b' "$log" >&2; then
    echo "mdbook build warned (above): fix the book" >&2
    exit 1
fi
"$PY" scripts/check_book_links.py "$OUT"
# What the HTML cannot show: an include whose ANCHOR is missing renders as
# nothing, silently (mdBook 0.5); the sources' check finds it.
"$PY" scripts/check_doc_links.py
echo "book built: $OUT/index.html"
