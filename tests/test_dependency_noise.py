"""A CLI user sees superbiz's output only, and Milvus Lite outlives a slow model.

Seen live (issue 23): jieba printed "Building prefix dict … Loading model cost …" twice on
every command of a fresh install (once plain, once as ``DEBUG jieba:``), and while a turn
waited minutes for a slow model on the embedded defaults, gRPC printed ``Received a GOAWAY
with error code ENHANCE_YOUR_CALM … too_many_pings``: pymilvus pings its channel every
10 s, idle too, and Lite's in-process gRPC server answers that with GOAWAY after about two
minutes (129 s measured on this machine; ``superbiz`` at bc5e2c6).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import write_kb

#: Longer than the 129 s after which Lite's server sent GOAWAY to pymilvus' default pings
#: (measured on this machine at bc5e2c6); the 10-minute wait of the issue was checked by
#: hand (docs/getting-started/install.md, "A CLI user sees
#: superbiz's output only"). What makes the difference is whether the idle channel
#: pings at all, not how long it idles past the server's patience.
SLOW_MODEL_S = 160

NOISE = ("jieba", "prefix dict", "Loading model", "GOAWAY", "too_many_pings", "chttp2")


def _script() -> str:
    script = shutil.which("superbiz") or str(Path(sys.executable).with_name("superbiz"))
    assert Path(script).exists(), "the console script is not installed (pip install -e .)"
    return script


def _fresh_install_env(tmp_path: Path) -> dict[str, str]:
    """No jieba dictionary cache yet: the temporary directory is new."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    return {**os.environ, "TMPDIR": str(temp), "TEMP": str(temp), "TMP": str(temp)}


def test_commands_on_a_fresh_install_print_nothing_of_jieba(tmp_path: Path) -> None:
    env = _fresh_install_env(tmp_path)
    data = str(tmp_path / "data")
    kb = str(write_kb(tmp_path / "kb"))
    for args in (
        ["ingest", kb],
        ["lookup", "支付回调超时怎么办？"],
        ["ask", "支付回调超时怎么办？"],
    ):
        done = subprocess.run(
            [_script(), *args, "--data-dir", data],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert not [word for word in NOISE if word in done.stderr], done.stderr


SLOW_TURN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from superbiz.agents.runtime import open_runtime
    from superbiz.config import Settings
    from superbiz.knowledge.coverage.domains import DomainService
    from superbiz.knowledge.ingest.ingestor import Ingestor
    from superbiz.testing import ScriptedChatModel, answer

    data, kb, wait = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    plan = '{"need_retrieval": true, "domains": [{"domain": "payment", "sub_question": "x"}]}'

    def slow(messages, tools):  # a model thinking for minutes
        time.sleep(wait)
        return answer("支付渠道回调超时时，先检查网关日志 [1]。")

    runtime = open_runtime(Settings(data_dir=data), model=ScriptedChatModel(plan, slow))
    Ingestor(runtime.kb, domains=DomainService(runtime.kb)).ingest([kb])
    turn = runtime.ask("slow", "支付回调超时怎么办？").result
    after = runtime.user_lookup("slow", "Redis 连接池耗尽")  # the store after the wait
    print(turn.answer_source, turn.executed, after.executed, after.error)
    runtime.close()
    """
)


def test_milvus_lite_outlives_a_model_that_takes_minutes(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SLOW_TURN,
            str(tmp_path / "data"),
            str(write_kb(tmp_path / "kb")),
            str(SLOW_MODEL_S),
        ],
        capture_output=True,
        text=True,
        timeout=SLOW_MODEL_S + 300,
        check=False,
        env=_fresh_install_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["model", "1", "True", "None"], done.stdout + done.stderr
    assert not [word for word in NOISE if word in done.stderr], done.stderr


PYMILVUS_WARNS = textwrap.dedent(
    """
    import logging, sys
    from superbiz.cli import _main
    from superbiz.retrieval.vector_store import MilvusChunkStore

    _main(verbose=sys.argv[2] == "verbose")  # the CLI's callback, before any command
    store = MilvusChunkStore(sys.argv[1], "chunks")  # pymilvus imported, as a command does
    # what its query iterator logs against a `milvus-lite server`, which has no sessions
    logging.getLogger("pymilvus.client.iterator.search_iterator").warning(
        "failed to get mvccTs from milvus server, use client-side ts instead"
    )
    store.close()
    """
)


def test_pymilvus_warnings_stay_quiet_once_a_store_imported_it(tmp_path: Path) -> None:
    """Seen in `eval scale --profile server`: one such line per query of `milvus-lite
    server`, hundreds a run, although the CLI sets pymilvus' logger to ERROR: pymilvus
    set it back to WARNING when the store imported it. ``--verbose`` still shows them."""

    def stderr(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", PYMILVUS_WARNS, str(tmp_path / f"{mode}.db"), mode],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stderr

    assert "mvccTs" not in stderr("quiet")
    assert "mvccTs" in stderr("verbose")
