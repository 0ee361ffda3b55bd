"""zarr-python codec plugins our registry does not know are used through zarr-python (issue 24): a codec
registered with zarr-python's registry, as an installed plugin's entry point registers one, reads and writes
both ways; an unknown one fails naming what to install."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import UnknownCodecError

zarr = pytest.importorskip("zarr")
from zarr.abc.codec import ArrayArrayCodec, BytesBytesCodec  # noqa: E402
from zarr.registry import register_codec  # noqa: E402


@dataclass(frozen=True)
class Xor(BytesBytesCodec):
    """Every byte XOR a key: a bytes-to-bytes plugin."""

    is_fixed_size = True
    key: int = 0x5A

    @classmethod
    def from_dict(cls, data):
        return cls(key=int(data.get("configuration", {}).get("key", 0x5A)))

    def to_dict(self):
        return {"name": "test.xor", "configuration": {"key": self.key}}

    async def _decode_single(self, chunk_bytes, chunk_spec):
        raw = np.frombuffer(chunk_bytes.to_bytes(), "u1") ^ self.key
        return chunk_spec.prototype.buffer.from_bytes(raw.tobytes())

    async def _encode_single(self, chunk_bytes, chunk_spec):
        return await self._decode_single(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length, _chunk_spec):
        return input_byte_length


@dataclass(frozen=True)
class Negate(ArrayArrayCodec):
    """``-x``: an array-to-array plugin."""

    is_fixed_size = True

    @classmethod
    def from_dict(cls, data):
        return cls()

    def to_dict(self):
        return {"name": "test.negate"}

    def resolve_metadata(self, chunk_spec):
        return chunk_spec

    async def _decode_single(self, chunk_array, chunk_spec):
        return chunk_spec.prototype.nd_buffer.from_numpy_array(-chunk_array.as_numpy_array())

    async def _encode_single(self, chunk_array, chunk_spec):
        return await self._decode_single(chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length, _chunk_spec):
        return input_byte_length


register_codec("test.xor", Xor)
register_codec("test.negate", Negate)


def test_plugins_read_what_zarr_python_wrote_and_write_what_it_reads(tmp_path):
    data = np.arange(60, dtype="i4").reshape(6, 10)
    theirs = zarr.create_array(
        str(tmp_path / "theirs.zarr"), shape=data.shape, dtype="i4", chunks=(4, 4), filters=[Negate()],
        compressors=[Xor(key=7)], fill_value=0,
    )  # fmt: skip
    theirs[...] = data
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path / "theirs.zarr"))[...], data)
    ours = zarr_dask.create_array(
        str(tmp_path / "ours.zarr"), shape=data.shape, dtype="i4", chunks=(4, 4),
        filters=[{"name": "test.negate"}], compressors=[{"name": "test.xor", "configuration": {"key": 9}}],
    )  # fmt: skip
    ours[...] = data
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "ours.zarr"), mode="r")[...], data)
    with open(tmp_path / "ours.zarr" / "c" / "0" / "0", "rb") as f:  # really XORed and negated
        assert np.frombuffer(bytes(b ^ 9 for b in f.read()), "<i4")[1] == -1


def test_a_missing_plugin_names_what_to_install():
    with pytest.raises(UnknownCodecError, match=r"'no.such.codec'.*zarr-python"):
        zarr_dask.codecs.registry.codec_from_v3({"name": "no.such.codec"})
