"""The GPT-2 tokenizer loaded from ../shared/data/tokenizers/gpt2 against tiktoken's reference encoding, on
real WikiText-2 text; tokenizer hashes; missing tokenizer paths."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import tiktoken
import tiktoken.load

from llm_assets.core.tokenize import load_tokenizer, tokenizer_hash
from llm_assets.core.versions import VERSION_CHARS
from llm_assets.settings import TokenizedSettings
from llm_assets_support.shared_data import shared

R50K_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOS = 50256


@pytest.fixture(scope="module")
def gpt2_dir():
    return shared("tokenizers", "gpt2")


@pytest.fixture(scope="module")
def reference(gpt2_dir) -> tiktoken.Encoding:
    ranks = tiktoken.load.load_tiktoken_bpe(str(gpt2_dir / "gpt2.tiktoken"))
    return tiktoken.Encoding("gpt2-reference", pat_str=R50K_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOS})


@pytest.fixture(scope="module")
def wikitext_lines() -> list[str]:
    return shared("text", "pytorch-examples__wikitext-2-v1.valid.txt").read_text(encoding="utf-8").splitlines()


def test_vocabulary_and_eos(gpt2_dir):
    """50,257 tokens with <|endoftext|> as the last id, 50256."""
    tok = load_tokenizer(str(gpt2_dir))
    assert tok.get_vocab_size() == 50257
    assert tok.token_to_id("<|endoftext|>") == EOS
    assert tok.id_to_token(EOS) == "<|endoftext|>"


@pytest.mark.corpus  # the whole wikitext split
def test_ids_match_tiktoken_on_every_wikitext_line(gpt2_dir, reference, wikitext_lines):
    """Every line of the WikiText-2 validation split (3,760 lines) encodes to tiktoken's GPT-2 ids."""
    tok = load_tokenizer(str(gpt2_dir))
    assert len(wikitext_lines) == 3760
    encoded = tok.encode_batch(wikitext_lines, add_special_tokens=False)
    mismatched = [i for i, (line, e) in enumerate(zip(wikitext_lines, encoded, strict=True))
                  if e.ids != reference.encode_ordinary(line)]
    assert mismatched == []
    assert sum(len(e.ids) for e in encoded) > 200_000


@pytest.mark.corpus  # the whole wikitext split
def test_ids_match_tiktoken_on_the_whole_split_and_round_trip(gpt2_dir, reference, wikitext_lines):
    """The split as one document (newlines, blank lines, runs of spaces) matches tiktoken and decodes back."""
    text = "\n".join(wikitext_lines)
    tok = load_tokenizer(str(gpt2_dir))
    ids = tok.encode(text, add_special_tokens=False).ids
    assert ids == reference.encode_ordinary(text)
    assert tok.decode(ids) == text


def test_ids_match_tiktoken_on_ccnet_web_documents(gpt2_dir, reference):
    """The 10 CCNet documents (real web text, as one document each) encode to tiktoken's ids."""
    path = shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    assert len(texts) == 10
    tok = load_tokenizer(str(gpt2_dir))
    for text, e in zip(texts, tok.encode_batch(texts, add_special_tokens=False), strict=True):
        assert e.ids == reference.encode_ordinary(text)


@pytest.mark.parametrize("text", [
    "", " ", "   leading spaces", "trailing spaces   ", "tabs\tand\n\nnewlines \n",
    "Ünïcödé, emoji 🤖, 中文 and Привет", "it's we'll they've I'M", "1234567 3.14159 -42",
    "literal <|endoftext|> in the text",
])
def test_ids_match_tiktoken_on_edge_cases(gpt2_dir, reference, text):
    """Whitespace, non-Latin scripts, contractions, numbers; a literal <|endoftext|> is ordinary text, not EOS."""
    ids = load_tokenizer(str(gpt2_dir)).encode(text, add_special_tokens=False).ids
    assert ids == reference.encode_ordinary(text)
    assert EOS not in ids


def test_settings_default_path_is_the_shared_gpt2(gpt2_dir):
    """The default tokenized.tokenizer_path resolves to ../shared/data/tokenizers/gpt2."""
    assert TokenizedSettings().resolved_path() == gpt2_dir.resolve()


def test_tokenizer_hash_is_stable_and_content_based(gpt2_dir, tmp_path):
    """Same files give the same hash wherever they live; changing one byte changes it."""
    h = tokenizer_hash(str(gpt2_dir))
    assert h == tokenizer_hash(str(gpt2_dir))
    assert len(h) == VERSION_CHARS and int(h, 16) >= 0

    copy = tmp_path / "gpt2"
    shutil.copytree(gpt2_dir, copy)
    assert tokenizer_hash(str(copy)) == h

    merges = copy / "vocab.bpe"
    merges.write_bytes(merges.read_bytes() + b"\n")
    assert tokenizer_hash(str(copy)) != h


def test_tokenizer_hash_of_a_single_file(gpt2_dir):
    """A tokenizer given as one file hashes that file only."""
    one = tokenizer_hash(str(gpt2_dir / "encoder.json"))
    assert one != tokenizer_hash(str(gpt2_dir))
    assert one == tokenizer_hash(str(gpt2_dir / "encoder.json"))


def test_merges_txt_and_vocab_json_names_are_accepted(gpt2_dir, reference, tmp_path):
    """The Hugging Face file names (vocab.json + merges.txt) load the same tokenizer."""
    hf = tmp_path / "hf"
    hf.mkdir()
    shutil.copy(gpt2_dir / "encoder.json", hf / "vocab.json")
    shutil.copy(gpt2_dir / "vocab.bpe", hf / "merges.txt")
    text = "Robert Boulter is an English film, television and theatre actor."
    assert (load_tokenizer(str(hf)).encode(text).ids
            == load_tokenizer(str(gpt2_dir)).encode(text).ids
            == reference.encode_ordinary(text))


def test_missing_path_names_the_path(tmp_path):
    """A path that does not exist raises FileNotFoundError naming it."""
    missing = tmp_path / "no-such-tokenizer"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_tokenizer(str(missing))


def test_folder_without_tokenizer_files_names_the_folder(tmp_path):
    """A folder holding neither tokenizer.json nor vocab + merges raises FileNotFoundError naming the folder."""
    (tmp_path / "encoder.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        load_tokenizer(str(tmp_path))


# --- the tokenized stage's batches and min_tokens -------------------------------------------------------------------


def _batch(texts: list[str]):
    import pyarrow as pa

    return pa.record_batch({"doc_id": [f"d{i}" for i in range(len(texts))],
                            "url": [f"https://example.org/{i}" for i in range(len(texts))],
                            "crawl": ["C"] * len(texts),
                            "language": ["en", "de"] * (len(texts) // 2) + ["en"] * (len(texts) % 2),
                            "text": texts})


def test_a_batch_gets_the_ids_of_each_document_and_eos_as_uint16(gpt2_dir, reference, wikitext_lines):
    """Without min_tokens every document is kept, in order: its ids, then EOS; n_tokens counts the EOS."""
    from llm_assets.core.tokenized import schema, tokenize_batch

    texts = wikitext_lines[:300] + [""]
    tok = load_tokenizer(str(gpt2_dir))
    kept, rejected = tokenize_batch(_batch(texts), [e.ids for e in tok.encode_batch_fast(texts)], EOS,
                                    tok.get_vocab_size())
    assert kept.schema == schema(50257) and rejected.num_rows == 0
    assert kept.column("doc_id").to_pylist() == [f"d{i}" for i in range(len(texts))]
    assert kept.column("language").to_pylist()[:3] == ["en", "de", "en"]  # each document keeps its language
    assert kept.column("tokens").to_pylist() == [reference.encode_ordinary(t) + [EOS] for t in texts]
    assert kept.column("n_tokens").to_pylist() == [len(reference.encode_ordinary(t)) + 1 for t in texts]
    assert kept.column("tokens").to_pylist()[-1] == [EOS]  # an empty document is its EOS alone


def test_min_tokens_sets_aside_documents_under_it_with_the_reason(gpt2_dir, reference):
    """A document with exactly min_tokens tokens (EOS not counted) is kept, one fewer is set aside as
    too_few_tokens with its count; kept + rejected = the batch."""
    from llm_assets.core.tokenized import REJECTED_SCHEMA, TOO_FEW_TOKENS, tokenize_batch

    words = "one two three four five six seven eight nine ten eleven".split()
    texts = [" ".join(words[:n]) for n in (10, 9, 11, 0, 3)]
    assert [len(reference.encode_ordinary(t)) for t in texts] == [10, 9, 11, 0, 3]
    tok = load_tokenizer(str(gpt2_dir))
    kept, rejected = tokenize_batch(_batch(texts), [e.ids for e in tok.encode_batch_fast(texts)], EOS,
                                    tok.get_vocab_size(), min_tokens=10)
    assert kept.column("doc_id").to_pylist() == ["d0", "d2"]
    assert kept.column("tokens").to_pylist() == [reference.encode_ordinary(texts[i]) + [EOS] for i in (0, 2)]
    assert rejected.schema == REJECTED_SCHEMA
    assert rejected.to_pydict() == {
        "doc_id": ["d1", "d3", "d4"], "url": [f"https://example.org/{i}" for i in (1, 3, 4)], "crawl": ["C"] * 3,
        "document_tokens": [9, 0, 3], "reason": [TOO_FEW_TOKENS] * 3,
        "detail": ["9 tokens, min_tokens 10", "0 tokens, min_tokens 10", "3 tokens, min_tokens 10"]}
    assert kept.num_rows + rejected.num_rows == len(texts)


def test_encoding_ahead_keeps_the_batches_in_order_and_raises_what_the_encoder_raises(gpt2_dir):
    """The next batch is encoded in a thread: batches come back in order, each with its own ids."""
    from llm_assets.core.tokenize import batch_encoder
    from llm_assets.core.tokenized import encoded

    tok = load_tokenizer(str(gpt2_dir))
    encoder = batch_encoder(str(gpt2_dir))
    batches = [_batch([f"batch {i} text {j}" for j in range(i + 1)]) for i in range(5)]
    got = list(encoded(encoder, iter(batches)))
    assert [b for b, _ in got] == batches
    for batch, ids in got:
        assert ids == [tok.encode(t, add_special_tokens=False).ids for t in batch.column("text").to_pylist()]
    assert list(encoded(encoder, iter([]))) == []

    def failing():
        yield batches[0]
        raise OSError("store gone")

    with pytest.raises(OSError, match="store gone"):
        list(encoded(encoder, failing()))


@pytest.mark.corpus  # the whole wikitext split
def test_the_gpt2_folder_is_encoded_by_tiktoken_with_the_tokenizers_ids(gpt2_dir, wikitext_lines):
    """tiktoken's encoder is used for GPT-2's files, and gives `tokenizers`' ids on real text, one thread or more."""
    from llm_assets.core.tokenize import _batch_encoder

    tok = load_tokenizer(str(gpt2_dir))
    texts = wikitext_lines[:2000] + ["", "  \n\n ", "<|endoftext|>", "x" * 5000, "é" * 300 + " 😀" * 50]
    want = [e.ids for e in tok.encode_batch_fast(texts)]
    for threads in (1, 2):
        encoder = _batch_encoder(str(gpt2_dir), threads)
        assert encoder.__name__ == "with_tiktoken"
        assert encoder(texts) == want


def test_a_tokenizer_whose_ids_are_not_its_merge_ranks_keeps_tokenizers(gpt2_dir, tmp_path):
    """tiktoken merges by id: a vocabulary numbered otherwise is encoded by `tokenizers`, as it always was."""
    import json as json_

    from llm_assets.core.tokenize import _batch_encoder

    vocab = json_.loads((gpt2_dir / "encoder.json").read_text("utf-8"))
    a, b = "Ġthe", "Ġand"  # two merged tokens swap ids
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (tmp_path / "encoder.json").write_text(json_.dumps(vocab), "utf-8")
    (tmp_path / "vocab.bpe").write_bytes((gpt2_dir / "vocab.bpe").read_bytes())
    encoder = _batch_encoder(str(tmp_path), 1)
    assert encoder.__name__ == "with_tokenizers"
    assert encoder(["the cat and the dog"]) == [load_tokenizer(str(tmp_path)).encode("the cat and the dog").ids]


def test_min_tokens_is_validated_and_moves_the_stage_version_but_not_the_tokenizer_version():
    """min_tokens >= 0; left at 0 the code version is the one lakes built before it have; any other value is
    another tokenized version, and the tokenizer's version ignores it (it decides what is kept, not the ids)."""
    import json as json_

    from pydantic import ValidationError

    from llm_assets.core.versions import digest
    from llm_assets.settings import Settings
    from llm_assets.stages.tokenized import tokenized_version, tokenizer_version

    with pytest.raises(ValidationError, match="min_tokens"):
        TokenizedSettings(min_tokens=-1)
    before = TokenizedSettings().model_dump(mode="json")
    del before["min_tokens"]
    assert TokenizedSettings().fingerprint() == digest(json_.dumps(before, sort_keys=True))
    base, ten = Settings(), Settings(tokenized=TokenizedSettings(min_tokens=10))
    assert tokenized_version(ten) != tokenized_version(base)
    assert tokenized_version(Settings(tokenized=TokenizedSettings(min_tokens=11))) != tokenized_version(ten)
    assert tokenizer_version(ten) == tokenizer_version(base)
    # the same settings and tokenizer hash; the stage's own version moved (documents keep their language), the
    # tokenizer's did not: it encodes as before
    assert tokenizer_version(base).split("-", 1)[1] == tokenized_version(base).split("-", 1)[1]
