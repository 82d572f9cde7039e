// kvdesk-cli template: the prompt a chat template renders for a conversation, byte for byte, as
// the engine renders it (the model's own template, or a Jinja file) — to see what the model is
// given, and to check kvdesk's Jinja engine against others.
#include <cstdio>
#include <ctime>
#include <optional>

#include "app/cli/cli_common.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/jinja/value.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk::cli {
namespace {

struct TemplateArgs {
  std::string model_path;
  std::string template_path;
  std::string messages_path;
  std::string tools_path;
  bool no_generation_prompt = false;
  std::optional<std::string> bos;
  std::optional<std::string> eos;
  std::string date;
  std::string kwargs;
};

// YYYY-MM-DD at local midnight, weekday and day of year filled in.
std::tm parse_date(const std::string& text) {
  std::tm date{};
  int year = 0, month = 0, day = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c", &year, &month, &day, &tail) != 3 || month < 1 || month > 12 ||
      day < 1 || day > 31) {
    throw UsageError("--date must be YYYY-MM-DD, not '" + text + "'");
  }
  date.tm_year = year - 1900;
  date.tm_mon = month - 1;
  date.tm_mday = day;
  date.tm_isdst = -1;
  std::tm normalized = date;
  if (std::mktime(&normalized) == -1 || normalized.tm_mday != day) throw UsageError("--date " + text + " is not a day");
  return normalized;
}

struct TemplateSource {
  ChatTemplate chat_template;
  ChatSpecialTexts specials;
};

// The template and BOS/EOS texts: the model's (its vocabulary's BOS and EOS pieces), or the
// file's with empty ones; --bos-token / --eos-token override either.
TemplateSource template_source(const TemplateArgs& a) {
  TemplateSource out;
  if (!a.template_path.empty()) {
    out.chat_template = chat_template_from_source("file", read_text_file(a.template_path, "chat template"));
  } else {
    const std::unique_ptr<GgufFile> file = GgufFile::open(a.model_path);
    out.chat_template = chat_template_for(*file, "");
    out.specials = special_texts(*Tokenizer::from_gguf(*file));
  }
  if (!out.chat_template.error.empty()) throw Error(out.chat_template.error);
  if (a.bos) out.specials.bos = *a.bos;
  if (a.eos) out.specials.eos = *a.eos;
  return out;
}

int run_template(const TemplateArgs& a) {
  if (a.model_path.empty() == a.template_path.empty()) throw UsageError("give one of -m MODEL and --template FILE");
  const std::tm date = a.date.empty() ? local_now() : parse_date(a.date);
  ChatRenderOptions options;
  options.add_generation_prompt = !a.no_generation_prompt;
  options.kwargs_json = a.kwargs;
  if (!a.tools_path.empty()) options.tools_json = read_text_file(a.tools_path, "tools");
  const jinja::Dict context = chat_context_from_json(read_text_file(a.messages_path, "conversation"), options);
  const TemplateSource source = template_source(a);
  const std::string prompt = joined_text(render_chat_context(source.chat_template, context, source.specials, date));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace

Command add_template_command(CLI::App& app) {
  auto args = std::make_shared<TemplateArgs>();
  CLI::App* cmd = app.add_subcommand("template", "Print the prompt a chat template renders for a conversation");
  CLI::Option* model = cmd->add_option("-m,--model", args->model_path, "GGUF model whose own template renders");
  CLI::Option* file = cmd->add_option("--template", args->template_path, "Jinja chat template file instead");
  model->excludes(file);
  cmd->add_option("--messages", args->messages_path,
                  "Conversation JSON: {\"messages\": [...], \"tools\": [...]} in OpenAI's shape")
      ->required();
  cmd->add_option("--tools", args->tools_path, "Tool definitions JSON (an array), instead of the conversation's");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt, "Render without add_generation_prompt");
  cmd->add_option("--bos-token", args->bos, "Text of bos_token (default: the model's; none with --template)");
  cmd->add_option("--eos-token", args->eos, "Text of eos_token (default: the model's; none with --template)");
  cmd->add_option("--date", args->date, "The day strftime_now() shows, YYYY-MM-DD (default: today)");
  cmd->add_option("--kwargs", args->kwargs, "More template variables as a JSON object, e.g. {\"enable_thinking\": false}");
  return Command{cmd, [args] { return run_template(*args); }};
}

}  // namespace kvdesk::cli
