"""The embedded object store: loopback only, credentials enforced, idempotent start, clean stop."""

import json
import subprocess
import time

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

    from llm_assets import cli
    from llm_assets.core.lake import Lake, StoreSettings
    from llm_assets.platform import environment
    from llm_assets.platform.embedded_store import DEFAULT_PORTS

    for name in ("LLM_ASSETS_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LLM_ASSETS_STORE_DATA"):
        monkeypatch.delenv(name, raising=False)
    squatter = socket.socket()
    # 8888, as a Jupyter server would. Held by something else, it may be a store of another test that is stopping
    # and would free it in the middle of this one: bound here once it is free, or left to a holder that keeps it.
    for _ in range(120):
        try:
            squatter.bind(("127.0.0.1", DEFAULT_PORTS["filer.port"]))
            squatter.listen()
            break
        except OSError:
            time.sleep(0.5)
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
            assert Lake(environment.store_config(StoreSettings())).get_bytes("raw/X/hello.txt") == str(home).encode()
            assert cli.main(["store", "status"]) == 0
    finally:
        squatter.close()
        for home in homes:
            monkeypatch.setenv("LLM_ASSETS_HOME", str(home))
            monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
            monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
            cli.main(["store", "stop"])


def test_stores_starting_at_the_same_moment_on_the_same_ports_all_come_up(tmp_path):
    """Four checkouts start their stores at once, each having chosen the same free ports (as every checkout picks
    the defaults): all but the first find a port taken between their choice and weed's bind, and start on fresh
    free ports instead of failing."""
    import secrets
    from concurrent.futures import ThreadPoolExecutor

    from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports

    same_ports = dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True))
    stores = [EmbeddedStore(state_dir=tmp_path / f"checkout-{i}", bucket="llm-assets",
                            access_key=f"k{i}{secrets.token_hex(4)}", secret_key=secrets.token_urlsafe(16),
                            ports=dict(same_ports)) for i in range(4)]
    for store in stores:
        store.state_dir.mkdir()
    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            errors = [f.exception() for f in [pool.submit(store.start) for store in stores]]
        assert errors == [None] * len(stores), errors
        assert all(store.ready() for store in stores)
        assert len({store.endpoint for store in stores}) == len(stores)
        for store in stores:  # each records the ports it runs on, where its home's commands find them
            assert json.loads((store.state_dir / "ports.json").read_text()) == store.ports
    finally:
        with ThreadPoolExecutor(len(stores)) as pool:  # every store is stopped, whatever one of them raises
            stopped = [f.exception() for f in [pool.submit(store.stop) for store in stores]]
    assert stopped == [None] * len(stores), stopped


def test_a_port_the_user_pinned_is_never_replaced(tmp_path):
    import secrets
    import socket

    from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports

    ports = dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True))
    store = EmbeddedStore(state_dir=tmp_path, bucket="llm-assets", access_key="k" + secrets.token_hex(4),
                          secret_key=secrets.token_urlsafe(16), ports=ports, pinned=("s3.port",))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports["s3.port"]))
        squatter.listen()
        with pytest.raises(RuntimeError, match=f"ports in use by another process \\(s3.port={ports['s3.port']}\\)"):
            store.start()
    assert store.pid() is None


@pytest.mark.parametrize("wrong", ["secret", "access key", "environment"])
def test_refused_credentials_fail_at_once_naming_the_endpoint_and_their_source(seaweed, tmp_path, monkeypatch,
                                                                              caplog, wrong):
    """InvalidAccessKeyId, SignatureDoesNotMatch, a bare 403 (HEAD): waiting will not change them, so no call retries
    them, even with a long retry budget; the error says which store refused which credentials (where they came
    from, never the secret)."""
    import secrets

    from llm_assets.core.errors import StoreAuthFailed
    from llm_assets.core.lake import Lake, RetryPolicy, StoreConfig

    secret = "not-the-secret-" + secrets.token_hex(8)
    key = "nobody" + secrets.token_hex(4) if wrong == "access key" else seaweed.access_key
    credentials = tmp_path / "credentials.env"
    credentials.write_text(f"AWS_ACCESS_KEY_ID={key}\nAWS_SECRET_ACCESS_KEY={secret}\n")
    if wrong == "environment":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    lake = Lake(StoreConfig(endpoint=seaweed.endpoint, bucket=seaweed.bucket, region="us-east-1",
                            credentials_file=None if wrong == "environment" else str(credentials),
                            retry=RetryPolicy(budget_s=3600.0)))
    local = tmp_path / "part.bin"
    local.write_bytes(b"x" * 100)
    source = "the environment's AWS_ACCESS_KEY_ID" if wrong == "environment" else str(credentials)
    caplog.set_level("WARNING", logger="llm_assets.core.lake")
    for call in (lambda: lake.get_json("lake/x/_manifest.json"), lambda: lake.put_bytes("raw/X/k", b"v"),
                 lambda: lake.exists("raw/X/k"), lambda: list(lake.list("raw/")),
                 lambda: lake.put_file("raw/X/part.bin", local)):
        with pytest.raises(StoreAuthFailed) as e:
            call()
        said = str(e.value)
        assert seaweed.endpoint in said and source in said and "not retried" in said, said
        assert secret not in said
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_a_killed_store_process_is_not_running_even_unreaped():
    """weed killed under the process that started it stays a zombie until reaped, and a zombie answers signal 0:
    the liveness the supervisor's wrapper polls must not call it alive. Our killed child is reaped; another
    process's zombie child is seen in its state."""
    import os
    import signal
    import sys
    import time

    from llm_assets.platform.embedded_store import running

    def ends(pid: int) -> bool:  # a signal is delivered in its own time: asked until it has been, or for 10 s
        for _ in range(200):
            if not running(pid):
                return True
            time.sleep(0.05)
        return False

    child = subprocess.Popen(["sleep", "600"])
    assert running(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    assert ends(child.pid)
    with pytest.raises(ProcessLookupError):  # reaped
        os.kill(child.pid, 0)
    # a zombie that is not ours: the child of a process that never reaps it
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, time; p = subprocess.Popen(['sleep', '600']); "
                               "print(p.pid, flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(parent.stdout.readline())
        assert running(grandchild)
        os.kill(grandchild, signal.SIGKILL)
        assert ends(grandchild)
        os.kill(grandchild, 0)  # unreaped: signal 0 still answers
    finally:
        parent.kill()
        parent.wait()
