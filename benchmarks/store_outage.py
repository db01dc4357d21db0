"""How long a run takes to fail when its object store is gone.

    .venv/bin/python -m benchmarks.store_outage [--units 8] [--nodes 3] [--budget 20] [--moved]

A partition's units (each reads one object, as a stage's units read their parts) on the local Dask cluster
(`llm_assets.platform.local_cluster`, `--nodes` - 1 workers of one thread, the runner's default `max_retries`),
against a private SeaweedFS stopped before the run starts, with a retry budget of `--budget` seconds. With
`--moved`, the store is not gone but moved: another server (answering 403 InvalidAccessKeyId, as any S3 server that
does not know the key) took its S3 port, and the store started again on another one. The time is from the runner's
start to the run's end. Run it with PYTHONPATH naming an older checkout to measure that one: the
script only uses what both know (a StoreConfig without an outage clock there).

The table of benchmarks/results/store-outage.md is assembled from several runs by hand; a stopped store's time to
fail, with this checkout's code, replaces its row of BENCHMARKS.md's summary table.
"""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from llm_assets.core.lake import Lake, RetryPolicy, StoreConfig
from llm_assets.core.units import UnitResult, timed_unit


@dataclass(frozen=True)
class Read:
    config: StoreConfig
    key: str

    @property
    def source(self) -> str:
        return self.key


@timed_unit
def read(unit: Read) -> UnitResult:
    data = Lake(unit.config).get_bytes(unit.key)
    return UnitResult(unit=unit.key, source=unit.key, rows_in=1, rows_out=1, bytes_in=len(data))


class ForeignS3(BaseHTTPRequestHandler):
    """Another S3 server, which does not know our key."""

    def refuse(self) -> None:
        body = b"" if self.command == "HEAD" else b"<Error><Code>InvalidAccessKeyId</Code><Message>no</Message></Error>"
        self.send_response(403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = refuse

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--moved", action="store_true", help="the store moved to another port instead of stopping")
    parser.add_argument("--no-write", action="store_true", help="print only (a stopped store's time to fail goes to "
                                                                 "its row of BENCHMARKS.md's summary table)")
    args = parser.parse_args()

    from llm_assets.core.dask_runner import DaskRunner
    from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports
    from llm_assets.platform.local_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="store-outage-") as tmp:
        store = EmbeddedStore(state_dir=Path(tmp) / "store", bucket="outage", access_key="k" + secrets.token_hex(6),
                              secret_key=secrets.token_urlsafe(24),
                              ports=dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True)))
        store.start()
        cluster = LocalCluster(Path(tmp) / "cluster")
        try:
            fields = {f.name for f in dataclasses.fields(StoreConfig)}
            clock = {"outage_clock": str(Path(tmp) / "outage"),
                     "ports_file": str(store.state_dir / "ports.json")} if "outage_clock" in fields else {}
            config = StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                                 credentials_file=str(store.credentials_file),
                                 retry=RetryPolicy(budget_s=args.budget), **clock)
            keys = [f"raw/C/{i}.bin" for i in range(args.units)]
            for key in keys:
                Lake(config).put_bytes(key, b"x")
            state = cluster.start(nodes=args.nodes)
            runner = DaskRunner(state.address, security=cluster.security())
            store.stop()
            if args.moved:
                foreign = ThreadingHTTPServer(("127.0.0.1", store.ports["s3.port"]), ForeignS3)
                threading.Thread(target=foreign.serve_forever, daemon=True).start()
                store.start()
            start = time.monotonic()
            try:
                runner.run(read, [Read(config, key) for key in keys])
                outcome = "succeeded"
            except Exception as e:  # noqa: BLE001 - what the run's error says is the result
                outcome = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            seconds = time.monotonic() - start
        finally:
            cluster.stop()
            store.stop()
    print(f"{args.units} units, {args.nodes - 1} workers, budget {args.budget:.0f} s, "
          f"{'run-wide clock' if clock else 'budget per call'}, store {'moved' if args.moved else 'stopped'}: "
          f"ended after {seconds:.1f} s ({outcome})")
    if clock and not args.moved and not args.no_write:  # this checkout's code: its row of the summary table
        from benchmarks.summary import ROOT, Row, update_rows

        update_rows(ROOT / "BENCHMARKS.md", [Row(
            "store-outage:fail", f"store outage: time for a run to fail, {args.budget:g} s retry budget, "
            f"{args.units} units on {args.nodes - 1} workers", f"{seconds:.1f} s ({outcome.split(':')[0]})",
            " ".join([".venv/bin/python -m benchmarks.store_outage", *sys.argv[1:]]), "store-outage.md")])
    sys.exit(0)


if __name__ == "__main__":
    main()
