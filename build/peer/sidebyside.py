#!/usr/bin/python3
"""Side by side: Suzuran's cpu backend and llama.cpp (node-llama-cpp 3.21.1)
on the 4-layer full-width synthetic (3 DeltaNet layers, then attention),
alternating the engines round by round (BENCHMARKS.md shows the result).

Each round: `suzuran bench --synthetic` (the 4 layers: prefill 512, decode
32; then the first n layers for n = 1..4, prefill 512 and decode 16 each,
for its per-layer fit) and, in PEER_DIR, bench.mjs on the same weights as
GGUFs: the 4 layers (decode 32) and two layer mixes of them, a DeltaNet
and an attention layer, and that pair twice (decode 16 each;
make_gguf_mix.py, remix_gguf.py); llama.cpp cannot run a model without
both kinds of layer, so its mixes differ from Suzuran's prefixes. Each engine's
times are fitted as fixed + DeltaNet layers·d + attention layers·a and
projected to 30 DeltaNet + 10 attention layers. The engine that goes first
alternates from round to round.

usage: sidebyside.py SUZURAN_BIN PEER_DIR ROUNDS OUT_DIR
(ROUNDS 0 summarizes the rounds saved in OUT_DIR/runs.json.) With
BASE_BIN set in the environment, each round also runs that build of
Suzuran ("base"), in turn with the others, and the summary adds it: a
before and after measured in the same rounds.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

bin_path, PEER, rounds, out_dir = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(out_dir, exist_ok=True)
MIXES = {"synth-DDDA.gguf": (3, 1), "synth-DA.gguf": (1, 1), "synth-DADA.gguf": (2, 2)}
# More mixes, where PEER_DIR has them, give llama.cpp's fit more equations
# than unknowns (remix_gguf.py, from synth-DDDA.gguf):
#   synth-DDA.gguf 3 0 1 3, synth-DDADDA.gguf 3 0 1 3 2 0 3,
#   synth-DADADA.gguf 2 0 3 1 3 2 3
for name, mix in (("synth-DDA.gguf", (2, 1)), ("synth-DDADDA.gguf", (4, 2)), ("synth-DADADA.gguf", (3, 3))):
    if os.path.exists(os.path.join(PEER, name)):
        MIXES[name] = mix


def suzuran(r, name="suzuran", path=bin_path):
    out = f"{out_dir}/{name}-{r}.json"
    cmd = [path, "bench", "--synthetic", "--prompt", "512", "--gen", "32", "--runs", "1",
           "--warmup", "32", "--copy-mib", "64", "--layer-costs", "prefixes",
           "--prefix-prompt", "512", "--prefix-gen", "16", "--out", out]
    t = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=open(f"{out_dir}/{name}-{r}.log", "w"))
    rep = json.load(open(out))
    pre = {f'{p["DeltaNet"]},{p["Attention"]}': p["Ms"] for p in rep["prefix_times"]["prefill"]}
    dec = {f'{p["DeltaNet"]},{p["Attention"]}': p["Ms"] for p in rep["prefix_times"]["decode"]}
    res = {"prefill_tok_s": rep["prefill"][0]["tok_per_s"]["median"],
           "decode_tok_s": rep["decode"][0]["tok_per_s"]["median"],
           "prefill_cpu_s": rep["prefill"][0]["cpu_s"]["median"],
           "decode_cpu_ms": rep["decode"][0]["cpu_s"]["median"] * 1e3 / rep["decode"][0]["tokens"],
           "prefix_prefill_ms": pre, "prefix_decode_ms": dec, "backend": rep["backend"],
           "wall_s": time.time() - t}
    print(f"round {r} {name}: prefill {res['prefill_tok_s']:.1f} tok/s, decode {res['decode_tok_s']:.2f} tok/s "
          f"({res['wall_s']:.0f} s)", flush=True)
    return res


def llama(r):
    res = {"prefix_prefill_ms": {}, "prefix_decode_ms": {}}
    t = time.time()
    for gguf, (d, a) in MIXES.items():
        full = gguf == "synth-DDDA.gguf"
        p = subprocess.run(["node", f"{PEER}/bench.mjs", f"{PEER}/{gguf}", "512", "32" if full else "16", "1"],
                           check=True, capture_output=True, text=True, cwd=PEER)
        open(f"{out_dir}/llama-{r}-{gguf}.log", "w").write(p.stdout + p.stderr)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
        x = json.loads(line[len("RESULT "):])["results"][0]
        res["prefix_prefill_ms"][f"{d},{a}"] = x["ttft_s"]["median"] * 1e3
        res["prefix_decode_ms"][f"{d},{a}"] = x["decode_ms_token"]["median"]
        if full:
            res["prefill_tok_s"] = x["prefill_tok_s"]["median"]
            res["decode_tok_s"] = x["decode_tok_s"]["median"]
            res["prefill_cpu_s"] = x["prefill_cpu_s"]["median"]
            res["decode_cpu_ms"] = x["decode_cpu_ms_token"]["median"]
    res["wall_s"] = time.time() - t
    print(f"round {r} llama.cpp: prefill {res['prefill_tok_s']:.1f} tok/s, decode {res['decode_tok_s']:.2f} tok/s "
          f"({res['wall_s']:.0f} s)", flush=True)
    return res


def fit(ms, tokens):
    """Least squares ms = fixed + d·DeltaNet + a·attention over the layer
    mixes ("d,a" → ms), projected to 30 DeltaNet + 10 attention layers."""
    mixes = sorted(ms)
    A = np.array([[1, *map(int, m.split(","))] for m in mixes], dtype=float)
    y = np.array([ms[m] for m in mixes])
    (fixed, d, a), *_ = np.linalg.lstsq(A, y, rcond=None)
    full = fixed + 30 * d + 10 * a
    return {"fixed_ms": fixed, "deltanet_ms": d, "attention_ms": a, "full40_ms": full, "tok_s": tokens / full * 1e3}


def fit_nonneg(ms, tokens):
    """fit with every term held at or above zero (a layer cannot cost less
    than nothing): the least-squares solution over each subset of the
    terms, the best of those whose terms all come out non-negative."""
    mixes = sorted(ms)
    A = np.array([[1, *map(int, m.split(","))] for m in mixes], dtype=float)
    y = np.array([ms[m] for m in mixes])
    best = None
    for mask in range(1, 8):
        cols = [i for i in range(3) if mask >> i & 1]
        c, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
        if (c < 0).any():
            continue
        x = np.zeros(3)
        x[cols] = c
        res = float(((A @ x - y) ** 2).sum())
        if best is None or res < best[0]:
            best = (res, x)
    fixed, d, a = best[1]
    full = fixed + 30 * d + 10 * a
    return {"fixed_ms": fixed, "deltanet_ms": d, "attention_ms": a, "full40_ms": full, "tok_s": tokens / full * 1e3}


base_bin = os.environ.get("BASE_BIN")
runs = {"suzuran": [], "llama": []}
if base_bin:
    runs["base"] = []
if rounds == 0:
    runs = json.load(open(f"{out_dir}/runs.json"))
engines = list(runs)
for r in range(rounds):
    k = r % len(engines)
    for e in engines[k:] + engines[:k]:  # who goes first rotates
        if e == "llama":
            runs[e].append(llama(r))
        else:
            runs[e].append(suzuran(r, e, base_bin if e == "base" else bin_path))
    json.dump(runs, open(f"{out_dir}/runs.json", "w"), indent=1)


def stat(xs):
    return f"{statistics.median(xs):.4g} ({min(xs):.4g}–{max(xs):.4g})"


summary = {}
for e, rs in runs.items():
    if e == "base":
        continue
    s = {k: [x[k] for x in rs] for k in ("prefill_tok_s", "decode_tok_s", "prefill_cpu_s", "decode_cpu_ms")}
    s["fit_prefill"] = [fit(x["prefix_prefill_ms"], 512) for x in rs]
    s["fit_decode"] = [fit(x["prefix_decode_ms"], 1) for x in rs]
    summary[e] = s
print()
print(f"{'':34s} {'Suzuran':28s} {'llama.cpp':28s} ratio of medians")
for k, label in (("prefill_tok_s", "prefill 512, tok/s"), ("decode_tok_s", "decode after 512, tok/s"),
                 ("prefill_cpu_s", "prefill 512, process CPU s"), ("decode_cpu_ms", "decode, process CPU ms/token")):
    a, b = summary["suzuran"][k], summary["llama"][k]
    print(f"{label:34s} {stat(a):28s} {stat(b):28s} {statistics.median(a) / statistics.median(b):.2f}")
ratios = {k: [s[k] / l[k] for s, l in zip(runs["suzuran"], runs["llama"])] for k in ("prefill_tok_s", "decode_tok_s")}
print(f"{'per-round ratio, prefill':34s} {stat(ratios['prefill_tok_s'])}")
print(f"{'per-round ratio, decode':34s} {stat(ratios['decode_tok_s'])}")
if "base" in runs:
    print()
    print(f"{'':34s} {'Suzuran base':28s} base / llama.cpp, medians; per-round Suzuran / base")
    for k, label in (("prefill_tok_s", "prefill 512, tok/s"), ("decode_tok_s", "decode after 512, tok/s"),
                     ("prefill_cpu_s", "prefill 512, process CPU s"), ("decode_cpu_ms", "decode, process CPU ms/token")):
        a = [x[k] for x in runs["base"]]
        b = summary["llama"][k]
        per = [s[k] / x[k] for s, x in zip(runs["suzuran"], runs["base"])]
        print(f"{label:34s} {stat(a):28s} {statistics.median(a) / statistics.median(b):.2f}; {stat(per)}")
for what in ("fit_prefill", "fit_decode"):
    for k, label in (("fixed_ms", "fixed ms"), ("deltanet_ms", "DeltaNet layer ms"), ("attention_ms", "attention layer ms"),
                     ("tok_s", "projected 40 layers, tok/s")):
        a = [f[k] for f in summary["suzuran"][what]]
        b = [f[k] for f in summary["llama"][what]]
        print(f"{what[4:] + ': ' + label:34s} {stat(a):28s} {stat(b):28s} {statistics.median(a) / statistics.median(b):.2f}")
# One fit per engine over every mix's median time across the rounds: the
# rounds' noise averages out before the fit instead of inside each one.
print()
for title, fitter, tag in (("pooled fit (medians of each mix)", fit, "pooled_"),
                           ("pooled fit, terms held >= 0", fit_nonneg, "pooled_nonneg_")):
    print()
    print(f"{title:34s} {'Suzuran':28s} {'llama.cpp':28s} ratio")
    for what, key, tokens in (("prefill", "prefix_prefill_ms", 512), ("decode", "prefix_decode_ms", 1)):
        pooled = {}
        for e in ("suzuran", "llama"):
            mixes = set.intersection(*(set(x[key]) for x in runs[e]))
            pooled[e] = fitter({m: statistics.median(x[key][m] for x in runs[e]) for m in mixes}, tokens)
            summary[e][tag + what] = pooled[e]
        for k, label in (("fixed_ms", "fixed ms"), ("deltanet_ms", "DeltaNet layer ms"), ("attention_ms", "attention layer ms"),
                         ("tok_s", "projected 40 layers, tok/s")):
            a, b = pooled["suzuran"][k], pooled["llama"][k]
            ratio = f"{a / b:.2f}" if b else "—"
            print(f"{what + ': ' + label:34s} {a:<28.4g} {b:<28.4g} {ratio}")
json.dump(summary, open(f"{out_dir}/summary.json", "w"), indent=1)
