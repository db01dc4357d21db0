"""Where the lake and the local state live, from the environment. Secrets come only from here.

    LLM_ASSETS_S3_ENDPOINT   S3 API endpoint (default: the embedded store of LLM_ASSETS_HOME, on the ports it
                             recorded in store/ports.json when it started: 8333 for S3 when that was free;
                             `aws` for AWS S3's own endpoints)
    LLM_ASSETS_BUCKET        bucket holding every zone (default: llm-assets)
    AWS_REGION               region (default: us-east-1)
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
                             credentials. For the embedded store only, when they are unset, the ones that
                             `llm-assets store start` generated are read from $LLM_ASSETS_HOME/store/credentials.env
    LLM_ASSETS_HOME          local state: embedded store data, Dagster instance (default: <repo>/.llm-assets); every
                             folder of it is the owner's only (`private_dir`)
    LLM_ASSETS_STORE_DATA    the embedded store's data folder, when it is not $LLM_ASSETS_HOME/store/data (lets a
                             server error on a full disk be reported as "object store full")
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

from llm_assets.core.config import PROJECT_ROOT
from llm_assets.core.lake import Credentials, StoreConfig, StoreSettings

EMBEDDED_ENDPOINT = "http://127.0.0.1:8333"


def home() -> Path:
    return Path(os.environ.get("LLM_ASSETS_HOME", PROJECT_ROOT / ".llm-assets"))


def private_dir(path: Path) -> Path:
    """`path` as a folder only its owner can enter (0700), with its missing parents: every folder of the state home
    is made here. One found open (a home made before it was private: the Dagster home was 0755 with world-readable run
    logs) is tightened with everything under it. Returns `path`.

    Also sets this process's umask to 077, so what it and its children (Dagster's webserver, daemon, code servers and
    run workers; the store; cluster workers) write later (run storage, compute logs, event logs) is private too."""
    os.umask(0o077)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    state = home().absolute()
    inside = path.absolute()
    for folder in [inside, *(p for p in inside.parents if p.is_relative_to(state))]:
        # traversable but not readable (0711) is private enough, and on purpose: the way to PostgreSQL's data when
        # `deploy up` runs it as the postgres user (llm_assets/platform/deploy.py)
        if stat.S_IMODE(folder.stat().st_mode) & 0o066:
            tighten(folder)
    return path


def tighten(root: Path) -> None:
    """Take every group/other permission off `root` and everything under it (symbolic links excepted)."""
    root.chmod(0o700)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
                if st.st_mode & 0o077 and not stat.S_ISLNK(st.st_mode):
                    os.chmod(os.path.join(dirpath, name), stat.S_IMODE(st.st_mode) & ~0o077)
            except FileNotFoundError:  # removed meanwhile
                pass


def credentials_file() -> Path:
    return home() / "store" / "credentials.env"


def ports_file() -> Path:
    """Where the embedded store records the ports it started on: every command of this home finds it there."""
    return home() / "store" / "ports.json"


def outage_clock(run_id: str) -> str:
    """The file where a run's processes record when the store started failing (`OutageClock`): one budget a run."""
    return str(private_dir(home() / "outages") / run_id)


def recorded_ports() -> dict[str, int] | None:
    try:
        return {k: int(v) for k, v in json.loads(ports_file().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return None


def endpoint() -> str | None:
    value = os.environ.get("LLM_ASSETS_S3_ENDPOINT")
    if value is None:  # the embedded store of this home
        ports = recorded_ports()
        return f"http://127.0.0.1:{ports['s3.port']}" if ports and "s3.port" in ports else EMBEDDED_ENDPOINT
    return None if value in ("", "aws") else value


def bucket() -> str:
    return os.environ.get("LLM_ASSETS_BUCKET", "llm-assets")


def region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def uses_embedded_store() -> bool:
    ep = endpoint()
    return ep is not None and ep.startswith(("http://127.0.0.1:", "http://localhost:"))


def ensure_credentials_file() -> Path:
    """The embedded store's credentials file, generated on first use (random, 0600, under the git-ignored home).

    Nothing is copied into this process's environment: every process that opens the lake (this one, pool workers,
    cluster workers started by `llm-assets cluster start` or elsewhere) reads the file its units name, so none works
    only because it happened to inherit the environment of the process that read it.
    """
    path = credentials_file()
    if not path.exists():
        private_dir(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another command of this home made it first
            return path
        with os.fdopen(fd, "w") as f:
            f.write(f"AWS_ACCESS_KEY_ID=llm{secrets.token_hex(8)}\n")
            f.write(f"AWS_SECRET_ACCESS_KEY={secrets.token_urlsafe(30)}\n")
    return path


def embedded_store_credentials() -> Credentials:
    """The credentials the embedded store starts with: the environment's when set, else its credentials file's."""
    return Credentials.from_env() or Credentials.from_file(ensure_credentials_file())


def embedded_data_dir() -> str | None:
    """The embedded store's data folder (where a full disk can be seen), or None for a remote store.
    LLM_ASSETS_STORE_DATA names it when the store is not the one under LLM_ASSETS_HOME."""
    if not uses_embedded_store():
        return None
    return os.environ.get("LLM_ASSETS_STORE_DATA") or str(home() / "store" / "data")


def embedded_credentials_file() -> str | None:
    """The embedded store's credentials file, when the environment names no credentials of its own."""
    if Credentials.from_env() is not None or not uses_embedded_store():
        return None
    if not credentials_file().exists():
        raise RuntimeError("no object-store credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                           "or run `llm-assets store start` for the embedded store")
    return str(credentials_file())


def store_config(store: StoreSettings) -> StoreConfig:
    """The lake's configuration: the store the environment names, with these settings' retries and retention. It
    names where credentials come from (the environment, the embedded store's file, or boto3's default chain for
    AWS), never the credentials themselves."""
    return StoreConfig(endpoint=endpoint(), bucket=bucket(), region=region(),
                       credentials_file=embedded_credentials_file(), retry=store.retry(),
                       retention_s=store.retention_hours * 3600, local_data_dir=embedded_data_dir(),
                       ports_file=embedded_ports_file())


def embedded_ports_file() -> str | None:
    """The file the embedded store records its ports in, which clients read again when it stops answering; None when
    the endpoint is pinned (LLM_ASSETS_S3_ENDPOINT) or remote."""
    if "LLM_ASSETS_S3_ENDPOINT" in os.environ or not uses_embedded_store():
        return None
    return str(ports_file())
