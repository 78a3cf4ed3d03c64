"""The configuration reference against the config types (issue 45):
`switchyard config-schema` prints the config file's JSON Schema, derived
from the raw config types with schemars; docs/src/reference/config.schema.json
is that output, committed for editors (a test fails when it drifts), and
every property path the schema lists (`routes[].cache.ttl_s`) must be on
the Configuration page (docs/src/reference/configuration.md), so a new
field cannot go undocumented. docs/src/reference/config-fields.md is the
schema rendered as one table per section by scripts/config_reference.py
(a test fails when it is stale)."""

import json
import os
import re
import importlib.util
import subprocess

from conftest import REPO

SCHEMA_FILE = REPO / "docs" / "src" / "reference" / "config.schema.json"
CONFIG_PAGE = REPO / "docs" / "src" / "reference" / "configuration.md"
FIELDS_PAGE = REPO / "docs" / "src" / "reference" / "config-fields.md"
GENERATOR = REPO / "scripts" / "config_reference.py"


def binary() -> str:
    return os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


def printed_schema() -> str:
    out = subprocess.run([binary(), "config-schema"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def schema_properties(schema: dict):
    """(path, schema node) for every property of `schema`, through `$ref`s,
    `anyOf`/`oneOf`/`allOf` and arrays: paths `a.b`, `a[].b` for arrays of
    tables (a path may come more than once)."""
    defs = schema.get("$defs", {})

    def walk(node, path):
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            yield from walk(defs[node["$ref"].rsplit("/", 1)[-1]], path)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                yield from walk(sub, path)
        if "items" in node:
            yield from walk(node["items"], path + "[]")
        for name, sub in node.get("properties", {}).items():
            inner = f"{path}.{name}" if path else name
            yield inner, sub
            yield from walk(sub, inner)

    yield from walk(schema, "")


def schema_paths(schema: dict) -> set:
    """Every property path of `schema`."""
    return {path for path, _ in schema_properties(schema)}


def parent(path: str) -> str:
    return path.rsplit(".", 1)[0].removesuffix("[]") if "." in path else ""


def documented_rows() -> dict:
    """Path -> the text of its row, for each field the page's table names
    (`a.b`, then siblings written `.c` or `c`; a trailing `[]` dropped)."""
    rows = {}
    for line in CONFIG_PAGE.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first, *siblings = re.findall(r"`([^`]+)`", line.split(" | ")[0])
        table = first.rsplit(".", 1)[0] + "." if "." in first else ""
        for name in [first] + [table + s.lstrip(".") for s in siblings]:
            name = name.removesuffix("[]")
            rows[name] = rows.get(name, "") + " " + line
    return rows


def is_documented(path: str, rows: dict) -> bool:
    """A row of its own; a table whose fields have rows; or a word of the
    row of its nearest ancestor that has one (`{ttl_s=60, methods=...}`)."""
    if path in rows or any(p.startswith(path + ".") or p.startswith(path + "[].") for p in rows):
        return True
    leaf, above = path.rsplit(".", 1)[-1], parent(path)
    while above:
        if above in rows:
            return re.search(rf"\b{re.escape(leaf)}\b", rows[above]) is not None
        above = parent(above)
    return False


def test_the_committed_schema_is_the_one_the_binary_prints():
    assert SCHEMA_FILE.read_text() == printed_schema(), (
        f"{SCHEMA_FILE.relative_to(REPO)} is stale: regenerate it with "
        f"`switchyard config-schema > {SCHEMA_FILE.relative_to(REPO)}`")


def test_every_config_field_is_on_the_configuration_page():
    paths = schema_paths(json.loads(printed_schema()))
    assert len(paths) > 100, sorted(paths)  # the walker found the fields
    rows = documented_rows()
    missing = sorted(p for p in paths if not is_documented(p, rows))
    assert missing == [], f"config fields not on {CONFIG_PAGE.relative_to(REPO)}: {missing}"


def generator():
    spec = importlib.util.spec_from_file_location("config_reference", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def field_rows() -> dict:
    """Path -> [type, default, range, description] of each row of the
    generated page (a path may have several rows: one per policy kind)."""
    rows = {}
    for line in FIELDS_PAGE.read_text().splitlines():
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if m:
            cells = [c.strip() for c in re.split(r"(?<!\\) \| ", m.group(2))]
            assert len(cells) == 4, line
            rows.setdefault(m.group(1), []).append(cells)
    return rows


def test_the_field_reference_page_is_the_one_the_script_renders():
    rendered = generator().render(json.loads(SCHEMA_FILE.read_text()))
    assert FIELDS_PAGE.read_text() == rendered, (
        f"{FIELDS_PAGE.relative_to(REPO)} is stale: regenerate it with "
        f"`python3 scripts/config_reference.py`")


def test_the_field_reference_has_every_field_with_its_type_default_and_range():
    rows = field_rows()
    paths = schema_paths(json.loads(SCHEMA_FILE.read_text()))
    assert len(paths) > 100
    sections = set(re.findall(r"^## `(\w+)(?:\[\])?`$", FIELDS_PAGE.read_text(), re.M))
    assert sorted(p for p in paths if "." not in p) == sorted(sections)
    assert sorted(p for p in paths - set(rows) if "." in p) == [], "schema fields without a row"
    # Known fields, as the config types declare them.
    assert rows["server.listen"] == [["string", '`"127.0.0.1:8000"`', "", "V2 API listener, default `127.0.0.1:8000`."]]
    assert rows["models[].name"][0][0] == "string, *required*"
    assert rows["models[].warmup"][0][:2] == ["boolean", "`false`"]
    kind, default, bounds, about = rows["models[].pools[].batching.max_batch_size"][0]
    assert (kind, default, bounds) == ("integer", "", ">= 0") and "default 32" in about
    assert rows["cache.l1_max_bytes"][0] == [
        "[`ByteSize`](#bytesize): integer or string", "`268435456` (256 MiB)", ">= 1",
        "L1 size bound in bytes, default 256MiB."]
    assert rows["upstreams[].kind"][0][0].startswith('one of `"v2"`, `"http"`')
    assert rows["models[].tokenizer.buckets"][0][:3] == ["array of integer", "", "each >= 0"]
    # The policy table's fields, per kind, with the defaults the schema has.
    assert rows["routes[].policy.type"][0][0].startswith(
        'one of `"fixed"`, `"latency_budget"`, `"cascade"`, `"weighted"`')
    kind, default, _, about = rows["routes[].policy.shed_margin"][0]
    assert (kind, default) == ("number", "`0.5`") and about.startswith('With `type = "latency_budget"`')
    assert rows["routes[].policy.cheap"][0][1] == "absent"
    # Defaults and ranges the config types state (#[schemars(default, range)]),
    # the constants their checks fall back to (config::schema_default's test).
    assert rows["server.max_concurrent_requests"][0][:3] == ["integer", "`4096`", ">= 1"]
    assert rows["server.max_body_bytes"][0][1:3] == ["`67108864` (64 MiB)", ">= 1"]
    assert rows["server.threads"][0][1:3] == ["", ">= 1"]  # the number of cores: computed
    assert rows["server.grpc_max_streams"][0][1:3] == ["`128`", ">= 1"]
    assert rows["cache.redis.timeout_ms"][0][1:3] == ["`5`", ">= 1"]
    assert rows["cache.redis.namespace"][0][1] == '`"switchyard"`'
    assert rows["models[].version"][0][1] == "`1`"
    assert rows["models[].batching"][0][1] == (
        "`{ idle_dispatch = true, inline_max_us = 50, max_batch_size = 32, max_queue_delay_us = 500,"
        " preempt = false, queue_capacity = 1024, queue_order = \"deadline\", reserve_top_class = false }`")
    assert rows["models[].pools[].workers"][0][1:3] == ["`1`", ">= 1"]
    assert rows["models[].pools[].cost"][0][2] == "> 0"
    assert rows["models[].tokenizer.max_length"][0][1:3] == ["`128`", ">= 2"]
    assert rows["routes[].budget_ms.default"][0][1:3] == ["`1000`", ">= 1"]
    assert rows["routes[].cache.ttl_s"][0][1:3] == ["`300`", ">= 1"]
    assert rows["routes[].cache.fleet_wait_ms"][0][1:3] == ["`2000`", ">= 1, <= 60000"]
    assert rows["routes[].cache.enabled"][0][1] == "`true`"
    assert rows["routes[].record.max_line_bytes"][0][1:3] == ["`4194304` (4 MiB)", ">= 1024, <= 16777216"]
    assert rows["routes[].calibrate.target"][0][1:3] == ["`0.995`", "> 0, <= 1"]
    assert rows["routes[].draft.mode"][0][1] == '`"parallel"`'
    assert rows["upstreams[].kind"][0][1] == '`"http"`'
    assert rows["upstreams[].health.timeout_ms"][0][1:3] == ["`2000`", ">= 1"]
    assert rows["prefix_routes[].cache.methods"][0][1] == '`["GET", "HEAD"]`'
    assert rows["repository.concurrency"][0][1:3] == ["", ">= 1, <= 64"]  # its default is the store's
    assert rows["telemetry.sampling_ratio"][0][1:3] == ["`1.0`", ">= 0, <= 1"]


def test_the_reference_states_defaults_for_the_main_sections():
    """Most fields of each section state their
    default (a field whose default is computed, absent or required has
    none), so the page is the place to look a default up."""
    rows = field_rows()
    for section, least in (("server.", 14), ("cache.", 8), ("models[].", 7), ("routes[].", 14),
                           ("upstreams[].", 10), ("prefix_routes[].", 8), ("repository.", 7)):
        with_default = [p for p, r in rows.items() if p.startswith(section) and r[0][1]]
        assert len(with_default) >= least, (section, with_default)
    assert rows["routes[].policy.weights[].weight"][0][0] == "number, *required*"


def stated_defaults(schema: dict) -> dict:
    """Path -> the `default` the schema states for it."""
    return {path: node["default"] for path, node in schema_properties(schema) if "default" in node}


UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def written_value(cell: str):
    """A default as the Configuration page writes it (`64MiB`, 4096,
    true, `"http"`), or None when it is prose ("cores", "16M")."""
    text = cell.strip().strip("`").strip('"')
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"\d+", text):
        return int(text)
    if re.fullmatch(r"\d+\.\d+", text):
        return float(text)
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)", text)
    if m:
        return int(m[1]) * UNITS[m[2]]
    if cell.strip().startswith("`") and " " not in text:
        return text
    return None


def test_the_configuration_page_writes_the_defaults_the_schema_states():
    """The hand-written Configuration page gives defaults too: each one
    that is a plain value must be the one the config types state (a
    default changed in code and not on the page fails here)."""
    stated = stated_defaults(json.loads(printed_schema()))
    compared, wrong = [], []
    for line in CONFIG_PAGE.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        names = re.findall(r"`([^`]+)`", cells[0])
        if len(names) != 1 or names[0] not in stated or ", " in cells[1]:
            continue
        value = written_value(cells[1])
        if value is None:
            continue
        compared.append(names[0])
        if value != stated[names[0]]:
            wrong.append(f"{names[0]}: the page says {cells[1]}, the config types {stated[names[0]]!r}")
    assert len(compared) >= 30, compared
    assert wrong == [], wrong
