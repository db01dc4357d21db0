"""Two kinds of failure, never confused: the input's fault, and the infrastructure's.

An error caused by the input (a corrupt record, an unreadable file) is quarantined and counted; the other records
and files go on. An error of the infrastructure (the object store unreachable, throttled, timed out or full; the
local disk full) says nothing about the input: it is retried with backoff by the lake client and, if it persists,
fails the partition without a commit. Code that catches broad exceptions to quarantine bad input re-raises
`InfrastructureError` first.
"""

from __future__ import annotations

import errno
import re

import botocore.exceptions as bce
import urllib3.exceptions as u3e


class InfrastructureError(Exception):
    """The platform, not the input, failed: nothing about the input may be concluded from it."""


class StoreUnavailable(InfrastructureError):
    """The object store could not be reached (or kept failing) for longer than the retry budget."""


class StoreAuthFailed(InfrastructureError):
    """The object store refused the credentials (unknown key, wrong secret, access denied): waiting will not
    change that, so it is never retried."""


class StoreFull(InfrastructureError):
    """The object store has no space left for a write."""


class LocalDiskFull(InfrastructureError):
    """This machine's temporary space is full."""


class ClusterUnavailable(InfrastructureError):
    """The cluster engine's scheduler could not be reached, or was lost during a run."""


class SourceChanged(InfrastructureError):
    """An object was replaced while it was being read: the run saw two versions of it, so it must not commit."""


# Error codes S3 servers use for throttling and server-side trouble (AWS, MinIO, SeaweedFS, Ceph).
TRANSIENT_CODES = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequests", "RequestLimitExceeded",
    "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable", "ServerBusy",
    "XMinioServerNotInitialized", "500", "502", "503", "504",
}
# How servers say they are out of space: MinIO's XMinioStorageFull (507), SeaweedFS's volume errors, and the OS.
_FULL = re.compile(r"storage ?full|no (?:free|writable) volumes?|no space left|insufficient ?storage|disk (?:is )?full|"
                   r"volume.{0,40}(?:full|size limit)|not enough space|quota exceeded", re.IGNORECASE)

# How S3 servers refuse credentials. A HEAD request has no body, so only its status says so (SeaweedFS: "403").
AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken",
              "AuthorizationHeaderMalformed", "403", "Forbidden"}

_CONNECTION = (bce.ConnectionError, bce.HTTPClientError, bce.ResponseStreamingError, bce.IncompleteReadError,
               u3e.ProtocolError, u3e.TimeoutError, u3e.NewConnectionError, ConnectionError, TimeoutError)


def is_store_full(exc: BaseException) -> bool:
    if isinstance(exc, StoreFull):
        return True
    if isinstance(exc, bce.ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status == 507 or bool(_FULL.search(f"{err.get('Code', '')} {err.get('Message', '')}"))
    return bool(_FULL.search(str(exc))) and isinstance(exc, (bce.BotoCoreError, OSError))


def auth_failure(exc: BaseException | None) -> str | None:
    """The S3 error code when the store refused the credentials (also wrapped, as boto3's transfer manager does)."""
    while exc is not None:
        if isinstance(exc, StoreAuthFailed):
            return "refused"
        if isinstance(exc, bce.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return (code or "403") if code in AUTH_CODES or status == 403 else None
        exc = exc.__cause__ or exc.__context__
    return None


def is_transient(exc: BaseException) -> bool:
    """An error that may go away by itself: connection failures, timeouts, throttling, 5xx. Never a refusal of the
    credentials, whatever wraps it."""
    if auth_failure(exc):
        return False
    if isinstance(exc, InfrastructureError):
        return isinstance(exc, StoreUnavailable)
    if isinstance(exc, bce.ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return (err.get("Code") in TRANSIENT_CODES or status in (429, 500, 502, 503, 504)) and not is_store_full(exc)
    if isinstance(exc, _CONNECTION):
        return True
    cause = exc.__cause__ or exc.__context__
    # boto3's transfer manager wraps the failure of a multipart upload in S3UploadFailedError
    return type(exc).__name__ in ("S3UploadFailedError", "RetriesExceededError") and (
        cause is None or is_transient(cause) or "reached max retries" in str(exc) or "Could not connect" in str(exc))


def is_infrastructure(exc: BaseException) -> bool:
    """True for every error that is not the input's fault (store or local disk), retried or not."""
    if isinstance(exc, InfrastructureError):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return is_transient(exc) or is_store_full(exc)


def is_store_error(exc: BaseException) -> bool:
    """An error from the store or the machine, rather than from the bytes read: an infrastructure error, or the
    store's own answer (a key that is gone, access denied). Never quarantined as bad input."""
    return is_infrastructure(exc) or isinstance(exc, (bce.ClientError, bce.BotoCoreError))
