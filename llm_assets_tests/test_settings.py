"""Settings: validated, typed, with clear errors naming the file."""

import pickle

import pytest

from llm_assets.core.filters import DEFAULT_LANGUAGES
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.settings import DEFAULT_SETTINGS, Settings


def test_default_settings_file_is_valid():
    s = Settings.from_file(DEFAULT_SETTINGS)
    language = s.filtered.block("language")
    assert language.languages == DEFAULT_LANGUAGES and language.threshold is None  # each language's own
    assert s.filtered == type(s.filtered)()  # the file lists the published defaults, nothing else
    assert s.quality_classifier == type(s.quality_classifier)()
    assert s.dedup == type(s.dedup)() and s.release == type(s.release)()
    assert s.tokenized.train == type(s.tokenized.train)()
    assert s.shard_keys()[:2] == ["0000", "0001"] and len(s.shard_keys()) == s.shards


@pytest.mark.parametrize("text, fragment", [
    ("shards: 0\n", "shards"),
    ("filtered:\n  chain:\n    - block: language\n      threshold: 2\n", "threshold"),
    # typo: unknown keys are errors
    ("filtered:\n  chain:\n    - block: gopher_quality\n      min_word: 3\n", "min_word"),
    ("filtered:\n  chain:\n    - block: gopher_qualty\n", "gopher_qualty"),  # so are unknown blocks
    ("filtered:\n  gopher_quality:\n    min_doc_words: 3\n", "gopher_quality"),  # the chain is a list
    ("runner:\n  kind: threads\n", "runner.kind"),
])
def test_invalid_settings_name_the_file_and_the_key(tmp_path, text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        Settings.from_file(path)
    assert str(path) in str(e.value) and fragment in str(e.value)


def test_credentials_never_print_and_never_travel(tmp_path, monkeypatch):
    """A StoreConfig holds no secret (it travels inside work units); credentials are read by each process and
    refuse to be pickled, so no task argument or engine log can hold them."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    path = tmp_path / "credentials.env"
    path.write_text("AWS_ACCESS_KEY_ID=AK\nAWS_SECRET_ACCESS_KEY=very-secret-value\n")
    cfg = StoreConfig(endpoint="http://127.0.0.1:1", bucket="b", region="us-east-1", credentials_file=str(path))
    creds = cfg.credentials()
    assert creds.secret_key == "very-secret-value"
    assert "very-secret-value" not in repr(creds) + str(creds) + repr(cfg)
    assert b"very-secret-value" not in pickle.dumps(cfg) and b"very-secret-value" not in pickle.dumps(Lake(cfg))
    with pytest.raises(TypeError, match="do not travel"):
        pickle.dumps(creds)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "EK")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    assert cfg.credentials().access_key == "AK"  # the store's own file first
    assert StoreConfig(endpoint=None, bucket="b", region="us-east-1").credentials().secret_key == "env-secret"

def test_every_setting_has_a_description():
    """What `docs/settings.md` says of each key comes from its Field(description=...): none is left blank."""
    from llm_assets.settings_reference import every_field

    fields = every_field()
    # the flat runner class is left as it is: the per-kind runner classes replacing it come with descriptions
    blank = [key for key, field in fields if not (field.description or "").strip()]
    assert len(fields) > 200 and blank == []
