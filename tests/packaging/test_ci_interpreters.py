""".ci/fetch-python-3.13t, run against a Debian mirror on disk (a file://
URL): it does nothing when the interpreter is in place; otherwise it takes
the tarball's path from a Sources index (testing's, else sid's; stanzas as
the archive writes them: several versions of one package, Directory after
the checksums) and refuses an index or a download whose SHA256 is not the
pinned one.  No network, no build: every case ends before ./configure.
"""
from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "fetch-python-3.13t"
TEXT = SCRIPT.read_text(encoding="utf-8")
VERSION = re.search(r"^version=(\S+)$", TEXT, re.M).group(1)  # type: ignore[union-attr]
ORIG = f"python3.13_{VERSION}.orig.tar.xz"
PINNED = re.search(r"^orig_sha256=([0-9a-f]{64})$", TEXT, re.M).group(1)  # type: ignore[union-attr]
POOL = "pool/main/p/python3.13"


def test_the_pins_are_cpython_3_13_15_as_debian_ships_it() -> None:
    assert re.search(r'^orig="python3\.13_\$\{version\}\.orig\.tar\.xz"$', TEXT, re.M)
    assert (VERSION, PINNED) == ("3.13.15", "1e66a7945a48390ee4c2a4268a0e4185884059a13c4aab6d148aa208deea4a76")


def stanza(version: str, sums: dict[str, str]) -> str:
    lines = "".join(f" {sha} {len(name)} {name}\n" for name, sha in sums.items())
    return (f"Package: python3.13\nBinary: python3.13, python3.13-dev\nVersion: {version}-1\n"
            f"Checksums-Sha256:\n{lines}Package-List: \n python3.13 deb python optional arch=any\n"
            f"Directory: {POOL}\nPriority: optional\n\n")


def mirror(root: Path, indexes: dict[str, str], tarball: bytes | None) -> str:
    """A mirror at ``root``: each suite's Sources.xz, and the tarball (if
    given) at the path the archive keeps it under."""
    for suite, text in indexes.items():
        folder = root / "dists" / suite / "main" / "source"
        folder.mkdir(parents=True)
        (folder / "Sources.xz").write_bytes(lzma.compress(text.encode()))
    if tarball is not None:
        (root / POOL).mkdir(parents=True)
        (root / POOL / ORIG).write_bytes(tarball)
    return root.as_uri()


def fetch(tmp_path: Path, url: str, python: str | None = None) -> subprocess.CompletedProcess[str]:
    """The script with ``url`` as its mirror and its prefix in ``tmp_path``;
    ``python``: the body of a stand-in bin/python3.13t there.  dpkg says every
    build dependency is installed, so nothing is installed with apt."""
    prefix = tmp_path / "prefix"
    if python is not None:
        (prefix / "bin").mkdir(parents=True)
        (prefix / "bin" / "python3.13t").write_text(f"#!/bin/sh\n{python}\n", encoding="utf-8")
        (prefix / "bin" / "python3.13t").chmod(0o755)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "dpkg").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (fake / "dpkg").chmod(0o755)
    env = dict(os.environ, DEBIAN_MIRROR=url, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    # The script runs curl, xz and bash, none of them this project's C: not
    # under the ASan suite's preloaded runtime.
    for key in [key for key in env if key == "LD_PRELOAD" or key.endswith("SAN_OPTIONS")]:
        del env[key]
    return subprocess.run(["bash", str(SCRIPT), str(prefix)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(autouse=True)
def _tools() -> None:
    for tool in ("bash", "curl", "xz", "sha256sum"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed (Debian: apt-get install curl xz-utils coreutils)")


def test_nothing_is_fetched_when_the_interpreter_is_in_place(tmp_path: Path) -> None:
    # The mirror does not exist: any download would fail the run.
    result = fetch(tmp_path, (tmp_path / "no-mirror").as_uri(), python="exit 0")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_an_interpreter_that_fails_the_check_is_not_in_place(tmp_path: Path) -> None:
    result = fetch(tmp_path, (tmp_path / "no-mirror").as_uri(), python="exit 1")
    assert result.returncode != 0
    assert "Sources.xz" in result.stderr or "curl" in result.stderr, result.stderr


def test_an_index_whose_sha256_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    other = hashlib.sha256(b"another tarball").hexdigest()
    url = mirror(tmp_path / "mirror", {"testing": stanza(VERSION, {ORIG: other})}, b"another tarball")
    result = fetch(tmp_path, url)
    assert result.returncode == 1
    assert f"testing's index gives {ORIG} the SHA256 {other}, not {PINNED}" in result.stderr


def test_the_download_is_checked_against_the_pinned_sha256(tmp_path: Path) -> None:
    # testing has moved on; sid lists a newer release first, with a
    # signature beside it, then the pinned one.
    newer = "python3.13_3.13.18.orig.tar.xz"
    url = mirror(tmp_path / "mirror", {
        "testing": stanza("3.13.18", {newer: "a" * 64}),
        "sid": stanza("3.13.18", {newer: "a" * 64, newer + ".asc": "b" * 64}) + stanza(VERSION, {ORIG: PINNED}),
    }, b"not the release")
    result = fetch(tmp_path, url)
    assert result.returncode == 1
    # Found at the index's path (a wrong path would fail the download instead).
    assert f"fetch-python-3.13t: {POOL}/{ORIG} does not match its SHA256" in result.stderr, result.stderr
    assert not (tmp_path / "prefix").exists()
