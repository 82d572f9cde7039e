// Headless ImGui: every panel drawn over empty, small and huge (10,000-block) view models with
// no window and no GL (the font atlas built in memory, NewFrame/Render without a backend).
#include <catch2/catch.hpp>
#include <imgui.h>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "ui/keyboard.h"
#include "ui/panel_data.h"
#include "ui/panels.h"

using namespace kvdesk::ui;

namespace {

constexpr Panel kAllPanels[] = {Panel::Settings, Panel::Model, Panel::Blocks, Panel::Fragmentation, Panel::Sharing,
                                Panel::Quantization, Panel::Memory, Panel::Plots};

// The renderer's side of the panels' images, without GL: makes the pixels when asked and
// remembers the last image of each key.
class RecordingTextures : public TextureCache {
 public:
  ImTextureID texture(TextureSlot, uint64_t key, const std::function<RgbaImage()>& make) override {
    if (!made || key != key_) {
      last = make();
      key_ = key;
      ++made;
    }
    return reinterpret_cast<ImTextureID>(uintptr_t(1));
  }
  RgbaImage last;
  int made = 0;

 private:
  uint64_t key_ = 0;
};

// One ImGui context for a test; the atlas built the way a renderer would ask for it.
class HeadlessImGui {
 public:
  explicit HeadlessImGui(bool korean = false) {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1280, 800);
    io.DeltaTime = 1.0f / 60.0f;
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;   // as the OpenGL3 backend
    io.KeyMap[ImGuiKey_Tab] = 258;                                 // and the keys as the GLFW backend maps them
    io.KeyMap[ImGuiKey_Enter] = 257;
    io.KeyMap[ImGuiKey_Escape] = 256;
    io.KeyMap[ImGuiKey_Backspace] = 259;
    fonts_ = load_fonts(16.0f, korean);
    unsigned char* pixels = nullptr;
    int width = 0, height = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &width, &height);
    REQUIRE(pixels != nullptr);
    atlas_width_ = width;
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }

  // Draws one frame; returns the actions and checks the draw data.
  UiActions frame(ViewModel& vm) {
    ImGui::NewFrame();
    UiActions actions = draw_main_window(vm, fonts_, textures_);
    ImGui::Render();
    const ImDrawData* data = ImGui::GetDrawData();
    REQUIRE(data != nullptr);
    CHECK(data->Valid);
    CHECK(data->TotalVtxCount > 0);
    vertices_ = data->TotalVtxCount;
    return actions;
  }
  // A chord held for one frame, then let go for one; returns the first frame's actions.
  UiActions press(ViewModel& vm, const std::string& chord) {
    const std::optional<KeyChord> c = parse_key_chord(chord);
    REQUIRE(c.has_value());
    set_chord_down(*c, true);
    UiActions actions = frame(vm);
    set_chord_down(*c, false);
    frame(vm);
    return actions;
  }
  // Every side panel in turn, two frames each (a requested tab shows on the next frame).
  void all_panels(ViewModel& vm) {
    for (Panel p : kAllPanels) {
      vm.ui.panel = p;
      vm.ui.panel_requested = true;
      frame(vm);
      frame(vm);
      CHECK(vm.ui.panel == p);
    }
  }
  const Fonts& fonts() const { return fonts_; }
  int vertices() const { return vertices_; }
  int atlas_width() const { return atlas_width_; }
  const RecordingTextures& textures() const { return textures_; }

 private:
  RecordingTextures textures_;
  Fonts fonts_;
  int vertices_ = 0;
  int atlas_width_ = 0;
};

KvView make_kv(int32_t num_blocks, int32_t num_sequences) {
  KvView kv;
  kv.valid = true;
  kv.k_type = kv.v_type = "f16";
  kv.block_size = 16;
  kv.bytes_per_token = 4096;
  kv.bytes_per_block = 4096 * 16;
  kv.pool_bytes = kv.bytes_per_block * uint64_t(num_blocks);
  kv.max_context = 4096;
  kv.blocks_total = num_blocks;
  kv.blocks.resize(size_t(num_blocks));
  // Every sequence shares block 0..1 (a common system prompt), then owns 3 blocks.
  int32_t next = 2;
  for (int32_t s = 0; s < num_sequences && next + 3 <= num_blocks; ++s) {
    KvSequenceView seq;
    seq.seq_id = s;
    seq.conversation_id = s + 1;
    seq.label = "conversation " + std::to_string(s + 1);
    seq.block_table = {0, 1, next, next + 1, next + 2};
    seq.num_tokens = 16 * 4 + 7;
    for (int32_t b = next; b < next + 3; ++b) kv.blocks[size_t(b)] = {BlockKind::Used, 1, b == next + 2 ? 7 : 16};
    next += 3;
    kv.sequences.push_back(std::move(seq));
  }
  if (!kv.sequences.empty() && num_blocks >= 2) {
    kv.blocks[0] = kv.blocks[1] = {BlockKind::Shared, int32_t(kv.sequences.size()), 16};
  }
  for (int32_t b = next; b < num_blocks; ++b) kv.blocks[size_t(b)] = {b % 3 == 0 ? BlockKind::Cached : BlockKind::Free, 0, b % 3 == 0 ? 16 : 0};
  for (const KvBlockView& b : kv.blocks) {
    kv.blocks_used += b.ref_count > 0;
    kv.blocks_shared += b.ref_count > 1;
    kv.blocks_cached += b.kind == BlockKind::Cached;
    kv.blocks_free += b.kind == BlockKind::Free;
  }
  kv.slots_reserved = int64_t(kv.blocks_used) * 16;
  kv.tokens_stored = kv.slots_reserved - 9 * int64_t(kv.sequences.size());
  kv.internal_waste_tokens = kv.slots_reserved - kv.tokens_stored;
  kv.internal_waste_pct = kv.slots_reserved ? 100.0 * double(kv.internal_waste_tokens) / double(kv.slots_reserved) : 0;
  kv.contiguous_reserved_tokens = 4096 * int64_t(kv.sequences.size());
  kv.contiguous_waste_tokens = kv.contiguous_reserved_tokens - 71 * int64_t(kv.sequences.size());
  kv.contiguous_waste_pct = 98.3;
  kv.what_if = {{8, 1, 8192}, {16, 9, 9 * 4096}, {32, 25, 25 * 4096}, {64, 57, 57 * 4096}};
  kv.prefix_hits = 40;
  kv.prefix_misses = 10;
  kv.prefix_hit_rate = 0.8;
  return kv;
}

ViewModel make_vm(int32_t num_blocks, int32_t num_sequences, int32_t num_messages) {
  ViewModel vm;
  vm.model.state = ModelState::Loaded;
  vm.model.name = "stories260K";
  vm.model.backend = "cpu";
  vm.model.context_length = 4096;
  vm.model.layers = 5;
  vm.model.heads = 8;
  vm.model.kv_heads = 4;
  vm.model.head_dim = 8;
  vm.model.chat_template = "own";
  vm.model.chat_template_warning = "the chat template does not parse: line 2: unexpected '}'";
  vm.model.chat_template_source = "{% for message in messages %}\n{{ message.content }\n{% endfor %}";
  vm.model.bos_text = "<s>";
  vm.model.eos_text = "</s>";
  vm.ui.chat_templates = {"plain", "chatml", "llama3"};
  vm.kv = make_kv(num_blocks, num_sequences);
  vm.kv_types = {{"f32", 1280, {KvQualityState::Measured, 0, 100, ""}},
                 {"f16", 640, {KvQualityState::Measured, 1e-7, 100, ""}},
                 {"int8", 480, {KvQualityState::Measuring, 0, 0, ""}},
                 {"int4", 280, {KvQualityState::Failed, 0, 0, "the engine step failed"}}};
  vm.memory = {1 << 20, 0, uint64_t(1) << 33};
  for (int32_t i = 0; i < num_sequences; ++i) vm.conversations.push_back({i + 1, "conversation " + std::to_string(i + 1), i % 2 == 0});
  vm.chat.conversation_id = num_sequences > 0 ? 1 : 0;
  vm.chat.title = "conversation 1";
  for (int32_t i = 0; i < num_messages; ++i) {
    MessageView m;
    m.id = i + 1;
    m.role = i % 2 == 0 ? MessageRole::User : MessageRole::Assistant;
    m.text = i % 4 == 1 ? "Here is code:\n```cpp\nint main() { return 0; }\n```\nand more prose after it." : "Once upon a time";
    m.sibling_count = i == 1 ? 2 : 1;
    m.next_sibling = i == 1 ? 99 : 0;
    m.stats = m.role == MessageRole::Assistant ? "12 tokens, 300.0 tok/s" : "";
    vm.chat.messages.push_back(std::move(m));
  }
  for (int i = 0; i < 300; ++i) {
    vm.plots.tokens_per_s.push_back(float(i % 50));
    vm.plots.blocks_used.push_back(float(i));
    vm.plots.hit_rate.push_back(50.0f);
  }
  vm.presets = {{1, "Pirate", "You are a pirate."}};
  return vm;
}

}  // namespace

TEST_CASE("every panel draws over an empty view model", "[ui][headless]") {
  HeadlessImGui imgui;
  ViewModel vm;
  imgui.all_panels(vm);
  vm.model.state = ModelState::Loading;
  vm.model.loading_seconds = 1.5;
  imgui.frame(vm);
  vm.model.state = ModelState::Failed;
  vm.model.error = "not a GGUF file";
  imgui.frame(vm);
}

TEST_CASE("every panel draws over a small view model", "[ui][headless]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 3, 6);
  imgui.all_panels(vm);
  SECTION("the popups and the notice draw too") {
    vm.ui.rename_conversation = 2;
    vm.ui.rename_text = "renamed";
    imgui.frame(vm);
    imgui.frame(vm);
    vm.ui.rename_conversation = 0;
    vm.ui.delete_conversation = 3;
    imgui.frame(vm);
    imgui.frame(vm);
    vm.status.modal = "Could not open the database";
    imgui.frame(vm);
    imgui.frame(vm);
  }
  SECTION("editing, selecting and streaming messages draw") {
    vm.ui.editing_message = 1;
    vm.ui.edit_text = "changed";
    vm.ui.selectable_messages = {2};
    vm.chat.generating = true;
    vm.chat.messages.back().state = MessageState::Streaming;
    imgui.frame(vm);
    imgui.frame(vm);
  }
  SECTION("a delete waiting for confirmation and an answer to continue draw, asking nothing") {
    REQUIRE(vm.chat.messages.size() >= 2);
    vm.chat.messages.back().role = MessageRole::Assistant;
    vm.chat.messages.back().can_continue = true;
    vm.ui.delete_message = vm.chat.messages.front().id;
    CHECK(imgui.frame(vm).empty());
    vm.ui.delete_message = vm.chat.messages.back().id;
    CHECK(imgui.frame(vm).empty());
    CHECK(vm.ui.delete_message == vm.chat.messages.back().id);   // still waiting for the user
  }
  SECTION("a model loading draws its progress and Cancel, asking nothing") {
    vm.model.state = ModelState::Loading;
    vm.model.load_progress = 0.42;
    vm.model.loading_seconds = 1.5;
    CHECK(imgui.frame(vm).empty());
    CHECK(imgui.frame(vm).empty());
    CHECK(status_line(vm).find("42%") != std::string::npos);
  }
}

TEST_CASE("the prompt as the model sees it replaces the messages: its text, a render error or a note", "[ui][headless]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 3, 6);
  const auto entries = [&](const std::string& where) {
    return std::count_if(vm.ui.layout.entries.begin(), vm.ui.layout.entries.end(),
                         [&](const LayoutEntry& e) { return e.where == where; });
  };
  imgui.frame(vm);
  CHECK(entries("chat: paragraph") > 0);
  CHECK(entries("chat: prompt") == 0);

  vm.ui.show_prompt = true;
  vm.chat.prompt.conversation_id = vm.chat.conversation_id;
  vm.chat.prompt.pieces = {{"<|im_start|>user\n", true}, {"Once upon a time, a long line of text that wraps", false},
                           {"<|im_end|>\n<|im_start|>assistant\n", true}};
  CHECK(imgui.frame(vm).empty());
  CHECK(entries("chat: paragraph") == 0);
  REQUIRE(entries("chat: prompt") == 1);
  CHECK(vm.ui.layout.overflows().empty());
  const int with_prompt = imgui.vertices();

  vm.chat.prompt.pieces.clear();
  vm.chat.prompt.error = "the chat template raised at line 2: System role not supported";
  CHECK(imgui.frame(vm).empty());
  CHECK(entries("chat: prompt") == 0);
  CHECK(imgui.vertices() != with_prompt);
  vm.chat.prompt.error.clear();
  vm.chat.prompt.note = "No messages yet";
  CHECK(imgui.frame(vm).empty());
}

TEST_CASE("every panel draws over a huge view model of 10,000 blocks", "[ui][headless]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(10000, 1000, 200);
  imgui.all_panels(vm);
  vm.ui.panel = Panel::Blocks;
  vm.ui.panel_requested = true;
  imgui.frame(vm);
  imgui.frame(vm);
  const int made = imgui.textures().made;
  for (int i = 0; i < 5; ++i) imgui.frame(vm);
  CHECK(imgui.textures().made == made);   // same blocks, same grid: no new image
  const RgbaImage& image = imgui.textures().last;
  CHECK(int64_t(image.width) * image.height >= 10000);   // at least a pixel per block
  vm.kv.blocks[9999].kind = vm.kv.blocks[9999].kind == BlockKind::Free ? BlockKind::Used : BlockKind::Free;
  imgui.frame(vm);
  CHECK(imgui.textures().made == made + 1);
}

TEST_CASE("actions come back from the panels without touching anything else", "[ui][headless]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 2, 2);
  const UiActions actions = imgui.frame(vm);
  CHECK(actions.empty());   // no input, no action
}

TEST_CASE("the CJK fonts are found and their atlas built with oversampling 1", "[ui][headless]") {
  HeadlessImGui imgui(true);
  if (imgui.fonts().korean) {
    CHECK(imgui.fonts().note.find("CJK: ") == 0);
    CHECK(imgui.atlas_width() <= 4096);
    // Hangul, kana, a Japanese kanji, simplified Chinese (not among NanumGothic's Hanja: from the
    // merged fallback font when one is installed) and full-width punctuation.
    for (const ImWchar c : {ImWchar(0xD55C), ImWchar(0x3042), ImWchar(0x30AB), ImWchar(0x65E5), ImWchar(0xFF01)}) {
      CHECK(imgui.fonts().body->FindGlyphNoFallback(c) != nullptr);
    }
    if (imgui.fonts().note.find(" + ") != std::string::npos) {
      for (const ImWchar c : {ImWchar(0x8FD9), ImWchar(0x4EEC), ImWchar(0x8BF4)}) {   // 这 们 说
        CHECK(imgui.fonts().body->FindGlyphNoFallback(c) != nullptr);
      }
    }
  } else {
    CHECK(imgui.fonts().note.find("no CJK font") == 0);
  }
  ViewModel vm = make_vm(64, 1, 0);
  vm.chat.messages.push_back({1, MessageRole::User, MessageState::Complete, "안녕하세요, KV 캐시! こんにちは 你好，这是我们的"});
  imgui.frame(vm);
}

TEST_CASE("panel names round-trip for scripts", "[ui][headless]") {
  for (Panel p : kAllPanels) CHECK(panel_from_name(panel_name(p)) == p);
  CHECK_FALSE(panel_from_name("nope").has_value());
}

namespace {

constexpr const char* kRichAnswer =
    "# Paged KV\n\nBlocks are **fixed-size** and *shared*; see [vLLM](https://vllm.ai) or `block_size`.\n\n"
    "- one\n- two\n  1. nested\n\n> a quote\n> > deeper\n\n"
    "| type | bytes per token |\n|---|---|\n| f16 | 640 |\n| int8 | 480 |\n\n"
    "```cpp\nint main() { return 0; }   // a long line that is wider than a narrow chat column, so it scrolls\n```\n\n---\n\n"
    "안녕하세요 averyveryveryveryveryveryveryveryveryveryveryveryveryveryveryverylongwordwithoutanyspaces";

bool has_action(const UiActions& actions, ActionKind kind) {
  for (const UiAction& a : actions) {
    if (a.kind == kind) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("Markdown answers draw, parsed once while they do not change", "[ui][headless][markdown]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 1, 0);
  vm.chat.messages.push_back({1, MessageRole::User, MessageState::Complete, "Explain **paged** KV"});
  vm.chat.messages.push_back({2, MessageRole::Assistant, MessageState::Complete, kRichAnswer});
  vm.chat.messages.push_back({3, MessageRole::Assistant, MessageState::Streaming, "Streaming ```py\nx = 1"});
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 3);
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 3);
  vm.chat.messages[2].text += "\ny = 2";
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 4);   // only the streaming answer again
  vm.chat.messages.erase(vm.chat.messages.begin());
  imgui.frame(vm);
  CHECK(vm.ui.markdown.size() == 2);     // the message gone from the chat is forgotten
}

TEST_CASE("a reasoning model's answer draws its reasoning folded and only the answer as Markdown",
          "[ui][headless][markdown]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 1, 0);
  vm.chat.messages.push_back({1, MessageRole::User, MessageState::Complete, "2+2?"});
  vm.chat.messages.push_back({2, MessageRole::Assistant, MessageState::Complete,
                              "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>**4**"});
  vm.chat.messages.push_back({3, MessageRole::Assistant, MessageState::Streaming, "<think>\nAdd th"});
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 2);   // the question and the harmony answer; the streaming one is all reasoning so far
  vm.chat.messages[2].text += "em.\n</think>\n\n4";
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 3);
}

TEST_CASE("an answer whose prompt opened <think> streams as reasoning before its </think> arrives",
          "[ui][headless][markdown]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 1, 0);
  vm.chat.messages.push_back({1, MessageRole::Assistant, MessageState::Streaming, "Add th"});
  vm.chat.messages[0].opened_in_reasoning = true;
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 0);   // all reasoning so far: no answer drawn as Markdown
  vm.chat.messages[0].text += "em.\n</think>\n\n4";
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 1);
  vm.chat.messages[0].opened_in_reasoning = false;   // the same text from the store, finished
  vm.chat.messages[0].text = "Add them.\n</think>\n\n4";
  imgui.frame(vm);
  CHECK(vm.ui.markdown.parses() == 1);   // the same answer, still split at </think>
}

TEST_CASE("nothing the panels draw overflows from 1024x700 to 2560x1440", "[ui][headless][layout]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(512, 6, 4);
  vm.chat.messages.push_back({100, MessageRole::Assistant, MessageState::Complete, kRichAnswer});
  vm.status.message = "model loaded; no CUDA device: CUDA driver version is insufficient for CUDA runtime version";
  vm.status.font_note = "Korean: NanumGothic";
  vm.status.last_answer = "TTFT 12 ms, 812.3 tok/s (200 tokens, 0 of 30 prompt tokens cached)";
  for (const ImVec2 size : {ImVec2(1024, 700), ImVec2(1280, 800), ImVec2(2560, 1440)}) {
    ImGui::GetIO().DisplaySize = size;
    for (Panel p : kAllPanels) {
      vm.ui.panel = p;
      vm.ui.panel_requested = true;
      imgui.frame(vm);
      imgui.frame(vm);
      INFO(panel_name(p) << "\n" << vm.ui.layout.text());
      CHECK(vm.ui.layout.window_width == size.x);
      CHECK(vm.ui.layout.overflows().empty());
    }
  }
}

TEST_CASE("keyboard shortcuts ask for their actions", "[ui][headless][keyboard]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 2, 2);
  imgui.frame(vm);
  SECTION("Ctrl+N starts a new chat and puts the focus in the composer") {
    CHECK(has_action(imgui.press(vm, "ctrl+n"), ActionKind::NewChat));
    CHECK_FALSE(vm.ui.focus_composer);   // taken by the composer on the next frame
  }
  SECTION("Ctrl+R regenerates, and does nothing while an answer streams") {
    CHECK(has_action(imgui.press(vm, "ctrl+r"), ActionKind::Regenerate));
    vm.chat.generating = true;
    CHECK(imgui.press(vm, "ctrl+r").empty());
  }
  SECTION("Esc stops the answer being generated, and does nothing otherwise") {
    CHECK(imgui.press(vm, "esc").empty());
    vm.chat.generating = true;
    CHECK(has_action(imgui.press(vm, "esc"), ActionKind::Stop));
  }
  SECTION("Ctrl+F puts the focus in the search field") {
    imgui.press(vm, "ctrl+f");
    imgui.frame(vm);
    ImGui::GetIO().AddInputCharactersUTF8("kv");
    const UiActions actions = imgui.frame(vm);
    CHECK(vm.ui.search == "kv");
    CHECK(has_action(actions, ActionKind::Search));
  }
  SECTION("a letter alone is typing, not a shortcut") {
    CHECK(imgui.press(vm, "n").empty());
  }
}

TEST_CASE("in the composer Enter sends and Shift+Enter breaks the line", "[ui][headless][keyboard]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 1, 0);
  vm.ui.focus_composer = true;
  imgui.frame(vm);
  imgui.frame(vm);
  ImGui::GetIO().AddInputCharactersUTF8("first");
  imgui.frame(vm);
  CHECK(imgui.press(vm, "shift+enter").empty());
  ImGui::GetIO().AddInputCharactersUTF8("second");
  imgui.frame(vm);
  CHECK(vm.ui.composer == "first\nsecond");
  const UiActions actions = imgui.press(vm, "enter");
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == ActionKind::Send);
  CHECK(actions[0].text == "first\nsecond");
  CHECK(vm.ui.composer.empty());
}

namespace {

// Draws only the chat's Conversation settings, opened, in a window of its own; returns the
// actions and the vertices drawn.
std::pair<UiActions, int> draw_open_conversation_settings(ViewModel& vm) {
  ImGui::NewFrame();
  ImGui::Begin("settings test");
  ImGui::SetNextItemOpen(true);
  UiActions actions;
  draw_conversation_settings(vm, actions);
  ImGui::End();
  ImGui::Render();
  return {actions, ImGui::GetDrawData()->TotalVtxCount};
}

}  // namespace

TEST_CASE("conversation settings draw opened, with own values and a note, asking nothing", "[ui][headless][settings]") {
  HeadlessImGui imgui;
  ViewModel vm;
  vm.chat.conversation_id = 4;
  const int plain = draw_open_conversation_settings(vm).second;
  ConversationSettingsView& s = vm.chat.settings;
  s.model_context = 512;
  s.values.context_length = 64;
  s.values.retention = 2;
  s.set_own(SettingField::ContextLength, true);
  s.set_own(SettingField::Retention, true);
  s.note = "temperature -3 is out of range (0 to 5): the app's default is used";
  const auto [actions, vertices] = draw_open_conversation_settings(vm);
  CHECK(actions.empty());
  CHECK(vertices > plain);   // the KV keep slider and the note
  CHECK(s.values.context_length == 64);
  CHECK(s.is_own(SettingField::ContextLength));
  CHECK_FALSE(s.is_own(SettingField::Temperature));
}

TEST_CASE("The library and the file browser draw over many models, broken ones and an empty folder", "[ui][headless][library]") {
  HeadlessImGui imgui;
  ViewModel vm = make_vm(64, 2, 2);
  vm.ui.show_library = true;
  for (int i = 0; i < 300; ++i) {
    LibraryEntryView e;
    e.name = "org/model-" + std::to_string(i);
    e.source = i % 2 ? "Ollama" : "Hugging Face";
    e.path = "/models/m" + std::to_string(i) + ".gguf";
    e.size_bytes = uint64_t(i) << 24;
    e.broken = i % 50 == 7;
    e.error = e.broken ? "bad magic: not a GGUF file" : "";
    e.arch = e.broken ? "" : "llama";
    e.fits = {{"f16", 4096, 3}, {"int8", 8192, 6}};
    vm.library.entries.push_back(e);
  }
  vm.library.folders = {"/home/me/models"};
  vm.library.problems = {"/mnt/gone: not a folder"};
  imgui.frame(vm);
  imgui.frame(vm);
  vm.ui.library_filter = "model-1";
  vm.ui.library_arch = "llama";
  imgui.frame(vm);
  vm.library.entries.clear();
  imgui.frame(vm);   // the empty library's hint

  vm.browser.folder = "/models";
  vm.browser.entries = {{"sub", true, false, 0}, {"a.gguf", false, true, 1234}, {"notes.txt", false, false, 5}};
  vm.ui.browser_purpose = BrowsePurpose::OpenModel;
  imgui.frame(vm);
  imgui.frame(vm);
  CHECK(vm.ui.browser_purpose == BrowsePurpose::OpenModel);
  imgui.press(vm, "esc");
  CHECK(vm.ui.browser_purpose == BrowsePurpose::None);
  vm.ui.browser_purpose = BrowsePurpose::AddLibraryFolder;
  vm.browser.error = "cannot list '/models': permission denied";
  imgui.frame(vm);
  imgui.frame(vm);
}
