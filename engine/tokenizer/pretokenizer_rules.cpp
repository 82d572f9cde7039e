// The table of tokenizer.ggml.pre names. The patterns are the ones in each family's
// tokenizer.json, which llama.cpp records next to the forms it adapts for its own regex
// engine; ICU runs the originals as written (\p{Lu}, (?i:...), set intersection, possessive
// quantifiers), so no adaptation is needed. Non-ASCII characters in character classes are
// written as \x{...} code points, so that no editor or normalization can change them.
#include "engine/tokenizer/pretokenizer_rules.h"

#include "engine/error.h"

namespace kvdesk {
namespace {

// GPT-2: lowercase contractions, letter and number runs with one optional leading space.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3: case-insensitive contractions, a letter run with at most one leading non-letter,
// numbers in groups of up to three digits, newlines kept with the punctuation before them.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama 3's pattern with every digit on its own.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2's pattern with combining marks (\p{M}) kept inside words.
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o (o200k): a word is an optional non-letter, then capitals followed by lowercase (or
// a run of capitals), with a contraction attached; numbers in threes; "/" joins newlines.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tekken (Mistral NeMo and later): GPT-4o's words without contractions, every digit apart.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Kimi K2: runs of Han characters first, then GPT-4o-style words that exclude Han.
constexpr const char* kKimiK2 =
    R"(\p{Han}+)"
    R"(|[^\r\n\p{L}\p{N}]?[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]&&[^\p{Han}]]*[[\p{Ll}\p{Lm}\p{Lo}\p{M}]&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]&&[^\p{Han}]]+[[\p{Ll}\p{Lm}\p{Lo}\p{M}]&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek LLM's letters: the cased letters (Latin, Greek, Cyrillic, Armenian, Georgian, ...)
// with one optional leading whitespace; other scripts are left to the later stages.
constexpr const char* kDeepSeekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
// DeepSeek LLM's punctuation: ASCII and fullwidth punctuation, curly quotes, ideographic
// space and full stop.
constexpr const char* kDeepSeekPunctuation =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
// DeepSeek LLM and Coder: CJK ideographs (and the blocks before them) and Hangul as runs.
constexpr const char* kDeepSeekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek V3: CJK ideographs, Hiragana and Katakana as runs.
constexpr const char* kDeepSeekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
// DeepSeek V3: an ASCII punctuation mark may lead an ASCII word; letters keep their marks.
constexpr const char* kDeepSeekV3Words =
    R"([!-/:-@\[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM, Poro, Viking: anything up to whitespace or sentence punctuation (the parentheses and
// "|" are members of the class, as in the original).
constexpr const char* kBloom =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
// Ling (BailingMoE): Qwen2's pattern with possessive quantifiers and one newline per match.
constexpr const char* kBailingMoe =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// Seed-Coder: Qwen2's pattern where punctuation never takes newlines.
constexpr const char* kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// EXAONE MoE: words may span single spaces between letters.
constexpr const char* kExaoneMoe =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
// MiniCPM5: Llama 3's pattern with whole digit runs (an earlier stage cuts them in threes).
constexpr const char* kMiniCpm5 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's pattern without contractions, so Turkish apostrophe suffixes stay on their word.
constexpr const char* kUfakZeka =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Jais 2: Llama 3's pattern with whitespace runs cut in power-of-two lengths.
constexpr const char* kJais2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)"
    R"(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S))"
    R"(|\s{1,2}(?!\S)|\s{1})";

// names.front() is the name llama.cpp's converter writes for the family's reference model.
struct Family {
  std::vector<std::string_view> names;
  PreTokenizerRules rules;
};

// Split rules with neither loading flag set and no normalization.
PreTokenizerRules patterns_only(std::vector<std::string> patterns) { return {std::move(patterns), false, false, false}; }

// Split rules after NFC, with neither loading flag set.
PreTokenizerRules nfc_then(std::vector<std::string> patterns) { return {std::move(patterns), false, false, true}; }

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      // llama.cpp's rules for a BPE vocabulary that names no pre-tokenizer.
      {{"default"}, patterns_only({R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"})},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {{kLlama3}, true, true}},
      {{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, patterns_only({kLlama3})},
      // Qwen's tokenizer.json (DeepSeek R1's Qwen distills share it) normalizes to NFC; the
      // other families with Qwen2's split are not known to.
      {{"qwen2", "deepseek-r1-qwen"}, nfc_then({kQwen2})},
      {{"kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"}, patterns_only({kQwen2})},
      {{"qwen35"}, patterns_only({kQwen35})},
      {{"deepseek-llm"},
       patterns_only({R"([\r\n])", kDeepSeekLetters, kDeepSeekPunctuation, R"(\s+$)", kDeepSeekCjk, R"(\p{N}+)"})},
      {{"deepseek-coder"}, patterns_only({R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepSeekCjk, R"(\p{N})"})},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, patterns_only({R"(\p{N}{1,3})", kDeepSeekV3Cjk, kDeepSeekV3Words})},
      {{"falcon"}, patterns_only({R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"})},
      // StarCoder's tokenizer: every digit apart first, then GPT-2's pattern.
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
       patterns_only({R"(\p{N})", kGpt2})},
      {{"gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "exaone4", "olmo", "jais", "trillion", "granite-docling"},
       patterns_only({kGpt2})},
      // GPT-NeoX's tokenizer.json (MPT's) normalizes to NFC before GPT-2's split.
      {{"mpt"}, nfc_then({kGpt2})},
      {{"poro-chat", "bloom", "gpt3-finnish"}, patterns_only({kBloom})},
      {{"viking"}, patterns_only({kBloom, R"(\p{N})"})},
      {{"tekken"}, {{kTekken}, true, true}},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, patterns_only({kGpt4o})},
      // Digits in threes counted from the right ("1234567" -> 1 234 567), then GPT-4o's pattern.
      {{"tiny_aya", "cohere2moe"}, patterns_only({R"(\d{1,3}(?=(?:\d{3})*\b))", kGpt4o})},
      {{"kimi-k2"}, patterns_only({kKimiK2})},
      // Number runs, then cut before every group of three digits that ends the run.
      {{"superbpe"}, patterns_only({R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"})},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, patterns_only({kBailingMoe})},
      {{"seed-coder"}, patterns_only({kSeedCoder})},
      {{"exaone-moe"}, patterns_only({kExaoneMoe})},
      {{"minicpm5"}, {{R"(\p{N}{1,3})", kMiniCpm5}, true, false}},
      {{"ufakzeka"}, patterns_only({kUfakZeka})},
      {{"jais-2"}, patterns_only({kJais2})},
      {{"laguna"}, patterns_only({R"([^\n]+|[\n]+)", kQwen2})},
  };
  return table;
}

}  // namespace

const PreTokenizerRules& pre_tokenizer_rules(std::string_view name) {
  for (const Family& family : families()) {
    for (const std::string_view known : family.names) {
      if (known == name) return family.rules;
    }
  }
  std::string names;
  for (const std::string_view known : known_pre_tokenizer_names()) {
    names += std::string(names.empty() ? "" : ", ") + std::string(known);
  }
  throw Error("unsupported pre-tokenizer '" + std::string(name) + "' (tokenizer.ggml.pre; kvdesk knows " + names + ")");
}

std::vector<std::string_view> known_pre_tokenizer_names() {
  std::vector<std::string_view> names;
  for (const Family& family : families()) names.insert(names.end(), family.names.begin(), family.names.end());
  return names;
}

std::vector<PreTokenizerFamily> pre_tokenizer_families() {
  std::vector<PreTokenizerFamily> out;
  for (const Family& family : families()) out.push_back({family.names.front(), &family.rules});
  return out;
}

}  // namespace kvdesk
