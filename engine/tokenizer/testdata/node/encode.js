// Reference encoder for engine/tokenizer's tests: @lenml/tokenizers (a port
// of Hugging Face tokenizers to JavaScript) on the same tokenizer.json.
//
//   node encode.js request.json  →  JSON on stdout
//
// request: {
//   "tokenizer": path to tokenizer.json, "config": path to tokenizer_config.json,
//   "pattern": optional regex that replaces the Split pre-tokenizer's pattern,
//   "texts": [strings to encode],
//   "bench": optional {"file": path of a UTF-8 text, "repeats": n}
// }
// reply: {"ids": [[ids] per text], "bench": {"cold_ms", "warm_ms": [..], "tokens"}}
"use strict";
const fs = require("fs");
const { TokenizerLoader } = require("@lenml/tokenizers");

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const tokenizerJSON = JSON.parse(fs.readFileSync(req.tokenizer, "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(req.config, "utf8"));

if (req.pattern) {
  const pre = tokenizerJSON.pre_tokenizer;
  const steps = pre.type === "Sequence" ? pre.pretokenizers : [pre];
  const split = steps.find((s) => s.type === "Split");
  if (!split) throw new Error("no Split pre-tokenizer to override");
  split.pattern = { Regex: req.pattern };
}

const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const encode = (text) => tok.encode(text, { add_special_tokens: false });

const out = { ids: (req.texts || []).map(encode) };

if (req.bench) {
  const text = fs.readFileSync(req.bench.file, "utf8");
  let t0 = process.hrtime.bigint();
  const first = encode(text);
  const cold = Number(process.hrtime.bigint() - t0) / 1e6;
  const warm = [];
  for (let i = 0; i < req.bench.repeats; i++) {
    t0 = process.hrtime.bigint();
    encode(text);
    warm.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  out.bench = { cold_ms: cold, warm_ms: warm, tokens: first.length, ids: first };
}

process.stdout.write(JSON.stringify(out));
