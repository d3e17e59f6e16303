"""Minimal safetensors reader/writer (the `safetensors` package is not installed here).

File layout: u64 little-endian header length N, then N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional "__metadata__": {str: str}}),
then the data buffer. Offsets are relative to the start of the data buffer. The format forbids holes
in the buffer, so alignment comes from ordering: tensors are written widest dtype first (then by
name), and the JSON header is padded with spaces to a multiple of 8 bytes, which keeps every tensor
aligned to its element size.
"""

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype string -> (torch dtype used to hold the raw bits, element size in bytes).
# BF16 goes through int16 because numpy has no bfloat16; F8 stays as raw uint8 codes.
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
    "F8_E4M3": (torch.uint8, 1),
}
_TORCH_TO_ST = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
_NP_RAW = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def st_dtype(t):
    return _TORCH_TO_ST[t.dtype]


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    size = t.element_size()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    # Reinterpret as a same-width integer so numpy can export the raw little-endian bits.
    raw = t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])
    return raw.numpy().tobytes()


def plan_layout(specs):
    """specs: list of (name, st_dtype, shape). Returns (header_bytes, ordered [(name, begin, end)])."""
    order = sorted(specs, key=lambda s: (-_DTYPES[s[1]][1], s[0]))
    header, layout, offset = {}, [], 0
    for name, dtype, shape in order:
        nbytes = _DTYPES[dtype][1] * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        layout.append((name, offset, offset + nbytes))
        offset += nbytes
    return header, layout


def write_streaming(path, specs, produce, metadata=None):
    """Writes tensors one at a time: produce(name) returns the tensor for that name, or
    (safetensors dtype, tensor) when the dtype is not torch's (e.g. "F8_E4M3" as uint8).

    Lets callers generate multi-GB checkpoints without holding them in memory.
    Returns the total data size in bytes.
    """
    header, layout = plan_layout(specs)
    if metadata:
        header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}, **header}
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * ((-len(blob)) % 8)
    expected = {name: (dtype, tuple(shape)) for name, dtype, shape in specs}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, begin, end in layout:
            t = produce(name)
            # (dtype, tensor) names a dtype torch cannot hold (F8_E4M3 codes in a uint8 tensor).
            dtype, t = t if isinstance(t, tuple) else (st_dtype(t), t)
            if _DTYPES[dtype][1] != t.element_size():
                raise ValueError(f"{name}: {dtype} produced as {t.dtype}")
            if (dtype, tuple(t.shape)) != expected[name]:
                raise ValueError(f"{name}: produced {dtype} {tuple(t.shape)}, "
                                 f"planned {expected[name]}")
            data = _tensor_bytes(t)
            assert len(data) == end - begin
            f.write(data)
    return layout[-1][2] if layout else 0


def save_file(tensors, path, metadata=None):
    specs = [(n, st_dtype(t), tuple(t.shape)) for n, t in tensors.items()]
    return write_streaming(path, specs, lambda n: tensors[n], metadata)


class SafeFile:
    """One safetensors file, memory-mapped; tensors are materialised on request."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 100 * 1024 * 1024:
                raise ValueError(f"{path}: header length {n} is implausible")
            header = json.loads(f.read(n).decode("utf-8"))
        self.metadata = header.pop("__metadata__", None)
        self.header = header
        self.data_start = 8 + n
        size = os.path.getsize(path)
        self.mm = np.memmap(path, dtype=np.uint8, mode="r") if size > 0 else None
        ends = sorted(tuple(v["data_offsets"]) for v in header.values())
        pos = 0
        for b, e in ends:  # the spec forbids holes and overlaps
            if b != pos:
                raise ValueError(f"{path}: data buffer has a hole or overlap at {b}")
            pos = e
        if self.data_start + pos != size:
            raise ValueError(f"{path}: data ends at {self.data_start + pos}, file is {size}")

    def keys(self):
        return list(self.header.keys())

    def info(self, name):
        h = self.header[name]
        return h["dtype"], tuple(h["shape"])

    def get(self, name):
        h = self.header[name]
        torch_dtype, size = _DTYPES[h["dtype"]]
        b, e = h["data_offsets"]
        count = int(np.prod(h["shape"], dtype=np.int64))
        if e - b != count * size:
            raise ValueError(f"{name}: {e - b} bytes for {count} elements of {h['dtype']}")
        raw = np.array(self.mm[self.data_start + b:self.data_start + e]).view(_NP_RAW[size])
        t = torch.from_numpy(raw)
        t = t.view(torch.uint8).to(torch.bool) if torch_dtype == torch.bool else t.view(torch_dtype)
        return t.reshape(h["shape"])


class Checkpoint:
    """A checkpoint folder: model.safetensors, or model.safetensors.index.json + shards."""

    def __init__(self, folder):
        index = os.path.join(folder, "model.safetensors.index.json")
        self.files, self.where = {}, {}
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            for name, fname in weight_map.items():
                if fname not in self.files:
                    self.files[fname] = SafeFile(os.path.join(folder, fname))
                if name not in self.files[fname].header:
                    raise ValueError(f"index maps {name} to {fname}, which lacks it")
                self.where[name] = fname
        else:
            fname = "model.safetensors"
            self.files[fname] = SafeFile(os.path.join(folder, fname))
            for name in self.files[fname].keys():
                self.where[name] = fname

    def keys(self):
        return list(self.where.keys())

    def info(self, name):
        return self.files[self.where[name]].info(name)

    def get(self, name):
        return self.files[self.where[name]].get(name)
