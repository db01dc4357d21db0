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
from llm_assets_tests.conftest import shared

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


def test_ids_match_tiktoken_on_every_wikitext_line(gpt2_dir, reference, wikitext_lines):
    """Every line of the WikiText-2 validation split (3,760 lines) encodes to tiktoken's GPT-2 ids."""
    tok = load_tokenizer(str(gpt2_dir))
    assert len(wikitext_lines) == 3760
    encoded = tok.encode_batch(wikitext_lines, add_special_tokens=False)
    mismatched = [i for i, (line, e) in enumerate(zip(wikitext_lines, encoded))
                  if e.ids != reference.encode_ordinary(line)]
    assert mismatched == []
    assert sum(len(e.ids) for e in encoded) > 200_000


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
    for text, e in zip(texts, tok.encode_batch(texts, add_special_tokens=False)):
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
