"""Serve a recorded real-model transcript as an OpenAI-compatible endpoint.

    python tests/fakes/serve_transcript.py [TRANSCRIPT] [--port 8765] [--dataset DIR]

The fake OpenAI server (``fakes.openai_server``) answers every chat request with the
recorded response that matches it (see its replay mode), embeddings by hash. With
``--dataset DIR`` it also writes an ``eval agent`` dataset of the transcript's questions
(the live run's, ``fakes.real_transcripts.LIVE_TURN3_QUESTIONS``). Then, in another shell::

    SUPERBIZ_LLM__BASE_URL=http://127.0.0.1:8765/v1 SUPERBIZ_LLM__MODEL=qwen2.5-coder-1.5b \\
        superbiz eval agent DIR --model llm --data-dir /tmp/replay-eval

Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script from anywhere

from fakes.openai_server import FakeOpenAIServer
from fakes.real_transcripts import (
    QWEN_LIVE_TURN3,
    load_transcript,
    write_transcript_dataset,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcript", nargs="?", default=QWEN_LIVE_TURN3)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--dataset", type=Path)
    args = parser.parse_args()
    server = FakeOpenAIServer(port=args.port)
    server.replay(load_transcript(args.transcript))
    with server:
        if args.dataset:
            write_transcript_dataset(args.dataset)
            print(f"dataset: {args.dataset}", flush=True)
        print(f"serving {args.transcript} at {server.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
