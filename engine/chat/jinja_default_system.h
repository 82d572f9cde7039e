// The default system message a chat template sets when the conversation has none, read from
// the template's Jinja source without running Jinja. Granite 3.x and Mistral Small 3 (v7 /
// tekken) templates compute it in the branch of `if messages[0]['role'] == 'system'` taken
// when there is none: `set system_message = <expr>` statements whose values are string
// literals and strftime_now() dates joined by `+`, some under conditions on request inputs
// kvdesk never passes (tools, documents, thinking, controls), which are therefore false.
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

// Text a template computes from string literals and strftime_now(format) calls: the literal
// parts as they are, the date parts formatted for the day the prompt is rendered.
struct DatedText {
  struct Part {
    std::string text;      // literal text, or a strftime format when is_date
    bool is_date = false;
  };
  std::vector<Part> parts;

  static DatedText literal(std::string text);
  bool empty() const { return parts.empty(); }
  bool has_date() const;
  // Appends other, joining neighbouring literal parts.
  void append(const DatedText& other);
  // The text with every date part formatted for date as Python's strftime does in the C
  // locale ("%B %d, %Y": "April 05, 2025"), whatever the process locale is.
  std::string format(const std::tm& date) const;
};

// The calendar time strftime_now() formats: now, local time (what Hugging Face's
// datetime.now() gives the template).
std::tm local_now();
// The local calendar time of a Unix time in seconds.
std::tm local_time(std::time_t time);

struct JinjaDefaultSystem {
  DatedText text;            // empty when the template sets none, or when it could not be read
  std::string unreadable;    // why it could not be read: what the template computes it with
};

// What the template sets as the system message when messages[0] is not a system message.
// Templates without that branch, or whose branch sets no system message, give neither text nor
// reason.
JinjaDefaultSystem jinja_default_system(std::string_view template_text);

// The value the template sets `name` to (`set name = <expr>`, string literals and strftime_now()
// dates joined by +) where strftime_now is defined, as Hugging Face and llama.cpp define it: of
// its assignments the evaluator can compute, the first that calls strftime_now, else the first
// (Llama 3.2 sets date_string = strftime_now("%d %b %Y") when it can and "26 Jul 2024" when not;
// Llama 3.1 only the latter). nullopt when it sets nothing computable.
std::optional<DatedText> jinja_assigned_value(std::string_view template_text, std::string_view name);

}  // namespace kvdesk
