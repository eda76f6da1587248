"""chash.JumpRouter(layout="guava") against Guava itself.

The test writes a small Java program into a temporary directory, compiles
it with javac against Debian's Guava (libguava-java, /usr/share/java), and
feeds it cases on stdin: ``H buckets long`` prints
``Hashing.consistentHash(long, buckets)``; ``K buckets utf8-hex`` prints
``Hashing.consistentHash(Hashing.murmur3_128().hashString(key, UTF_8),
buckets)`` and that hash code's ``padToLong()``.  Every answer is compared
with the router's.  No network: javac and java only read the local jar.

A missing JDK or Guava is a skip that says what to install, and a failure
in CI (``CI=true``), as for the other real programs.
"""
from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from _support.ci import missing
from _support.compat_programs import program_env, require, varied_keys
from chash import JumpRouter

GUAVA_JAR = Path("/usr/share/java/guava.jar")
M64 = (1 << 64) - 1

PROGRAM = """\
import com.google.common.hash.HashCode;
import com.google.common.hash.Hashing;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public final class GuavaConsistentHash {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null;) {
            String[] f = line.split(" ");
            int buckets = Integer.parseInt(f[1]);
            if (f[0].equals("H")) {
                out.append(Hashing.consistentHash(Long.parseLong(f[2]), buckets)).append('\\n');
                continue;
            }
            byte[] utf8 = new byte[f[2].length() / 2];
            for (int i = 0; i < utf8.length; i++)
                utf8[i] = (byte) Integer.parseInt(f[2].substring(2 * i, 2 * i + 2), 16);
            String key = new String(utf8, StandardCharsets.UTF_8);
            HashCode code = Hashing.murmur3_128().hashString(key, StandardCharsets.UTF_8);
            out.append(Hashing.consistentHash(code, buckets)).append(' ')
               .append(code.padToLong()).append('\\n');
        }
        System.out.print(out);
    }
}
"""

BUCKETS = [*range(3, 21), 100, 1000, 65536]


def require_guava() -> Path:
    if not GUAVA_JAR.is_file():
        missing(f"Guava is not installed at {GUAVA_JAR} (Debian: apt-get install libguava-java)")
    return GUAVA_JAR


@pytest.fixture(scope="module")
def guava(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A function from case lines to Guava's answer lines."""
    javac, java, jar = require("javac"), require("java"), require_guava()
    work = tmp_path_factory.mktemp("guava")
    (work / "GuavaConsistentHash.java").write_text(PROGRAM, encoding="utf-8")
    subprocess.run([javac, "-cp", str(jar), "-d", str(work), str(work / "GuavaConsistentHash.java")],
                   check=True, env=program_env(), timeout=300, capture_output=True)

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run([java, "-cp", f"{jar}{os.pathsep}{work}", "GuavaConsistentHash"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True,
                              encoding="utf-8", check=True, env=program_env(), timeout=300)
        answers = done.stdout.splitlines()
        assert len(answers) == len(lines), done.stderr
        return answers

    return run


def routers(n: int) -> JumpRouter:
    r = JumpRouter(layout="guava", hash="murmur3_128")
    r.add_service_nodes([f"bucket-{i}" for i in range(n)])
    return r


def test_every_key_lands_where_guava_puts_it(guava) -> None:  # type: ignore[no-untyped-def]
    keys = varied_keys(300, seed=30)
    lines = [f"K {n} {k.encode().hex()}" for n in BUCKETS for k in keys]
    answers = iter(guava(lines))
    checked = 0
    for n in BUCKETS:
        r = routers(n)
        got = r.get_target_nodes(keys)
        for key, node in zip(keys, got, strict=True):
            bucket, pad = next(answers).split()
            assert node == f"bucket-{bucket}", (key, n)
            assert r.get_target_node(key) == node
            assert r._calculate_hash(key) == int(pad) & M64, key
            checked += 1
    assert checked == len(BUCKETS) * len(keys)


def test_every_hash_lands_where_guava_puts_it(guava) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(31)
    # Also two longs whose first generator step has its top 31 bits all
    # ones, where Guava's int sum wraps and the walk stops at bucket 0.
    extremes = [0, 1, -1, 2**63 - 1, -(2**63), 42, -1378172617505958997, -383274579211869544]
    hashes = extremes + [rng.getrandbits(64) - 2**63 for _ in range(400)]
    # The one long here on which Guava's rounding and the paper's part.
    cases = [(n, h) for n in BUCKETS for h in hashes] + [(459790, 12970273959431459788 - 2**64)]
    answers = guava([f"H {n} {h}" for n, h in cases])
    by_n = {n: routers(n) for n in {n for n, _ in cases}}
    for (n, h), answer in zip(cases, answers, strict=True):
        r = by_n[n]
        assert r.get_target_node_by_hash(h & M64) == f"bucket-{answer}", (n, h)
    for n, r in by_n.items():
        group = [h & M64 for m, h in cases if m == n]
        want = [f"bucket-{a}" for (m, _), a in zip(cases, answers, strict=True) if m == n]
        assert r.get_target_nodes_by_hash(group) == want
    paper = JumpRouter(layout="jump")
    paper.add_service_nodes([f"bucket-{i}" for i in range(459790)])
    assert answers[-1] == "327680"
    assert paper.get_target_node_by_hash(12970273959431459788) == "bucket-327679"
