"""What a storage service's refusal means to the user: a bucket that does not exist, credentials it does not
accept, a request it denies, or throttling. Each has its own :class:`~zarr_dask.errors.StoreError` subclass and
message naming the store, the key and the fix, on S3, GCS, Azure Blob and HTTP alike.

The point is to never read one of them as something else: a conditional create that fails because the bucket
is missing is not "another writer created it first" (the caller would then report an existing node and advise
``overwrite=True``, which deletes data), and a denied read is not "not found". :func:`classify` looks at the
exception and what it chains (s3fs wraps botocore's ``ClientError``, gcsfs raises ``HttpError``s with a status,
adlfs and azure-storage-blob carry an ``error_code``, obstore has its own exception classes, aiohttp a
``status``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from zarr_dask.errors import (
    BucketNotFoundError,
    StoreAccessDeniedError,
    StoreCredentialsError,
    StoreError,
    StoreThrottledError,
)

__all__ = ["Kind", "classify", "failure_error"]

Kind = Literal["bucket", "credentials", "denied", "throttled"]

#: service error codes (S3 ``<Code>``, Azure ``x-ms-error-code``) and what they mean
_CODES: dict[str, Kind] = {
    # S3 (and S3-compatible services)
    "NoSuchBucket": "bucket",
    "AccessDenied": "denied",
    "AllAccessDisabled": "denied",
    "AccountProblem": "denied",
    "InvalidAccessKeyId": "credentials",
    "SignatureDoesNotMatch": "credentials",
    "ExpiredToken": "credentials",
    "InvalidToken": "credentials",
    "TokenRefreshRequired": "credentials",
    "InvalidClientTokenId": "credentials",
    "SlowDown": "throttled",
    "Throttling": "throttled",
    "ThrottlingException": "throttled",
    "RequestLimitExceeded": "throttled",
    "TooManyRequests": "throttled",
    "RequestThrottled": "throttled",
    # Azure Blob
    "ContainerNotFound": "bucket",
    "AuthenticationFailed": "credentials",
    "InvalidAuthenticationInfo": "credentials",
    "AuthorizationFailure": "denied",
    "AuthorizationPermissionMismatch": "denied",
    "AuthorizationProtocolMismatch": "denied",
    "InsufficientAccountPermissions": "denied",
    "ServerBusy": "throttled",
}

#: exception classes (by name: their packages are optional) that mean missing or unusable credentials
_CREDENTIAL_CLASSES = frozenset({
    "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "UnauthorizedSSOTokenError",
    "DefaultCredentialsError", "RefreshError", "ClientAuthenticationError", "UnauthenticatedError",
})  # fmt: skip
_DENIED_CLASSES = frozenset({"PermissionDeniedError"})  # obstore

#: HTTP statuses that say it whatever the service
_STATUSES: dict[int, Kind] = {401: "credentials", 403: "denied", 429: "throttled"}

#: what a message says when a service answers a missing bucket with a bare 404 (gcsfs's HttpError)
_BUCKET_TEXT = ("bucket does not exist", "specified bucket does not exist", "container does not exist")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo and len(seen) < 8:
        err = todo.pop(0)
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        yield err
        todo += [err.__cause__, err.__context__]


def _code(err: BaseException) -> str | None:
    response = getattr(err, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        error = response.get("Error") or {}
        code = error.get("Code")
        if code:
            return str(code)
    code = getattr(err, "error_code", None)  # azure-storage-blob
    code = getattr(code, "value", code)
    return str(code) if code else None


def _status(err: BaseException) -> int | None:
    for name in ("status_code", "status", "code"):  # azure, aiohttp, gcsfs's HttpError
        value = getattr(err, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        if isinstance(status, int):
            return status
    return None


def classify(exc: BaseException) -> tuple[Kind, str] | None:
    """``(kind, what the service said)`` when ``exc`` (or an exception it chains) is a missing bucket or
    container, refused credentials, a denied request or throttling; None for anything else (a missing key, a
    failed condition, a network error).

    >>> classify(FileNotFoundError("no such key")) is None
    True
    >>> classify(PermissionError("Forbidden"))
    ('denied', 'PermissionError: Forbidden')
    """
    for err in _chain(exc):
        name = type(err).__name__
        code = _code(err)
        said = f"{code or name}: {err}".strip()
        if code in _CODES:
            if _CODES[code] == "denied" and "failed to authenticate" in str(err):  # Azurite's bad signature
                return "credentials", said
            return _CODES[code], said
        if name in _CREDENTIAL_CLASSES:
            return "credentials", said
        if name in _DENIED_CLASSES:
            return "denied", said
        status = _status(err)
        if status in _STATUSES:
            return _STATUSES[status], said
        if status == 503 and "slow down" in str(err).lower():
            return "throttled", said
        if status == 404 and any(text in str(err).lower() for text in _BUCKET_TEXT):
            return "bucket", said
    for err in _chain(exc):
        if isinstance(err, PermissionError) and not isinstance(err, StoreError):  # s3fs: 403 without a code
            return "denied", f"{type(err).__name__}: {err}"
    return None


def bucket_of(path: str) -> str:
    """The bucket (or container) of a store path ``"bucket/prefix/key"``."""
    return path.strip("/").split("/", 1)[0]


def failure_error(kind: Kind, said: str, *, action: str, key: str, store: str, bucket: str | None) -> StoreError:
    """The error for a classified failure of ``action`` on ``key``, naming the store and the fix."""
    noun = "container" if store.startswith(("az://", "abfs://", "abfss://", "adl://")) else "bucket"
    where = f"the {noun} {bucket!r}" if bucket else "the storage"
    said = said.strip().splitlines()[0] if said.strip() else said
    said = said if len(said) <= 200 else said[:200] + "..."
    if kind == "bucket":
        return BucketNotFoundError(
            f"cannot {action} key {key!r}: {where} does not exist (or these credentials cannot see it) [{said}]; "
            "create it first, or fix the URL or the storage_options (endpoint, region); nothing was written",
            store=store,
        )
    if kind == "credentials":
        return StoreCredentialsError(
            f"cannot {action} key {key!r}: {where} did not accept the credentials [{said}]; pass valid ones in "
            "storage_options (key/secret/token, a profile, a connection string) or the environment "
            "(AWS_ACCESS_KEY_ID..., GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_CONNECTION_STRING)",
            store=store,
        )
    if kind == "denied":
        return StoreAccessDeniedError(
            f"cannot {action} key {key!r}: access denied by {where} [{said}]; these credentials lack the "
            f"permission to {action} there: grant it (bucket policy, IAM role, SAS scope) or use another location",
            store=store,
        )
    return StoreThrottledError(
        f"cannot {action} key {key!r}: {where} throttled the requests and every retry [{said}]; lower "
        "zarr_dask's request budget (dask.config 'zarr_dask.max-requests' or ZARR_DASK_MAX_REQUESTS) or the "
        "number of workers, then run again (resume=True keeps what landed)",
        store=store,
    )
