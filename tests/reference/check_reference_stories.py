#!/usr/bin/python3
"""Checks the numpy reference itself against other implementations: on stories260K.gguf (a real
llama-family model: GQA, consecutive-pair RoPE) its logits must match the ones llama.cpp and
llama2.c's run.c recorded in stories260K.reference.json, and teacher-forced along the recorded
greedy continuation its argmax must give every recorded token. The recorded logits come through
llama.cpp's f16 KV cache and f16 rounding in attention, hence the 0.03 tolerance.

Usage: check_reference_stories.py MODELS_DIR
"""
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("check_reference_stories.py needs numpy: install Debian's python3-numpy and run it with /usr/bin/python3")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_reference import ReferenceModel  # noqa: E402

TOLERANCE = 0.03


def recorded_logit_errors(logits, recorded):
    """|reference - recorded| for every recorded (position, token, logit)."""
    errors = [abs(logits[p["pos"], token] - value) for p in recorded["per_position_top10"] for token, value in p["top10"]]
    last = len(recorded["prompt_ids"]) - 1
    errors.extend(np.abs(logits[last] - np.array(recorded["last_prompt_pos_logits"])))
    return np.array(errors)


def main():
    models_dir = sys.argv[1]
    with open(os.path.join(models_dir, "stories260K.reference.json")) as f:
        recorded = json.load(f)
    tokens = recorded["prompt_ids"] + recorded["generated_ids"]
    logits = ReferenceModel(os.path.join(models_dir, "stories260K.gguf")).logits(tokens)
    worst = recorded_logit_errors(logits, recorded).max()
    first_generated = len(recorded["prompt_ids"]) - 1
    greedy = np.argmax(logits[first_generated:len(tokens) - 1], axis=1).tolist()
    print(f"stories260K: max abs diff from the recorded logits {worst:.3g}, "
          f"greedy ids {'equal' if greedy == recorded['generated_ids'] else 'DIFFERENT'}")
    if not worst < TOLERANCE or greedy != recorded["generated_ids"]:
        sys.exit("FAIL: the numpy reference does not reproduce stories260K.reference.json")


if __name__ == "__main__":
    main()
