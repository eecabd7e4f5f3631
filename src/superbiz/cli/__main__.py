"""``python -m superbiz.cli``."""

from superbiz.cli import app

app()
