"""The process pool's fork server loads the tokenizer its units name before it forks them: each worker starts with it
loaded, encodes the same ids as this process, and a pool that needs another tokenizer gets a server that loaded it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import pytest

from llm_assets.core import tokenize
from llm_assets.core.units import PoolRunner, UnitResult, Warmup, run_units, stop_pool_server
from llm_assets_support.shared_data import shared

TEXTS = ["Hello world! It's 2026.", "naïve café — “quotes”", "日本語のテキスト 😀", ""]


@dataclass(frozen=True)
class Probe:
    source: str
    path: str
    warm: bool = True

    @property
    def warmup(self) -> Warmup | None:
        return Warmup("llm_assets.core.tokenize:warm", self.path) if self.warm else None


def probe(u: Probe) -> UnitResult:
    """What a worker finds as its unit starts: whether the tokenizer at u.path is loaded, and its threads; then the
    ids it encodes."""
    loaded = tokenize._checked_tiktoken.cache_info().currsize + tokenize.load_tokenizer.cache_info().currsize
    threads = threading.active_count()
    ids = tokenize.batch_encoder(u.path)(TEXTS)
    return UnitResult(unit=u.source, source=u.source, counts={"loaded": loaded, "threads": threads,
                                                              "pid": os.getpid()},
                      errors=[repr(ids)])


def test_workers_start_with_the_tokenizer_their_fork_server_loaded(tmp_path):
    gpt2 = str(shared("tokenizers", "gpt2"))
    expected = repr(tokenize.batch_encoder(gpt2)(TEXTS))
    stop_pool_server()
    try:
        cold = run_units(probe, [Probe(f"c{i}", gpt2, warm=False) for i in range(4)], PoolRunner(2))
        first = {}
        for r in cold:
            first.setdefault(r.counts["pid"], r.counts["loaded"])
        assert set(first.values()) == {0}  # without the warm-up each worker loads it for its first unit
        warm = run_units(probe, [Probe(f"w{i}", gpt2) for i in range(4)], PoolRunner(2))
        assert all(r.counts["loaded"] == 2 for r in warm)  # tokenizer and checked encoder, before any unit
        assert all(r.counts["threads"] == 1 for r in warm)  # nothing forked with threads of the server's
        assert {r.errors[0] for r in cold + warm} == {expected}  # the same ids as this process

        other = tmp_path / "tokenizer.json"
        tokenize.train_bytelevel_bpe(TEXTS * 20, 300, ["<|endoftext|>"], other)
        mixed = run_units(probe, [Probe("o1", str(other)), Probe("o2", str(other))], PoolRunner(2))
        assert [r.counts["loaded"] for r in mixed] == [2, 2]  # from a server that loaded the other one
        assert {r.errors[0] for r in mixed} == {repr(tokenize.batch_encoder(str(other))(TEXTS))}
    finally:
        stop_pool_server()


@dataclass(frozen=True)
class Named:
    source: str
    warmup: Warmup


def made(u: Named) -> UnitResult:
    """The warm-ups the worker's fork server made, and which extractors' libraries it finds imported."""
    import sys

    from llm_assets.core.units import served_warmups

    return UnitResult(unit=u.source, source=u.source, errors=[
        repr(sorted((w.function, w.argument) for w in served_warmups())),
        repr([m for m in ("trafilatura", "resiliparse") if m in sys.modules])])


def test_the_fork_server_warms_exactly_what_the_units_name_and_routed_extraction_warms_both_extractors():
    from llm_assets.core.documents import DocumentsSettings, ExtractUnit
    from llm_assets.core.units import POOL_WARMUPS

    routed = ExtractUnit(store=None, source="raw/c/a.warc.gz", settings=DocumentsSettings(extractor="routed"),
                         crawl="c", size=0, part="").warmup
    assert routed == Warmup("llm_assets.core.documents:warm", "trafilatura,resiliparse")
    stop_pool_server()
    try:
        results = run_units(made, [Named(f"u{i}", routed) for i in range(2)], PoolRunner(2))
    finally:
        stop_pool_server()
    expected = sorted((w.function, w.argument) for w in (*POOL_WARMUPS, routed))
    assert {r.errors[0] for r in results} == {repr(expected)}
    assert {r.errors[1] for r in results} == {repr(["trafilatura", "resiliparse"])}  # before any unit ran


def test_a_warm_up_that_fails_fails_every_unit_naming_it():
    from llm_assets.core.units import WarmupFailed

    stop_pool_server()
    try:
        with pytest.raises(WarmupFailed, match=r"llm_assets\.core\.documents:warm\('routed'\): ValueError: unknown "
                                               r"extractor 'routed'"):
            run_units(made, [Named(f"u{i}", Warmup("llm_assets.core.documents:warm", "routed")) for i in range(2)],
                      PoolRunner(2))  # (one unit alone runs in this process, no pool)
    finally:
        stop_pool_server()
