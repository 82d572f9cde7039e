// The model library: each program's cache layout found and named as that program names it,
// split models as one, projectors beside their model, broken files listed with the reason,
// what fits from the KV arithmetic, and rescans that read only what changed.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "app/library/model_library.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/lab/gguf_writer.h"
#include "engine/model/model_config.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace kvdesk::library;
namespace fs = std::filesystem;

namespace {

const std::string kStories = std::string(KVDESK_MODELS_DIR) + "/stories260K.gguf";

void copy_model(const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(kStories, to, fs::copy_options::overwrite_existing);
}

void write_text(const fs::path& to, const std::string& text) {
  fs::create_directories(to.parent_path());
  std::ofstream(to, std::ios::binary) << text;
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const FoundModel* named(const FindResult& r, const std::string& name) {
  for (const FoundModel& m : r.models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// A shard of a split model: split.no / split.count as gguf-split writes them, one f32 tensor.
void write_shard(const fs::path& path, uint32_t index, uint32_t count, int64_t values) {
  GgufWriter w;
  if (index == 0) w.add_string("general.architecture", "llama");
  w.add_uint32("split.no", index);
  w.add_uint32("split.count", count);
  w.add_tensor("t" + std::to_string(index), GgmlType::F32, {values},
               [values](std::vector<uint8_t>& out) { out.assign(size_t(values) * 4, 0); });
  fs::create_directories(path.parent_path());
  w.write(path.string());
}

}  // namespace

TEST_CASE("Each program's cache location comes from its variable, else its default", "[app][library]") {
  const std::vector<SourceRoot> defaults = default_roots(env_of({{"HOME", "/h"}}));
  std::map<ModelSource, std::vector<std::string>> by_source;
  for (const SourceRoot& r : defaults) by_source[r.source].push_back(r.path);
  CHECK(by_source[ModelSource::LmStudio] == std::vector<std::string>{"/h/.lmstudio/models", "/h/.cache/lm-studio/models"});
  CHECK(by_source[ModelSource::Ollama] == std::vector<std::string>{"/h/.ollama/models"});
  CHECK(by_source[ModelSource::HuggingFace] == std::vector<std::string>{"/h/.cache/huggingface/hub"});
  CHECK(by_source[ModelSource::LlamaCpp] == std::vector<std::string>{"/h/.cache/llama.cpp"});

  const std::vector<SourceRoot> set = default_roots(env_of({{"HOME", "/h"}, {"OLLAMA_MODELS", "/o"}, {"HF_HOME", "/hf"},
                                                            {"LLAMA_CACHE", "/l"}, {"XDG_CACHE_HOME", "/x"}}));
  by_source.clear();
  for (const SourceRoot& r : set) by_source[r.source].push_back(r.path);
  CHECK(by_source[ModelSource::Ollama] == std::vector<std::string>{"/o"});
  CHECK(by_source[ModelSource::HuggingFace] == std::vector<std::string>{"/hf/hub"});
  CHECK(by_source[ModelSource::LlamaCpp] == std::vector<std::string>{"/l"});
  const std::vector<SourceRoot> hub = default_roots(env_of({{"HOME", "/h"}, {"HF_HOME", "/hf"}, {"HF_HUB_CACHE", "/cache"}}));
  CHECK(std::any_of(hub.begin(), hub.end(), [](const SourceRoot& r) { return r.path == "/cache"; }));
  CHECK(default_roots(env_of({})).empty());
}

TEST_CASE("The library finds LM Studio, Ollama, Hugging Face and llama.cpp models and names them their way", "[app][library]") {
  test::TempDir home;
  const fs::path h = home.path();
  copy_model(h / ".lmstudio/models/lmstudio-community/Stories-GGUF/stories-Q8_0.gguf");
  copy_model(h / ".lmstudio/models/lmstudio-community/Stories-GGUF/mmproj-stories-f16.gguf");
  // Ollama: a manifest whose model layer names a blob; a manifest of another registry.
  const std::string digest(64, 'a');
  copy_model(h / (".ollama/models/blobs/sha256-" + digest));
  const std::string manifest = R"({"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:)" +
                               std::string(64, 'b') + R"("},{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" + digest + R"("}]})";
  write_text(h / ".ollama/models/manifests/registry.ollama.ai/library/stories/260k", manifest);
  // A manifest pointing outside the blobs folder is ignored.
  write_text(h / ".ollama/models/manifests/registry.ollama.ai/library/evil/latest",
             R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:../../../etc/passwd"}]})");
  write_text(h / ".ollama/models/manifests/registry.ollama.ai/library/garbage/latest", "not json");
  write_text(h / ".ollama/models/manifests/registry.ollama.ai/library/typed/latest",
             R"({"layers":[{"mediaType":7,"digest":["sha256"]},{"mediaType":"application/vnd.ollama.image.model","digest":42},"x"]})");
  // Hugging Face: refs/main names the snapshot; the file is a link into blobs.
  const fs::path repo = h / ".cache/huggingface/hub/models--karpathy--tinyllamas";
  copy_model(repo / "blobs/0123");
  write_text(repo / "refs/main", "rev1\n");
  fs::create_directories(repo / "snapshots/rev1");
  fs::create_directories(repo / "snapshots/rev0");
  fs::create_symlink("../../blobs/0123", repo / "snapshots/rev1/stories260K.gguf");
  copy_model(repo / "snapshots/rev0/old.gguf");   // not the revision main names
  copy_model(h / ".cache/llama.cpp/ggml-org_stories_stories260K.gguf");

  const FindResult r = find_models(default_roots(env_of({{"HOME", h.string()}})));
  std::vector<std::string> names;
  for (const FoundModel& m : r.models) names.push_back(m.name);
  INFO(nlohmann::json(names).dump());
  REQUIRE(named(r, "lmstudio-community/Stories-GGUF/stories-Q8_0"));
  CHECK(named(r, "lmstudio-community/Stories-GGUF/stories-Q8_0")->projectors.size() == 1);
  CHECK_FALSE(named(r, "lmstudio-community/Stories-GGUF/mmproj-stories-f16"));
  REQUIRE(named(r, "stories:260k"));
  CHECK(named(r, "stories:260k")->files == std::vector<std::string>{(h / (".ollama/models/blobs/sha256-" + digest)).string()});
  CHECK(std::count_if(r.models.begin(), r.models.end(), [](const FoundModel& m) { return m.source == ModelSource::Ollama; }) == 1);
  CHECK_FALSE(named(r, "evil:latest"));
  CHECK(std::any_of(r.problems.begin(), r.problems.end(), [](const std::string& p) { return p.find("garbage") != std::string::npos; }));
  REQUIRE(named(r, "karpathy/tinyllamas"));
  CHECK(named(r, "karpathy/tinyllamas")->source == ModelSource::HuggingFace);
  REQUIRE(named(r, "ggml-org_stories_stories260K"));
  CHECK(named(r, "ggml-org_stories_stories260K")->source == ModelSource::LlamaCpp);
  CHECK(r.models.size() == 4);
}

TEST_CASE("Ollama names: another namespace and another registry keep their prefixes", "[app][library]") {
  test::TempDir dir;
  const std::string digest(64, 'c');
  copy_model(dir.path() / ("blobs/sha256-" + digest));
  copy_model(dir.path() / ("blobs/sha256-" + std::string(64, 'd')));
  auto manifest = [](const std::string& hex) {
    return R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" + hex + R"("}]})";
  };
  write_text(dir.path() / "manifests/registry.ollama.ai/someone/stories/latest", manifest(digest));
  write_text(dir.path() / "manifests/hf.co/org/stories/Q8_0", manifest(std::string(64, 'd')));
  // A second tag of the same blob is the same file: listed once, under the name that sorts first.
  write_text(dir.path() / "manifests/registry.ollama.ai/zz/again/latest", manifest(digest));
  const FindResult r = find_models({SourceRoot{ModelSource::Ollama, dir.path().string()}});
  CHECK(named(r, "someone/stories:latest"));
  CHECK(named(r, "hf.co/org/stories:Q8_0"));
  CHECK(r.models.size() == 2);
  // Blobs named as older Ollama named them ("sha256:<hex>") are found too.
  const std::string old_digest(64, 'e');
  copy_model(dir.path() / ("blobs/sha256:" + old_digest));
  write_text(dir.path() / "manifests/registry.ollama.ai/library/old/latest", manifest(old_digest));
  const FindResult with_old = find_models({SourceRoot{ModelSource::Ollama, dir.path().string()}});
  REQUIRE(named(with_old, "old:latest"));
  CHECK(named(with_old, "old:latest")->files == std::vector<std::string>{(dir.path() / ("blobs/sha256:" + old_digest)).string()});
}

TEST_CASE("A split model is one model of its shards in order, and a missing first shard is broken", "[app][library]") {
  test::TempDir dir;
  write_shard(dir.path() / "big-00002-of-00002.gguf", 1, 2, 64);
  write_shard(dir.path() / "big-00001-of-00002.gguf", 0, 2, 32);
  write_shard(dir.path() / "lost/half-00002-of-00002.gguf", 1, 2, 64);
  const FindResult r = find_models({SourceRoot{ModelSource::Folder, dir.path().string()}});
  REQUIRE(r.models.size() == 2);
  const FoundModel* big = named(r, "big");
  REQUIRE(big);
  CHECK(big->files == std::vector<std::string>{dir.file("big-00001-of-00002.gguf"), dir.file("big-00002-of-00002.gguf")});
  const ModelCard card = read_model_card(*big);
  CHECK_FALSE(card.broken);
  CHECK(card.params == 96);
  CHECK(card.size_bytes == fs::file_size(big->files[0]) + fs::file_size(big->files[1]));

  const FoundModel* half = named(r, "lost/half");
  REQUIRE(half);
  const ModelCard lost = read_model_card(*half);
  CHECK(lost.broken);
  CHECK(lost.error.find("first of its 2 shards is missing") != std::string::npos);
}

TEST_CASE("A model card reads the header, and a file that is no GGUF is listed as broken with the reason", "[app][library]") {
  test::TempDir dir;
  copy_model(dir.path() / "stories.gguf");
  write_text(dir.path() / "notes.gguf", "this is not a model");
  write_text(dir.path() / "empty.gguf", "");
  ModelLibrary lib;
  const ScanReport report = lib.scan({SourceRoot{ModelSource::Folder, dir.path().string()}});
  REQUIRE(report.cards.size() == 3);
  std::map<std::string, ModelCard> by_name;
  for (const ModelCard& c : report.cards) by_name[c.found.name] = c;
  const ModelCard& stories = by_name.at("stories");
  CHECK(stories.error.empty());
  CHECK(stories.arch == "llama");
  CHECK(stories.params > 200000);
  CHECK(stories.params < 400000);
  CHECK(stories.context_length > 0);
  CHECK(stories.chat_template == "none");
  CHECK(stories.size_bytes == fs::file_size(kStories));
  CHECK_FALSE(stories.weight_type.empty());
  CHECK(by_name.at("notes").broken);
  CHECK(by_name.at("notes").error.find("not a GGUF") != std::string::npos);
  CHECK(by_name.at("empty").broken);
}

TEST_CASE("What fits: the longest context and 4K conversations per KV type from the block arithmetic", "[app][library]") {
  const ModelCard card = read_model_card(FoundModel{"stories", ModelSource::Folder, {kStories}, 1, {}});
  REQUIRE(card.kv);
  const uint64_t memory = card.weight_bytes + (uint64_t(8) << 20);
  const std::vector<KvFit> fits = kv_fits(card, memory);
  REQUIRE(fits.size() == all_kv_types().size());
  const ModelConfig c = read_model_config(*GgufFile::open(kStories));
  for (const KvFit& f : fits) {
    INFO(kv_type_name(f.type));
    const uint64_t per_block = kv_bytes_per_block(c, f.type, f.type, 16);
    const uint64_t per_4k = uint64_t(kv_blocks_for_sequence(c, 16, 4096, 256)) * per_block;
    CHECK(f.conversations == int64_t((uint64_t(8) << 20) / per_4k));
    CHECK(f.max_context <= c.context_length);
    CHECK(uint64_t(kv_blocks_for_sequence(c, 16, f.max_context, 256)) * per_block <= (uint64_t(8) << 20));
    if (f.max_context < c.context_length) {
      CHECK(uint64_t(kv_blocks_for_sequence(c, 16, f.max_context + 1, 256)) * per_block > (uint64_t(8) << 20));
    }
  }
  // Smaller KV types hold more: int4 at least as many conversations as f32.
  CHECK(fits.back().conversations >= fits.front().conversations);
  // No memory after the weights: nothing fits.
  for (const KvFit& f : kv_fits(card, card.weight_bytes / 2)) CHECK(f.max_context == 0);
}

TEST_CASE("A rescan reads only the models whose files changed", "[app][library]") {
  test::TempDir dir;
  copy_model(dir.path() / "a.gguf");
  copy_model(dir.path() / "b.gguf");
  const std::vector<SourceRoot> roots{SourceRoot{ModelSource::Folder, dir.path().string()}};
  ModelLibrary lib;
  ScanReport first = lib.scan(roots);
  CHECK(first.read == 2);
  CHECK(first.reused == 0);
  ScanReport second = lib.scan(roots);
  CHECK(second.read == 0);
  CHECK(second.reused == 2);
  write_text(dir.path() / "b.gguf", "damaged");   // b changed size
  copy_model(dir.path() / "c.gguf");
  ScanReport third = lib.scan(roots);
  CHECK(third.read == 2);
  CHECK(third.reused == 1);
  fs::remove(dir.path() / "a.gguf");
  CHECK(lib.scan(roots).cards.size() == 2);
}

TEST_CASE("Kept cards stand for unchanged files in the next run, and damaged ones are read again", "[app][library]") {
  test::TempDir dir;
  copy_model(dir.path() / "a.gguf");
  copy_model(dir.path() / "b.gguf");
  write_text(dir.path() / "broken.gguf", "nope");
  const std::vector<SourceRoot> roots{SourceRoot{ModelSource::Folder, dir.path().string()}};
  ModelLibrary first;
  const ScanReport before = first.scan(roots);
  const nlohmann::json saved = nlohmann::json::parse(first.saved().dump());   // through text, as the database keeps it

  ModelLibrary next;
  next.restore(saved);
  const ScanReport after = next.scan(roots);
  CHECK(after.read == 0);
  CHECK(after.reused == 3);
  REQUIRE(after.cards.size() == before.cards.size());
  for (size_t i = 0; i < after.cards.size(); ++i) {
    CHECK(card_to_json(after.cards[i]) == card_to_json(before.cards[i]));
    CHECK(kv_fits(after.cards[i], uint64_t(1) << 30).size() == kv_fits(before.cards[i], uint64_t(1) << 30).size());
  }

  nlohmann::json damaged = saved;
  damaged["entries"][0]["card"]["kv"] = {{"context_length", 512}, {"num_groups", 1 << 30}, {"num_global_groups", 1},
                                         {"window", 0}, {"block_bytes", {1, 2}}};
  damaged["entries"][1]["stamps"] = "not stamps";
  ModelLibrary third;
  third.restore(damaged);
  const ScanReport redone = third.scan(roots);
  CHECK(redone.read == 2);
  CHECK(redone.reused == 1);
  ModelLibrary fourth;
  fourth.restore(nlohmann::json::parse("[1, 2, 3]"));
  fourth.restore(nlohmann::json{{"version", 99}});
  fourth.restore(nlohmann::json{{"version", "1"}, {"entries", 5}});
  fourth.restore(nlohmann::json{{"version", 1}, {"entries", {1, "x", nullptr}}});
  CHECK(fourth.scan(roots).read == 3);
}

TEST_CASE("The scanner thread hands over every card and ends not scanning", "[app][library]") {
  test::TempDir dir;
  for (int i = 0; i < 5; ++i) copy_model(dir.path() / ("m" + std::to_string(i) + ".gguf"));
  LibraryScanner scanner;
  scanner.rescan({SourceRoot{ModelSource::Folder, dir.path().string()}});
  LibrarySnapshot s = scanner.snapshot();
  for (int i = 0; i < 2000 && s.scanning; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = scanner.snapshot();
  }
  CHECK_FALSE(s.scanning);
  CHECK(s.cards.size() == 5);
  scanner.rescan({SourceRoot{ModelSource::Folder, dir.path().string()}});   // a rescan can start at once
}

TEST_CASE("kvdesk-cli models lists --dir folders as JSON with what fits", "[app][library][cli]") {
  test::TempDir dir;
  copy_model(dir.path() / "shelf/stories.gguf");
  write_text(dir.path() / "shelf/broken.gguf", "GGUF but not really");
  const test::CliRun run = test::run_cli({"models", "--only-dirs", "--dir", dir.path().string(), "--memory-gib", "1", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json models = nlohmann::json::parse(run.out);
  REQUIRE(models.size() == 2);
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& m : models) by_name[m["name"]] = m;
  const nlohmann::json& stories = by_name.at("shelf/stories");
  CHECK(stories["source"] == "folder");
  CHECK(stories["arch"] == "llama");
  CHECK(stories["error"].is_null());
  CHECK(stories["fits"]["f16"]["max_context"].get<int64_t>() == stories["context_length"].get<int64_t>());
  CHECK(stories["fits"]["int8"]["conversations_4k"].get<int64_t>() > 0);
  CHECK(by_name.at("shelf/broken")["broken"] == true);
  CHECK(by_name.at("shelf/broken")["fits"].is_null());

  const test::CliRun text = test::run_cli({"models", "--only-dirs", "--dir", dir.path().string()});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("shelf/stories") != std::string::npos);
  CHECK(text.out.find("broken:") != std::string::npos);
  CHECK(test::run_cli({"models", "--memory-gib", "-1"}).exit_code == 2);
}
