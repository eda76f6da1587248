"""What a user sees when chash's C extension is not where Python looks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import chash

PACKAGE = Path(chash.__file__).resolve().parent


def _import_from(folder: Path) -> subprocess.CompletedProcess[str]:
    """``import chash`` in a fresh Python whose current folder is ``folder``,
    without site-packages (-S), where an installed chash could fill in."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run([sys.executable, "-S", "-c", "import chash"],
                          check=False, cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)


def _copy_package_without_extension(root: Path) -> None:
    shutil.copytree(PACKAGE, root / "chash",
                    ignore=shutil.ignore_patterns("_chash*.so", "_chash*.pyd", "__pycache__"))


def test_source_folder_without_built_extension_says_what_to_run(tmp_path: Path) -> None:
    _copy_package_without_extension(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'chash-router'\n")
    (tmp_path / "csrc").mkdir()
    result = _import_from(tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: chash is imported from the source folder "), last
    assert str(tmp_path / "chash") in last
    assert "is not built" in last and "pip install -e ." in last
    assert "No module named 'chash._chash'" in result.stderr  # the cause, chained


def test_installed_package_without_extension_says_reinstall(tmp_path: Path) -> None:
    _copy_package_without_extension(tmp_path)
    result = _import_from(tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: chash's C extension (chash._chash) is missing"), last
    assert "pip install --force-reinstall chash-router" in last
