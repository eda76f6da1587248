"""Write the benchmark figures of README.md and benchmarks/README.md from
the committed result files.

    python3 benchmarks/readme_figures.py           # rewrite the regions
    python3 benchmarks/readme_figures.py --check   # exit 1 if one would change

A region is the text between ``<!-- figures: NAME -->`` and
``<!-- /figures -->``; NAME picks a renderer of RENDERERS, or is ``file
results/X.txt``: that file verbatim in a ``text`` block.  Every figure in
a region is computed here from a file in ``benchmarks/results/``; a ratio
quoted in prose is the more conservative of the ratio of the medians and
the median of the per-round ratios (and of both by CPU time where samples
were preempted), as ``_ratios.conservative`` picks it.  Figures outside
the regions are checked by ``tests/packaging/test_readme_figures.py``
against the result files their section links.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import _ratios
from rerun import RUNS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
READMES = (ROOT / "README.md", ROOT / "benchmarks" / "README.md")
REGION = re.compile(r"(<!-- figures: (?P<name>[^>]*?) -->\n)(?P<body>.*?)(<!-- /figures -->)",
                    re.DOTALL)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def x(value: float, unit: str = "x") -> str:
    return f"{_ratios.fmt(value)}{unit}"


def span(values: Iterable[float], unit: str = "x", sep: str = "-") -> str:
    """min-max of values as the tables print them (one figure if equal)."""
    listed = sorted(values)
    low, high = _ratios.fmt(listed[0]), _ratios.fmt(listed[-1])
    return f"{low}{unit}" if low == high else f"{low}{sep}{high}{unit}"


def num(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


# --------------------------------------------------------------------------
# The rows of _bench.py's JSON (router, fastring, nodes, clients)


def rows_of(data: dict[str, Any], row: str, section: str = "") -> dict[Any, dict[str, Any]]:
    """The rows named row (in the section starting with section), by nodes."""
    return {r["nodes"]: r for r in data["rows"]
            if r["row"] == row and r["section"].startswith(section)}


def quote(r: dict[str, Any], label: str, op: str = ">=") -> float:
    """The ratio label of row r as README quotes it: the least favourable
    of the ratio of medians and the median of per-round ratios, and of
    both by CPU time if any sample of the row was kept preempted."""
    values = [r["ratios"][label], r.get("paired_ratios", {}).get(label)]
    if any(r.get("preempted_samples", {}).values()):
        values += [r["cpu_ratios"].get(label), r.get("cpu_paired_ratios", {}).get(label)]
    return _ratios.conservative(values, op)


def load_text(data: dict[str, Any]) -> str:
    if "load_average" not in data:
        return "load average not recorded"
    start, end = data["load_average"]["start"], data["load_average"]["end"]
    first = start[0] if isinstance(start, list) else start
    last = end[0] if isinstance(end, list) else end
    return f"load average {first:.2f} at the start and {last:.2f} at the end"


def commit_of(data: dict[str, Any]) -> str:
    return str(data.get("commit") or data["machine"]["commit"]).split()[0]


def rounds_of(data: dict[str, Any]) -> int:
    for where in ("config", "settings"):
        if where in data:
            return int(data[where].get("rounds") or data[where].get("repeat"))
    return int(data["rounds"])


# --------------------------------------------------------------------------
# README.md


def readme_router() -> str:
    router, fast = load("router"), load("fastring")
    md5 = "MD5, "
    nodes = sorted(rows_of(router, "single lookup", md5))
    cells: dict[str, list[str]] = {}

    def each(label: str, make: Callable[[Any], str]) -> None:
        cells[label] = [make(n) for n in nodes]

    def ratio(row: str, label: str, rows: dict[str, Any] = router, section: str = md5) -> \
            Callable[[Any], str]:
        return lambda n: x(quote(rows_of(rows, row, section)[n], label))

    each("single lookup, MD5, vs documented", ratio("single lookup", "doc/chash"))
    each("batch lookup, MD5, per key vs documented", ratio("batch lookup", "doc/chash"))
    each("build the ring vs documented / uhashring", lambda n: " / ".join(
        x(quote(rows_of(router, "build the ring", md5)[n], lab)) for lab in ("doc/chash", "uh/chash")))
    each("add one node vs documented", ratio("add one node", "doc/chash"))
    each("remove one node vs documented", ratio("remove one node", "doc/chash"))
    memory = rows_of(router, "memory", md5)
    docs = [memory[n]["median"]["documented"] for n in nodes]
    each(f"bytes per ring point, engine / resident (documented {span(docs, '')})", lambda n: (
        f"{memory[n]['median']['chash']:.1f} / {memory[n]['median']['chash rss']:.1f}"))
    each("vs fastring (Rust, XXH3, CPython 3.13): build / add / single / batch", lambda n: " / ".join(
        x(quote(rows_of(fast, row)[n], "fastring/chash"))
        for row in ("build the ring", "add one node", "single lookup", "batch lookup")))
    lines = [
        f"From the committed runs ([router.txt](benchmarks/results/router.txt): commit "
        f"{commit_of(router)}, {rounds_of(router)} rounds, {load_text(router)}; "
        f"[fastring.txt](benchmarks/results/fastring.txt): commit {commit_of(fast)}, "
        f"{rounds_of(fast)} rounds, {load_text(fast)}; a 2-vCPU AMD EPYC shared with other work), "
        "160 virtual nodes a node, ratios = rival time / chash time, each the more conservative "
        "of the ratio of medians and the median of per-round ratios (and of both by CPU time "
        "where samples were preempted):",
        "",
        "| | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
        "|---" * (len(nodes) + 1) + "|",
    ]
    lines += [f"| {label} | " + " | ".join(values) + " |" for label, values in cells.items()]
    return "\n".join(lines) + "\n"


def readme_router_more() -> str:
    router, nodes = load("router"), load("nodes")
    fast = "chash with fast hashes"
    singles = [quote(r, lab) for r in rows_of(router, "single lookup", fast).values()
               for lab in r["ratios"]]
    batches = [quote(r, lab) for r in rows_of(router, "batch lookup", fast).values()
               for lab in r["ratios"]]
    flat = {row: quote(rows_of(router, row, "Flatness")[next(iter(rows_of(router, row, "Flatness")))],
                       "big/small", "<=") for row in ("single lookup", "batch lookup")}
    grow = "chash by node count"
    inn = next(iter(rows_of(nodes, "in", grow).values()))
    build = next(iter(rows_of(nodes, "build", grow).values()))
    add = next(iter(rows_of(nodes, "add one node", grow).values()))
    remove = next(iter(rows_of(nodes, "remove one node", grow).values()))
    big = "1,000× nodes"
    md5 = rows_of(router, "single lookup", "MD5, ")
    chash_ns = [r["median"]["chash"] for r in md5.values()]
    doc_ns = [r["median"]["documented"] for r in md5.values()]
    verdicts = [f"{n} nodes {x(t['value'])} / {x(t['rounds_value'])} "
                f"{'met' if t['ok'] else 'missed'}" if t.get("rounds_value") is not None else
                f"{n} nodes {x(t['value'])} {'met' if t['ok'] else 'missed'}"
                for n, r in md5.items() for t in r["targets"]]
    return (
        f"With a fast hash, against uhashring (MD5): single lookups {span(singles)} (`murmur3`, "
        f"`xxh3`, `fnv1a` at {' and '.join(str(n) for n in rows_of(router, 'single lookup', fast))} "
        f"nodes), batch lookups {span(batches)} per key. Lookup cost stays flat: murmur3 at "
        f"1,000,000 points costs {x(flat['single lookup'])} (single) and "
        f"{x(flat['batch lookup'])} (batch) what it costs at 500 points. With 10 points a node "
        f"([nodes.txt](benchmarks/results/nodes.txt), commit {commit_of(nodes)}, "
        f"{load_text(nodes)}), `name in router` costs {num(inn['median']['1,000 nodes'])} ns at "
        f"1000 nodes and {num(inn['median']['1,000,000 nodes'])} ns at 1,000,000 "
        f"({x(quote(inn, big, '<='))}), building 100,000 nodes takes "
        f"{num(build['median']['100,000 nodes'])} ms, and adding or removing one node grows "
        f"{x(quote(add, big, '<='))} and {x(quote(remove, big, '<='))} from 10**3 to 10**6 "
        "nodes, less than the 1000x of the points they move. Single MD5 lookups are the "
        f"target that depends on the run: chash costs {span(chash_ns, ' ns', ' to ')} a call, "
        f"the documented router {span(doc_ns, ' ns', ' to ')} (it has slow and fast phases); "
        f"against the 8x target (10x at 1000 nodes), of medians / of rounds: "
        f"{'; '.join(verdicts)}.\n")


def wide_rows() -> list[list[str]]:
    text = (RESULTS / "wide-layouts.txt").read_text(encoding="utf-8")
    return [line.split() for line in text.splitlines()
            if re.match(r"\s+\d+\s+\d+\s+(single|batch|by-hash)", line)]


def readme_wide() -> str:
    rows = wide_rows()

    def cell(text: str) -> float:
        """A ratio cell: "of medians/of rounds" (the larger, both targets
        being upper bounds), or a lone ratio of medians in older files."""
        return max(float(v) for v in text.split("/"))

    both = all("/" in r[-3] for r in rows)
    # A trailing " x" marks a missed target; the cells are the two before it.
    cells = [[c for c in r if "/" in c or re.fullmatch(r"\d+\.\d+", c)] for r in rows]
    keys = [cell(c[-3]) for r, c in zip(rows, cells, strict=True) if r[2] != "by-hash"]
    hashed = [cell(c[-3]) for r, c in zip(rows, cells, strict=True) if r[2] == "by-hash"]
    maglev = [cell(c[-1]) for c in cells]
    text = (RESULTS / "wide-layouts.txt").read_text(encoding="utf-8")
    build = re.search(r"100 hosts ([\d.]+) ms", text)
    assert build is not None
    commit = re.search(r"# commit (\w+)", text)
    assert commit is not None
    points = sorted({int(r[1]) for r in rows})
    rule = ("each the larger of the ratio of medians and the median of per-round ratios" if both
            else "ratios of medians: the file predates the per-round ratios")
    return (
        "Envoy's and gRPC's 64-bit rings cost what the 32-bit ring costs (`bench_router.py "
        f"--wide-only`, commit {commit.group(1)}): {span(keys)} on key lookups, {span(hashed)} "
        f"by hash, 10 to 1000 nodes, {points[0]:,} to {points[-1]:,} points; `MaglevRouter` "
        f"lookups cost {span(maglev)} the 64-bit ring's, and a 65537-entry Maglev table for 100 "
        f"hosts builds in {build.group(1)} ms ({rule}; [benchmarks/results/wide-layouts.txt]"
        "(benchmarks/results/wide-layouts.txt)).\n")


def bounded_spans(unit: str = "x") -> dict[str, str]:
    families = load("families")
    out: dict[str, list[float]] = {}
    for rows in families["results"].values():
        for name, row in rows.items():
            if row["section"] == "bounded":
                out.setdefault(name.removeprefix("bounded "), []).append(
                    row["ratios"]["single"]["conservative"])
    return {family: span(values, unit) for family, values in out.items()}


def readme_bounded() -> str:
    got = bounded_spans()
    return (f"An acquire and its release cost {got['ring']} a plain lookup over the ring, "
            f"{got['rendezvous']} over rendezvous, {got['jump']} over jump, {got['maglev']} over "
            "Maglev (whose lookup costs about one Python call) at 10 to 1,000 nodes, the more "
            "conservative of the ratio of medians and the median of per-round ratios "
            "([benchmarks/results/families.txt](benchmarks/results/families.txt)).\n")


def against_nginx(rows: dict[str, Any], rps: str) -> dict[str, Any]:
    """Each row of a gateway result with both ratios to the nginx row of
    its measure and worker count, computed from the samples (so files of
    every format read alike)."""
    for name, row in rows.items():
        head, workers = name.rsplit("-", 1)
        base = rows[head.rsplit(" ", 1)[0] + " nginx-" + workers if " " in head
                    else f"nginx-{workers}"]
        ours = [s["rps"] for s in row["samples"]]
        theirs = [s["rps"] for s in base["samples"]]
        medians, rounds = _ratios.both(ours, theirs)
        row.update(ratio_of_medians=medians, median_of_round_ratios=rounds,
                   conservative=_ratios.conservative([medians, rounds], ">="))
        row.setdefault(rps, statistics.median(ours))
        row.setdefault("median_p99_ms", statistics.median(s["p99_ms"] for s in row["samples"]))
    return rows


def gateway_numbers() -> dict[str, Any]:
    data = load("gateway")
    rows = against_nginx(data["rows"], "median_rps")
    return {"data": data, "rows": rows,
            "fo": {f["contender"]: f for f in data["failover"]}}


def versus_text(rows: dict[str, Any], name: str, base: str, rps: str = "median_rps") -> str:
    row = rows[name]
    return (f"**{x(row['conservative'])}** ({num(row[rps])} against {num(rows[base][rps])} "
            f"a second, medians: {x(row['ratio_of_medians'])}; median of per-round ratios "
            f"{x(row['median_of_round_ratios'])})")


def p99_verdict(rows: dict[str, Any]) -> str:
    """Whether each worker count's p99 is within 2x nginx's by both ratios
    (files before the rule do not say: nothing)."""
    if "p99_ok" not in rows["chash-1"]:
        return ""
    said = [f"{'met' if rows[f'chash-{w}']['p99_ok'] else 'missed'} at {w}"
            for w in (1, 2) if f"chash-{w}" in rows]
    return (f" (the target, p99 within 2x nginx's: {' and '.join(said)} workers, a target "
            "holding only when both ratios meet it)")


def readme_gateway() -> str:
    g = gateway_numbers()
    rows, fo, data = g["rows"], g["fo"], g["data"]
    chash = fo["chash-1"]
    tls = against_nginx(load("gateway-tls")["rows"], "median_per_second")
    tls_text = "; ".join(
        f"{measure} {x(tls_conservative(tls[f'{measure} chash-1']))} / "
        f"{x(tls_conservative(tls[f'{measure} chash-2']))}"
        for measure in ("keep-alive", "handshakes"))
    return (
        "`python3 benchmarks/bench_gateway.py` puts `chash gateway` beside nginx 1.22 (`hash "
        "$http_x_user_id consistent`) and haproxy 2.6 (`balance hdr(X-User-Id)`, `hash-type "
        "consistent`) in front of the same three nginx backends on loopback, with `wrk -t2 "
        "-c64` and a pool of 1,000 keys, interleaved rounds, on the 2-vCPU machine which wrk, "
        "the backends and the balancer share ([benchmarks/results/gateway.txt]"
        f"(benchmarks/results/gateway.txt), commit {data['commit']}, "
        f"{data['settings']['repeat']} rounds, {load_text(data)}): one gateway process served "
        f"{versus_text(rows, 'chash-1', 'nginx-1')} the requests of nginx with one worker and "
        f"`--workers 2` {versus_text(rows, 'chash-2', 'nginx-2')} nginx with two, p99 "
        f"{rows['chash-1']['median_p99_ms']:.1f} and {rows['chash-2']['median_p99_ms']:.1f} ms "
        f"against nginx's {rows['nginx-1']['median_p99_ms']:.1f} and "
        f"{rows['nginx-2']['median_p99_ms']:.1f} ms{p99_verdict(rows)}; killing a backend under "
        "load and "
        f"restarting it cost **{chash['failed']} failed requests**, moved "
        f"{'exactly its keys' if chash['moved_were_exactly_bs'] else 'other keys than its own'} "
        f"({chash['moved_while_b_down']} of {chash['keys']}) and brought "
        f"{chash['back_after_restart']} of {chash['keys']} back. Over HTTPS "
        "([benchmarks/results/gateway-tls.txt](benchmarks/results/gateway-tls.txt)), x nginx at "
        f"1 / 2 workers: {tls_text}.\n")


def readme_clients() -> str:
    data = load("clients")
    rows = [r for r in data["rows"] if r["ratios"]]
    names = [r["row"] for r in rows]
    label = "sticky/by hand"

    def line(title: str, values: list[str]) -> str:
        return f"| {title} | " + " | ".join(values) + " |"

    targets = {r["row"]: bool(r["targets"]) for r in rows}
    return "\n".join([
        "| sticky / by hand | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        line("ratio of medians (target ≤ 1.10)", [
            x(r["ratios"][label]) + ("" if targets[r["row"]] else " (no target)") for r in rows]),
        line("median of per-round ratios", [x(r["paired_ratios"][label]) for r in rows]),
        line("thread CPU time, ratio of medians", [x(r["cpu_ratios"][label]) for r in rows]),
    ]) + "\n"


# --------------------------------------------------------------------------
# benchmarks/README.md


def current(name: str) -> Callable[[], str]:
    def render() -> str:
        data = load(name)
        python = str(data.get("machine", {}).get("python", ""))
        if python and not python[0].isalpha():
            python = f"Python {python}"
        both = "ratio_statistics" in data or any(
            "rounds_value" in t or "rounds_ratio" in t
            for t in [*data.get("targets", []),
                      *(t for r in data.get("rows", []) if isinstance(r, dict)
                        for t in r.get("targets", []))])
        rule = ("each by both its ratio of medians and its median of per-round ratios" if both
                else "judged on the ratio of medians: the file predates the per-round rule")
        if "targets_met" in data:
            met = f"{data['targets_met']} of {data['targets_total']} targets met, {rule}"
        elif "targets" in data and isinstance(data["targets"], list):
            met = (f"{sum(t['met'] for t in data['targets'])} of {len(data['targets'])} targets "
                   f"met, {rule}")
        else:
            met = "The file records no verdicts"
        return (f"**Current result**: [results/{name}.txt](results/{name}.txt) and "
                f"[{name}.json](results/{name}.json), commit {commit_of(data)}"
                f"{', ' + python if python else ''}, {rounds_of(data)} rounds, "
                f"{load_text(data)} (the machine shared with other work). {met}:\n")
    return render


def fastring_reading() -> str:
    fast = load("fastring")

    def q(row: str, n: int) -> str:
        return x(quote(rows_of(fast, row)[n], "fastring/chash"), "×")

    nodes = sorted(rows_of(fast, "single lookup"))
    single = [quote(r, "fastring/chash") for r in rows_of(fast, "single lookup").values()]
    batch = [quote(r, "fastring/chash") for r in rows_of(fast, "batch lookup").values()]
    slower = [f"{row} at {n} nodes ({x(quote(r, 'fastring/chash'), '×')})"
              for row in ("build the ring", "build, one node at a time", "add one node",
                          "remove one node")
              for n, r in rows_of(fast, row).items() if quote(r, "fastring/chash") < 1]
    return (
        f"Quoting the more conservative ratio of each row: chash builds a 10-node ring "
        f"{q('build the ring', 10)} as fast as fastring, adds a node {q('add one node', 10)} and "
        f"removes one {q('remove one node', 10)}, answers single lookups {span(single, '×')} and "
        f"batches {span(batch, '×')} as fast, and builds {nodes[-1]} nodes "
        f"{q('build the ring', nodes[-1])} as fast (fastring adds one node at a time)"
        + (f"; it is not faster on {', '.join(slower)}: single changes to a tiny ring take a "
           "few µs on both sides, and their rounds spread widely" if slower else "")
        + ". The build path sorts each batch in place by an MSD radix sort and writes each "
        "node's virtual-key prefix once; merging many points into a small ring is one backward "
        "pass.\n")


def router_reading() -> str:
    router = load("router")
    md5 = "MD5, "
    build = rows_of(router, "build the ring", md5)
    remove = rows_of(router, "remove one node", md5)
    n = max(build)
    memory = rows_of(router, "memory", md5)
    engine = [r["median"]["chash"] for r in memory.values()]
    rss = [r["median"]["chash rss"] for r in memory.values()]
    cold = {row: quote(next(iter(rows_of(router, row, "Flatness").values())), "big/small", "<=")
            for row in ("single lookup, cold", "batch lookup, cold")}
    b = build[n]
    return "\n".join([
        f"- **Builds and changes.** Building {n} nodes takes {b['median']['chash']:.1f} ms: "
        f"{x(b['ratios']['doc/chash'], '×')} / {x(b['paired_ratios']['doc/chash'], '×')} the "
        f"documented router's time and {x(b['ratios']['uh/chash'], '×')} / "
        f"{x(b['paired_ratios']['uh/chash'], '×')} uhashring's by wall clock (of medians / "
        f"of rounds), and by CPU time (ratios of medians) {x(b['cpu_ratios']['doc/chash'], '×')} "
        f"and {x(b['cpu_ratios']['uh/chash'], '×')} (the rivals' "
        f"samples preempted {b['preempted_samples']['documented']} of "
        f"{len(b['samples']['documented'])} and {b['preempted_samples']['uhashring']} of "
        f"{len(b['samples']['uhashring'])}); removing one node at {n} nodes is "
        f"{x(quote(remove[n], 'doc/chash'), '×')} the documented router's speed, the more "
        "conservative of the four.",
        f"- **Memory.** The engine holds {span(engine, '', ' to ')} bytes a point (8 for the "
        "point and its owner, the rest bucket index, node table and id index); the resident "
        f"memory a fresh process gains is {span(rss, '', ' to ')} bytes a point.",
        f"- **Cold lookups are not flat.** Cold, when the ring's lines are not in the cache, a "
        f"lookup on 1,000,000 points costs {x(cold['single lookup, cold'], '×')} (single) and "
        f"{x(cold['batch lookup, cold'], '×')} (batch) the one on 500 points; the flatness "
        "target is on warm lookups.",
        "- **Absolute times move with the load** between runs; ratios in one run are the "
        "result.",
    ]) + "\n"


def families_reading() -> str:
    families = load("families")
    by_n = families["results"]
    pm = {n: rows["rendezvous pymemcache"]["ratios"]["single"]["conservative"]
          for n, rows in by_n.items()}
    uh: dict[str, list[float]] = {"single": [], "batch": []}
    fr: dict[str, list[float]] = {"single": [], "batch": []}
    for rows in by_n.values():
        for row in rows.values():
            ratios = row.get("ratios")
            if not ratios or row["section"] != "ring":
                continue
            for kind in ("single", "batch"):
                (fr if ratios["vs"] == "fastring" else uh)[kind].append(ratios[kind]["conservative"])
    wide = [rows[f"ring {layout}"]["median"] for rows in by_n.values() for layout in ("envoy", "grpc")]
    bounded = bounded_spans("×")
    out = [
        "- **Rendezvous against pymemcache**: the same answers "
        + ", ".join(f"{x(v, '×')} at {int(n):,} nodes" for n, v in pm.items())
        + " a single lookup (the more conservative ratio; pymemcache's hasher scores every "
        "node in Python).",
        f"- **Rings against uhashring**: {span(uh['single'], '×', ' to ')} a single lookup, "
        f"{span(uh['batch'], '×', ' to ')} a batch; the 64-bit envoy and grpc rings are the "
        f"fastest ({span([m['single'] for m in wide], '', ' to ')} ns, "
        f"{span([m['batch'] for m in wide], '', ' to ')} ns a key in a batch).",
    ]
    if fr["single"]:
        out.append(f"- **Against fastring**, the same XXH3 ring is {span(fr['single'], '×', ' to ')}"
                   f" faster a lookup and {span(fr['batch'], '×', ' to ')} a batch.")
    out.append(
        f"- **Bounded loads** cost {bounded['ring']} a plain lookup on the ring, "
        f"{bounded['rendezvous']} on rendezvous, {bounded['jump']} on jump and "
        f"{bounded['maglev']} on Maglev, the more conservative ratio of each row. Both loops "
        "have the same shape (`for key in keys: get(key)` against `release(acquire(key))`), so "
        "the pair pays one Python call more than the lookup and the bookkeeping of one slot; "
        "a Maglev lookup is one of the cheapest, so there that bookkeeping shows most.")
    return "\n".join(out) + "\n"


def gateway_reading() -> str:
    g = gateway_numbers()
    rows, fo = g["rows"], g["fo"]
    chash = fo["chash-1"]
    met = (f"{g['data']['targets_met']} of {g['data']['targets_total']} targets met"
           if "targets_met" in g["data"] else "")
    return (
        f"One gateway process served {versus_text(rows, 'chash-1', 'nginx-1')} the requests "
        f"of nginx with one worker and `--workers 2` {versus_text(rows, 'chash-2', 'nginx-2')} "
        f"nginx with two, p99 {rows['chash-1']['median_p99_ms']:.2f} and "
        f"{rows['chash-2']['median_p99_ms']:.2f} ms against nginx's "
        f"{rows['nginx-1']['median_p99_ms']:.2f} and {rows['nginx-2']['median_p99_ms']:.2f} ms"
        f"{': ' + met if met else ''}. Killing a backend under load cost {chash['failed']} "
        f"failed requests, moved {'exactly its' if chash['moved_were_exactly_bs'] else 'other'}"
        f" keys ({chash['moved_while_b_down']} of {chash['keys']}) and brought "
        f"{chash['back_after_restart']} back.\n")


def tls_cpu(row: dict[str, Any]) -> tuple[float, float] | None:
    """Both ratios to nginx per CPU-second, where the file has them."""
    if "cpu_ratio_of_medians" not in row:
        return None
    return row["cpu_ratio_of_medians"], row["cpu_median_of_ratios"]


def tls_conservative(row: dict[str, Any]) -> float:
    """The lowest of a row's ratios to nginx: wall clock, and CPU time
    where the file has it (a target holds only when all of them do)."""
    return min(row["conservative"], *(tls_cpu(row) or ()))


def tls_table() -> str:
    data = load("gateway-tls")
    rows = against_nginx(data["rows"], "median_per_second")
    cpu = all(tls_cpu(row) for row in rows.values())
    lines = [f"Committed: [results/gateway-tls.txt](results/gateway-tls.txt) (and `.json`, every "
             f"sample; commit {data['commit']}, {data['settings']['repeat']} rounds, "
             f"{load_text(data)}; wrk shares the two cores with the contenders). x nginx is "
             "the ratio of medians / the median of per-round ratios"
             + (", by the wall clock and per CPU-second of each contender's processes; a target "
                "holds only when all four do:" if cpu else ":"),
             ""]
    if cpu:
        lines += ["| | per s | per CPU-s | p99 ms | x nginx (wall) | x nginx (CPU) | target |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
    else:
        lines += ["| | per s | p99 ms | x nginx | target |", "| --- | --- | --- | --- | --- |"]
    for measure in ("keep-alive", "handshakes"):
        for workers in data["settings"]["workers"]:
            for kind in ("nginx", "chash"):
                row = rows[f"{measure} {kind}-{workers}"]
                who = (f"nginx {workers} worker{'s' if workers > 1 else ''}" if kind == "nginx"
                       else f"chash {workers} {'process' if workers == 1 else 'workers'}")
                wall = (row["ratio_of_medians"], row["median_of_round_ratios"])
                by_cpu = tls_cpu(row)
                ratios = [_ratios.pair_text(*pair, "") for pair in (wall, by_cpu) if pair]
                target = ""
                if kind == "chash":
                    figures = [*wall, *(by_cpu or ())]
                    ok = _ratios.holds(figures, ">=", data["targets"][measure])
                    target = f"≥ {data['targets'][measure]} {'✓' if ok else '✗'}"
                    ratios = [f"**{r}**" for r in ratios]
                per_cpu = f" {num(row['per_cpu_second'])} |" if cpu else ""
                lines.append(f"| {measure}, {who} | {num(row['median_per_second'])} |{per_cpu} "
                             f"{row['median_p99_ms']:.2f} | {' | '.join(ratios)} | {target} |")
    return "\n".join(lines) + "\n"


def websocket_table() -> str:
    data = load("gateway-websocket")
    rows = data["rows"]

    def both(name: str, attr: str) -> tuple[float, float]:
        return _ratios.both([s[attr] for s in rows[name]["samples"]],
                            [s[attr] for s in rows["nginx"]["samples"]])

    def med(name: str, attr: str) -> float:
        return float(statistics.median(s[attr] for s in rows[name]["samples"]))

    mps, p99 = both("chash", "mps"), both("chash", "p99_ms")
    ok = (_ratios.holds(mps, ">=", 0.6), _ratios.holds(p99, "<=", 2.0))
    lines = [
        "| | msg/s | p50 ms | p99 ms | x nginx | p99 x nginx |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| nginx, 1 worker | {num(med('nginx', 'mps'))} | {med('nginx', 'p50_ms'):.2f} | "
        f"{med('nginx', 'p99_ms'):.2f} | 1.00 | 1.00 |",
        f"| chash gateway, 1 process | {num(med('chash', 'mps'))} | {med('chash', 'p50_ms'):.2f} | "
        f"{med('chash', 'p99_ms'):.2f} | **{_ratios.pair_text(*mps, '')}** | "
        f"**{_ratios.pair_text(*p99, '')}** |",
        "",
        "(x nginx: the ratio of medians / the median of per-round ratios.) The targets, 0.6x "
        f"nginx's messages and p99 within 2x, are {'met' if ok[0] else 'missed'} and "
        f"{'met' if ok[1] else 'missed'} by both.",
    ]
    return "\n".join(lines) + "\n"


def rerun_archive() -> str:
    """The runs rerun.py replaced, as it named them in results/archive/."""
    pattern = re.compile(rf"^({'|'.join(map(re.escape, RUNS))})-([0-9a-f]{{7,}})\.txt$")
    found = sorted((m.group(1), m.group(2), path.name)
                   for path in (RESULTS / "archive").glob("*.txt")
                   if (m := pattern.match(path.name)))
    lines = ["- Replaced by the runs of `benchmarks/rerun.py`, each named by the commit it "
             "measured:"]
    for name, commit, file in found:
        both = _ratios.LEGEND in (RESULTS / "archive" / file).read_text(encoding="utf-8")
        lines.append(f"  - [{file}](results/archive/{file}): `{name}` at {commit}, "
                     + ("both ratios" if both else "ratios of medians only (before the "
                        "per-round rule)"))
    return "\n".join(lines) + "\n"


def migration_table() -> str:
    data = load("migration")
    diffs = rows_of(data, "diff, one node added")
    runs = rows_of(data, "Migration: every batch of 200")
    label = "route twice / diff"
    lines = ["| nodes | `diff` | route 100,000 keys twice | ratio: of medians / of rounds "
             "(by CPU time) | quoted | Migration, all batches |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, r in diffs.items():
        lines.append(
            f"| {n:,} | {r['median']['diff']:.2f} ms | {r['median']['route keys twice']:.1f} ms | "
            f"{_ratios.pair_text(r['ratios'][label], r['paired_ratios'][label])} "
            f"({x(r['cpu_ratios'][label], '×')}) | {x(quote(r, label), '×')} | "
            f"{_ratios.fmt(runs[n]['median']['Migration'])} ms |")
    return "\n".join(lines) + "\n"


def rebuild_table() -> str:
    data = load("rebuild")
    label = "one by one / _replace_nodes"
    big = [r for r in data["rows"] if r["nodes"] == max(x["nodes"] for x in data["rows"])]
    lines = ["| layout | 10,000 nodes: `_replace_nodes` | `pickle` | one by one | ratio: of medians "
             "/ of rounds | quoted |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in big:
        m = r["median"]
        lines.append(f"| {r['row'].removesuffix(' layout')} | {num(m['_replace_nodes'])} ms | "
                     f"{num(m['pickle'])} ms | {num(m['one by one'])} ms | "
                     f"{_ratios.pair_text(r['ratios'][label], r['paired_ratios'][label])} | "
                     f"{x(quote(r, label), '×')} |")
    swaps = [r["median"]["_replace_nodes"] for r in big]
    quoted = [quote(r, label) for r in big]
    lines += ["", f"10,000 nodes swap in within {span(swaps, ' ms', ' to ')}, "
              f"{span(quoted, '×', ' to ')} faster than one by one (the quoted ratio: the least "
              "favourable of both ratios and, the samples being preempted, of both by CPU time)."]
    return "\n".join(lines) + "\n"


def verbatim(path: str) -> str:
    return "```text\n" + (RESULTS.parent / path).read_text(encoding="utf-8").rstrip("\n") + \
        "\n```\n"


RENDERERS: dict[str, Callable[[], str]] = {
    "readme router": readme_router,
    "readme router more": readme_router_more,
    "readme wide": readme_wide,
    "readme bounded": readme_bounded,
    "readme gateway": readme_gateway,
    "readme clients": readme_clients,
    "current router": current("router"),
    "current fastring": current("fastring"),
    "current uhashring": current("uhashring"),
    "current families": current("families"),
    "current gateway": current("gateway"),
    "current nodes": current("nodes"),
    "current migration": current("migration"),
    "current clients": current("clients"),
    "current rebuild": current("rebuild"),
    "reading router": router_reading,
    "reading fastring": fastring_reading,
    "reading families": families_reading,
    "reading gateway": gateway_reading,
    "tls table": tls_table,
    "websocket table": websocket_table,
    "rerun archive": rerun_archive,
    "migration table": migration_table,
    "rebuild table": rebuild_table,
}


def render(name: str) -> str:
    if name.startswith("file "):
        return verbatim(name.removeprefix("file "))
    if name not in RENDERERS:
        raise KeyError(f"no renderer for the region {name!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[name]()


def regenerate(text: str) -> str:
    """text with every region's body rendered anew."""
    return REGION.sub(lambda m: m.group(1) + render(m.group("name")) + m.group(4), text)


def regions(text: str) -> list[str]:
    return [m.group("name") for m in REGION.finditer(text)]


# --------------------------------------------------------------------------
# Figures outside the regions

#: A measured figure: a number with a ratio sign or a unit of time, rate,
#: memory or share.  "1000 x 160" (spaces) is a product, not a ratio.
FIGURE = re.compile(
    r"(?<![\w.`/-])~?(?P<number>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
    r"(?:(?P<ratio>[×x])(?![\w])|\s?(?P<unit>ns|µs|us|ms|s|req/s|msg/s|MiB|%)(?![\w/]))")

#: Figures in the READMEs that are settings or definitions, not
#: measurements, with why: they need no result file.
NOT_MEASURED = {
    "60 s": "how long CI fuzzes",
    "50 ms": "the length below which _bench.py retakes a preempted sample",
    "45 s": "the sample budget of a slow contender",
    "0.2 s": "the membership benchmark's resync_interval",
    "500 ms": "etcd's election timeout in the benchmark's cluster",
    "1 s": "a setting (etcd's default election timeout, a client timeout, slow_s)",
    "3 %": "the --reference verdict's threshold",
    "10 %": "how far a ratio is known on a loaded machine, a judgement",
    "0.5×": "the gateway's target",
    "30 s": "how long the demo's scripted run lasts",
}


def strip(text: str) -> str:
    """text without the generated regions, code blocks and code spans."""
    text = REGION.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def linked_results(section: str, base: Path) -> list[Path]:
    """The result files a section links, with each .txt's .json."""
    out = []
    for target in re.findall(r"\]\(([^)#\s]+)", section):
        path = (base / target).resolve()
        if RESULTS in path.parents and path.is_file():
            out += [path, path.with_suffix(".json")]
    return [p for p in out if p.is_file()]


def scalars(value: Any) -> Iterable[float]:
    """The numbers of a JSON value that are statistics, not samples: lists
    longer than 4 (a run's samples or its rounds' ratios) are left out."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from scalars(item)
    elif isinstance(value, list):
        if len(value) > 4 and all(isinstance(item, (int, float)) for item in value):
            return
        for item in value:
            yield from scalars(item)


NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def sourced(number: str, files: list[Path]) -> bool:
    """number (as printed: "1.46", "9,108") is in one of the files: as text
    in a .txt or a statistic of a .json that prints as number at its
    precision (66.0 is "66")."""
    plain = number.replace(",", "")
    digits = len(plain.split(".")[1]) if "." in plain else 0
    target = f"{float(plain):.{digits}f}"
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            values: Iterable[float] = scalars(json.loads(text))
        else:
            values = (float(n.replace(",", "")) for n in NUMBER.findall(text))
        if any(f"{value:.{digits}f}" == target for value in values):
            return True
    return False


def unsourced(text: str, base: Path) -> list[str]:
    """The measured figures outside the regions of a README (text, links
    relative to base) that no result file linked in their section holds
    and that NOT_MEASURED does not name: "section title: figure"."""
    missing = []
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # a region's "#" lines too
    for section in re.split(r"\n(?=#{1,3} )", text):
        files = linked_results(section, base)
        title = section.lstrip("#").strip().splitlines()[0] if section.strip() else ""
        for match in FIGURE.finditer(strip(section)):
            figure = match.group(0).lstrip("~")
            if figure in NOT_MEASURED:
                continue
            if not sourced(match.group("number"), files):
                missing.append(f"{title}: {figure}")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a region would change")
    args = parser.parse_args(argv)
    stale = []
    for path in READMES:
        old = path.read_text(encoding="utf-8")
        new = regenerate(old)
        if new != old:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(ROOT)}")
    missing = [f"{path.relative_to(ROOT)}: {figure}" for path in READMES
               for figure in unsourced(path.read_text(encoding="utf-8"), path.parent)]
    for figure in missing:
        print(f"no result file holds: {figure}")
    return 1 if (args.check and stale) or missing else 0


if __name__ == "__main__":
    sys.exit(main())
