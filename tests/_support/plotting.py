"""Whether matplotlib can draw in this process."""

from __future__ import annotations

import os

import pytest


def need_matplotlib() -> None:
    """Skip unless matplotlib can draw in this process."""
    pytest.importorskip("matplotlib")
    preload = os.environ.get("LD_PRELOAD", "")
    if "libasan" in preload and "libstdc++" not in preload:
        pytest.skip("matplotlib's C++ font module aborts when the ASan runtime is preloaded "
                    "without libstdc++")
