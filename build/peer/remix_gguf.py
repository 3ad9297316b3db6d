#!/usr/bin/python3
"""Assemble a GGUF from the blocks of another, copying the quantized
tensors as they are (seconds, where make_gguf_mix.py requantizes for tens of
minutes): block i of OUT is block SRC_BLOCK[i] of IN, and llama.cpp's
full_attention_interval is INTERVAL (layer i is attention when
(i+1) % INTERVAL is 0). The side by side's DADA mix:
remix_gguf.py synth-DDDA.gguf synth-DADA.gguf 2 0 3 1 3

usage: GGUF_PY=llama-src/gguf-py remix_gguf.py IN.gguf OUT.gguf INTERVAL SRC_BLOCK...
"""
import os
import sys

sys.path.insert(0, os.environ.get("GGUF_PY", "llama-src/gguf-py"))
from gguf import GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402

src, out, interval, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(b) for b in sys.argv[4:]]
r = GGUFReader(src)
arch = "qwen35moe"
w = GGUFWriter(out, arch)
for f in r.fields.values():
    name = f.name
    if name.startswith("GGUF.") or name == "general.architecture":
        continue
    if name == f"{arch}.block_count":
        w.add_uint32(name, len(blocks))
        continue
    if name == f"{arch}.full_attention_interval":
        w.add_uint32(name, interval)
        continue
    vt = f.types[0]
    if vt == GGUFValueType.ARRAY:
        sub = f.types[-1]
        if sub == GGUFValueType.STRING:
            val = [bytes(f.parts[i]).decode("utf-8", errors="surrogateescape") for i in f.data]
        else:
            val = [f.parts[i].tolist()[0] for i in f.data]
        w.add_key_value(name, val, vt, sub_type=sub)
    elif vt == GGUFValueType.STRING:
        w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8"), vt)
    else:
        w.add_key_value(name, f.parts[f.data[0]].tolist()[0], vt)
for t in r.tensors:
    if not t.name.startswith("blk."):
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
for i, b in enumerate(blocks):
    for t in r.tensors:
        if t.name.startswith(f"blk.{b}."):
            w.add_tensor(f"blk.{i}." + t.name[len(f"blk.{b}."):], t.data, raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file(progress=False)
w.close()
print("wrote", out)
