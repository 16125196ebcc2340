"""safetensors files as the golden scripts write and read them (shared by families/, vision/ and hf/).

save_file follows safetensors' save_file (safetensors/src/tensor.rs @ 24b0b2857fef49be734b9ab72ce97c09bb25f5b9,
prepare + Metadata serialize) for tensors of one dtype: tensors sorted by name, the header
{"__metadata__": ..., name: {"dtype", "shape", "data_offsets"}, ...} as compact JSON in that order, padded
with spaces to a multiple of 8 bytes, little-endian data. The scripts import it with their parent folder
on sys.path (they run as files, not as a package).
"""

import json
import struct

import torch

DTYPE_NAMES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}


def save_file(tensors, path, metadata=None):
    """Writes tensors (name -> tensor, one dtype of DTYPE_NAMES) with metadata (default {"format": "pt"},
    as transformers' save_pretrained writes it)."""
    names = sorted(tensors)
    assert len({tensors[n].dtype for n in names}) == 1
    header = {"__metadata__": {"format": "pt"} if metadata is None else metadata}
    blobs, offset = [], 0
    for n in names:
        t = tensors[n].detach().contiguous()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the same 16 bits as integers
            b = t.view(torch.int16).numpy().astype("<i2").tobytes()
        elif t.dtype == torch.float16:
            b = t.numpy().astype("<f2").tobytes()
        else:
            b = t.numpy().astype("<f4").tobytes()
        header[n] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Reads a float32 safetensors file: name -> float32 tensor (a copy, writable)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", v
        a, b = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(v["shape"]).clone()
    return out


def fmt(x):
    """x as the goldens write floats: float32's nine significant digits."""
    return float("%.9g" % float(x))
