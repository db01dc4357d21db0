"""The lake client against a real store that goes away: a short outage is waited out, a long one fails with an
error naming the store, and a stream cut mid-read resumes where it stopped. Each test has its own SeaweedFS
server, since it stops it."""

from __future__ import annotations

import http.server
import logging
import os
import random
import secrets
import socket
import threading

import pytest

from llm_assets.core.errors import StoreUnavailable
from llm_assets.core.lake import Lake, RetryPolicy, StoreConfig
from llm_assets.core.units import PoolRunner, UnitFailed
from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore
from llm_assets_tests.cluster_units import ReadKey, read_key


def quiet_ports(n: int) -> list[int]:
    """Free ports below Linux's ephemeral range (32768-60999): while the store is down for a test, no other
    process's bind-to-any-port (another test server, an outgoing connection) takes them before the restart."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            if port not in ports and s.connect_ex(("127.0.0.1", port)) != 0:
                ports.append(port)
    return ports


# An outage, not a shutdown: after writing tens of MiB, weed takes more than 30 s to exit on SIGTERM; these
# tests kill it after 2 s (what they test is the client's side of a store that vanished).
OUTAGE_STOP_S = 2.0


@pytest.fixture
def own_store(tmp_path):
    store = EmbeddedStore(state_dir=tmp_path / "store", bucket="outage-test", access_key="k" + secrets.token_hex(6),
                          secret_key=secrets.token_urlsafe(24),
                          ports=dict(zip(DEFAULT_PORTS, quiet_ports(len(DEFAULT_PORTS)), strict=True)))
    store.start()
    yield store
    store.stop(timeout=OUTAGE_STOP_S)


def config_of(store: EmbeddedStore, budget_s: float, **kwargs) -> StoreConfig:
    return StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                       credentials_file=str(store.credentials_file),
                       retry=RetryPolicy(budget_s=budget_s, base_s=0.05, max_s=0.5), **kwargs)


def lake_on(store: EmbeddedStore, budget_s: float) -> Lake:
    return Lake(config_of(store, budget_s))


def test_an_outage_longer_than_the_budget_fails_naming_the_store(own_store):
    lake = lake_on(own_store, budget_s=1.0)
    lake.put_json("lake/x/_manifest.json", {"a": 1})
    own_store.stop(timeout=OUTAGE_STOP_S)
    for call in (lambda: lake.get_json("lake/x/_manifest.json"), lambda: lake.put_bytes("k", b"v"),
                 lambda: list(lake.list("lake/"))):
        with pytest.raises(StoreUnavailable, match=f"{own_store.endpoint}.*bucket {own_store.bucket}"):
            call()


class _Retries(logging.Handler):
    """Counts the lake client's retry warnings, so a test can act once a call is known to be waiting."""

    def __init__(self):
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying" in record.getMessage():
            self.seen.set()


def test_a_call_waits_out_an_outage_within_the_budget(own_store):
    lake = lake_on(own_store, budget_s=600.0)
    lake.put_json("lake/x/_manifest.json", {"rows": 30})
    own_store.stop(timeout=OUTAGE_STOP_S)
    retries = _Retries()
    logging.getLogger("llm_assets.core.lake").addHandler(retries)
    result: list = []
    try:
        reader = threading.Thread(target=lambda: result.append(lake.get_json("lake/x/_manifest.json")))
        reader.start()
        assert retries.seen.wait(120), "the call never retried"
        own_store.start()  # same state folder and ports: the object is still there
        reader.join(600)
    finally:
        logging.getLogger("llm_assets.core.lake").removeHandler(retries)
    assert result == [{"rows": 30}]


def test_a_stream_cut_mid_read_resumes_where_it_stopped(own_store):
    lake = lake_on(own_store, budget_s=600.0)
    data = os.urandom(24 << 20)
    lake.put_bytes("raw/C/big.bin", data)
    stream = lake.open("raw/C/big.bin")
    head = stream.read(1 << 20)
    own_store.stop(timeout=OUTAGE_STOP_S)
    own_store.start()
    rest = b"".join(iter(lambda: stream.read(1 << 20), b""))
    assert head + rest == data


def test_a_ranged_file_reads_the_same_version_or_says_it_changed(own_store):
    """Parquet parts are read by ranges pinned to the ETag: a replaced object is never read half old, half new."""
    from llm_assets.core.errors import SourceChanged

    lake = lake_on(own_store, budget_s=5.0)
    lake.put_bytes("lake/a/part.bin", b"a" * 100)
    f = lake.open_arrow("lake/a/part.bin")
    assert f.read(10) == b"a" * 10
    lake.put_bytes("lake/a/part.bin", b"b" * 100 + b"!" * (8 << 20))
    f.raw.seek(50)
    with pytest.raises(SourceChanged, match="lake/a/part.bin"):
        f.raw.read(10)


def test_retry_policy_backs_off_exponentially_with_jitter_up_to_its_cap():
    policy = RetryPolicy(budget_s=10, base_s=1.0, max_s=8.0)
    delays = policy.delays()
    caps = [1, 2, 4, 8, 8, 8]
    assert all(0 <= next(delays) <= cap for cap in caps)


class _ForeignS3(http.server.BaseHTTPRequestHandler):
    """Another S3 server on the port the store had: it does not know our key, as AWS or a second checkout's store
    would not (measured: `store start` moved S3 off 8333, and a running run retried the old port for good)."""

    def _refuse(self) -> None:
        body = b"" if self.command == "HEAD" else (
            b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidAccessKeyId</Code>"
            b"<Message>The access key ID you provided does not exist in our records.</Message></Error>")
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _refuse

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def foreign_s3():
    """Start a foreign S3 server on a port; stopped after the test."""
    servers = []

    def start(port: int) -> None:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _ForeignS3)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_live_client_follows_the_store_restarted_on_another_s3_port(own_store, foreign_s3, capfd):
    """The store stops; a foreign server takes its S3 port; `start` moves S3 elsewhere and says so. A lake client,
    an ObjectStore resource and pool workers all made for the old port find the new one in the ports file."""

    from resources import ObjectStore, S3Endpoint

    ports_file = own_store.state_dir / "ports.json"
    config = config_of(own_store, budget_s=600.0, ports_file=str(ports_file))
    lake = Lake(config)
    lake.put_bytes("raw/C/a.bin", b"before the move")
    resource = ObjectStore(s3=S3Endpoint(endpoint_url=own_store.endpoint, region_name="us-east-1"),
                           bucket=own_store.bucket, credentials_file=str(own_store.credentials_file),
                           ports_file=str(ports_file))
    old = own_store.ports["s3.port"]
    own_store.stop(timeout=OUTAGE_STOP_S)
    foreign_s3(old)
    capfd.readouterr()
    own_store.start()
    new = own_store.ports["s3.port"]
    assert new != old
    said = capfd.readouterr().err
    assert f"s3.port: {old} -> {new}" in said and str(ports_file) in said, said

    assert lake.get_bytes("raw/C/a.bin") == b"before the move"  # the client made before the move
    assert lake.config.endpoint == own_store.endpoint
    assert resource.lake().get_bytes("raw/C/a.bin") == b"before the move"
    # units carry the config of the old port to pool workers, which read the ports file for themselves
    results = PoolRunner(workers=2).run(read_key, [ReadKey(config, "raw/C/a.bin"), ReadKey(config, "raw/C/a.bin")])
    assert [r.counts["bytes"] for r in results] == [len(b"before the move")] * 2


def test_the_retry_budget_bounds_the_run_not_each_call(own_store, tmp_path):
    """Every call of a run shares one outage clock: once the store has been failing for the budget in the run, a
    new client, a new call, a pool worker fail with the budget's error instead of each waiting out a budget of its
    own (measured before: (units / workers) x the budget)."""
    clock = tmp_path / "outage"
    config = config_of(own_store, budget_s=2.0, outage_clock=str(clock))
    Lake(config).put_bytes("raw/C/k", b"v")
    own_store.stop(timeout=OUTAGE_STOP_S)

    with pytest.raises(StoreUnavailable, match="past its retry budget of 2 s \\(settings: store.retry_budget_s\\)"):
        Lake(config).get_bytes("raw/C/k")
    started = clock.read_text().split()[0]
    for call in (lambda: Lake(config).put_bytes("raw/C/other", b"w"), lambda: list(Lake(config).list("raw/"))):
        with pytest.raises(StoreUnavailable, match="past its retry budget of 2 s"):
            call()
    with pytest.raises(UnitFailed, match="past its retry budget of 2 s"):
        PoolRunner(workers=2).run(read_key, [ReadKey(config, "raw/C/k"), ReadKey(config, "raw/C/k")])
    assert clock.read_text().split()[0] == started  # one outage, one clock, whichever process failed

    own_store.start()
    assert Lake(config).get_bytes("raw/C/k") == b"v"
    assert not clock.exists()  # the store is back: the next outage gets the whole budget again
