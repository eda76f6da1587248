"""benchmarks/results/ holds one current run per benchmark, earlier runs in
results/archive/, and benchmarks/README.md links every one of them with
links that resolve."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: What a rerun's name carries; such a file belongs in results/archive/.
RERUN = re.compile(r"run-\d|-run\b|earlier|second|latest|loaded|before-after")


def readme() -> str:
    path = BENCHMARKS / "README.md"
    if not path.is_file():
        pytest.skip(f"no benchmarks/ beside the tests ({BENCHMARKS}): needs a checkout")
    return path.read_text(encoding="utf-8")


def linked(text: str) -> set[Path]:
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose)
    return {(BENCHMARKS / target).resolve() for target in targets if "://" not in target}


def test_the_readme_links_resolve() -> None:
    missing = sorted(str(path) for path in linked(readme()) if not path.exists())
    assert missing == []


def test_every_result_file_is_linked_and_no_rerun_is_current() -> None:
    links = linked(readme())
    results = BENCHMARKS / "results"
    current = sorted(path for path in results.iterdir() if path.is_file())
    archived = sorted(path for path in (results / "archive").iterdir() if path.is_file())
    assert current and archived
    assert [path.name for path in current if RERUN.search(path.stem)] == []
    # A .json is linked through its .txt where only the text is shown.
    unlinked = [path.relative_to(results) for path in current + archived
                if path.resolve() not in links and path.with_suffix(".txt").resolve() not in links]
    assert unlinked == []
