"""Hypothesis profiles. ``ci`` (the default) draws the same examples every run, so the
suite's verdict on a commit does not depend on the day it runs; ``explore``
(``HYPOTHESIS_PROFILE=explore make test``) draws fresh ones, to look for new failures -
each one found is kept as a plain test beside the property that found it."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
