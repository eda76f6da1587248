"""Hypothesis profiles: "ci" (reproducible, bounded) when CI is set, else "dev"."""
import os

from hypothesis import settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    max_examples=25,
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
