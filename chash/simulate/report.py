"""A comparison of routing policies over a trace (``policies.compare()``) as
the table ``chash simulate --trace`` prints and as a plot."""
from __future__ import annotations

from typing import Any

from chash.simulate.plots import figure_class, plot_path
from chash.simulate.text import table

__all__ = ["plot_comparison", "render_comparison"]


def _setup(result: dict[str, Any]) -> str:
    config = result["config"]
    loads = "shared loads" if config["shared_loads"] else "own loads"
    replicas = config["replicas"]
    seeds = "" if replicas == 1 else f" ({loads}, mean of seeds {','.join(map(str, result['seeds']))})"
    return (f"{result['requests']:,} requests, {config['workers']} workers, "
            f"C = {config['cache_blocks']:,} blocks, P = {config['prefill_rate']:,.0f} tokens/s, "
            f"D = {config['decode_time']:g} s/token, K = {config['key_blocks']}, "
            f"R = {replicas}{seeds}")


def render_comparison(result: dict[str, Any]) -> str:
    """The comparison as a text table, one row a policy."""
    rows = ([row["policy"], f"{100 * row['hit_rate']:.1f}%",
             *(f"{row['ttft'][name]:.3f}" for name in ("mean", "p50", "p90", "p99")),
             f"{row['max_mean_load']:.2f}"] for row in result["policies"])
    out = [f"chash simulate --trace: {_setup(result)}", ""]
    out += table(["policy", "hit rate", "TTFT mean s", "p50 s", "p90 s", "p99 s", "max/mean load"],
                 rows)
    return "\n".join(out)


def plot_comparison(results: list[dict[str, Any]], path: str) -> str:
    """Mean, p90 and p99 TTFT and the hit rate of each policy, one column of
    panels a comparison in ``results``; returns the file written (see
    ``plot_path``).  Needs matplotlib (the ``plot`` extra)."""
    written = plot_path(path)
    figure = figure_class()(figsize=(4.5 * len(results), 7), layout="constrained")
    panels = figure.subplots(2, len(results), squeeze=False)
    for k, result in enumerate(results):
        rows = result["policies"]
        names = [row["policy"] for row in rows]
        ttft_ax, hit_ax = panels[0][k], panels[1][k]
        width = 0.27
        for i, stat in enumerate(("mean", "p90", "p99")):
            ttft_ax.bar([x + (i - 1) * width for x in range(len(rows))],
                        [row["ttft"][stat] for row in rows], width, label=stat)
        ttft_ax.set_xticks(range(len(rows)), names, rotation=45, ha="right")
        ttft_ax.set_ylabel("TTFT (s)")
        ttft_ax.set_title(_setup(result).replace(", C", ",\nC").replace(", R", ",\nR"),
                          fontsize="small")
        ttft_ax.legend(fontsize="small")
        ttft_ax.grid(True, axis="y", alpha=0.3)
        hit_ax.bar(range(len(rows)), [row["hit_rate"] for row in rows], color="C3")
        hit_ax.set_xticks(range(len(rows)), names, rotation=45, ha="right")
        hit_ax.set_ylabel("prefix cache hit rate")
        hit_ax.set_ylim(0, 1)
        hit_ax.grid(True, axis="y", alpha=0.3)
    figure.savefig(written, dpi=100)
    return written
