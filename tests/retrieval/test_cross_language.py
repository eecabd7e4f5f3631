"""A Chinese question over English runbooks (real USE embedder, Milvus Lite BM25 with jieba).

BM25 cannot see the question's Chinese words there; it matched only the product's name,
which every runbook repeats, and min-max fusion once stretched that noise above the dense
cosine, which reads across languages (``superbiz.retrieval.fusion.lexical_reach``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import ingested_kb

_OVERVIEW = """---
title: Acme CLI overview
category: acme
---
# Acme CLI overview

Acme is the command line of the Acme platform. Run `acme --help` to list every acme command.
The acme tool reads `~/.acme/config.toml`; `acme version` prints the acme version. Acme
commands: acme deploy, acme status, acme logs, acme cache, acme login. See the acme guides.
"""

RUNBOOKS = {
    "acme/overview.md": _OVERVIEW,
    "acme/reference.md": _OVERVIEW.replace("overview", "reference").replace("Acme is", "Acme,"),
    "acme/certificates.md": """---
title: HTTPS certificates
category: acme
---
# HTTPS certificates

When the TLS handshake fails with "certificate verify failed", the machine does not trust
the issuer of the server certificate. Add your company's root certificate bundle to the
trust store, or point `ca_bundle` at it in the acme configuration.
""",
    "acme/cache.md": """---
title: Clearing the local cache
category: acme
---
# Clearing the local cache

Downloaded artifacts are kept on disk to speed up later runs. To free disk space, remove
the cache directory, or purge only the entries older than a week with `acme cache purge`.
""",
    "acme/login.md": """---
title: Signing in with a password or a token
category: acme
---
# Signing in with a password or a token

A private registry asks for credentials. Store the user name and password, or an access
token, in the keyring; `acme login` prompts for them once and remembers them.
""",
    "acme/rollback.md": """---
title: Rolling back a release
category: acme
---
# Rolling back a release

If a deployment breaks production, redeploy the previous release: `acme deploy --revision`
with the last good revision number. Then tell the on-call engineer what happened.
""",
    "acme/builds.md": """---
title: Builds that wait too long
category: acme
---
# Builds that wait too long

Alert Name: AcmeBuildsPendingForLong

Pending builds pile up in a namespace when its jobs repeat: look up the namespace, find the
projects whose pipelines keep queueing builds, and block the user when it is abuse.
""",
    "acme/runners.md": """---
title: Runner fleet
category: acme
---
# Runner fleet

Alert Name: AcmeTooManyPendingBuildsPerNamespace

Check that the runner managers create machines, that the cloud quota is not exhausted and
that the error rate of the managers is low. Restart a manager that stopped polling.
""",
}

QUESTIONS = {
    "acme 证书校验失败怎么办？": "acme/certificates.md",
    "acme 的本地缓存占了太多磁盘空间，怎么清理？": "acme/cache.md",
    "私有仓库要用户名和密码，acme 怎么登录认证？": "acme/login.md",
    "acme 发布出问题了，怎么回滚到上一个版本？": "acme/rollback.md",
}


@pytest.fixture(scope="module")
def english_kb(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Any]:
    with ingested_kb(tmp_path_factory.mktemp("english-kb"), dict(RUNBOOKS), use_embedder) as kb:
        yield kb


@pytest.mark.parametrize("question", QUESTIONS, ids=[Path(p).stem for p in QUESTIONS.values()])
def test_a_chinese_question_finds_the_english_runbook_that_answers_it(
    english_kb: Any, question: str
) -> None:
    ranked = english_kb.retriever.candidates(question).ranked
    assert ranked[0].doc_path == QUESTIONS[question], [d.doc_path for d in ranked]


def test_a_chinese_question_naming_an_alert_finds_the_page_that_names_it(
    english_kb: Any,
) -> None:
    """The alert's name is one term of three for BM25 (the rest is Chinese), but only one
    page contains it: an identifier counts whatever language the question is in."""
    question = "AcmeTooManyPendingBuildsPerNamespace 告警了，要怎么排查？"
    ranked = english_kb.retriever.candidates(question).ranked
    assert ranked[0].doc_path == "acme/runners.md", [d.doc_path for d in ranked]


def test_an_english_question_still_weighs_its_words(english_kb: Any) -> None:
    ranked = english_kb.retriever.candidates("acme cache purge").ranked
    assert ranked[0].doc_path == "acme/cache.md"
