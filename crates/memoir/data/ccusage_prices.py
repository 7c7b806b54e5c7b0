#!/usr/bin/env python3
"""Extract the price table ccusage uses offline into a LiteLLM-format file.

ccusage (npm, MIT) bundles a snapshot of LiteLLM's
model_prices_and_context_window.json in its native binary, compressed (raw
deflate) with short keys, for `--offline`; Gemini prices come from a bundled
models.dev snapshot. This script finds both snapshots in the binary, keeps the
first-party Claude, OpenAI and Gemini entries (and Claude's Bedrock ids, which
`PriceTable::from_litellm` uses for Claude models LiteLLM lists only there),
and writes them with LiteLLM's field names, USD per token:

    python3 crates/memoir/data/ccusage_prices.py BINARY > crates/memoir/data/litellm-ccusage.json

BINARY is node_modules/@ccusage/ccusage-linux-x64/bin/ccusage after
`npm install ccusage@<version>`. Standard library only.
"""

import json
import sys
import zlib

# ccusage's short keys -> LiteLLM's field names (the `a` suffix is the
# "above 200k tokens" rate).
LITELLM_FIELDS = {
    "i": "input_cost_per_token",
    "o": "output_cost_per_token",
    "cc": "cache_creation_input_token_cost",
    "cr": "cache_read_input_token_cost",
    "ia": "input_cost_per_token_above_200k_tokens",
    "oa": "output_cost_per_token_above_200k_tokens",
    "cca": "cache_creation_input_token_cost_above_200k_tokens",
    "cra": "cache_read_input_token_cost_above_200k_tokens",
    "ctx": "max_input_tokens",
}
FIRST_PARTY_PREFIXES = ("claude-", "gpt-", "o1", "o3", "o4", "codex-", "chatgpt-")


def embedded_json_blobs(data):
    """Every raw-deflate stream in `data` that inflates to a JSON object."""
    i, n = 0, len(data)
    while i < n:
        if (data[i] >> 1) & 3 == 3:  # reserved block type: not a stream start
            i += 1
            continue
        try:
            head = zlib.decompressobj(-15).decompress(data[i : i + 4096], 64)
        except zlib.error:
            i += 1
            continue
        if not head.startswith(b'{"'):
            i += 1
            continue
        d = zlib.decompressobj(-15)
        try:
            text = d.decompress(data[i : i + 8_000_000])
            value = json.loads(text)
        except (zlib.error, ValueError):
            i += 1
            continue
        yield value
        i = n - len(d.unused_data) if d.unused_data else i + 1


def is_compact_litellm(blob):
    return any(isinstance(v, dict) and "i" in v and "o" in v for v in blob.values())


def is_models_dev(blob):
    return any(isinstance(v, dict) and isinstance(v.get("cost"), dict) for v in blob.values())


def litellm_entries(compact):
    out = {}
    for name, v in compact.items():
        if not isinstance(v, dict):
            continue
        if name.startswith(FIRST_PARTY_PREFIXES) and "/" not in name and ":" not in name:
            provider = "anthropic" if name.startswith("claude-") else "openai"
        elif name.startswith("anthropic.claude-"):
            provider = "bedrock"
        else:
            continue
        entry = {"litellm_provider": provider, "mode": "chat"}
        for short, field in LITELLM_FIELDS.items():
            if short in v:
                entry[field] = v[short]
        out[name] = entry
    return out


def gemini_entries(models_dev):
    out = {}
    per_token = lambda usd_per_mtok: round(usd_per_mtok / 1e6, 15)
    for key, v in models_dev.items():
        if not key.startswith("gemini/gemini-") or not isinstance(v.get("cost"), dict):
            continue
        cost = v["cost"]
        if "input" not in cost or "output" not in cost:
            continue
        entry = {"litellm_provider": "gemini", "mode": "chat"}
        for field, name in [
            ("input", "input_cost_per_token"),
            ("output", "output_cost_per_token"),
            ("cache_read", "cache_read_input_token_cost"),
        ]:
            if field in cost:
                entry[name] = per_token(cost[field])
        for tier in cost.get("tiers", []):
            size = tier.get("tier", {}).get("size")
            if tier.get("tier", {}).get("type") != "context" or not size or size % 1000:
                continue
            for field, name in [
                ("input", "input_cost_per_token"),
                ("output", "output_cost_per_token"),
                ("cache_read", "cache_read_input_token_cost"),
            ]:
                if field in tier:
                    entry[f"{name}_above_{size // 1000}k_tokens"] = per_token(tier[field])
        if "context" in v.get("limit", {}):
            entry["max_input_tokens"] = v["limit"]["context"]
        out[key] = entry
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    table = {}
    for blob in embedded_json_blobs(data):
        if is_compact_litellm(blob):
            table.update(litellm_entries(blob))
        elif is_models_dev(blob):
            table.update(gemini_entries(blob))
    if not any(k.startswith("claude-") for k in table):
        sys.exit("no Claude prices found in that binary")
    json.dump(dict(sorted(table.items())), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
