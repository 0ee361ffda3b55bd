"""Record the botocore operations an s3fs-backed store sends (``GetObject``, ``HeadObject``...), for tests that
count them."""

from __future__ import annotations

from typing import Any

import pytest


def record_s3_calls(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list, filled as ``store``'s s3fs filesystem calls S3, of the operations' names."""
    calls: list[str] = []
    real = store.fs._call_s3

    async def spy(method: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(method)
        return await real(method, *args, **kwargs)

    monkeypatch.setattr(store.fs, "_call_s3", spy)
    return calls
