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
