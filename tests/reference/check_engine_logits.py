#!/usr/bin/python3
"""Checks the engine's logits against the independent numpy forward pass (forward_reference.py)
on one random-weight model: kvdesk-cli make-model writes an f32 GGUF, kvdesk-cli logits gives
every logit at every prompt position with an f32 KV cache, forward_reference.py computes its own
from the same file and token ids, and the largest absolute difference must stay under the
tolerance. Exits 0 on agreement, 1 with the worst position and token otherwise.

Usage: check_engine_logits.py --cli KVDESK_CLI --vocab TOKENIZER.model --prompt TEXT
                              [--tolerance 1e-3] -- MAKE_MODEL_ARGS...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.exit("check_engine_logits.py needs numpy: install Debian's python3-numpy and run it with /usr/bin/python3")

REFERENCE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forward_reference.py")
ALL_LOGITS = "1048576"   # kvdesk-cli logits --top's largest value: more than any vocabulary here


def run(command):
    """Runs a command, failing the check with its output when it fails; returns its stdout."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def engine_logits(cli, model, prompt):
    """(token ids, [positions, vocab] logits) from kvdesk-cli logits --json with every logit."""
    out = run([cli, "logits", "-m", model, "-p", prompt, "--top", ALL_LOGITS, "--json",
               "--kv-type", "f32", "--attn-numerics", "exact"])
    positions = json.loads(out)["positions"]
    vocab = len(positions[0]["top"])
    logits = np.full((len(positions), vocab), np.nan)
    for row, position in enumerate(positions):
        pairs = np.array(position["top"])
        logits[row, pairs[:, 0].astype(np.int64)] = pairs[:, 1]
    return [position["token"] for position in positions], logits


def reference_logits(model, tokens, out_path):
    run([sys.executable, REFERENCE_SCRIPT, model, "--tokens", ",".join(map(str, tokens)), "--out", out_path])
    return np.load(out_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True, help="kvdesk-cli")
    parser.add_argument("--vocab", required=True, help="SentencePiece .model for make-model --vocab-from")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("make_model_args", nargs="*", help="after --: more make-model arguments (--arch ...)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kvdesk-numpy-ref-") as scratch:
        model = os.path.join(scratch, "model.gguf")
        run([args.cli, "make-model", "--type", "f32", "--vocab-from", args.vocab, "-o", model, *args.make_model_args])
        tokens, engine = engine_logits(args.cli, model, args.prompt)
        reference = reference_logits(model, tokens, os.path.join(scratch, "reference.npy"))

    if engine.shape != reference.shape:
        sys.exit(f"engine logits {engine.shape} but reference {reference.shape}")
    if np.isnan(engine).any():
        sys.exit("kvdesk-cli logits did not print every vocabulary entry at every position")
    diff = np.abs(engine - reference)
    position, token = np.unravel_index(np.argmax(diff), diff.shape)
    print(f"{' '.join(args.make_model_args)}: {len(tokens)} positions x {engine.shape[1]} logits, "
          f"largest |logit| {np.abs(reference).max():.4f}, max abs diff {diff.max():.3g} "
          f"(position {position}, token {token}: engine {engine[position, token]:.6f}, "
          f"reference {reference[position, token]:.6f})")
    if not diff.max() < args.tolerance:
        sys.exit(f"FAIL: max abs diff {diff.max():.3g} is not under {args.tolerance}")


if __name__ == "__main__":
    main()
