// The backend decision table (engine/backend/backend.h) over every kind of CUDA availability;
// select_backend on this machine (cpu as asked, auto never fails); and the engine's load: an
// explicit cuda ends in an Error event, auto loads and reports its choice and note.
#include <catch2/catch.hpp>

#include <chrono>

#include "engine/backend/backend.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace std::chrono_literals;

namespace {

CudaAvailability not_built() { return CudaAvailability{}; }
CudaAvailability no_device() { return CudaAvailability{true, 0, "CUDA driver version is insufficient for CUDA runtime version", {}, false}; }
CudaAvailability device_without_forward() { return CudaAvailability{true, 1, {}, "NVIDIA H200, sm_90, 139.8 GiB", false}; }
CudaAvailability device_with_forward() { return CudaAvailability{true, 2, {}, "NVIDIA H200, sm_90, 139.8 GiB", true}; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cpu is taken as asked, whatever CUDA offers, with no note", "[backend]") {
  for (const CudaAvailability& cuda : {not_built(), no_device(), device_without_forward(), device_with_forward()}) {
    const BackendChoice c = choose_backend(BackendRequest::Cpu, cuda);
    CHECK(c.backend == Backend::Cpu);
    CHECK(c.note.empty());
  }
}

TEST_CASE("auto falls back to the CPU and says why", "[backend]") {
  const BackendChoice unbuilt = choose_backend(BackendRequest::Auto, not_built());
  CHECK(unbuilt.backend == Backend::Cpu);
  CHECK(unbuilt.note == "no CUDA device: this build has no CUDA support; using the CPU");

  const BackendChoice none = choose_backend(BackendRequest::Auto, no_device());
  CHECK(none.backend == Backend::Cpu);
  CHECK(none.note == "no CUDA device: CUDA driver version is insufficient for CUDA runtime version; using the CPU");

  const BackendChoice no_forward = choose_backend(BackendRequest::Auto, device_without_forward());
  CHECK(no_forward.backend == Backend::Cpu);
  CHECK(contains(no_forward.note, "CUDA device NVIDIA H200, sm_90, 139.8 GiB found"));
  CHECK(contains(no_forward.note, "the CUDA forward pass is not available in this build yet; using the CPU"));
}

TEST_CASE("auto and cuda take CUDA when a device and the CUDA forward pass are there", "[backend]") {
  for (BackendRequest r : {BackendRequest::Auto, BackendRequest::Cuda}) {
    const BackendChoice c = choose_backend(r, device_with_forward());
    CHECK(c.backend == Backend::Cuda);
    CHECK(c.note == "using CUDA device NVIDIA H200, sm_90, 139.8 GiB");
  }
}

TEST_CASE("an explicit cuda that cannot run is an error naming the reason", "[backend]") {
  CHECK_THROWS_WITH(choose_backend(BackendRequest::Cuda, not_built()),
                    Catch::Contains("this build has no CUDA support") && Catch::Contains("KVDESK_CUDA=ON"));
  CHECK_THROWS_WITH(choose_backend(BackendRequest::Cuda, no_device()),
                    Catch::Contains("there is no CUDA device: CUDA driver version is insufficient"));
  CHECK_THROWS_WITH(choose_backend(BackendRequest::Cuda, device_without_forward()),
                    Catch::Contains("NVIDIA H200") && Catch::Contains("the CUDA forward pass is not available in this build yet"));
  CHECK_THROWS_AS(choose_backend(BackendRequest::Cuda, no_device()), Error);
}

TEST_CASE("select_backend on this machine: cpu as asked, auto never fails and never claims CUDA without a forward pass",
          "[backend]") {
  CHECK(select_backend(BackendRequest::Cpu).backend == Backend::Cpu);
  const CudaAvailability cuda = probe_cuda();
  const BackendChoice automatic = select_backend(BackendRequest::Auto);
  CHECK(automatic.backend == (cuda.devices > 0 && cuda.forward_pass ? Backend::Cuda : Backend::Cpu));
  CHECK_FALSE(automatic.note.empty());
  if (!cuda.built) CHECK(cuda.devices == 0);
  if (cuda.built && cuda.devices == 0) CHECK_FALSE(cuda.no_device_reason.empty());
}

TEST_CASE("the engine refuses an explicit cuda at load and reports the backend it chose", "[backend][engine]") {
  EngineSettings settings;
  settings.model_path = test::model_path("stories260K.gguf");
  settings.threads = 1;
  settings.kv.num_blocks = 16;
  for (BackendRequest request : {BackendRequest::Cuda, BackendRequest::Auto, BackendRequest::Cpu}) {
    Engine engine;
    settings.backend = request;
    engine.load_model(settings);
    REQUIRE(engine.wait_idle(30s));
    std::vector<Event> events = engine.poll_events();
    std::erase_if(events, [](const Event& e) { return e.kind == EventKind::LoadProgress; });
    REQUIRE(events.size() == 1);
    if (request == BackendRequest::Cuda) {
      CHECK(events[0].kind == EventKind::Error);
      CHECK_THAT(events[0].text, Catch::Contains("the CUDA backend was asked for"));
      CHECK_FALSE(engine.stats().model_loaded);
      continue;
    }
    CHECK(events[0].kind == EventKind::ModelLoaded);
    const ModelSummary model = engine.stats().model;
    CHECK(model.backend == "cpu");
    CHECK(model.backend_note == events[0].text);
    CHECK(model.backend_note.empty() == (request == BackendRequest::Cpu));
  }
}

TEST_CASE("backend names", "[backend]") {
  CHECK(std::string(backend_name(Backend::Cpu)) == "cpu");
  CHECK(std::string(backend_name(Backend::Cuda)) == "cuda");
}
