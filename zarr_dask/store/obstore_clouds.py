"""GCS and Azure Blob reads through obstore: the ``storage_options`` of gcsfs and adlfs that map to obstore's
``GCSStore`` / ``AzureStore`` exactly, and why the others stay on fsspec (see :mod:`~zarr_dask.store.obstore_reads`).

* **GCS** (gcsfs): anonymous access (``token="anon"``) on gcsfs's endpoint (``endpoint_url``, default the
  public one) maps to unsigned requests there. obstore reads GCS's XML API and gcsfs writes through its JSON
  API: on a custom endpoint, until obstore has read a value there, a key it reports absent is asked of gcsfs,
  and if gcsfs sees it the bucket is read through fsspec from then on, with a warning naming the
  ``remote_transport`` knob (a node just written never reads as missing). gcsfs's other credentials (a token file or dict,
  ``google_default``, ``cloud``...) are google-auth objects whose refresh belongs to gcsfs; they, requester-pays,
  ``version_aware``, client certificates and session arguments stay on fsspec.
* **Azure Blob** (adlfs): ``connection_string`` (``AccountName``, ``AccountKey`` or ``SharedAccessSignature``,
  ``BlobEndpoint`` or ``DefaultEndpointsProtocol`` / ``EndpointSuffix``), ``account_name`` with
  ``account_key``, ``sas_token`` or ``anon=True``, and ``account_host``. Credential objects
  (``credential=``, ``DefaultAzureCredential``), service principals (``client_id``...) and a secondary
  ``location_mode`` stay on fsspec.

Examples
--------
>>> parse_connection_string("AccountName=a;AccountKey=k;BlobEndpoint=http://127.0.0.1:1/a")
{'AccountName': 'a', 'AccountKey': 'k', 'BlobEndpoint': 'http://127.0.0.1:1/a'}
"""

from __future__ import annotations

from typing import Any

from zarr_dask.store.obstore_reads import RETRY, ObstoreReads

__all__ = ["azure_reads", "gcs_reads", "parse_connection_string"]

_GCS_ENDPOINT = "https://storage.googleapis.com"


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key


def gcs_reads(fs: Any) -> ObstoreReads | str:
    """GCS: one ``GCSStore`` per bucket on gcsfs's endpoint, for anonymous access only (module notes)."""
    credentials = getattr(fs, "credentials", None)
    if getattr(credentials, "method", None) != "anon":
        return "credentials other than token='anon' (gcsfs refreshes its google-auth credentials itself)"
    if getattr(fs, "requester_pays", False) or getattr(fs, "version_aware", False):
        return "requester_pays or version_aware is set"
    if getattr(fs, "session_kwargs", None) or getattr(fs, "_use_client_cert", False):
        return "session arguments or a client certificate are set"
    endpoint = str(getattr(fs, "_location", "") or _GCS_ENDPOINT).rstrip("/")

    async def make(bucket: str) -> Any:
        from obstore.store import GCSStore

        config = {"base_url": endpoint, "skip_signature": True}
        options = {"allow_http": endpoint.startswith("http:")}
        return GCSStore(bucket, config=config, client_options=options, retry_config=RETRY), None  # type: ignore[arg-type]

    # A custom endpoint (an emulator, a proxy) may serve the XML API obstore reads differently from the JSON
    # API gcsfs writes through: until obstore has read a value there, a key it reports absent is asked of gcsfs.
    verify = None if endpoint == _GCS_ENDPOINT else _sees(fs)
    return ObstoreReads("gcs", make, _split, verify=verify, apis="obstore reads GCS's XML API, gcsfs its JSON API")


def _sees(fs: Any) -> Any:
    """``await sees(path)``: True if the filesystem ``fs`` holds an object (not a directory) at ``path``."""

    async def sees(path: str) -> bool:
        try:
            info = await fs._info(path)
        except FileNotFoundError:
            return False
        return bool(info.get("type") == "file")

    return sees


def parse_connection_string(text: str) -> dict[str, str]:
    """The ``Key=value`` pairs of an Azure Storage connection string (values may contain ``=``)."""
    pairs = (part.partition("=") for part in text.split(";") if part.strip())
    return {key.strip(): value.strip() for key, _, value in pairs}


def azure_reads(fs: Any) -> ObstoreReads | str:
    """Azure Blob: one ``AzureStore`` per container, with adlfs's account, key or SAS and endpoint (module notes)."""
    if getattr(fs, "credential", None) is not None or getattr(fs, "client_id", None):
        return "a credential object or a service principal is set (azure-identity refreshes it)"
    if getattr(fs, "location_mode", "primary") != "primary":
        return f"location_mode={fs.location_mode!r}"
    config = _azure_config(fs)
    if isinstance(config, str):
        return config
    endpoint = str(config.get("endpoint", ""))

    async def make(container: str) -> Any:
        from obstore.store import AzureStore

        options = {"allow_http": endpoint.startswith("http:")}
        return AzureStore(container, config=config, client_options=options, retry_config=RETRY), None  # type: ignore[arg-type]

    return ObstoreReads("azure", make, _split, suffix_ranges=False)  # Azure has no bytes=-n: fsspec sends those


def _azure_config(fs: Any) -> dict[str, Any] | str:
    """obstore's ``AzureConfig`` for adlfs's options, or why there is none."""
    text = getattr(fs, "connection_string", None)
    if text:
        parts = parse_connection_string(text)
        if parts.get("UseDevelopmentStorage", "").lower() == "true":
            return "UseDevelopmentStorage=true"
        account, key, sas = parts.get("AccountName"), parts.get("AccountKey"), parts.get("SharedAccessSignature")
        endpoint = parts.get("BlobEndpoint") or (account and "{}://{}.blob.{}".format(
            parts.get("DefaultEndpointsProtocol", "https"), account, parts.get("EndpointSuffix", "core.windows.net")))  # fmt: skip
    else:
        account, key, sas = fs.account_name, getattr(fs, "account_key", None), getattr(fs, "sas_token", None)
        host = getattr(fs, "account_host", None)
        endpoint = f"https://{host}" if host else None
    if not account:
        return "no account name"
    config: dict[str, Any] = {"account_name": account}
    if endpoint:
        config["endpoint"] = endpoint.rstrip("/")
    if key:
        config["account_key"] = key
    elif sas:
        config["sas_key"] = sas.lstrip("?")
    elif getattr(fs, "anon", None) is True:
        config["skip_signature"] = True
    else:
        return "no account key, SAS token or anon=True (adlfs would use DefaultAzureCredential)"
    return config
