"""The README opens with its two commands, unchanged, before anything else: the one that
installs superbiz and answers a question on the example knowledge base, and the one that
runs CI. Cutting the README down to point into the documentation site must keep them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
TRY_IT = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
    "superbiz ingest src/superbiz/examples/corpus && "
    'superbiz ask "支付回调超时，是不是 Redis 连接池的问题？"'
)
CI = "bash .ci/run"


def test_the_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)\n```$", text, re.S | re.M)
    assert blocks[:2] == [TRY_IT, CI]
    first_section = text.find("\n## ")
    assert text.index(CI) < (first_section if first_section >= 0 else len(text))
