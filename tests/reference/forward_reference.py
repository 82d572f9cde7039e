#!/usr/bin/python3
"""An independent reference forward pass: logits at every position of a token sequence for a
GGUF model of one of the families `kvdesk-cli make-model --arch` writes (llama, qwen2, qwen2moe,
qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, granite, gpt-oss, smollm3), in float64 numpy, with
its own minimal GGUF v3 reader.

Written from the public definitions only (llama.cpp's graph builders in src/models/ and its
converter's GGUF conventions, Hugging Face transformers' modeling files), never from kvdesk's
engine, so that agreeing with the engine means something. Conventions it follows:
  - Weights are as llama.cpp's converter stores them: Gemma's norm weights already hold 1 + w,
    so every norm multiplies by the stored weight; llama/granite Q and K rows are already
    permuted for RoPE on consecutive pairs ("norm"), the other families rotate the pairs
    (i, i + n_rot/2) ("neox").
  - Sliding-window layers (llama.cpp's swa pattern): gemma2 layers 0, 2, 4, ...; gemma3 all but
    every sixth. A query at position p sees keys at positions p - window + 1 .. p.
  - Phi-3 LongRoPE (transformers): the long factors when the sequence is longer than the
    original context, the short ones otherwise; cos and sin scaled by the attention factor.
  - A mixture of experts (Mixtral, Qwen3 MoE in transformers, norm_topk_prob): the router's
    softmax over all experts, the expert_used_count most probable kept and renormalized, their
    FFNs summed with those weights. Qwen2 MoE (Qwen1.5-MoE: norm_topk_prob false) keeps the
    probabilities as they are and adds its shared expert's FFN times sigmoid(x . w_shared_gate).
  - YaRN (transformers' _compute_yarn_parameters): frequencies blended between the trained ones
    and those divided by the factor over the correction range; cos and sin times 0.1 ln(f) + 1.
  - SmolLM3 (transformers' SmolLM3, no_rope_layer_interval 4): layers 3, 7, 11, ... use no RoPE.
  - gpt-oss (transformers' GptOss): layers 0, 2, 4, ... sliding, a learned sink logit per head
    in each softmax's denominator, a bias on the attention output, the router's scores biased
    and softmaxed over the top k, experts with biases and the clamped SwiGLU
    (min(gate, 7) * sigmoid(1.702 min(gate, 7)) * (clamp(up, -7, 7) + 1)); the FFN's input
    norm is stored as post_attention_norm.

Usage: forward_reference.py MODEL.gguf --tokens 1,2,3 --out logits.npy
"""
import argparse
import math
import struct
import sys
from dataclasses import dataclass

try:
    import numpy as np
except ImportError:
    sys.exit("forward_reference.py needs numpy: install Debian's python3-numpy and run it with /usr/bin/python3")

# ---------------------------------------------------------------------------------------------
# GGUF v3 reading: header, metadata, tensor infos, then tensor data at aligned offsets.
# ---------------------------------------------------------------------------------------------

GGUF_SCALARS = {  # GGUF metadata value type -> struct format
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
GGUF_STRING = 8
GGUF_ARRAY = 9
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30


class GgufCursor:
    """Sequential little-endian reads from the file's bytes."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def scalar(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        n = self.scalar("<Q")
        raw = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="surrogateescape")

    def value(self, value_type):
        if value_type in GGUF_SCALARS:
            return self.scalar(GGUF_SCALARS[value_type])
        if value_type == GGUF_STRING:
            return self.string()
        if value_type == GGUF_ARRAY:
            element_type = self.scalar("<I")
            count = self.scalar("<Q")
            return [self.value(element_type) for _ in range(count)]
        raise ValueError(f"unknown GGUF metadata value type {value_type}")


@dataclass
class TensorInfo:
    dims: list      # ggml order: dims[0] is the contiguous one
    ggml_type: int
    offset: int


class GgufFile:
    """metadata: key -> value; tensor(name) -> float64 array shaped like numpy (dims reversed)."""

    def __init__(self, path):
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        cursor = GgufCursor(self.data)
        if bytes(self.data[:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        cursor.pos = 4
        version = cursor.scalar("<I")
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}, this reader knows 3")
        n_tensors = cursor.scalar("<Q")
        n_metadata = cursor.scalar("<Q")
        self.metadata = {}
        for _ in range(n_metadata):
            key = cursor.string()
            self.metadata[key] = cursor.value(cursor.scalar("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = cursor.string()
            dims = [cursor.scalar("<Q") for _ in range(cursor.scalar("<I"))]
            ggml_type = cursor.scalar("<I")
            self.tensors[name] = TensorInfo(dims, ggml_type, cursor.scalar("<Q"))
        alignment = self.metadata.get("general.alignment", 32)
        self.data_start = (cursor.pos + alignment - 1) // alignment * alignment

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        info = self.tensors[name]
        count = math.prod(info.dims)
        start = self.data_start + info.offset
        shape = tuple(reversed(info.dims))
        if info.ggml_type == GGML_F32:
            values = np.frombuffer(self.data, dtype="<f4", count=count, offset=start)
        elif info.ggml_type == GGML_F16:
            values = np.frombuffer(self.data, dtype="<f2", count=count, offset=start)
        elif info.ggml_type == GGML_BF16:
            halves = np.frombuffer(self.data, dtype="<u2", count=count, offset=start)
            values = (halves.astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{name}: ggml type {info.ggml_type} is not F32, F16 or BF16")
        return values.astype(np.float64).reshape(shape)


# ---------------------------------------------------------------------------------------------
# Hyperparameters: the common keys, then each family's own.
# ---------------------------------------------------------------------------------------------

NEOX_ROPE_ARCHITECTURES = {"qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi3", "gpt-oss"}
NORM_ROPE_ARCHITECTURES = {"llama", "granite", "smollm3"}
GEMMA_LOCAL_ROPE_BASE = 10000.0   # llama.cpp's rope_freq_base_train_swa for Gemma 3


@dataclass
class Hyperparameters:
    arch: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rope_base: float
    rms_eps: float
    sliding_window: int = 0
    local_rope_base: float = 0.0
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    embedding_scale: float = 1.0
    residual_scale: float = 1.0
    attention_scale: float = 0.0   # 0: 1/sqrt(head_dim)
    logit_scale: float = 1.0
    rope_original_context: int = 0
    rope_attn_factor: float = 1.0
    yarn_factor: float = 0.0            # YaRN: 0 off
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    experts_used: int = 0   # of a mixture of experts; 0: a dense FFN

    def is_sliding_layer(self, layer):
        if self.sliding_window <= 0:
            return False
        if self.arch in ("gemma2", "gpt-oss"):
            return layer % 2 == 0
        return self.arch == "gemma3" and layer % 6 < 5

    def is_gemma(self):
        return self.arch in ("gemma", "gemma2", "gemma3")


def read_hyperparameters(gguf):
    m = gguf.metadata
    arch = m["general.architecture"]
    if arch not in NEOX_ROPE_ARCHITECTURES | NORM_ROPE_ARCHITECTURES:
        raise ValueError(f"architecture {arch} is not one this reference knows")
    a = arch + "."
    n_embd = m[a + "embedding_length"]
    n_head = m[a + "attention.head_count"]
    head_dim = m.get(a + "attention.key_length", n_embd // n_head)
    hp = Hyperparameters(
        arch=arch, n_embd=n_embd, n_layer=m[a + "block_count"], n_head=n_head,
        n_head_kv=m.get(a + "attention.head_count_kv", n_head), head_dim=head_dim,
        n_rot=m.get(a + "rope.dimension_count", head_dim), rope_base=m.get(a + "rope.freq_base", 10000.0),
        rms_eps=m[a + "attention.layer_norm_rms_epsilon"])
    if hp.is_gemma() or arch == "gpt-oss":
        hp.sliding_window = m.get(a + "attention.sliding_window", 0)
    if hp.is_gemma():
        hp.attn_softcap = m.get(a + "attn_logit_softcapping", 0.0)
        hp.final_softcap = m.get(a + "final_logit_softcapping", 0.0)
        hp.embedding_scale = math.sqrt(n_embd)
    hp.local_rope_base = m.get(a + "rope.freq_base_swa", GEMMA_LOCAL_ROPE_BASE) if arch == "gemma3" else hp.rope_base
    if arch == "granite":
        hp.embedding_scale = m.get(a + "embedding_scale", 1.0)
        hp.residual_scale = m.get(a + "residual_scale", 1.0)
        hp.attention_scale = m.get(a + "attention.scale", 0.0)
        hp.logit_scale = m.get(a + "logit_scale", 1.0)
    hp.rope_original_context = m.get(a + "rope.scaling.original_context_length", 0)
    hp.rope_attn_factor = m.get(a + "rope.scaling.attn_factor", 1.0)
    if m.get(a + "rope.scaling.type") == "yarn":
        hp.yarn_factor = m[a + "rope.scaling.factor"]
        hp.yarn_beta_fast = m.get(a + "rope.scaling.yarn_beta_fast", 32.0)
        hp.yarn_beta_slow = m.get(a + "rope.scaling.yarn_beta_slow", 1.0)
        hp.rope_attn_factor *= 0.1 * math.log(hp.yarn_factor) + 1.0
    hp.experts_used = m.get(a + "expert_used_count", 0)
    return hp


# ---------------------------------------------------------------------------------------------
# Building blocks.
# ---------------------------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def swiglu_oai(gate, up, alpha=1.702, limit=7.0):
    gate = np.minimum(gate, limit)
    return gate / (1.0 + np.exp(-alpha * gate)) * (np.clip(up, -limit, limit) + 1.0)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softcap(x, cap):
    return np.tanh(x / cap) * cap if cap > 0 else x


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_inv_freq(n_rot, base, freq_factors):
    """[n_rot/2] frequencies base^(-2i/n_rot) / factor_i."""
    inv_freq = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors
    return inv_freq


def yarn_inv_freq(inv_freq, n_rot, base, factor, original_context, beta_fast, beta_slow):
    """transformers' _compute_yarn_parameters: frequencies blended between the trained ones and
    those divided by factor, by a linear ramp over the pairs turning beta_fast..beta_slow times
    over the original context."""
    def correction_dim(rotations):
        return n_rot * math.log(original_context / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), n_rot - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(n_rot // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    return inv_freq / factor * (1 - extrapolation) + inv_freq * extrapolation


def apply_rope(x, angles, neox, mscale):
    """x: [tokens, heads, head_dim]; rotates the first n_rot = 2 * angles.shape[1] dims."""
    half = angles.shape[1]
    cos = (np.cos(angles) * mscale)[:, None, :]
    sin = (np.sin(angles) * mscale)[:, None, :]
    out = x.copy()
    if neox:
        x0, x1 = x[..., :half], x[..., half:2 * half]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:2 * half] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = x0 * cos - x1 * sin
        out[..., 1:2 * half:2] = x0 * sin + x1 * cos
    return out


def attention_mask(n_tokens, window):
    """0 where query row q may see key column k (k <= q, and q - k < window when windowed)."""
    q = np.arange(n_tokens)[:, None]
    k = np.arange(n_tokens)[None, :]
    visible = k <= q
    if window > 0:
        visible &= (q - k) < window
    return np.where(visible, 0.0, -np.inf)


# ---------------------------------------------------------------------------------------------
# The forward pass.
# ---------------------------------------------------------------------------------------------

class ReferenceModel:
    def __init__(self, path):
        self.gguf = GgufFile(path)
        self.hp = read_hyperparameters(self.gguf)

    def weight(self, name):
        return self.gguf.tensor(name)

    def optional(self, name):
        return self.gguf.tensor(name) if self.gguf.has(name) else None

    def logits(self, tokens):
        """[len(tokens), vocab] float64 logits, one row per position."""
        hp = self.hp
        x = self.weight("token_embd.weight")[np.asarray(tokens)] * hp.embedding_scale
        for layer in range(hp.n_layer):
            x = self.block(x, layer)
        x = rms_norm(x, self.weight("output_norm.weight"), hp.rms_eps)
        output = self.optional("output.weight")
        logits = x @ (output if output is not None else self.weight("token_embd.weight")).T
        return softcap(logits / hp.logit_scale, hp.final_softcap)

    def block(self, x, layer):
        hp = self.hp
        p = f"blk.{layer}."
        attn = self.attention(rms_norm(x, self.weight(p + "attn_norm.weight"), hp.rms_eps), layer)
        if hp.arch == "gpt-oss":
            x = x + attn
            return x + self.feed_forward(rms_norm(x, self.weight(p + "post_attention_norm.weight"), hp.rms_eps), layer)
        x = x + self.post_norm(attn, p + "post_attention_norm.weight") * hp.residual_scale
        ffn = self.feed_forward(rms_norm(x, self.weight(p + "ffn_norm.weight"), hp.rms_eps), layer)
        return x + self.post_norm(ffn, p + "post_ffw_norm.weight") * hp.residual_scale

    def post_norm(self, x, name):
        weight = self.optional(name)
        return rms_norm(x, weight, self.hp.rms_eps) if weight is not None else x

    def qkv(self, h, layer):
        """Q, K, V projections [tokens, dims] with their biases; Phi-3's come fused as Q|K|V."""
        hp = self.hp
        p = f"blk.{layer}."
        q_dim, kv_dim = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
        if self.gguf.has(p + "attn_qkv.weight"):
            fused = h @ self.weight(p + "attn_qkv.weight").T
            return fused[:, :q_dim], fused[:, q_dim:q_dim + kv_dim], fused[:, q_dim + kv_dim:]
        projections = []
        for part in ("q", "k", "v"):
            y = h @ self.weight(f"{p}attn_{part}.weight").T
            bias = self.optional(f"{p}attn_{part}.bias")
            projections.append(y + bias if bias is not None else y)
        return projections

    def rope_factors(self, n_tokens):
        """Per-pair frequency divisors: rope_freqs (Llama 3), Phi-3's long/short, or none."""
        hp = self.hp
        if self.gguf.has("rope_freqs.weight"):
            return self.weight("rope_freqs.weight")
        if self.gguf.has("rope_factors_long.weight"):
            use_long = n_tokens > hp.rope_original_context
            return self.weight("rope_factors_long.weight" if use_long else "rope_factors_short.weight")
        return None

    def rotate(self, x, layer):
        hp = self.hp
        n_tokens = x.shape[0]
        base = hp.local_rope_base if hp.is_sliding_layer(layer) else hp.rope_base
        inv_freq = rope_inv_freq(hp.n_rot, base, self.rope_factors(n_tokens))
        if hp.yarn_factor:
            inv_freq = yarn_inv_freq(inv_freq, hp.n_rot, base, hp.yarn_factor, hp.rope_original_context,
                                     hp.yarn_beta_fast, hp.yarn_beta_slow)
        angles = np.outer(np.arange(n_tokens), inv_freq)
        return apply_rope(x, angles, hp.arch in NEOX_ROPE_ARCHITECTURES, hp.rope_attn_factor)

    def attention(self, h, layer):
        hp = self.hp
        p = f"blk.{layer}."
        n_tokens = h.shape[0]
        q, k, v = (y.reshape(n_tokens, -1, hp.head_dim) for y in self.qkv(h, layer))
        q_norm, k_norm = self.optional(p + "attn_q_norm.weight"), self.optional(p + "attn_k_norm.weight")
        if q_norm is not None:
            q = rms_norm(q, q_norm, hp.rms_eps)
            k = rms_norm(k, k_norm, hp.rms_eps)
        if not (hp.arch == "smollm3" and (layer + 1) % 4 == 0):   # SmolLM3's NoPE layers
            q, k = self.rotate(q, layer), self.rotate(k, layer)
        scale = hp.attention_scale if hp.attention_scale > 0 else 1.0 / math.sqrt(hp.head_dim)
        mask = attention_mask(n_tokens, hp.sliding_window if hp.is_sliding_layer(layer) else 0)
        group = hp.n_head // hp.n_head_kv
        sinks = self.optional(p + "attn_sinks.weight")
        heads = []
        for head in range(hp.n_head):
            kv = head // group
            scores = softcap((q[:, head] @ k[:, kv].T) * scale, hp.attn_softcap) + mask
            if sinks is None:
                heads.append(softmax(scores) @ v[:, kv])
            else:   # the sink as one more column whose probability is dropped
                with_sink = np.concatenate([scores, np.full((n_tokens, 1), sinks[head])], axis=-1)
                heads.append(softmax(with_sink)[:, :-1] @ v[:, kv])
        out = np.concatenate(heads, axis=-1) @ self.weight(p + "attn_output.weight").T
        bias = self.optional(p + "attn_output.bias")
        return out + bias if bias is not None else out

    def feed_forward(self, h, layer):
        """Gated FFN: act(gate) * up -> down; Phi-3's ffn_up holds gate|up; Gemma's act is GELU-tanh."""
        p = f"blk.{layer}."
        act = gelu_tanh if self.hp.is_gemma() else silu
        if self.gguf.has(p + "ffn_gate_inp.weight"):
            return self.experts(h, layer)
        if self.gguf.has(p + "ffn_gate.weight"):
            gate = h @ self.weight(p + "ffn_gate.weight").T
            up = h @ self.weight(p + "ffn_up.weight").T
        else:
            gate, up = np.split(h @ self.weight(p + "ffn_up.weight").T, 2, axis=-1)
        return (act(gate) * up) @ self.weight(p + "ffn_down.weight").T

    def expert_matrices(self, p, kind, n_experts):
        """[experts, rows, cols]: stacked (ffn_gate_exps), or one tensor per expert as Mixtral files
        converted before April 2024 hold them (ffn_gate.0 ..)."""
        stacked = f"{p}ffn_{kind}_exps.weight"
        if self.gguf.has(stacked):
            return self.weight(stacked)
        return np.stack([self.weight(f"{p}ffn_{kind}.{e}.weight") for e in range(n_experts)])

    def experts(self, h, layer):
        """Each token's expert_used_count most probable experts, weighted by their probabilities,
        renormalized over the chosen ones except in Qwen2 MoE (norm_topk_prob false), which adds a
        shared expert gated by sigmoid(h . ffn_gate_inp_shexp)."""
        p = f"blk.{layer}."
        router = self.weight(p + "ffn_gate_inp.weight")
        router_bias = self.optional(p + "ffn_gate_inp.bias")
        probs = softmax(h @ router.T + (router_bias if router_bias is not None else 0.0))
        gates, ups, downs = (self.expert_matrices(p, kind, router.shape[0]) for kind in ("gate", "up", "down"))
        gpt_oss = self.hp.arch == "gpt-oss"
        if gpt_oss:   # biases on every expert matrix and the clamped SwiGLU
            gate_b, up_b, down_b = (self.weight(f"{p}ffn_{kind}_exps.bias") for kind in ("gate", "up", "down"))
        out = np.zeros_like(h)
        if self.hp.arch == "qwen2moe":
            shared_gate = 1.0 / (1.0 + np.exp(-(h @ self.weight(p + "ffn_gate_inp_shexp.weight").reshape(-1))))
            shared = silu(h @ self.weight(p + "ffn_gate_shexp.weight").T) * (h @ self.weight(p + "ffn_up_shexp.weight").T)
            out = shared_gate[:, None] * (shared @ self.weight(p + "ffn_down_shexp.weight").T)
        for t in range(h.shape[0]):
            chosen = np.argsort(-probs[t], kind="stable")[:self.hp.experts_used]
            weights = probs[t, chosen] if self.hp.arch == "qwen2moe" else probs[t, chosen] / probs[t, chosen].sum()
            for e, w in zip(chosen, weights):
                if gpt_oss:
                    hidden = swiglu_oai(gates[e] @ h[t] + gate_b[e], ups[e] @ h[t] + up_b[e])
                    out[t] += w * (hidden @ downs[e].T + down_b[e])
                else:
                    out[t] += w * ((silu(gates[e] @ h[t]) * (ups[e] @ h[t])) @ downs[e].T)
        return out


def main():
    parser = argparse.ArgumentParser(description="Reference logits for a GGUF model, in numpy")
    parser.add_argument("model", help="GGUF file (F32, F16 or BF16 tensors)")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--out", required=True, help=".npy file for the [tokens, vocab] logits")
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    np.save(args.out, ReferenceModel(args.model).logits(tokens))


if __name__ == "__main__":
    main()
