"""A result of ``simulate()`` as the text tables ``chash simulate`` prints."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from chash._text import plural

__all__ = ["render", "table"]


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Right-aligned columns but the first, a rule under the headers."""
    body = [list(row) for row in rows]
    widths = [max([len(headers[i]), *(len(row[i]) for row in body)]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in body)]


def _pct(value: float, digits: int = 2) -> str:
    return f"{100.0 * value:.{digits}f}%"


def _bytes(value: int) -> str:
    if value >= 10 * 1024 * 1024:
        return f"{value / (1024 * 1024):.1f} MiB"
    if value >= 10 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value} B"


def render(result: dict[str, Any]) -> str:
    """The result as readable text tables."""
    config = result["config"]
    keys = result["keys"]
    last = config["last_nodes"]
    strategies = result["strategies"]
    ids = [s["id"] for s in strategies]
    out: list[str] = [
        f"chash simulate: {plural(keys, 'key')}, {config['first_nodes']} -> {last} nodes, "
        f"hash {config['hash']}, measured in {result['seconds']:.1f} s",
        "",
        "Keys remapped as the cluster grows one node at a time (shrinking back, newest node",
        "first, moves the same keys back), and when a node in the middle fails",
    ]
    rows = []
    for step in result["remap"]["growth"]:
        rows.append([f"{step['from']} -> {step['to']}", _pct(step["ideal"]),
                     *(_pct(step["moved"][i]) for i in ids)])
    growth = result["remap"]["growth"]
    rows.append(["mean / ideal", "1.00",
                 *(f"{sum(s['moved'][i] / s['ideal'] for s in growth) / len(growth):.2f}" for i in ids)])
    for failure in result["remap"]["failure"]:
        rows.append([f"{failure['from']} -> {failure['to']}, {failure['failed']} fails",
                     _pct(failure["ideal"]), *(_pct(failure["moved"][i]) for i in ids)])
    out += table(["nodes", "ideal 1/N", *(s["label"] for s in strategies)], rows)
    out += [
        f"ring/V: the ring with V virtual nodes a node; bounded/V: bounded loads, "
        f"c = {config['balance_factor']:g}, over ring/V;",
        f"maglev: table of {config['maglev_size']:,} entries; jump and jumpback "
        f"(JumpBackHash): a failed node's bucket goes to the last node; anchor "
        f"(JumpBackAnchor): the failed node is removed where it is.",
        "",
        f"Load balance by virtual nodes ({last} nodes, {plural(keys, 'key')}; "
        f"arc = share of the ring each node owns)",
    ]
    out += table(
        ["virtual nodes", "max/mean", "min/mean", "std dev", "std dev/mean", "arc std dev/mean"],
        ([str(r["virtual_nodes"]), f"{r['max_over_mean']:.3f}", f"{r['min_over_mean']:.3f}",
          f"{r['stddev']:,.0f}", _pct(r["relative_stddev"]), _pct(r["arc_relative_stddev"])]
         for r in result["balance_by_vnodes"]))
    out += ["", f"Load balance by strategy ({last} nodes; keys thrown at random: "
                f"std dev/mean {_pct(result['random_relative_stddev'])})"]
    out += table(
        ["strategy", "max/mean", "min/mean", "std dev", "std dev/mean"],
        ([r["label"], f"{r['max_over_mean']:.3f}", f"{r['min_over_mean']:.3f}",
          f"{r['stddev']:,.0f}", _pct(r["relative_stddev"])] for r in result["balance_by_strategy"]))
    out += ["", f"Ring memory and build time by virtual nodes ({last} nodes; build: "
                f"add_service_node node by node,",
            "or add_service_nodes all at once; lookup: key_distribution, key hashing included)"]
    out += table(
        ["virtual nodes", "points", "engine", "bytes/point", "as Python list+dict",
         "build, node by node", "build, all at once", "lookup"],
        ([str(r["virtual_nodes"]), f"{r['points']:,}", _bytes(r["memory_bytes"]),
          f"{r['bytes_per_point']:.1f}", _bytes(r["python_bytes"]), f"{r['build_ms']:.2f} ms",
          f"{r['batch_build_ms']:.2f} ms", f"{r['lookup_ns_per_key']:.0f} ns"]
         for r in result["ring_cost"]))
    at = result["comparison_at"]
    out += ["", "Strategies side by side (routing cost includes hashing the key; "
                "round robin: two passes over the keys)"]
    out += table(
        ["strategy", f"moved {at['growth'][0]}->{at['growth'][1]}",
         f"moved {at['failure'][0]}->{at['failure'][1]} (fail)", "growth/ideal",
         "same node on repeat", "max/mean", "state", "route"],
        ([r["label"], _pct(r["growth_moved"]), _pct(r["failure_moved"]),
          "-" if r["growth_mean_over_ideal"] is None else f"{r['growth_mean_over_ideal']:.2f}",
          _pct(r["same_node_on_repeat"], 1), f"{r['max_over_mean']:.3f}", _bytes(r["state_bytes"]),
          "-" if r["ns_per_key"] is None else f"{r['ns_per_key']:.0f} ns/key"]
         for r in result["comparison"]))
    out.append(f"ideal: {_pct(at['growth_ideal'])} moved on growth, "
               f"{_pct(at['failure_ideal'])} on failure")
    return "\n".join(out)
