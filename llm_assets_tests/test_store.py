"""The embedded object store: loopback only, credentials enforced, idempotent start, clean stop."""

import subprocess

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError


def _listening_addresses(pid: int) -> set[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if f"pid={pid}," in line}


def test_binds_loopback_only(seaweed):
    addresses = _listening_addresses(seaweed.pid())
    assert addresses, "weed listens on no port"
    assert addresses <= {"127.0.0.1"}, addresses


def test_wrong_secret_is_refused(seaweed):
    client = boto3.client("s3", endpoint_url=seaweed.endpoint, aws_access_key_id=seaweed.access_key,
                          aws_secret_access_key="not-the-secret", region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    with pytest.raises(ClientError) as e:
        client.list_objects_v2(Bucket=seaweed.bucket)
    assert e.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied")


def test_start_is_idempotent(seaweed):
    pid = seaweed.pid()
    seaweed.start()
    assert seaweed.pid() == pid
    assert seaweed.status()["running"]


def test_two_homes_run_side_by_side_while_another_process_holds_the_default_ports(monkeypatch, tmp_path, capsys):
    """Two checkouts (two LLM_ASSETS_HOME) each start their own store, on the default ports where free and free
    loopback ports where a Jupyter server (8888) or the other checkout holds them; every command of a home finds
    its store through the ports it recorded."""
    import json
    import socket

    from llm_assets import cli, environment
    from llm_assets.core.lake import Lake, StoreSettings
    from llm_assets.embedded_store import DEFAULT_PORTS

    for name in ("LLM_ASSETS_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LLM_ASSETS_STORE_DATA"):
        monkeypatch.delenv(name, raising=False)
    squatter = socket.socket()
    try:
        squatter.bind(("127.0.0.1", DEFAULT_PORTS["filer.port"]))  # 8888, as a Jupyter server would
        squatter.listen()
    except OSError:
        pass  # something holds it already: the same situation
    homes = [tmp_path / "a", tmp_path / "b"]
    try:
        endpoints = []
        for home in homes:
            monkeypatch.setenv("LLM_ASSETS_HOME", str(home))
            monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
            monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
            assert cli.main(["store", "start"]) == 0
            ports = json.loads((home / "store" / "ports.json").read_text())
            assert ports["filer.port"] != DEFAULT_PORTS["filer.port"]
            endpoints.append(environment.endpoint())
            assert endpoints[-1] == f"http://127.0.0.1:{ports['s3.port']}"
            lake = Lake(environment.store_config(StoreSettings()))
            lake.put_bytes("raw/X/hello.txt", str(home).encode())
        assert endpoints[0] != endpoints[1]
        for home in homes:  # each home reads its own store
            monkeypatch.setenv("LLM_ASSETS_HOME", str(home))
            monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
            monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
            environment.ensure_embedded_credentials()
            assert Lake(environment.store_config(StoreSettings())).get_bytes("raw/X/hello.txt") == str(home).encode()
            assert cli.main(["store", "status"]) == 0
    finally:
        squatter.close()
        for home in homes:
            monkeypatch.setenv("LLM_ASSETS_HOME", str(home))
            monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
            monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
            cli.main(["store", "stop"])
