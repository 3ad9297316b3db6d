#!/usr/bin/python3
"""Convert Suzuran's synthetic MLX 4-bit checkpoint (qwen3_5_moe, few layers)
into a llama.cpp GGUF (arch qwen35moe) with the same weights: every MLX affine
matrix is dequantized (w = scale*q + bias, group 64) and requantized to Q4_0
(block 32) for 2-D/3-D weights, F32 for norms, router (ffn_gate_inp), conv1d,
A, dt bias and the shared-expert gate, as llama-quantize does for Q4_0
(except output.weight: Q4_0 here, llama-quantize's default would be Q6_K).

Tensor names, shapes, metadata keys and transformations follow the
llama.cpp sources bundled with node-llama-cpp 3.21.1 (conversion/qwen.py:
Qwen3NextModel + _LinearAttentionVReorderBase + Qwen3_5MoeTextModel;
src/models/qwen35moe.cpp).

usage: LAYER_SELECT=0,3 ATTN_INTERVAL=2 make_gguf_mix.py SYNTH_DIR TOKENIZER_JSON OUT.gguf
  the GGUF's layers are the listed layers of the checkpoint, in order (a
  layer may repeat); ATTN_INTERVAL is llama.cpp's full_attention_interval
  that gives them their kinds (layer i is attention when (i+1) % interval
  is 0), since llama.cpp cannot load a model without an attention layer:
  3 → 1 (attention), 3,3 → 1, 0,3 → 2, 0,1,2,3 → 4.
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.environ.get("GGUF_PY", "llama.cpp-src/gguf-py"))
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

src_dir, tok_path, out_path = sys.argv[1:4]

# ---------------------------------------------------------------- safetensors
st_path = f"{src_dir}/model.safetensors"
with open(st_path, "rb") as f:
    hlen = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(hlen))
header.pop("__metadata__", None)
raw = np.memmap(st_path, dtype=np.uint8, mode="r")
base = 8 + hlen


def tensor(name):
    h = header[name]
    a, b = h["data_offsets"]
    buf = raw[base + a: base + b]
    dt = {"U32": np.uint32, "BF16": np.uint16, "F32": np.float32}[h["dtype"]]
    return buf.view(dt).reshape(h["shape"]), h["dtype"]


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def load_f32(name):
    """Dense float32 value of a (possibly MLX-quantized) weight."""
    if name + ".weight" in header and name + ".scales" in header:
        w, _ = tensor(name + ".weight")
        s = bf16_to_f32(tensor(name + ".scales")[0])
        b = bf16_to_f32(tensor(name + ".biases")[0])
        groups = s.shape[-1]
        by = w.view(np.uint8)  # little-endian: element j of a word is bits 4j..
        # infer bits from shapes: in = groups*64; words per row = in*bits/32
        in_dim = groups * 64
        bits = w.shape[-1] * 32 // in_dim
        if bits == 4:
            q = np.empty(by.shape[:-1] + (by.shape[-1] * 2,), dtype=np.uint8)
            q[..., 0::2] = by & 0x0F
            q[..., 1::2] = by >> 4
        elif bits == 8:
            q = by
        else:
            raise ValueError(f"{name}: {bits} bits")
        q = q.reshape(q.shape[:-1] + (groups, 64)).astype(np.float32)
        out = q * s[..., None] + b[..., None]
        return out.reshape(out.shape[:-2] + (in_dim,))
    key = name if name in header else name + ".weight"
    a, dt = tensor(key)
    if dt == "BF16":
        return bf16_to_f32(a)
    return np.asarray(a, dtype=np.float32)


def load_f32_rows(name, r0, r1):
    """Rows r0:r1 of a 2-D MLX-quantized matrix (for the 248k-row ones)."""
    w, _ = tensor(name + ".weight")
    s = bf16_to_f32(tensor(name + ".scales")[0][r0:r1])
    b = bf16_to_f32(tensor(name + ".biases")[0][r0:r1])
    by = w[r0:r1].view(np.uint8)
    q = np.empty(by.shape[:-1] + (by.shape[-1] * 2,), dtype=np.uint8)
    q[..., 0::2] = by & 0x0F
    q[..., 1::2] = by >> 4
    groups = s.shape[-1]
    q = q.reshape(q.shape[:-1] + (groups, 64)).astype(np.float32)
    return (q * s[..., None] + b[..., None]).reshape(r1 - r0, groups * 64)


# ---------------------------------------------------------------- config
cfg = json.load(open(f"{src_dir}/config.json"))
tc = cfg["text_config"]
L = tc["num_hidden_layers"]
# LAYER_SELECT=3,3 ATTN_INTERVAL=1: the GGUF's layers are these layers of the
# synthetic checkpoint (layer mixes for the per-layer fit), with llama.cpp's
# full_attention_interval set to match their kinds.
SEL = [int(v) for v in os.environ["LAYER_SELECT"].split(",")]
L = len(SEL)
H = tc["hidden_size"]
V = tc["vocab_size"]
nk, nv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
dk, dv = tc["linear_key_head_dim"], tc["linear_value_head_dim"]
nvpk = nv // nk
layer_types = tc["layer_types"]
rp = tc["rope_parameters"]


def reorder_v(t, dim, head_dim):
    """_LinearAttentionVReorderBase._reorder_v_heads: grouped -> tiled."""
    shape = list(t.shape)
    if dim < 0:
        dim += len(shape)
    new = shape[:dim] + [nk, nvpk, head_dim] + shape[dim + 1:]
    t = t.reshape(new)
    perm = list(range(len(new)))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return np.ascontiguousarray(t.transpose(perm)).reshape(shape)


# ---------------------------------------------------------------- writer
w = gguf.GGUFWriter(out_path, "qwen35moe")
w.add_name(f"suzuran-synthetic-{L}layers")
w.add_block_count(L)
w.add_context_length(tc["max_position_embeddings"])
w.add_embedding_length(H)
w.add_head_count(tc["num_attention_heads"])
w.add_head_count_kv(tc["num_key_value_heads"])
ms = list(rp["mrope_section"]) + [0] * (4 - len(rp["mrope_section"]))
w.add_rope_dimension_sections(ms[:4])
w.add_rope_freq_base(rp["rope_theta"])
w.add_layer_norm_rms_eps(tc["rms_norm_eps"])
w.add_expert_count(tc["num_experts"])
w.add_expert_used_count(tc["num_experts_per_tok"])
w.add_key_length(tc["head_dim"])
w.add_value_length(tc["head_dim"])
w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
w.add_expert_feed_forward_length(tc["moe_intermediate_size"])
w.add_expert_shared_feed_forward_length(tc["shared_expert_intermediate_size"])
w.add_ssm_conv_kernel(tc["linear_conv_kernel_dim"])
w.add_ssm_state_size(dk)
w.add_ssm_group_count(nk)
w.add_ssm_time_step_rank(nv)
w.add_ssm_inner_size(dv * nv)
w.add_full_attention_interval(int(os.environ["ATTN_INTERVAL"]))
w.add_rope_dimension_count(int(tc["head_dim"] * rp.get("partial_rotary_factor", 0.25)))

# tokenizer: Suzuran Tiny's byte-level BPE (4,096 ids), padded to the model's
# vocabulary with [PAD{i}] UNUSED tokens as convert_hf_to_gguf does.
tok = json.load(open(tok_path))
vocab = tok["model"]["vocab"]
added = {a["id"]: a for a in tok["added_tokens"]}
id2tok = {i: t for t, i in vocab.items()}
tokens, types = [], []
for i in range(V):
    if i in added:
        tokens.append(added[i]["content"])
        types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
    elif i in id2tok:
        tokens.append(id2tok[i])
        types.append(gguf.TokenType.NORMAL)
    else:
        tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen35")
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(merges)
name2id = {t: i for i, t in enumerate(tokens)}
w.add_eos_token_id(name2id["<|im_end|>"])
w.add_pad_token_id(name2id["<|endoftext|>"])
w.add_bos_token_id(name2id["<|endoftext|>"])
w.add_add_bos_token(False)

stats = {}


def put(name, arr, qtype):
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == QT.Q4_0:
        data = quants.quantize(arr, QT.Q4_0)
    else:
        data = arr
    w.add_tensor(name, data, raw_dtype=qtype)
    stats[qtype.name] = stats.get(qtype.name, 0) + data.nbytes
    print(f"  {name:40s} {str(arr.shape):22s} {qtype.name}", flush=True)


def put_rows_q4(name, src, rows):
    """Huge 2-D matrices: dequantize and requantize in row chunks."""
    parts = []
    for r0 in range(0, rows, 16384):
        parts.append(quants.quantize(load_f32_rows(src, r0, min(rows, r0 + 16384)), QT.Q4_0))
    data = np.concatenate(parts, axis=0)
    w.add_tensor(name, data, raw_dtype=QT.Q4_0)
    stats["Q4_0"] = stats.get("Q4_0", 0) + data.nbytes
    print(f"  {name:40s} ({rows}, {H}) Q4_0", flush=True)


t0 = time.time()
P = "language_model.model."
put_rows_q4("token_embd.weight", P + "embed_tokens", V)
put("output_norm.weight", load_f32(P + "norm.weight"), QT.F32)
put_rows_q4("output.weight", "language_model.lm_head", V)

for i in range(L):
    src = SEL[i]
    p = f"{P}layers.{src}."
    b = f"blk.{i}."
    put(b + "attn_norm.weight", load_f32(p + "input_layernorm.weight"), QT.F32)
    put(b + "post_attention_norm.weight", load_f32(p + "post_attention_layernorm.weight"), QT.F32)
    if layer_types[src] == "linear_attention":
        a = p + "linear_attn."
        qkv = load_f32(a + "in_proj_qkv")
        qd = dk * nk
        qkv = np.concatenate([qkv[:2 * qd], reorder_v(qkv[2 * qd:], 0, dv)], axis=0)
        put(b + "attn_qkv.weight", qkv, QT.Q4_0)
        put(b + "attn_gate.weight", reorder_v(load_f32(a + "in_proj_z"), 0, dv), QT.Q4_0)
        put(b + "ssm_beta.weight", reorder_v(load_f32(a + "in_proj_b"), 0, 1), QT.Q4_0)
        put(b + "ssm_alpha.weight", reorder_v(load_f32(a + "in_proj_a"), 0, 1), QT.Q4_0)
        put(b + "ssm_out.weight", reorder_v(load_f32(a + "out_proj"), 1, dv), QT.Q4_0)
        conv = load_f32(a + "conv1d.weight").squeeze()  # MLX [ch, K, 1] -> [ch, K]
        conv = np.concatenate([conv[:2 * qd], reorder_v(conv[2 * qd:], 0, dv)], axis=0)
        put(b + "ssm_conv1d.weight", conv, QT.F32)
        alog = load_f32(a + "A_log")
        put(b + "ssm_a", reorder_v(-np.exp(alog)[:, None], 0, 1)[:, 0], QT.F32)
        put(b + "ssm_dt.bias", reorder_v(load_f32(a + "dt_bias")[:, None], 0, 1)[:, 0], QT.F32)
        put(b + "ssm_norm.weight", load_f32(a + "norm.weight"), QT.F32)
    else:
        a = p + "self_attn."
        put(b + "attn_q.weight", load_f32(a + "q_proj"), QT.Q4_0)
        put(b + "attn_k.weight", load_f32(a + "k_proj"), QT.Q4_0)
        put(b + "attn_v.weight", load_f32(a + "v_proj"), QT.Q4_0)
        put(b + "attn_output.weight", load_f32(a + "o_proj"), QT.Q4_0)
        put(b + "attn_q_norm.weight", load_f32(a + "q_norm.weight"), QT.F32)
        put(b + "attn_k_norm.weight", load_f32(a + "k_norm.weight"), QT.F32)
    m = p + "mlp."
    put(b + "ffn_gate_inp.weight", load_f32(m + "gate"), QT.F32)  # [256, 2048], 8-bit in MLX
    for src, dst in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
        put(b + dst + ".weight", load_f32(m + "switch_mlp." + src), QT.Q4_0)  # [E, out, in]
    put(b + "ffn_gate_shexp.weight", load_f32(m + "shared_expert.gate_proj"), QT.Q4_0)
    put(b + "ffn_up_shexp.weight", load_f32(m + "shared_expert.up_proj"), QT.Q4_0)
    put(b + "ffn_down_shexp.weight", load_f32(m + "shared_expert.down_proj"), QT.Q4_0)
    put(b + "ffn_gate_inp_shexp.weight", load_f32(m + "shared_expert_gate").reshape(H), QT.F32)

print(f"converted in {time.time() - t0:.0f} s; bytes by type: {stats}", flush=True)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file(progress=False)
w.close()
print(f"wrote {out_path} in {time.time() - t0:.0f} s", flush=True)
