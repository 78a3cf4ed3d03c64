"""The container build sees every file `cargo build -p switchyard` reads.

The image build (deploy/container/Containerfile*) copies the sources into
a build stage through a context that `.dockerignore` narrows to an
allow-list. A new build script, proto folder, workspace member or embedded
asset that the list misses breaks `make image` while every other test
stays green (it happened once: gRPC's `build.rs` and the fuzz member).
This test derives what the build reads from the repository itself and
checks both filters: the allow-list in `.dockerignore` and the `COPY` lines.
Building the image is `make image` / `make image-test` (podman)."""

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CONTAINERFILES = sorted((REPO / "deploy" / "container").glob("Containerfile*"))


def allowed(path: str) -> bool:
    """Whether `.dockerignore` (ignore everything, then `!path` entries) keeps `path`."""
    keep = False
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if pattern == "*" or path == pattern or path.startswith(pattern + "/"):
            keep = negated
    return keep


def copied(containerfile: Path, path: str) -> bool:
    """Whether a `COPY src... dst` line of the build stage brings `path` in."""
    for line in containerfile.read_text().splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "COPY" or any(w.startswith("--from") for w in words):
            continue
        for source in words[1:-1]:
            source = source.rstrip("/")
            if source in (".", "./") or path == source or path.startswith(source + "/"):
                return True
    return False


def read_by_the_build() -> list[str]:
    """Manifests, build scripts, sources, protos and embedded files of every workspace member."""
    workspace = tomllib.loads((REPO / "Cargo.toml").read_text())
    needed = ["Cargo.toml", "Cargo.lock"]
    for member in workspace["workspace"]["members"]:
        root = REPO / member
        needed += [f"{member}/Cargo.toml", f"{member}/src"]
        if (root / "build.rs").exists():
            needed.append(f"{member}/build.rs")
            # Every string in the build script naming a file or folder of the repository.
            for literal in re.findall(r'"([^"\s]+)"', (root / "build.rs").read_text()):
                where = (root / literal).resolve()
                if where.exists() and where.is_relative_to(REPO) and where != root:
                    needed.append(str(where.relative_to(REPO)))
        for source in root.glob("src/**/*.rs"):
            for target in re.findall(r'include_(?:str|bytes)!\("([^"]+)"\)', source.read_text()):
                needed.append(str((source.parent / target).resolve().relative_to(REPO)))
    return sorted(set(needed))


def test_the_derivation_finds_the_known_inputs():
    needed = read_by_the_build()
    for path in ["gateway/build.rs", "gateway/proto", "runtime/store/proto", "gateway/console/console.js",
                 "fuzz/Cargo.toml", "gateway/src/config/default.toml"]:
        assert path in needed, (path, needed)


@pytest.mark.parametrize("containerfile", CONTAINERFILES, ids=lambda p: p.name)
def test_every_input_of_the_build_reaches_the_build_stage(containerfile):
    missing_context = [p for p in read_by_the_build() if not allowed(p)]
    assert not missing_context, f".dockerignore keeps these out of the build context: {missing_context}"
    missing_copy = [p for p in read_by_the_build() if not copied(containerfile, p)]
    assert not missing_copy, f"{containerfile.name} copies none of: {missing_copy}"
