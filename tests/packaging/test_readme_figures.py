"""Every benchmark figure in README.md and benchmarks/README.md comes from
a committed result file: the generated regions are what
benchmarks/readme_figures.py writes from benchmarks/results/ today, and
every measured figure outside them is held by a result file its section
links.  Nothing here runs a benchmark."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    if not (BENCHMARKS / "readme_figures.py").is_file():
        pytest.skip(f"no benchmarks/ beside the tests ({BENCHMARKS}): needs a checkout")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import readme_figures
    finally:
        sys.path.remove(str(BENCHMARKS))
    return readme_figures


@pytest.mark.parametrize("name", ["README.md", "benchmarks/README.md"])
def test_regenerating_the_figures_changes_nothing(figures: ModuleType, name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    assert len(figures.regions(text)) >= 5
    assert figures.regenerate(text) == text


@pytest.mark.parametrize("name", ["README.md", "benchmarks/README.md"])
def test_every_figure_outside_the_regions_has_a_source(figures: ModuleType, name: str) -> None:
    path = ROOT / name
    assert figures.unsourced(path.read_text(encoding="utf-8"), path.parent) == []


def test_a_figure_with_no_source_fails(figures: ModuleType) -> None:
    section = ("## The ring against fastring\n\nSee [results/fastring.txt](results/fastring.txt):"
               " chash is 123.45× faster and answers in 0.001 ns.\n")
    assert figures.unsourced(section, BENCHMARKS) == [
        "The ring against fastring: 123.45×", "The ring against fastring: 0.001 ns"]
    # Without the link, even a figure the file holds has no source.
    data = json.loads((BENCHMARKS / "results" / "fastring.json").read_text(encoding="utf-8"))
    held = figures.x(data["rows"][0]["ratios"]["fastring/chash"], "×")
    assert figures.unsourced(section.replace("123.45×", held), BENCHMARKS) == [
        "The ring against fastring: 0.001 ns"]
    unlinked = section.replace("[results/fastring.txt](results/fastring.txt)", "the file")
    assert f"The ring against fastring: {held}" in figures.unsourced(
        unlinked.replace("123.45×", held), BENCHMARKS)


def test_every_exemption_is_still_used(figures: ModuleType) -> None:
    text = "\n".join(figures.strip((ROOT / name).read_text(encoding="utf-8"))
                     for name in ("README.md", "benchmarks/README.md"))
    found = {m.group(0).lstrip("~") for m in figures.FIGURE.finditer(text)}
    assert sorted(set(figures.NOT_MEASURED) - found) == []


def test_a_quoted_ratio_is_the_more_conservative(figures: ModuleType) -> None:
    row = {"ratios": {"a/b": 2.0}, "paired_ratios": {"a/b": 1.5}, "cpu_ratios": {"a/b": 1.2},
           "cpu_paired_ratios": {"a/b": 1.3}, "preempted_samples": {"a": 0, "b": 0}}
    assert figures.quote(row, "a/b") == 1.5
    assert figures.quote(row, "a/b", "<=") == 2.0
    row["preempted_samples"]["b"] = 1  # then CPU time counts too
    assert figures.quote(row, "a/b") == 1.2


def test_the_regions_quote_the_conservative_gateway_ratio(figures: ModuleType) -> None:
    """The gateway's figure is min(ratio of medians, median of per-round
    ratios), and the two medians it names give the former."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"one gateway process served \*\*([\d.]+)x\*\* \(([\d,]+) against "
                       r"([\d,]+) a second, medians: ([\d.]+)x; median of per-round ratios "
                       r"([\d.]+)x\)", text)
    assert quoted is not None
    shown, ours, theirs, medians, rounds = quoted.groups()
    assert float(shown) == min(float(medians), float(rounds))
    ratio = int(ours.replace(",", "")) / int(theirs.replace(",", ""))
    assert abs(ratio - float(medians)) < 0.006
