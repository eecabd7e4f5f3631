"""A knowledge-base article states its problem before its cause and its fix; asked about
the problem, the answer quotes the cause, not the statement (real USE embedder, Milvus
Lite, the extractive answer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import ingested_kb

from superbiz.agents.runtime import open_runtime
from superbiz.knowledge.kb.base import KnowledgeBase

_LOGS = "\n".join(
    f"    E0628 20:4{i}:37 kubelet: UnmountVolume.TearDown failed for volume pvc-{i}: "
    "driver name driver.longhorn.io not found in the list of registered CSI drivers"
    for i in range(8)
)

ARTICLES = {
    "kb/noexecute-taint.md": f"""---
title: "Troubleshooting: NoExecute taint prevents workloads from terminating"
---
## Symptoms

After a NoExecute taint is applied to a node, pods using Longhorn volumes stay stuck in
Terminating on that node, and their replacement pods on other nodes never start.
Describing the replacement pod shows a Multi-Attach error for the volume.

The kubelet on the tainted node logs:

{_LOGS}

## Root cause

The taint evicted the Longhorn CSI plugin from the node before the workload pods. Without
the plugin registered with kubelet, the old pod's volume cannot be unmounted, so the old
VolumeAttachment is never deleted and the volume cannot attach elsewhere.

## Workaround

Remove the taint, or add a toleration for it to the Longhorn components, then wait for the
old pods to terminate.
""",
    "kb/backup-target.md": """---
title: "Troubleshooting: Unable to mount an NFS backup target"
---
## 现象

备份目标设置为 NFS 后，Longhorn UI 提示无法挂载备份目标，备份一直失败。

## 原因

节点上没有安装 NFS 客户端（nfs-common 或 nfs-utils），mount 命令不支持 nfs 类型。

## 解决方法

在每个节点上安装 nfs-common（Debian、Ubuntu）或 nfs-utils（RHEL、CentOS），再重新设置备份目标。
""",
}


@pytest.fixture(scope="module")
def articles_kb(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Any
) -> Iterator[KnowledgeBase]:
    with ingested_kb(tmp_path_factory.mktemp("articles"), ARTICLES, use_embedder) as kb:
        yield kb


def _first_quote(kb: KnowledgeBase, question: str) -> str:
    turn = open_runtime(kb.settings, kb=kb).ask(f"statements-{hash(question)}", question).result
    assert turn.citations, turn.answer
    return turn.answer.split("\n\n[1] ", 1)[1].split("\n\nSources:", 1)[0]


def test_the_cause_is_quoted_not_the_symptoms_the_question_repeats(
    articles_kb: KnowledgeBase,
) -> None:
    quote = _first_quote(
        articles_kb,
        "Pods are stuck in Terminating on a tainted node",
    )
    heading, text = quote.split("\n", 1)
    assert heading.endswith("› Root cause"), quote
    assert text.startswith("The taint evicted the Longhorn CSI plugin"), quote


def test_a_chinese_article_is_read_the_same_way(articles_kb: KnowledgeBase) -> None:
    quote = _first_quote(articles_kb, "NFS 备份目标挂载不上，备份一直失败，怎么办？")
    assert quote.split("\n", 1)[0].endswith("› 原因"), quote
    assert "nfs-common" in quote


def test_asked_for_the_symptoms_the_answer_quotes_them(articles_kb: KnowledgeBase) -> None:
    quote = _first_quote(articles_kb, "What are the symptoms of a NoExecute taint on Longhorn?")
    assert quote.split("\n", 1)[0].endswith("› Symptoms"), quote
