"""Rerun benchmarks as committed, archive the runs they replace, and
regenerate the README figures from the new files.

    python3 benchmarks/rerun.py router fastring families --python3.13 PATH
    python3 benchmarks/rerun.py gateway gateway-tls
    python3 benchmarks/rerun.py nodes migration clients jump jumpback membership-redis
    python3 benchmarks/rerun.py get-bounded
    python3 benchmarks/rerun.py uhashring
    python3 benchmarks/rerun.py --list

A benchmark whose script writes no JSON gets the commit, the interpreter
and the load at the start on its command line and the load at the end
after its output; one whose file holds several runs (``THEN`` between
the commands) runs them one after the other into one file.

For each benchmark named, in the order given, one after the other: build
the extension in place for the interpreter it runs on (the checkout's
own chash, whatever is installed), run the command of RUNS (stdout and
the JSON to a scratch folder), and only when it succeeded move the
current ``results/NAME.txt`` and ``.json`` to ``results/archive/`` as
``NAME-COMMIT.txt`` (the commit the old run measured) and write the new
ones: the command on the first line, the script's output, and the wall
clock the command took on the last.  Then ``readme_figures.py`` rewrites
the generated regions of README.md and benchmarks/README.md.

The machine's other work moves absolute times; the rounds are set for a
busy 2-core machine (more rounds than the scripts' defaults).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: name -> (interpreter: "python" or "python3.13", arguments after it; JSON
#: is the place of the --json file).
JSON = "{json}"
#: Between two commands whose outputs make one result file, run one after
#: the other (text only).
THEN = "--then"
RUNS: dict[str, tuple[str, list[str]]] = {
    "router": ("python", ["benchmarks/bench_router.py", "--repeat", "11", "--json", JSON]),
    "fastring": ("python3.13", ["benchmarks/bench_fastring.py", "--repeat", "41", "--json", JSON]),
    "uhashring": ("python", ["benchmarks/bench_uhashring.py", "--repeat", "21", "--json", JSON]),
    "families": ("python3.13", ["benchmarks/bench_router.py", "--families-only", "--repeat", "15",
                                "--json", JSON]),
    "gateway": ("python", ["benchmarks/bench_gateway.py", "--repeat", "9", "--json", JSON]),
    "gateway-tls": ("python", ["benchmarks/bench_gateway.py", "--tls", "--repeat", "9",
                               "--json", JSON]),
    "nodes": ("python", ["benchmarks/bench_nodes.py", "--json", JSON]),
    "migration": ("python", ["benchmarks/bench_migration.py", "--json", JSON]),
    "clients-caches": ("python", ["benchmarks/bench_clients.py", "--caches", "--repeat", "61",
                                  "--json", JSON]),
    "clients": ("python", ["benchmarks/bench_clients.py", "--json", JSON]),
    "rebuild": ("python", ["benchmarks/bench_rebuild.py", "--repeat", "3", "--json", JSON]),
    "gateway-websocket": ("python", ["benchmarks/bench_gateway.py", "--websocket", "--repeat", "5",
                                     "--duration", "5", "--json", JSON]),
    "jumpback": ("python", ["benchmarks/bench_jumpback.py", "--repeat", "15", "--json", JSON]),
    "membership-etcd-sync": ("python", ["benchmarks/bench_membership.py", "--store", "etcd",
                                        "--driver", "sync", "--nodes", "3", "--changes", "30",
                                        "--repeat", "3", "--json", JSON]),
    "membership-etcd-async": ("python", ["benchmarks/bench_membership.py", "--store", "etcd",
                                         "--driver", "async", "--nodes", "3", "--changes", "30",
                                         "--repeat", "3", "--json", JSON]),
    "membership-redis": ("python", [
        "benchmarks/bench_membership.py", "--driver", "sync", "--nodes", "3", "--changes", "30",
        "--repeat", "3", THEN,
        "benchmarks/bench_membership.py", "--driver", "async", "--nodes", "3", "--changes", "30",
        "--repeat", "3"]),
    "membership-etcd-5000-nodes": ("python", [
        "benchmarks/bench_membership.py", "--store", "etcd", "--driver", "sync", "--nodes", "5000",
        "--changes", "10", "--no-faults", THEN,
        "benchmarks/bench_membership.py", "--store", "etcd", "--driver", "async", "--nodes",
        "5000", "--changes", "10", "--no-faults", THEN,
        "benchmarks/bench_membership.py", "--driver", "sync", "--nodes", "5000", "--changes", "10",
        "--no-faults"]),
    # Text only (no --json): the first line also gives the commit, the
    # interpreter and the load at the start, the last the load at the end.
    "jump": ("python", ["benchmarks/bench_router.py", "--jump-only", "--nodes", "10,100,1000",
                        "--repeat", "9"]),
    "wide-layouts": ("python", ["benchmarks/bench_router.py", "--wide-only", "--nodes",
                                "10,100,1000", "--repeat", "9"]),
    "rendezvous": ("python", ["benchmarks/bench_router.py", "--rendezvous-only", "--repeat", "7"]),
    "compat-layouts": ("python", ["benchmarks/bench_router.py", "--compat-only", "--repeat", "15"]),
    "haproxy-layout": ("python", ["benchmarks/bench_router.py", "--compat-only", "--layout",
                                  "haproxy", "--repeat", "15"]),
    "get-bounded": ("python", ["benchmarks/bench_get_bounded.py", "--repeat", "15"]),
}


def interpreter(kind: str, args: argparse.Namespace) -> str:
    if kind == "python":
        return sys.executable
    found = args.python3_13 or shutil.which("python3.13")
    if not found:
        raise SystemExit("fastring needs CPython 3.13: pass --python3.13 PATH")
    return str(found)


def provenance(python: str) -> str:
    """The commit measured, the interpreter and the CPUs, for a result
    file whose script does not print them."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    return f"commit {commit}, CPython {version}, {os.cpu_count()} CPUs"


def old_commit(name: str) -> str:
    """The commit the current result measured: its JSON's, else the commit
    that last changed the file."""
    path = RESULTS / f"{name}.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        commit = data.get("commit") or data.get("machine", {}).get("commit")
        if commit:
            return str(commit).split()[0]
    path = RESULTS / f"{name}.txt"
    if path.is_file():
        found = re.search(r"\b(?:commit|at) ([0-9a-f]{7,40})\b|\(([0-9a-f]{7,40})\)",
                          path.read_text(encoding="utf-8").split("\n", 3)[0])
        if found:
            return found.group(1) or found.group(2)
    out = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--",
                          str(path)], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def archive(name: str) -> None:
    commit = old_commit(name)
    for ext in (".txt", ".json"):
        current = RESULTS / f"{name}{ext}"
        if current.is_file():
            target = RESULTS / "archive" / f"{name}-{commit}{ext}"
            if target.exists():
                raise SystemExit(f"{target} exists already: archive it by hand")
            current.rename(target)


def rerun(name: str, args: argparse.Namespace) -> float:
    """Run one benchmark; its wall clock in seconds."""
    kind, argv = RUNS[name]
    python = interpreter(kind, args)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    subprocess.run([python, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    parts: list[list[str]] = [[]]
    for a in argv:
        if a == THEN:
            parts.append([])
        else:
            parts[-1].append(a)
    with tempfile.TemporaryDirectory(prefix=f"chash-rerun-{name}-") as tmp:
        out = Path(tmp) / f"{name}.json"
        texts: list[str] = []
        took = 0.0
        for part in parts:
            command = [python, *(str(out) if a == JSON else a for a in part)]
            shown = " ".join(["python3.13" if kind == "python3.13" else "python3",
                              *(f"benchmarks/results/{name}.json" if a == JSON else a
                                for a in part)])
            print(f"[{time.strftime('%H:%M:%S')}] {shown}", file=sys.stderr, flush=True)
            if JSON not in part:
                shown += f"   # {provenance(python)}, load {os.getloadavg()[0]:.2f} at start"
            started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
            took += time.monotonic() - started
            if done.returncode != 0:
                sys.stdout.write(done.stdout)
                raise SystemExit(f"{name}: exit status {done.returncode}; results left as they "
                                 "were")
            text = done.stdout.strip("\n")
            if JSON not in part:
                text += f"\n# load {os.getloadavg()[0]:.2f} at end"
            texts.append(f"$ {shown}\n{text}\n")
        archive(name)
        what = "command" if len(parts) == 1 else f"{len(parts)} commands"
        (RESULTS / f"{name}.txt").write_text(
            "\n".join(texts) + f"\n(wall clock of the {what}: {took:.0f} s)\n", encoding="utf-8")
        if JSON in argv:
            shutil.copyfile(out, RESULTS / f"{name}.json")
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {took:.0f} s", file=sys.stderr, flush=True)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(RUNS))
    parser.add_argument("--python3.13", dest="python3_13", metavar="PATH",
                        help="the CPython 3.13 with fastring (default: python3.13 on PATH)")
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    args = parser.parse_args(argv)
    if args.list or not args.names:
        for name, (kind, rest) in RUNS.items():
            print(f"{name:12s} {kind} {' '.join(rest).replace(JSON, f'results/{name}.json')}")
        return 0
    unknown = [n for n in args.names if n not in RUNS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(RUNS)}")
    for name in args.names:
        rerun(name, args)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "readme_figures.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
