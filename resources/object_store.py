"""The object store as a Dagster resource: dagster-aws's S3 resource, secrets from the environment."""

from __future__ import annotations

import dagster as dg
from dagster_aws.s3 import S3Resource

from llm_assets import environment
from llm_assets.core.lake import Lake, StoreConfig


class ObjectStore(dg.ConfigurableResource):
    """The lake's bucket on any S3 API: the embedded SeaweedFS, MinIO or AWS S3."""

    s3: S3Resource
    bucket: str

    def config(self) -> StoreConfig:
        return StoreConfig(
            endpoint=self.s3.endpoint_url,
            bucket=self.bucket,
            region=self.s3.region_name or "us-east-1",
            access_key=self.s3.aws_access_key_id or "",
            secret_key=self.s3.aws_secret_access_key or "",
        )

    def lake(self) -> Lake:
        return Lake(self.config())


def object_store_from_env() -> ObjectStore:
    environment.ensure_embedded_credentials()
    return ObjectStore(
        s3=S3Resource(
            endpoint_url=environment.endpoint(),
            region_name=environment.region(),
            aws_access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
        ),
        bucket=environment.bucket(),
    )
