#!/usr/bin/env python3
"""Writes the TensorRT-LLM fixtures of crates/moeplan/tests/trtllm.rs with
the `safetensors` Python package, as TensorRT-LLM's expert_statistic.py
saves them, and the same numbers as SGLang dumps, so the test can check that
both read to the same counts.

From one seeded set of random routes (2 ranks, iterations 10..12, MoE layers
1 and 3 of a 4-layer model, 8 experts, top-2):
  tests/fixtures/trtllm/dump/    rank<r>.safetensors ("{iter}_{layer}" ->
                                 bincount; int64 on rank 0 as the first
                                 version writes, int32 on rank 1 as the
                                 co-occurrence version does),
                                 cooccurrence_rank<r>.safetensors (int32 E x E),
                                 token_selected_experts_rank<r>.safetensors,
                                 meta_info.json
  tests/fixtures/trtllm/sglang/  expert_distribution.json ({"logical_count":
                                 [iter][model layer][expert]}, summed over ranks)
                                 and rank<r>.csv (layer_id,expert_id,count,
                                 summed over iterations)
  tests/fixtures/trtllm/routes.json  every token's route per layer, for the
                                 co-occurrence check against GRACE's affinity
  tests/fixtures/broken/trtllm-*.safetensors  hostile statistics files

Run: python3 benchmarks/trtllm_stats.py (it builds its own virtual
environment, /tmp/moeplan-trtllm-venv or $MOEPLAN_TRTLLM_VENV, on first use).
"""
import json
import os
import subprocess
import sys

VENV = os.environ.get("MOEPLAN_TRTLLM_VENV", "/tmp/moeplan-trtllm-venv")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "crates", "moeplan", "tests", "fixtures")

RANKS = 2
ITERATIONS = [10, 11, 12]
MODEL_LAYERS = 4
MOE_LAYERS = [1, 3]
EXPERTS = 8
TOP_K = 2


def ensure_venv():
    """Re-runs this script inside the virtual environment, creating it first."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([python, "-m", "pip", "install", "--quiet", "safetensors", "numpy"])
    os.execv(python, [python, *sys.argv])


def main():
    ensure_venv()
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(16)
    dump = os.path.join(FIXTURES, "trtllm", "dump")
    sglang = os.path.join(FIXTURES, "trtllm", "sglang")
    os.makedirs(dump, exist_ok=True)
    os.makedirs(sglang, exist_ok=True)

    # counts[iteration][model layer][expert], summed over ranks (SGLang's JSON)
    logical = np.zeros((len(ITERATIONS), MODEL_LAYERS, EXPERTS), dtype=np.int64)
    # per_rank[rank][layer][expert], summed over iterations (SGLang's CSVs)
    per_rank = np.zeros((RANKS, MODEL_LAYERS, EXPERTS), dtype=np.int64)
    routes = {layer: [] for layer in MOE_LAYERS}
    for rank in range(RANKS):
        counts, cooc, selected = {}, {}, {}
        for b, it in enumerate(ITERATIONS):
            tokens = int(rng.integers(5, 13))
            # a skewed router: low expert ids are popular, more so on rank 0
            weights = np.linspace(2.0 + rank, 1.0, EXPERTS)
            for layer in MOE_LAYERS:
                chosen = np.stack(
                    [rng.choice(EXPERTS, TOP_K, replace=False, p=weights / weights.sum()) for _ in range(tokens)]
                ).astype(np.int32)
                key = f"{it}_{layer}"
                bincount = np.bincount(chosen.flatten(), minlength=EXPERTS)
                counts[key] = bincount.astype(np.int64 if rank == 0 else np.int32)
                pairs = np.zeros((EXPERTS, EXPERTS), dtype=np.int32)
                for row in chosen:
                    pairs[np.ix_(row, row)] += 1
                cooc[key] = pairs
                selected[key] = chosen
                logical[b, layer] += bincount
                per_rank[rank, layer] += bincount
                routes[layer].extend(chosen.tolist())
        save_file(counts, os.path.join(dump, f"rank{rank}.safetensors"))
        save_file(cooc, os.path.join(dump, f"cooccurrence_rank{rank}.safetensors"))
        save_file(selected, os.path.join(dump, f"token_selected_experts_rank{rank}.safetensors"))
    with open(os.path.join(dump, "meta_info.json"), "w") as f:
        json.dump({"num_experts": EXPERTS, "num_experts_per_token": TOP_K}, f)

    with open(os.path.join(sglang, "expert_distribution.json"), "w") as f:
        json.dump({"logical_count": logical.tolist()}, f)
    for rank in range(RANKS):
        with open(os.path.join(sglang, f"rank{rank}.csv"), "w") as f:
            f.write("layer_id,expert_id,count\n")
            for layer in MOE_LAYERS:
                for e in range(EXPERTS):
                    f.write(f"{layer},{e},{per_rank[rank, layer, e]}\n")
    with open(os.path.join(FIXTURES, "trtllm", "routes.json"), "w") as f:
        json.dump({str(k): v for k, v in routes.items()}, f)

    broken = os.path.join(FIXTURES, "broken")
    good = {"0_1": np.arange(EXPERTS, dtype=np.int64)}
    save_file(good, "/tmp/moeplan-trtllm-good.safetensors")
    with open("/tmp/moeplan-trtllm-good.safetensors", "rb") as f:
        whole = f.read()
    header_len = int.from_bytes(whole[:8], "little")

    def write(name, data):
        with open(os.path.join(broken, name), "wb") as f:
            f.write(data)

    # the JSON header cut in the middle
    write("trtllm-truncated-header.safetensors", whole[: 8 + header_len // 2])
    # a header length of 1 TiB in front of a small file
    write("trtllm-huge-header.safetensors", (1 << 40).to_bytes(8, "little") + whole[8:])
    # the data cut short of what the header declares
    write("trtllm-truncated-data.safetensors", whole[:-8])
    save_file({"0_1": np.ones(EXPERTS, dtype=np.float16)}, os.path.join(broken, "trtllm-wrong-dtype.safetensors"))
    save_file({"0_1": -np.ones(EXPERTS, dtype=np.int32)}, os.path.join(broken, "trtllm-negative.safetensors"))
    save_file({"layer1": np.ones(EXPERTS, dtype=np.int32)}, os.path.join(broken, "trtllm-bad-key.safetensors"))
    # a co-occurrence file given where counts are read
    save_file({"0_1": np.ones((EXPERTS, EXPERTS), dtype=np.int32)}, os.path.join(broken, "trtllm-two-d.safetensors"))
    print(f"wrote {dump}, {sglang} and {broken}/trtllm-*.safetensors")


if __name__ == "__main__":
    main()
