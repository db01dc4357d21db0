"""The CLI as a user meets it: every argument explained in --help, and `drop` putting files where the sensor finds
them (a real WARC, through the real command, on the test store), refusing a bad crawl or name before uploading."""

from __future__ import annotations

import argparse

from llm_assets import cli
from llm_assets.core.inventory import partition_files, shard_of
from llm_assets.settings import load_settings
from llm_assets_support.shared_data import shared


def _actions(parser: argparse.ArgumentParser, path: str = "llm-assets"):
    for action in parser._actions:  # argparse has no public walk of its tree
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_argument_has_help():
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _actions(cli.build_parser())
               if not a.help]
    assert missing == []


def test_drop_streams_files_where_the_sensor_finds_them(store_env, lake, crawl, capsys):
    warc = shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz")
    shards = load_settings().shards
    assert cli.main(["drop", str(warc), "--crawl", crawl]) == 0
    assert cli.main(["drop", str(warc), "--crawl", crawl, "--as", "2024/é copy.warc.gz"]) == 0
    out = capsys.readouterr().out
    assert f"raw/{crawl}/{warc.name}" in out and "dropped into crawl" in out
    for key in (f"raw/{crawl}/{warc.name}", f"raw/{crawl}/2024/é copy.warc.gz"):
        listed = {f.key: f.size for f in partition_files(lake, crawl, shard_of(key, shards), shards)}
        assert listed[key] == warc.stat().st_size  # the inventory the sensor reads lists it, whole

    before = {o.key for o in lake.list("raw/")}
    assert cli.main(["drop", str(warc), "--crawl", "../etc"]) == 1
    assert "invalid crawl name" in capsys.readouterr().err
    assert cli.main(["drop", str(warc), str(warc), "--crawl", crawl + "-b", "--as", "x.warc.gz"]) == 1
    assert "--as names one file" in capsys.readouterr().err
    assert cli.main(["drop", str(warc), "--crawl", crawl + "-c", "--as", "bad\u202ename.warc.gz"]) == 1
    assert "bidi" in capsys.readouterr().err
    assert cli.main(["drop", str(warc), "/nonexistent/file.warc.gz", "--crawl", crawl + "-d"]) == 1
    assert "/nonexistent/file.warc.gz: no such file" in capsys.readouterr().err
    assert {o.key for o in lake.list("raw/")} == before  # nothing uploaded by a refused command


def test_settings_flag_overrides_the_environment_for_every_command(store_env, lake, crawl, tmp_path, capsys,
                                                                   monkeypatch):
    """`--settings PATH` on any command: the file it names is read instead of LLM_ASSETS_SETTINGS' (here a broken
    file, so that a command reading the environment's fails), and handed on through that variable."""
    import json
    import os

    broken = tmp_path / "broken.yaml"
    broken.write_text("shards: 0\n")
    monkeypatch.setenv("LLM_ASSETS_SETTINGS", str(broken))  # restored after the test, whatever main() sets
    flagged = tmp_path / "one-shard.yaml"
    flagged.write_text("shards: 1\nevals:\n  prefix: evals/flagged/\n")
    warc = shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz")

    assert cli.main(["status", "--json"]) == 1
    assert f"invalid settings in {broken}" in capsys.readouterr().err
    assert cli.main(["drop", str(warc), "--crawl", crawl, "--settings", str(flagged)]) == 0
    assert f"raw/{crawl}/{warc.name}" in capsys.readouterr().out

    assert cli.main(["settings", "--settings", str(flagged)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {flagged}\n") and "\nshards: 1\n" in out and "prefix: evals/flagged/" in out
    assert os.environ["LLM_ASSETS_SETTINGS"] == str(flagged)  # what the processes a command starts read

    assert cli.main(["status", "--json", "--settings", str(flagged)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["unused_eval_keys"]["prefix"] == "evals/flagged/"
    assert crawl in status["crawls"] and status["assets"]["documents"]["total"] == len(status["crawls"])  # 1 shard

    assert cli.main(["stale", "--json", "--settings", str(flagged)]) == 0
    planned = [p["partition"] for p in json.loads(capsys.readouterr().out)["partitions"]
               if (p["partition"] or "").startswith(f"{crawl}|")]
    assert planned and set(planned) == {f"{crawl}|0000"}

    assert cli.main(["settings", "--settings", str(tmp_path / "absent.yaml")]) == 1
    assert f"cannot read settings file {tmp_path / 'absent.yaml'}" in capsys.readouterr().err


def test_an_unknown_crawl_is_an_error_naming_it_in_every_command_that_reads_one(store_env, lake, crawl, tmp_path,
                                                                                 capsys):
    """A misspelt `--crawl` used to give empty tables and exit 0 (`preview`), or say nothing found (`trace`): every
    command that reads a crawl names it as unknown, and suggests the near one."""
    assert cli.main(["drop", str(shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz")), "--crawl", crawl]) == 0
    capsys.readouterr()
    settings = tmp_path / "new.yaml"
    settings.write_text("filtered:\n  overrides: {}\n")
    typo = crawl[:-1] + ("x" if crawl[-1] != "x" else "y")
    for command in (["preview", str(settings)], ["trace", "https://example.com/"], ["why", "https://example.com/"],
                    ["show", "documents"], ["show", "rejected", "--stage", "filtered"], ["export", "documents"],
                    ["record", "0" * 32]):
        assert cli.main([*command, "--crawl", typo]) == 1, command
        err = capsys.readouterr().err
        assert f"unknown crawl {typo!r}" in err and f"did you mean {crawl}" in err, (command, err)
