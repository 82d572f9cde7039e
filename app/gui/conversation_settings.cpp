// Conversation settings: store <-> view <-> Request (see conversation_settings.h). Each field
// has one row in the table below: its range, and where it lives in the store and in the view.
#include "app/gui/conversation_settings.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <iterator>
#include <string>

namespace kvdesk::gui {
namespace {

using ui::SettingField;

constexpr int32_t kMaxContextLength = 1 << 24;
constexpr int32_t kMaxNewTokens = 1 << 20;
constexpr int32_t kMaxTopK = 1 << 20;

std::string number_text(double value) {
  std::string text = std::to_string(value);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// Copies a stored number into the view when it lies in [low, high]; else notes it.
template <class Stored, class Value>
void take_number(const std::optional<Stored>& stored, double low, double high, SettingField field, const char* name,
                 Value& value, ui::ConversationSettingsView& view) {
  if (!stored) return;
  const double v = double(*stored);
  if (!std::isfinite(v) || v < low || v > high) {
    view.note += std::string(view.note.empty() ? "" : "; ") + name + " " + number_text(v) + " is out of range (" +
                 number_text(low) + " to " + number_text(high) + "): the app's default is used";
    return;
  }
  value = Value(*stored);
  view.set_own(field, true);
}

void take_retention(const std::optional<std::string>& stored, ui::ConversationSettingsView& view) {
  if (!stored) return;
  const auto begin = std::begin(ui::kRetentionPolicyNames);
  const auto end = std::end(ui::kRetentionPolicyNames);
  const auto it = std::find_if(begin, end, [&](const char* name) { return *stored == name; });
  if (it == end) {
    view.note += std::string(view.note.empty() ? "" : "; ") + "KV retention '" + *stored +
                 "' is unknown: the app's default is used";
    return;
  }
  view.values.retention = int32_t(it - begin);
  view.set_own(SettingField::Retention, true);
}

template <class T>
std::optional<T> if_own(const ui::ConversationSettingsView& view, SettingField field, T value) {
  return view.is_own(field) ? std::optional<T>(value) : std::nullopt;
}

}  // namespace

ui::ConversationSettingsView resolve_conversation_settings(const store::ConversationSettings& own,
                                                           const ui::SamplingView& defaults, int32_t model_context) {
  ui::ConversationSettingsView view;
  view.values = defaults;
  view.model_context = model_context;
  ui::SamplingView& v = view.values;
  take_number(own.context_length, ui::kMinConversationContext, kMaxContextLength, SettingField::ContextLength, "context length",
              v.context_length, view);
  take_number(own.max_tokens, 1, kMaxNewTokens, SettingField::MaxTokens, "max new tokens", v.max_tokens, view);
  take_number(own.temperature, 0, 5, SettingField::Temperature, "temperature", v.temperature, view);
  take_number(own.top_p, 0, 1, SettingField::TopP, "top-p", v.top_p, view);
  take_number(own.top_k, 0, kMaxTopK, SettingField::TopK, "top-k", v.top_k, view);
  take_number(own.min_p, 0, 1, SettingField::MinP, "min-p", v.min_p, view);
  take_number(own.seed, 0, INT32_MAX, SettingField::Seed, "seed", v.seed, view);
  take_retention(own.kv_retention, view);
  take_number(own.kv_keep, 0.05, 1, SettingField::KvKeep, "KV keep", v.kv_keep, view);
  if (model_context > 0 && v.context_length > model_context) v.context_length = model_context;
  return view;
}

store::ConversationSettings own_settings(const ui::ConversationSettingsView& view) {
  const ui::SamplingView& v = view.values;
  return store::ConversationSettings{
      .context_length = if_own<int64_t>(view, SettingField::ContextLength, v.context_length),
      .max_tokens = if_own<int64_t>(view, SettingField::MaxTokens, v.max_tokens),
      .temperature = if_own<double>(view, SettingField::Temperature, v.temperature),
      .top_p = if_own<double>(view, SettingField::TopP, v.top_p),
      .top_k = if_own<int64_t>(view, SettingField::TopK, v.top_k),
      .min_p = if_own<double>(view, SettingField::MinP, v.min_p),
      .seed = if_own<int64_t>(view, SettingField::Seed, v.seed),
      .kv_retention = if_own<std::string>(view, SettingField::Retention, ui::kRetentionPolicyNames[v.retention]),
      .kv_keep = if_own<double>(view, SettingField::KvKeep, v.kv_keep),
  };
}

void apply_generation_settings(const ui::SamplingView& s, int32_t model_context, uint64_t random_seed,
                               Request& r) {
  r.sampling.temperature = s.temperature;
  r.sampling.top_k = s.top_k;
  r.sampling.top_p = s.top_p;
  r.sampling.min_p = s.min_p;
  r.sampling.repeat_penalty = s.repeat_penalty;
  r.sampling.seed = s.seed != 0 ? uint64_t(s.seed) : random_seed;
  r.max_tokens = s.max_tokens;
  r.context_limit = s.context_length > 0 && (model_context == 0 || s.context_length < model_context) ? s.context_length : 0;
  r.context_policy = s.slide_context ? ContextPolicy::SinkWindow : ContextPolicy::Stop;
  const int32_t retention = std::clamp(s.retention, 0, int32_t(std::size(ui::kRetentionPolicyNames)) - 1);
  r.retention.policy = parse_retention_policy(ui::kRetentionPolicyNames[retention]);
  r.retention.budget.fraction = s.kv_keep;
}

}  // namespace kvdesk::gui
