"""Writes `fineweb2.json`: for every label of lid.176, the FineWeb-2 config of that language mapped to our blocks'
fields, with the constants FineWeb-2's pipeline passes to every language.

    python -m llm_assets.core.languages.generate [--fineweb2 PATH] [--revision HEAD] [--commit SHA]

PATH is a git directory of huggingface/fineweb-2 (read with `git show`, the default being the read-only mirror) or a
plain checkout (then give `--commit`). The label -> config mapping follows datatrove's tokenizer assignment (its
`tokenizer_assignment.csv`, from the installed datatrove): the language whose `code_1` is the label, else whose
`code_3` is, in its default script; `ALIASES` fix the labels lid.176 took from Wikipedia's codes."""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import importlib.resources
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # a dev-time tool: no stubs in the core's checks

from llm_assets.core.languages import TABLE

MIRROR = Path("/work/.mirror/huggingface+fineweb-2/repo")
REPOSITORY = "https://github.com/huggingface/fineweb-2"
PIPELINE = "fineweb-2-pipeline.py"
COMMAND = "python -m llm_assets.core.languages.generate"

# label -> (code_3, why): lid.176 names these by Wikipedia's language codes, not ISO 639's
ALIASES = {
    "als": ("gsw", "lid.176's `als` is Wikipedia's Alemannic (Swiss German); ISO 639-3 `als` is Tosk Albanian, "
                   "lid.176's `sq`"),
    "bh": ("bho", "Wikipedia's `bh` (Bihari) is written in Bhojpuri; datatrove's table has no `bh`"),
    "ku": ("kmr", "Wikipedia's `ku` is Kurmanji, in Latin script; Central Kurdish (Sorani) is lid.176's `ckb`"),
    "no": ("nob", "Norwegian Bokmål (Nynorsk is lid.176's `nn`); FineWeb-2 has no `nor` config"),
    "tl": ("fil", "Tagalog, which FineWeb-2 files as Filipino; it has no `tgl` config"),
}
NAMES = {"eml": "Emiliano-Romagnolo", "nah": "Nahuatl"}  # the assignment table leaves these blank
WITHOUT_CONFIG = {
    "en": "FineWeb-2 has no eng_Latn config: English keeps FineWeb's (v1) thresholds, the chain's own values",
    "sh": "Serbo-Croatian: FineWeb-2 has configs for Croatian, Bosnian and Serbian but none for the "
          "macrolanguage (hbs_Latn), and picking one would be a guess",
}

# what fineweb-2-pipeline.py passes to every language, in our blocks' fields. datatrove reads a 0 threshold as "rule
# off" (`if self.dup_para_frac and ...`), which our blocks spell null.
CONSTANTS: dict[str, dict[str, Any]] = {
    "gopher_repetition": {"dup_para_frac": None, "dup_line_char_frac": None, "dup_para_char_frac": None},
    "fineweb_quality": {"short_line_thr": 999, "char_duplicates_ratio": 0.1},
    "gopher_quality": {"min_stop_words": 2},
    "c4_quality": {"enabled": False},  # "we do not apply the C4 filters"
}
# our block field <- the config's key
FROM_CONFIG = {
    "language": {"threshold": "language_score"},
    "gopher_repetition": {"dup_line_frac": "dup_line_frac", "top_n_grams": "top_n_grams",
                          "dup_n_grams": "dup_n_grams"},
    "fineweb_quality": {"line_punct_thr": "line_punct_thr", "new_line_ratio": "new_line_ratio"},
    "gopher_quality": {"min_avg_word_length": "min_avg_word_length", "max_avg_word_length": "max_avg_word_length",
                       "stop_words": "stopwords", "min_alpha_words_ratio": "max_non_alpha_words_ratio"},
}


class Source:
    """A fineweb-2 checkout: a git directory (read at a revision) or a plain directory."""

    def __init__(self, path: Path, revision: str, commit: str | None):
        self.path, self.revision = path, revision
        self.git = not (path / "configs").is_dir()
        if self.git:
            commit = commit or self._git("rev-parse", revision).strip()
        if not commit:
            raise SystemExit("--commit: the fineweb-2 commit the plain directory holds")
        self.commit = commit

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True,
                              text=True).stdout

    def configs(self) -> set[str]:
        if self.git:
            names = self._git("ls-tree", "--name-only", self.revision, "configs/").split()
        else:
            names = [f"configs/{p.name}" for p in (self.path / "configs").iterdir()]
        return {Path(n).stem for n in names if n.endswith(".yml")}

    def config(self, name: str) -> dict[str, Any]:
        if self.git:
            text = self._git("show", f"{self.revision}:configs/{name}.yml")
        else:
            text = (self.path / "configs" / f"{name}.yml").read_text()
        return yaml.safe_load(text)


def assignment() -> list[dict[str, str]]:
    path = importlib.resources.files("datatrove") / "assets" / "tokenizer_assignment.csv"
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _row_for(label: str, rows: list[dict[str, str]]) -> dict[str, str]:
    code_3 = ALIASES[label][0] if label in ALIASES else None
    candidates = (
        [r for r in rows if r["code_3"] == code_3 and r["default_script"] == "TRUE"] if code_3 else
        [r for r in rows if r["code_1"] == label and r["default_code_1"] == "TRUE" and r["default_script"] == "TRUE"]
        or [r for r in rows if r["code_3"] == label and r["default_script"] == "TRUE"]
    )
    if len(candidates) != 1:
        raise SystemExit(f"{label}: {len(candidates)} rows of the tokenizer assignment match")
    return candidates[0]


def word_tokenizer(row: dict[str, str]) -> str:
    """datatrove's word tokenizer of a language, as `segment` names it: "spacy:<spaCy language>" (a blank spaCy
    pipeline's tokenizer), "indicnlp:<language>", "stanza:<language>", "kiwi", "thai", "khmer", "lao", "tibetan",
    "burmese", or "whitespace" (spaCy's multi-language tokenizer)."""
    kind = row["type"].removesuffix("Tokenizer").lower()
    return f"{kind}:{row['tok_code']}" if row["tok_code"] else kind


def overrides(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for block, fields in FROM_CONFIG.items():
        out[block] = {field: config[key] for field, key in fields.items()}
    for block, fields in CONSTANTS.items():
        out[block] = {**out.get(block, {}), **fields}
    return out


def table(source: Source, labels: list[str]) -> dict[str, Any]:
    rows, configs = assignment(), source.configs()
    languages = {}
    for label in sorted(labels):
        row = _row_for(label, rows)
        config = f"{row['code_3']}_{row['script']}"
        has = config in configs and label not in WITHOUT_CONFIG
        if not has and label not in WITHOUT_CONFIG:
            raise SystemExit(f"{label}: no FineWeb-2 config {config}; say why in WITHOUT_CONFIG")
        languages[label] = {"name": row["name"] or NAMES[label], "fineweb2": config if has else None,
                            "script": row["script"], "word_tokenizer": word_tokenizer(row),
                            "overrides": overrides(source.config(config)) if has else {}}
    return {
        "source": {
            "repository": REPOSITORY, "commit": source.commit, "license": "Apache-2.0",
            "configs": "configs/<code_3>_<Script>.yml", "constants": PIPELINE,
            "tokenizer_assignment": f"datatrove {importlib.metadata.version('datatrove')} "
                                    "datatrove/assets/tokenizer_assignment.csv",
        },
        "generator": COMMAND,
        "mapping": {
            "from_config": {f"{b}.{f}": k for b, fields in FROM_CONFIG.items() for f, k in fields.items()},
            "constants": {f"{b}.{f}": v for b, fields in CONSTANTS.items() for f, v in fields.items()},
            "null": "0 in the pipeline: datatrove skips a rule whose threshold is 0",
        },
        "without_config": WITHOUT_CONFIG,
        "aliases": {label: f"{code_3}: {why}" for label, (code_3, why) in ALIASES.items()},
        "languages": languages,
    }


def dumps(data: dict[str, Any]) -> str:
    """Indented JSON with one language per line: a table change reads as a diff of the languages it touched."""
    head = {k: v for k, v in data.items() if k != "languages"}
    lines = json.dumps(head, indent=2, ensure_ascii=False)[:-2].splitlines()
    rows = [f"    {json.dumps(code, ensure_ascii=False)}: {json.dumps(row, ensure_ascii=False)}"
            for code, row in data["languages"].items()]
    return "\n".join([*lines[:-1], lines[-1] + ",", '  "languages": {', ",\n".join(rows), "  }", "}"]) + "\n"


def main(argv: list[str] | None = None) -> None:
    from llm_assets.core.filters.language import language_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fineweb2", type=Path, default=MIRROR, help="a git directory or a plain checkout")
    parser.add_argument("--revision", default="HEAD", help="of the git directory")
    parser.add_argument("--commit", help="the commit a plain checkout holds")
    parser.add_argument("--output", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    labels = [label.removeprefix("__label__") for label in language_model().get_labels()]
    data = table(Source(args.fineweb2, args.revision, args.commit), labels)
    args.output.write_text(dumps(data), encoding="utf-8")
    print(f"{args.output}: {len(data['languages'])} languages, "
          f"{sum(1 for r in data['languages'].values() if r['fineweb2'])} with a FineWeb-2 config")


if __name__ == "__main__":
    main()
