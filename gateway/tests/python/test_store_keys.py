"""The model store against odd repositories, through the real binary and a
real S3 server (moto): an object key that `object_store` cannot parse
(`junk/1/../notes.txt`, an empty or `.` segment, a control character) is
skipped with a warning instead of hiding every model; a store that is down
with nothing cached fails start-up and `check-config` as docs/src/reference/configuration.md says;
a folder named like a version alias (`digits-cheap@1`) is refused, the
rest of the repository serves. Issue 37 item 8."""

import os
import subprocess

import pytest
import requests

from conftest import REPO, Gateway
from test_model_store import BUCKET, Moto, digits, infer, write_config

BINARY = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))

ODD_KEYS = ["repo/junk/1/../notes.txt", "repo/junk//empty.txt", "repo/junk/./dot.txt", "repo/junk/bell\x07.txt"]


@pytest.fixture
def store():
    server = Moto()
    yield server
    server.stop()


def check_config(config, env):
    return subprocess.run([BINARY, "check-config", str(config)], capture_output=True, text=True, timeout=180,
                          env={**os.environ, **env})


def test_odd_keys_are_skipped_and_every_model_serves(store, tmp_path):
    store.upload_repo(tmp_path / "repo", "digits-cheap", 1)
    for key in ODD_KEYS:
        store.s3.put_object(Bucket=BUCKET, Key=key, Body=b"not a model")
    listed = [o["Key"] for o in store.s3.list_objects_v2(Bucket=BUCKET, Prefix="repo/")["Contents"]]
    assert set(ODD_KEYS) <= set(listed), listed
    config = write_config(tmp_path, store.endpoint)
    checked = check_config(config, store.env())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "digits-cheap" in checked.stdout + checked.stderr
    gw = Gateway(config, env=store.env())
    try:
        r = infer(gw.base, "digits-cheap", digits())
        assert r.status_code == 200, r.text
        repo = requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]["repository"]
        assert repo["from_cache"] is False, repo
        log = gw.log_text()
        assert "junk/1/../notes.txt" in log and "skipped" in log, log
    finally:
        gw.stop()


def test_a_down_store_with_nothing_cached_fails_start_up_and_check_config(store, tmp_path):
    config = write_config(tmp_path, store.endpoint)
    store.stop()
    checked = check_config(config, store.env())
    assert checked.returncode != 0, checked.stdout + checked.stderr
    assert "repository.uri" in checked.stdout + checked.stderr, checked.stdout + checked.stderr
    with pytest.raises(RuntimeError) as failed:
        Gateway(config, env=store.env())
    text = str(failed.value)
    assert "repository.uri" in text and "unreachable" in text, text


def copy_folder(store, src, dst, rename=None):
    for obj in store.s3.list_objects_v2(Bucket=BUCKET, Prefix=src)["Contents"]:
        body = store.s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
        if rename and obj["Key"].endswith("config.pbtxt"):
            body = body.replace(b'name: "digits-cheap"', f'name: "{rename}"'.encode())
        store.s3.put_object(Bucket=BUCKET, Key=obj["Key"].replace(src, dst), Body=body)


def test_a_folder_named_like_a_version_alias_is_refused_not_the_gateway(store, tmp_path):
    """digits-cheap serves versions 2 and 1 (`digits-cheap@1`); a folder
    named `digits-cheap@1` beside it, and one named `other@7`, are refused
    with the reason; everything else serves."""
    store.upload_repo(tmp_path / "v1", "digits-cheap", 1)
    store.upload_repo(tmp_path / "v2", "digits-cheap", 2)
    pbtxt = store.s3.get_object(Bucket=BUCKET, Key="repo/digits-cheap/config.pbtxt")["Body"].read()
    pbtxt += b"\nversion_policy: { latest: { num_versions: 2 } }\n"
    store.s3.put_object(Bucket=BUCKET, Key="repo/digits-cheap/config.pbtxt", Body=pbtxt)
    store.upload_repo(tmp_path / "staging", "digits-cheap", 1, prefix="staging")
    copy_folder(store, "staging/digits-cheap/", "repo/digits-cheap@1/", rename="digits-cheap@1")
    copy_folder(store, "staging/digits-cheap/", "repo/other@7/")
    config = write_config(tmp_path, store.endpoint)
    checked = check_config(config, store.env())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    gw = Gateway(config, env=store.env())
    try:
        newest = infer(gw.base, "digits-cheap", digits())
        assert newest.status_code == 200 and newest.json()["model_version"] == "2", newest.text
        older = infer(gw.base, "digits-cheap@1", digits())
        assert older.status_code == 200 and older.json()["model_version"] == "1", older.text
        refused = infer(gw.base, "other@7", digits())
        assert refused.status_code in (404, 503) and "@" in refused.json()["error"], refused.text
        unavailable = requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]["repository"]["unavailable"]
        assert set(unavailable) == {"digits-cheap@1", "other@7"}, unavailable
        assert all("version" in reason for reason in unavailable.values()), unavailable
    finally:
        gw.stop()
