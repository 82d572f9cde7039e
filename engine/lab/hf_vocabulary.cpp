// tokenizer.json -> the converter's tokenizer.* keys. The JSON is read with nlohmann::json;
// the pre-tokenizer's regexes run on kvdesk's own PreTokenizer (ICU runs Hugging Face's
// patterns as written), so choosing tokenizer.ggml.pre compares splits, not regex spellings.
#include "engine/lab/hf_vocabulary.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "engine/lab/gguf_writer.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/pretokenizer_rules.h"

namespace kvdesk {
namespace {

using nlohmann::json;

constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kUnused = 5;

// Text the pre-tokenizer families split differently: llama.cpp's own check text (its
// converter's chktxt), then contractions glued to words, case changes, scripts each family
// treats apart (kana, Han, Hangul, Devanagari), digit runs of every length, the punctuation
// BLOOM splits at, and whitespace runs long enough for Jais 2's power-of-two cuts.
constexpr const char* kProbeText =
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\xF0\x9F\x9A\x80 (normal) \xF0\x9F\x98\xB6\xE2\x80\x8D"
    "\xF0\x9F\x8C\xAB\xEF\xB8\x8F (multiple emojis concatenated) \xE2\x9C\x85 \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 3 33 "
    "333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 \xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B\xE1\x9E"
    "\x8F\xE1\x9F\x82\xE1\x9E\x96\xE1\x9E\xB7\xE1\x9E\x9F\xE1\x9F\x81\xE1\x9E\x9F\xE1\x9E\xA2\xE1\x9E\xB6\xE1\x9E"
    "\x85\xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C" "1314151\xE5\xA4\xA9"
    "\xEF\xBD\x9E ------======= \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xD0\xBD\xD0\xB0 \xD0\x91\xD1\x8A\xD0\xBB\xD0\xB3"
    "\xD0\xB0\xD1\x80\xD1\x81\xD0\xBA\xD0\xB8 ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, "
    "'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"
    "\r\n\r\n\r x/y\n/\n// I'llama 'velvet 'S 'LLama we'VE don't DON'T CamelCaseWORDS HTTPServer xmlHTTPRequest "
    "\xC7\x85ungla \xCA\xB0mod e\xCC\x81t\xC3\xA9 \xE3\x81\xB2\xE3\x82\x89\xE3\x82\xAB\xE3\x82\xBF\xE6\xBC\xA2"
    "\xE5\xAD\x97 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9 "
    "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80 \xE0\xB9\x91\xE0\xB9\x92 1234567 "
    "12,345.678 \xEF\xBC\x93\xEF\xBC\x94 \xC2\xB2\xC2\xB3 \xE2\x91\xA0 \xE3\x80\x80\xC2\xA0\v\f\xC2\x85 "
    "a.b,c!d?e\xE2\x80\xA6" "f\xE3\x80\x82g\xEF\xBC\x8Ch\xE3\x80\x81i\xE0\xA5\xA4j\xDB\x94k\xD8\x8Cl (x|y) "
    "\xE2\x80\x9C" "curly\xE2\x80\x9D \xEF\xBC\xA0" "full\xEF\xBC\x81 $100 #tag @user <tag> {brace} [box] a  b   c"
    "                 d end   ";

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not JSON: " + e.what());
  }
}

// A JSON file beside tokenizer.json, or an empty object when there is none.
json read_sibling(const std::filesystem::path& tokenizer_json, const char* name) {
  const std::filesystem::path path = tokenizer_json.parent_path() / name;
  return std::filesystem::is_regular_file(path) ? read_json(path) : json::object();
}

bool starts_and_ends(const std::string& text, std::string_view begin, std::string_view end) {
  return text.size() >= begin.size() + end.size() && text.starts_with(begin) && text.ends_with(end);
}

// convert_hf_to_gguf.py's does_token_look_special: added tokens some models forgot to mark special.
bool looks_special(const std::string& text) {
  return text == "<pad>" || text == "<mask>" || text == "<2mass>" || text == "[@BOS@]" ||
         starts_and_ends(text, "<|", "|>") || starts_and_ends(text, "<\xEF\xBD\x9C", "\xEF\xBD\x9C>") ||
         starts_and_ends(text, "<unused", ">");
}

// The converter writes a user-defined token's U+2581 (SentencePiece's space) as a space.
std::string with_spaces(std::string text) {
  static const std::string kEscapedSpace = "\xE2\x96\x81";
  for (size_t at; (at = text.find(kEscapedSpace)) != std::string::npos;) text.replace(at, kEscapedSpace.size(), " ");
  return text;
}

void place_token(HfBpeVocabulary& v, int64_t id, std::string text, int32_t type) {
  if (id < 0 || id > INT32_MAX) throw Error("token id " + std::to_string(id) + " out of range");
  if (size_t(id) >= v.tokens.size()) {
    for (size_t i = v.tokens.size(); i <= size_t(id); ++i) {
      v.tokens.push_back("[PAD" + std::to_string(i) + "]");
      v.types.push_back(kUnused);
    }
  }
  v.tokens[size_t(id)] = std::move(text);
  v.types[size_t(id)] = type;
}

void read_tokens(const json& model, const json& added_tokens, HfBpeVocabulary& v) {
  for (const auto& [text, id] : model.at("vocab").items()) place_token(v, id.get<int64_t>(), text, kNormal);
  for (const json& added : added_tokens) {
    const std::string text = added.at("content").get<std::string>();
    const bool control = added.value("special", false) || looks_special(text);
    place_token(v, added.at("id").get<int64_t>(), control ? text : with_spaces(text), control ? kControl : kUserDefined);
  }
}

// Merges as "left right" strings; the newer [left, right] pairs may hold spaces, which the
// converter writes as U+0120 (what byte-level text makes of a space).
std::vector<std::string> read_merges(const json& merges) {
  std::vector<std::string> out;
  out.reserve(merges.size());
  const auto escape_spaces = [](std::string part) {
    for (size_t at; (at = part.find(' ')) != std::string::npos;) part.replace(at, 1, "\xC4\xA0");
    return part;
  };
  for (const json& merge : merges) {
    out.push_back(merge.is_string() ? merge.get<std::string>()
                                    : escape_spaces(merge.at(0).get<std::string>()) + " " +
                                          escape_spaces(merge.at(1).get<std::string>()));
  }
  return out;
}

// Regexes of the pre_tokenizer, in the order they split.
void collect_patterns(const json& pre, std::vector<std::string>& patterns) {
  const std::string type = pre.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const json& stage : pre.at("pretokenizers")) collect_patterns(stage, patterns);
  } else if (type == "Split") {
    if (pre.value("behavior", "") != "Isolated" || pre.value("invert", false)) {
      throw Error("a Split pre-tokenizer that is not \"Isolated\" (or is inverted)");
    }
    const json& pattern = pre.at("pattern");
    patterns.push_back(pattern.contains("Regex") ? pattern.at("Regex").get<std::string>()
                                                 : "\\Q" + pattern.at("String").get<std::string>() + "\\E");
  } else if (type == "ByteLevel") {
    if (pre.value("add_prefix_space", false)) throw Error("a ByteLevel pre-tokenizer that adds a prefix space");
    if (pre.value("use_regex", true)) patterns.push_back(pre_tokenizer_rules("gpt-2").patterns.front());
  } else if (type == "Digits") {
    patterns.push_back(pre.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else {
    throw Error("the pre-tokenizer type \"" + type + "\"");
  }
}

bool normalizes_to_nfc(const json& normalizer) {
  if (!normalizer.is_object()) return false;
  if (normalizer.value("type", "") == "NFC") return true;
  if (!normalizer.contains("normalizers")) return false;
  for (const json& inner : normalizer.at("normalizers")) {
    if (normalizes_to_nfc(inner)) return true;
  }
  return false;
}

// tokenizer_config.json's "bos_token" / "eos_token": a string or {"content": ...}.
std::optional<std::string> configured_token_text(const json& config, const std::string& key) {
  if (!config.contains(key)) return std::nullopt;
  const json& entry = config.at(key);
  const json content = entry.is_object() ? entry.value("content", json()) : entry;
  return content.is_string() ? std::optional<std::string>(content.get<std::string>()) : std::nullopt;
}

// That token's id: the first added token with its text, as SpecialVocab looks it up.
std::optional<int32_t> configured_token_id(const json& config, const std::string& key, const json& added_tokens) {
  const std::optional<std::string> text = configured_token_text(config, key);
  if (!text) return std::nullopt;
  for (const json& added : added_tokens) {
    if (added.at("content") == *text) return added.at("id").get<int32_t>();
  }
  return std::nullopt;
}

// config.json's "bos_token_id" / "eos_token_id", which SpecialVocab reads when
// tokenizer_config.json named no such token.
std::optional<int32_t> model_config_token_id(const json& model_config, const std::string& key) {
  const json id = model_config.value(key, json());
  return id.is_number_integer() ? std::optional<int32_t>(id.get<int32_t>()) : std::nullopt;
}

// SpecialVocab's reading of a TemplateProcessing post-processor: BOS is added when the single
// template starts with the BOS token, EOS when it ends with the EOS token.
void read_post_processor(const json& post, const json& config, HfBpeVocabulary& v) {
  if (!post.is_object()) return;
  const json processors = post.contains("processors") ? post.at("processors") : json::array({post});
  for (const json& processor : processors) {
    if (processor.value("type", "") != "TemplateProcessing") continue;
    const json& single = processor.at("single");
    if (single.size() < 2) continue;
    const auto special_at = [&](const json& item) { return item.value("SpecialToken", json::object()).value("id", ""); };
    if (const std::string first = special_at(single.front()); !first.empty()) {
      v.add_bos = first == configured_token_text(config, "bos_token").value_or(first);
    }
    if (const std::string last = special_at(single.back()); !last.empty()) {
      v.add_eos = last == configured_token_text(config, "eos_token").value_or(last);
    }
  }
}

void read_special_tokens(const json& tokenizer, const json& config, const json& model_config, HfBpeVocabulary& v) {
  const json& added_tokens = tokenizer.at("added_tokens");
  v.bos = configured_token_id(config, "bos_token", added_tokens);
  v.eos = configured_token_id(config, "eos_token", added_tokens);
  if (!v.bos) v.bos = model_config_token_id(model_config, "bos_token_id");
  if (!v.eos) v.eos = model_config_token_id(model_config, "eos_token_id");
  read_post_processor(tokenizer.value("post_processor", json()), config, v);
  if (config.value("add_bos_token", json()).is_boolean()) v.add_bos = config.at("add_bos_token").get<bool>();
  if (config.value("add_eos_token", json()).is_boolean()) v.add_eos = config.at("add_eos_token").get<bool>();
  if (config.value("chat_template", json()).is_string()) v.chat_template = config.at("chat_template").get<std::string>();
}

void check_byte_level_bpe(const json& tokenizer) {
  const json& model = tokenizer.at("model");
  if (model.value("type", "") != "BPE" || model.value("byte_fallback", false) ||
      tokenizer.value("decoder", json::object()).value("type", "") != "ByteLevel") {
    throw Error("not a byte-level BPE tokenizer (model.type BPE without byte_fallback, decoder ByteLevel)");
  }
}

}  // namespace

std::string pre_tokenizer_name_for(const std::vector<std::string>& patterns, bool ignore_merges, bool nfc) {
  const std::vector<std::string_view> split = PreTokenizer(patterns).split(kProbeText);
  std::string best;
  int best_agreement = -1;
  for (const PreTokenizerFamily& family : pre_tokenizer_families()) {
    if (PreTokenizer(family.rules->patterns).split(kProbeText) != split) continue;
    const int agreement = int(family.rules->ignore_merges == ignore_merges) + int(family.rules->nfc == nfc);
    if (agreement > best_agreement) {
      best = family.name;
      best_agreement = agreement;
    }
  }
  if (best.empty()) throw Error("no tokenizer.ggml.pre known to kvdesk splits text like this pre-tokenizer");
  return best;
}

HfBpeVocabulary read_hf_bpe_vocabulary(const std::string& tokenizer_json_path) {
  const std::filesystem::path path(tokenizer_json_path);
  const json tokenizer = read_json(path);
  try {
    check_byte_level_bpe(tokenizer);
    HfBpeVocabulary v;
    const json& model = tokenizer.at("model");
    read_tokens(model, tokenizer.at("added_tokens"), v);
    v.merges = read_merges(model.at("merges"));
    std::vector<std::string> patterns;
    collect_patterns(tokenizer.at("pre_tokenizer"), patterns);
    v.pre = pre_tokenizer_name_for(patterns, model.value("ignore_merges", false),
                                   normalizes_to_nfc(tokenizer.value("normalizer", json())));
    read_special_tokens(tokenizer, read_sibling(path, "tokenizer_config.json"), read_sibling(path, "config.json"), v);
    return v;
  } catch (const json::exception& e) {
    throw Error(path.string() + ": unexpected tokenizer.json layout: " + e.what());
  } catch (const Error& e) {
    throw Error(path.string() + ": cannot convert: " + e.what());
  }
}

void write_hf_bpe_vocabulary(GgufWriter& w, const HfBpeVocabulary& v) {
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", v.pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_int32_array("tokenizer.ggml.token_type", v.types);
  w.add_string_array("tokenizer.ggml.merges", v.merges);
  if (v.bos) w.add_uint32("tokenizer.ggml.bos_token_id", uint32_t(*v.bos));
  if (v.eos) w.add_uint32("tokenizer.ggml.eos_token_id", uint32_t(*v.eos));
  if (v.add_bos) w.add_bool("tokenizer.ggml.add_bos_token", *v.add_bos);
  if (v.add_eos) w.add_bool("tokenizer.ggml.add_eos_token", *v.add_eos);
  if (v.chat_template) w.add_string("tokenizer.chat_template", *v.chat_template);
}

}  // namespace kvdesk
