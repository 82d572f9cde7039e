#!/usr/bin/env python3
# Writes the seed GGUF files of the fuzz_gguf corpus into OUT_DIR: tiny but complete files, so
# the fuzzer starts from inputs that get through the reader into the model load. tests/fuzz/run.sh
# makes them each run (model files are generated, never committed).
#   tiny_llama.gguf   a whole Llama model: 4-token vocabulary, d_model 8, 1 layer, F32
#   tiny_llama_q8.gguf  the same with d_model 32 and Q8_0 matrices, a ChatML template
#   tiny_mixtral.gguf  tiny_llama with a mixture of 2 experts (1 per token) in place of its FFN
#   all_types_v2.gguf  GGUF v2, one metadata value of every type, one F16 tensor
#   python3 tests/fuzz/make_gguf_seeds.py OUT_DIR
import os
import struct
import sys

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
F32, F16, Q8_0 = 0, 1, 8


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    fmt = {T_U8: "B", T_I8: "b", T_U16: "H", T_I16: "h", T_U32: "I", T_I32: "i", T_F32: "f",
           T_BOOL: "?", T_U64: "Q", T_I64: "q", T_F64: "d"}
    if t == T_STR:
        return s(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack("<" + fmt[t], v)


def gguf(version, kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml_type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += s(key) + struct.pack("<I", t) + value(t, v)
    offset, blobs = 0, []
    for name, dims, gtype, data in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        pad = (-len(data)) % alignment
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + b"".join(blobs)


def f32s(n, scale=0.1):
    return b"".join(struct.pack("<f", scale * ((i * 7919) % 13 - 6)) for i in range(n))


def q8_0(rows, cols):
    block = struct.pack("<e", 0.01) + bytes((i * 37) % 256 for i in range(32))
    return block * (rows * cols // 32)


def llama(d, ff, matrix_type, extra_kvs, experts=0):
    vocab = ["<unk>", "<s>", "</s>", "\u2581a"]
    kvs = [("general.architecture", T_STR, "llama"), ("general.name", T_STR, "tiny"),
           ("llama.context_length", T_U32, 16), ("llama.embedding_length", T_U32, d),
           ("llama.block_count", T_U32, 1), ("llama.feed_forward_length", T_U32, ff),
           ("llama.attention.head_count", T_U32, 2), ("llama.attention.head_count_kv", T_U32, 1),
           ("llama.rope.freq_base", T_F32, 10000.0),
           ("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
           ("tokenizer.ggml.model", T_STR, "llama"),
           ("tokenizer.ggml.tokens", T_ARR, (T_STR, vocab)),
           ("tokenizer.ggml.scores", T_ARR, (T_F32, [0.0, 0.0, 0.0, -1.0])),
           ("tokenizer.ggml.token_type", T_ARR, (T_I32, [2, 3, 3, 1])),
           ("tokenizer.ggml.bos_token_id", T_U32, 1), ("tokenizer.ggml.eos_token_id", T_U32, 2)]
    kvs += extra_kvs

    def matrix(name, rows, cols):
        if matrix_type == Q8_0:
            return (name, [cols, rows], Q8_0, q8_0(rows, cols))
        return (name, [cols, rows], F32, f32s(rows * cols))

    kv_dim = d // 2
    tensors = [("token_embd.weight", [d, len(vocab)], F32, f32s(d * len(vocab))),
               ("output_norm.weight", [d], F32, f32s(d, 1.0)),
               ("blk.0.attn_norm.weight", [d], F32, f32s(d, 1.0)),
               matrix("blk.0.attn_q.weight", d, d), matrix("blk.0.attn_k.weight", kv_dim, d),
               matrix("blk.0.attn_v.weight", kv_dim, d), matrix("blk.0.attn_output.weight", d, d),
               ("blk.0.ffn_norm.weight", [d], F32, f32s(d, 1.0))]
    if experts:
        kvs += [("llama.expert_count", T_U32, experts), ("llama.expert_used_count", T_U32, 1)]
        tensors += [("blk.0.ffn_gate_inp.weight", [d, experts], F32, f32s(d * experts)),
                    ("blk.0.ffn_gate_exps.weight", [d, ff, experts], F32, f32s(d * ff * experts)),
                    ("blk.0.ffn_up_exps.weight", [d, ff, experts], F32, f32s(d * ff * experts)),
                    ("blk.0.ffn_down_exps.weight", [ff, d, experts], F32, f32s(ff * d * experts))]
    else:
        tensors += [matrix("blk.0.ffn_gate.weight", ff, d), matrix("blk.0.ffn_up.weight", ff, d),
                    matrix("blk.0.ffn_down.weight", d, ff)]
    return gguf(3, kvs, tensors)


def all_types():
    kvs = [("u8", T_U8, 200), ("i8", T_I8, -100), ("u16", T_U16, 60000), ("i16", T_I16, -30000),
           ("u32", T_U32, 4000000000), ("i32", T_I32, -2000000000), ("f32", T_F32, 0.5),
           ("bool", T_BOOL, True), ("str", T_STR, "text"), ("u64", T_U64, 2**63),
           ("i64", T_I64, -2**62), ("f64", T_F64, -2.5),
           ("strings", T_ARR, (T_STR, ["x", "", "yz"])), ("bools", T_ARR, (T_BOOL, [True, False])),
           ("general.alignment", T_U32, 64)]
    return gguf(2, kvs, [("h", [4, 2], F16, struct.pack("<8e", *range(8)))], alignment=64)


def main(out):
    os.makedirs(out, exist_ok=True)
    chatml = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
              "'<|im_end|>\\n'}}{% endfor %}")
    files = {"tiny_llama.gguf": llama(8, 8, F32, []),
             "tiny_llama_q8.gguf": llama(32, 32, Q8_0, [("tokenizer.chat_template", T_STR, chatml)]),
             "tiny_mixtral.gguf": llama(8, 8, F32, [], experts=2),
             "all_types_v2.gguf": all_types()}
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if len(sys.argv) != 2:
    sys.exit("usage: make_gguf_seeds.py OUT_DIR")
main(sys.argv[1])
