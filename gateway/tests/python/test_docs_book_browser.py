"""The rendered book in a browser (issue 45): the book under docs/ is built
with mdBook (scripts/build_book.sh, as `make docs` builds it, into this
test's tmp folder), served on a loopback port, and headless Chromium
(Debian's `chromium` through `playwright-core`, both installed by
`scripts/setup.sh test`, as for the other browser tests) opens its start
page and the configuration reference, then types a config field into the
book's search box and follows the result to the configuration reference.
See gateway/tests/browser/book_browser.mjs for the checks; screenshots
land in the tmp folder."""

import functools
import os
import shutil
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import REPO

BROWSER_DIR = REPO / "gateway" / "tests" / "browser"
MDBOOK = REPO / ".cache" / "mdbook" / "bin" / "mdbook"
# A field of the Configuration page a reader would search for.
FIELD = "max_concurrent_requests"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def build_book(out: Path):
    assert MDBOOK.exists(), f"{MDBOOK} is missing: run scripts/setup.sh docs (or test)"
    run = subprocess.run([str(REPO / "scripts" / "build_book.sh"), str(out)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"the book does not build:\n{run.stdout}\n{run.stderr}"


def test_a_browser_reads_the_book_and_its_search_finds_a_config_field(tmp_path):
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
    assert (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    chromium = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    assert Path(chromium).exists(), f"{chromium} is missing: run scripts/setup.sh test (apt chromium)"
    book = tmp_path / "book"
    build_book(book)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = [node, str(BROWSER_DIR / "book_browser.mjs"), url, FIELD, str(tmp_path)]
        run = subprocess.run(args, cwd=BROWSER_DIR, capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}"
    assert "passed, 0 failed" in run.stdout
    for shot in ("book-start.png", "book-search.png", "book-result.png"):
        assert (tmp_path / shot).exists(), shot
