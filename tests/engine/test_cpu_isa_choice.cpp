// --isa / KVDESK_ISA resolution: names, the environment's turn, refusing what the CPU lacks, and
// every ISA this CPU has giving stories260K's reference continuation.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "engine/system/cpu_isa_choice.h"
#include "tests/engine/model_run.h"
#include "tests/test_support.h"

using namespace kvdesk;

namespace {

// Sets KVDESK_ISA for one scope and removes it again.
struct IsaEnv {
  explicit IsaEnv(const char* value) { ::setenv(kIsaEnvVar, value, 1); }
  ~IsaEnv() { ::unsetenv(kIsaEnvVar); }
};

}  // namespace

TEST_CASE("ISA names resolve, and unknown names are IsaNameError", "[engine][isa]") {
  CHECK(choose_cpu_isa("ref") == CpuIsa::Scalar);
  CHECK(choose_cpu_isa("auto") == cpu_isa_detected());
  CHECK(choose_cpu_isa("") == cpu_isa_detected());
  CHECK_THROWS_AS(choose_cpu_isa("sse9"), IsaNameError);
  CHECK_THROWS_WITH(choose_cpu_isa("avx"), Catch::Contains("--isa avx: unknown instruction set"));
}

TEST_CASE("KVDESK_ISA applies when no flag is given, and the flag wins over it", "[engine][isa]") {
  const IsaEnv env("ref");
  CHECK(choose_cpu_isa("") == CpuIsa::Scalar);
  CHECK(choose_cpu_isa("auto") == cpu_isa_detected());
  const IsaEnv bad("avx1024");
  CHECK_THROWS_WITH(choose_cpu_isa(""), Catch::Contains("KVDESK_ISA=avx1024: unknown instruction set"));
}

TEST_CASE("an ISA this CPU lacks is refused, one it has is applied", "[engine][isa]") {
  for (const char* name : {"avx2", "avxvnni", "avx512", "ref"}) {
    const CpuIsa isa = *cpu_isa_from_name(name);
    INFO(name);
    if (cpu_isa_supported(isa)) {
      CHECK(apply_cpu_isa_choice(name) == isa);
      CHECK(cpu_isa_active() == isa);
    } else {
      CHECK_THROWS_WITH(choose_cpu_isa(name), Catch::Contains("this CPU cannot run"));
    }
  }
  cpu_isa_force(cpu_isa_detected());
}

TEST_CASE("stories260K greedy continuation equals the reference under every ISA this CPU has",
          "[engine][reference][isa]") {
  for (const char* name : {"ref", "avx2", "avxvnni", "avx512"}) {
    const CpuIsa isa = *cpu_isa_from_name(name);
    if (!cpu_isa_supported(isa)) continue;
    INFO(name);
    cpu_isa_force(isa);
    KvCacheConfig config;
    config.layout.k_type = KvType::F32;
    config.layout.v_type = KvType::F32;
    test::ModelRun r(Model::load(test::model_path("stories260K.gguf")), config, 2, 512);
    const auto& ref = test::reference();
    const Completion result = r.greedy(r.model->tokenizer().encode(ref["prompt"].get<std::string>(), true), 64);
    CHECK(result.tokens == ref["generated_ids"].get<std::vector<int32_t>>());
  }
  cpu_isa_force(cpu_isa_detected());
}
