"""The emulator fixtures themselves: a renewed Azurite is a new server, and the old one is gone."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests import emulators


def _endpoint(connection_string: str) -> str:
    return connection_string.split("BlobEndpoint=", 1)[1].rstrip(";")


@pytest.mark.azure
def test_azurite_is_renewed_once_old_and_the_old_one_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    if not emulators.AZURITE.exists():
        pytest.skip("Azurite is not installed (make node_modules/.installed: npm ci)")
    renewed = emulators.RenewedAzurite()
    try:
        first = renewed.connection_string()
        assert renewed.connection_string() == first  # young: the same server
        monkeypatch.setattr(emulators, "AZURITE_MAX_AGE", 0.0)
        second = renewed.connection_string()
        assert second != first
        with pytest.raises(urllib.error.URLError) as gone:  # the old server no longer listens
            urllib.request.urlopen(_endpoint(first) + "?comp=list", timeout=5)
        assert not isinstance(gone.value, urllib.error.HTTPError), "the old Azurite still answers"
        with pytest.raises(urllib.error.HTTPError):  # the new one answers (403: the request is not signed)
            urllib.request.urlopen(_endpoint(second) + "?comp=list", timeout=5)
    finally:
        renewed.close()
