"""A result of ``simulate()`` drawn with matplotlib (the ``plot`` extra,
imported when first needed)."""
from __future__ import annotations

import os
from typing import Any

from chash._optional import require
from chash._text import plural

__all__ = ["figure_class", "plot", "plot_figure", "plot_path"]


#: Who needs matplotlib, in the error raised without it: "chash simulate
#: --plot needs matplotlib: pip install 'chash-router[plot]'".
_PLOT_USER = "chash simulate --plot"


def figure_class() -> Any:
    """``matplotlib.figure.Figure``; ImportError naming the extra without
    matplotlib."""
    # The package itself first: a test (or a user) may block matplotlib
    # while one of its submodules is already loaded.
    require("matplotlib", user=_PLOT_USER, extra="plot")
    return require("matplotlib.figure", user=_PLOT_USER, extra="plot",
                   package="matplotlib").Figure


def plot_path(path: str) -> str:
    """The file ``plot(result, path)`` writes: ``path``, with ``.png``
    appended when it has no extension.

    ImportError naming the extra without matplotlib; ValueError when the
    extension is not an image format matplotlib writes."""
    figure = figure_class()
    ext = os.path.splitext(path)[1]
    if not ext:
        return path + ".png"
    formats = figure().canvas.get_supported_filetypes()
    if ext[1:].lower() not in formats:
        raise ValueError(f"cannot draw a {ext!r} file: use one of "
                         f"{', '.join('.' + name for name in sorted(formats))}")
    return path


def plot_figure(result: dict[str, Any]) -> Any:
    """The remap fractions and load spreads of ``result`` as a matplotlib
    ``Figure`` (ImportError naming the extra without matplotlib)."""
    figure = figure_class()(figsize=(16, 6), layout="constrained")
    halves: Any = figure.subfigures(1, 2, width_ratios=[1.25, 2])
    remap_fig, load_fig = halves

    # One small panel a strategy, each over the ideal 1/N: the curves that
    # run together near 1/N cannot hide one another.
    growth = result["remap"]["growth"]
    sizes = [step["to"] for step in growth]
    ideal = [step["ideal"] for step in growth]
    strategies = result["strategies"]
    columns = 3
    rows = -(-len(strategies) // columns)
    panels = remap_fig.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    for k, ax in enumerate(panels.flat):
        if k >= len(strategies):
            ax.set_visible(False)
            continue
        strategy = strategies[k]
        ax.plot(sizes, [step["moved"][strategy["id"]] for step in growth], color=f"C{k}",
                marker=".", linewidth=2, label=strategy["label"])
        ax.plot(sizes, ideal, color="black", linestyle="--", linewidth=1, label="ideal 1/N")
        ax.set_title(strategy["label"], fontsize="medium")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    panels[0][0].set_ylim(min(ideal) / 2, 1.5)
    panels[0][0].legend(handles=panels[0][0].lines[1:], fontsize="small", loc="lower left")
    remap_fig.supxlabel("nodes after adding one")
    remap_fig.supylabel("fraction of keys remapped")
    remap_fig.suptitle(f"Keys remapped as the cluster grows ({plural(result['keys'], 'key')}, "
                       f"hash {result['config']['hash']})")
    vnodes_ax, strategy_ax = load_fig.subplots(1, 2, width_ratios=[1, 1.3])

    def strip(ax: Any, groups: list[tuple[str, list[int]]], title: str) -> None:
        for x, (_, loads) in enumerate(groups):
            mean = sum(loads) / len(loads)
            spread = [(i - (len(loads) - 1) / 2) * 0.25 / len(loads) for i in range(len(loads))]
            ax.scatter([x + d for d in spread], [load / mean for load in loads], s=12)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_xticks(range(len(groups)), [label for label, _ in groups], rotation=45, ha="right")
        ax.set_ylabel("keys on a node / mean")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)

    last = result["config"]["last_nodes"]
    strip(vnodes_ax, [(f"v={row['virtual_nodes']}", row["loads"]) for row in result["balance_by_vnodes"]],
          f"Ring load per node by virtual nodes ({last} nodes)")
    strip(strategy_ax, [(row["label"], row["loads"]) for row in result["balance_by_strategy"]],
          f"Load per node by strategy ({last} nodes)")
    return figure


def plot(result: dict[str, Any], path: str) -> str:
    """Draw ``plot_figure(result)`` into an image file; returns the path
    written, ``plot_path(path)`` (a PNG unless ``path`` names another
    format).  Needs matplotlib (``pip install 'chash-router[plot]'``); raises
    ImportError naming that extra when it is missing."""
    written = plot_path(path)
    plot_figure(result).savefig(written, dpi=110)
    return written
