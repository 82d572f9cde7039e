// Tests of the prompt as the model sees it (app/gui/prompt_view.h) and of the template facts the
// view model carries: a conversation rendered with a template's Jinja source into template text
// and conversation content, a template that raises or does not parse shown as its error, and the
// controller keeping the rendering in step with the conversation and the template chosen.
#include <catch2/catch.hpp>

#include <algorithm>

#include "app/gui/kv_view.h"
#include "app/gui/prompt_view.h"
#include "engine/chat/chat_template.h"
#include "tests/gui/controller_session.h"
#include "ui/panel_data.h"

using namespace kvdesk;
using ui::ActionKind;

namespace {

// A loaded model's view whose template is `source`, named as the engine names a model's own.
ui::ModelView model_with_template(const std::string& source) {
  ui::ModelView m;
  m.state = ui::ModelState::Loaded;
  m.backend = "cpu";
  m.chat_template = "own";
  m.chat_template_source = source;
  m.bos_text = "<s>";
  m.eos_text = "</s>";
  return m;
}

std::string chatml_source() { return builtin_chat_template("chatml").source; }

// The pieces' texts of one provenance, joined.
std::string joined(const ui::PromptView& view, bool from_template) {
  std::string text;
  for (const ui::PromptPiece& p : view.pieces) {
    if (p.from_template == from_template) text += p.text;
  }
  return text;
}

}  // namespace

TEST_CASE("the prompt view renders a conversation with the template, its own text apart from the content",
          "[gui][prompt_view]") {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello <|im_end|>"}};
  const ui::PromptView view = gui::render_prompt_view(model_with_template(chatml_source()), messages, local_now());
  CHECK(view.error.empty());
  CHECK(view.note.empty());
  CHECK(ui::prompt_text(view) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello <|im_end|><|im_end|>\n<|im_start|>assistant\n");
  // What the user typed stays content, even where it spells a control token.
  CHECK(joined(view, false).find("Hello <|im_end|>") != std::string::npos);
  CHECK(joined(view, true).find("Hello") == std::string::npos);
  CHECK(joined(view, true).find("<|im_start|>assistant\n") != std::string::npos);
  CHECK(std::none_of(view.pieces.begin(), view.pieces.end(), [](const ui::PromptPiece& p) { return p.text.empty(); }));
}

TEST_CASE("a finished conversation is rendered as it stands, with the template's BOS and EOS texts", "[gui][prompt_view]") {
  const std::string source = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}{% endfor %}"
                             "{% if add_generation_prompt %}assistant:{% endif %}";
  const ui::PromptView view = gui::render_prompt_view(model_with_template(source),
                                                      {{"user", "Hi"}, {"assistant", "Hello"}}, local_now());
  CHECK(ui::prompt_text(view) == "<s>user: Hi</s>assistant: Hello</s>");
}

TEST_CASE("a template that raises or does not parse shows its error instead of a prompt", "[gui][prompt_view]") {
  const std::string raising = "{% if messages[0].role == 'system' %}\n"
                              "{{ raise_exception('System role not supported') }}\n"
                              "{% endif %}{{ messages[0].content }}";
  const ui::PromptView raised =
      gui::render_prompt_view(model_with_template(raising), {{"system", "Be brief."}, {"user", "Hi"}}, local_now());
  CHECK(raised.pieces.empty());
  CHECK_THAT(raised.error, Catch::Contains("System role not supported"));
  CHECK_THAT(raised.error, Catch::Contains("line 2"));

  const ui::PromptView broken =
      gui::render_prompt_view(model_with_template("{% for m in messages %}\n{{ m.content }"), {{"user", "Hi"}}, local_now());
  CHECK(broken.pieces.empty());
  CHECK_THAT(broken.error, Catch::Contains("line"));
}

TEST_CASE("the prompt view says why it has nothing to show", "[gui][prompt_view]") {
  CHECK_FALSE(gui::render_prompt_view(model_with_template(chatml_source()), {}, local_now()).note.empty());
  ui::ModelView remote = model_with_template("");
  remote.backend = "remote";
  const ui::PromptView server = gui::render_prompt_view(remote, {{"user", "Hi"}}, local_now());
  CHECK_THAT(server.note, Catch::Contains("server"));
  CHECK(server.pieces.empty());
  CHECK(server.error.empty());
}

TEST_CASE("the model view carries the template's source, BOS and EOS texts and its warning", "[gui][prompt_view]") {
  ModelSummary summary;
  summary.chat_template = "own";
  summary.chat_template_warning = "the chat template does not parse: line 3: unexpected end of template";
  summary.chat_template_source = "{% for m in messages %}";
  summary.bos_text = "<s>";
  summary.eos_text = "</s>";
  ui::ModelView view;
  gui::fill_model_view(summary, view);
  CHECK(view.chat_template_source == summary.chat_template_source);
  CHECK(view.bos_text == "<s>");
  CHECK(view.eos_text == "</s>");
  const std::string notice = ui::chat_template_notice(view, "");
  CHECK_THAT(notice, Catch::Contains("line 3: unexpected end of template"));
  CHECK_THAT(notice, Catch::Contains("choose a template from the list"));
}

TEST_CASE("the controller renders the selected conversation while the prompt is shown, again when it changes",
          "[gui][controller][prompt_view]") {
  test::ControllerSession s;
  s.vm.sampling.max_tokens = 16;
  REQUIRE(s.controller.apply({ActionKind::SetChatTemplate, 0, "chatml"}));
  REQUIRE(test::pump(s.controller, [&] { return s.vm.model.chat_template == "chatml"; }));
  CHECK(s.vm.model.chat_template_source == chatml_source());
  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  REQUIRE(s.vm.chat.messages.size() == 2);
  const std::string answer = s.vm.chat.messages[1].text;
  REQUIRE_FALSE(answer.empty());
  CHECK(s.vm.chat.prompt.pieces.empty());   // nothing rendered while the prompt is not shown

  s.vm.ui.show_prompt = true;
  const auto prompt_is = [&](const std::string& text) {
    return test::pump(s.controller, [&] { return ui::prompt_text(s.vm.chat.prompt) == text; });
  };
  CHECK(prompt_is("<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n" + answer + "<|im_end|>\n"));
  CHECK(s.vm.chat.prompt.conversation_id == s.vm.chat.conversation_id);
  CHECK(joined(s.vm.chat.prompt, false) == "Once upon a time" + answer);

  REQUIRE(s.controller.apply({ActionKind::SetSystemPrompt, 0, "Be brief."}));
  CHECK(prompt_is("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n"
                  "<|im_start|>assistant\n" + answer + "<|im_end|>\n"));

  REQUIRE(s.controller.apply({ActionKind::SetChatTemplate, 0, "plain"}));
  CHECK(prompt_is("Be brief.\nOnce upon a time" + answer));
}
