"""The object store as a Dagster resource: an S3 endpoint and bucket; the embedded store's secret is read from its file
by each process, any other store's from the environment."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
from pydantic import PrivateAttr

from llm_assets.core.lake import Credentials, Lake, RetryPolicy, StoreConfig, StoreSettings
from llm_assets.platform import environment

# A sensor tick gives up on a failing store after this long, well inside Dagster's 60 s sensor timeout.
SENSOR_RETRY_BUDGET_S = 30.0


# Not dagster-aws's S3Resource (whose field names these are): the lake makes its own boto3 client from them
# (core/lake.py), and importing dagster_aws imports Dagster's SQL storage, SQLAlchemy, Alembic and boto3: about 0.9
# CPU-s of a process that builds the code location without an instance (the code server, CLI commands, tests),
# and boto3 plus Dagster's test utilities in a run's worker, whose instance has the SQL storage loaded anyway.
class S3Endpoint(dg.ConfigurableResource):
    """Where the store's S3 API answers, and its keys (unset: the embedded store's file, else boto3's usual chain)."""

    endpoint_url: str | None = None
    region_name: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None


class ObjectStore(dg.ConfigurableResource):
    """The lake's bucket on any S3 API: the embedded SeaweedFS, MinIO or AWS S3."""

    s3: S3Endpoint
    bucket: str
    retry_budget_s: float = 300.0  # settings: store.retry_budget_s
    retry_base_s: float = 0.5
    retry_max_s: float = 20.0
    retention_hours: float = 24.0
    local_data_dir: str = ""  # the embedded store's data folder: a 500 with that disk full is reported as full
    # Where workers read the embedded store's credentials; empty: their environment (work units carry none).
    credentials_file: str = ""
    # Where the embedded store records its ports: a store restarted on another port is found there again.
    ports_file: str = ""
    _outage_clock: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # One retry budget for the whole run: every process of the run (and its units) shares this clock.
        if context.run_id:
            try:
                self._outage_clock = environment.outage_clock(context.run_id)
            except OSError:  # a read-only state home (an image): each process keeps its own clock
                self._outage_clock = None

    def config(self) -> StoreConfig:
        return StoreConfig(
            endpoint=self.s3.endpoint_url,
            bucket=self.bucket,
            region=self.s3.region_name or "us-east-1",
            credentials_file=self.credentials_file or None,
            retry=RetryPolicy(budget_s=self.retry_budget_s, base_s=self.retry_base_s, max_s=self.retry_max_s),
            retention_s=self.retention_hours * 3600,
            local_data_dir=self.local_data_dir or None,
            ports_file=self.ports_file or None,
            outage_clock=self._outage_clock,
        )

    def lake(self, retry_budget_s: float | None = None) -> Lake:
        """The lake client; `retry_budget_s` shortens how long it waits out a failing store (a sensor tick must
        give up well inside Dagster's 60 s sensor timeout, and simply tries again on the next tick)."""
        config = self.config()
        if retry_budget_s is not None:
            config = replace(config, retry=replace(config.retry, budget_s=retry_budget_s))
        key, secret = self.s3.aws_access_key_id, self.s3.aws_secret_access_key
        return Lake(config, Credentials(key, secret) if key and secret else None,
                    credentials_source="the store resource's aws_access_key_id and aws_secret_access_key")


def object_store_from_env(settings: StoreSettings) -> ObjectStore:
    """The store the environment names (the embedded one by default), with these settings' retries and retention."""
    credentials_file = environment.embedded_credentials_file() if environment.credentials_file().exists() else None
    # The embedded store's credentials stay in their file, which this process and every worker read for themselves;
    # otherwise they are the environment's, as Dagster EnvVars (never a value in the resource's config).
    keys = {} if credentials_file else {"aws_access_key_id": dg.EnvVar("AWS_ACCESS_KEY_ID"),
                                        "aws_secret_access_key": dg.EnvVar("AWS_SECRET_ACCESS_KEY")}
    return ObjectStore(
        s3=S3Endpoint(endpoint_url=environment.endpoint(), region_name=environment.region(), **keys),
        bucket=environment.bucket(),
        retry_budget_s=settings.retry_budget_s,
        retry_base_s=settings.retry_base_s,
        retry_max_s=settings.retry_max_s,
        retention_hours=settings.retention_hours,
        local_data_dir=environment.embedded_data_dir() or "",
        credentials_file=credentials_file or "",
        ports_file=environment.embedded_ports_file() or "",
    )
