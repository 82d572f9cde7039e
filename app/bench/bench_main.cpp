// kvdesk-bench: the KV measurement table built in. `kvdesk-bench MODE -m MODEL [flags]`
// prints the mode's tables as Markdown on stdout and progress on stderr, and writes --json and
// --report. Exit codes: 0 done, 1 runtime error, 2 bad arguments, 130 stopped by Ctrl-C (the
// reports then hold what was measured, "partial": true).
#include <cstdio>
#include <exception>
#include <optional>

#include "app/bench/bench_cli.h"
#include "app/bench/bench_modes.h"
#include "app/bench/busy_core.h"
#include "app/command_line.h"
#include "engine/backend/backend.h"
#include "engine/error.h"
#include "engine/system/cpu_isa_choice.h"

namespace kvdesk::bench {
namespace {

Report run_mode(const std::string& mode, const BenchOptions& o) {
  if (mode == "speed") return run_speed(o);
  if (mode == "kv") return run_kv(o);
  if (mode == "capacity") return run_capacity(o);
  if (mode == "prefix") return run_prefix(o);
  if (mode == "quality") return run_quality(o);
  if (mode == "trace") return run_trace(o);
  if (mode == "resume") return run_resume(o);
  if (mode == "templates") return run_templates(o);
  if (mode == "grammar") return run_grammar(o);
  return run_ab(o);
}

// prefix, trace and resume (and ab over them) run requests through the Engine, which takes the chosen
// backend. The other modes time the CPU kernels directly: they report the CPU whatever auto
// would pick, and refuse an explicit cuda rather than label CPU figures as CUDA ones.
bool mode_uses_engine(const ModeCommand& command) {
  const std::string& mode = command.mode == "ab" ? command.options->ab_mode : command.mode;
  return mode == "prefix" || mode == "trace" || mode == "resume";
}

BackendChoice bench_backend(const ModeCommand& command) {
  const BackendRequest requested = command.options->backend;
  if (mode_uses_engine(command)) return select_backend(requested);
  if (requested == BackendRequest::Cuda) {
    throw Error("kvdesk-bench " + command.mode + " times the CPU kernels; --backend cuda applies to the prefix and " +
                "trace modes");
  }
  return BackendChoice{Backend::Cpu, requested == BackendRequest::Auto ? command.mode + " times the CPU kernels" : ""};
}

// busy_core: the CPU a spinning process keeps busy for the run (--busy-core), or none.
int run(const ModeCommand& command, std::optional<int> busy_core, int argc, char** argv) {
  const BenchOptions& o = *command.options;
  const BackendChoice backend = bench_backend(command);
  if (!backend.note.empty()) progress(backend.note);
  RunInfo info = make_run_info(argc, argv);
  info.isa = cpu_isa_name(cpu_isa_active());
  info.isa_detected = cpu_isa_name(cpu_isa_detected());
  info.backend = kvdesk::backend_name(backend.backend);
  info.backend_note = backend.note;
  info.model = model_json(o.model_path, read_config(o.model_path));
  info.busy_core = busy_core;
  install_stop_handler();
  progress(isa_line(info));
  std::optional<BusyCore> spinner;
  if (busy_core) {
    spinner.emplace(*busy_core);
    progress(busy_core_line(info));
  }
  const Report report = run_mode(command.mode, o);
  for (const Table& t : report.tables) std::printf("%s", table_markdown(t).c_str());
  for (const std::string& note : report.notes) std::printf("%s\n\n", note.c_str());
  write_report(report, info, o.json_path, o.report_path);
  if (!report.partial) return 0;
  progress("stopped by Ctrl-C: the reports hold what was measured (\"partial\": true)");
  return 130;
}

}  // namespace
}  // namespace kvdesk::bench

int main(int argc, char** argv) {
  using namespace kvdesk::bench;
  CLI::App app{"kvdesk-bench: measure the paged KV cache (speed, kv, capacity, prefix, quality, trace, ab)"};
  app.require_subcommand(1);
  std::vector<ModeCommand> commands = add_mode_commands(app);
  std::string isa;  // every mode's --isa
  std::optional<int> busy_core;  // and --busy-core
  for (const ModeCommand& c : commands) {
    kvdesk::add_isa_option(c.app, isa);
    c.app->add_option("--busy-core", busy_core,
                      "Keep this CPU busy with a spinning process for the run, as a desktop's other programs "
                      "would (compare -t 1 and 2 beside it)")
        ->check(CLI::NonNegativeNumber);
  }
  if (const std::optional<int> exit_code = kvdesk::parse_command_line(app, "kvdesk-bench", argc, argv)) {
    return *exit_code;
  }
  for (ModeCommand& c : commands) {
    if (!c.app->parsed()) continue;
    if (const std::optional<std::string> problem = finish_options(c)) {
      std::fprintf(stderr, "kvdesk-bench %s: %s\n%s\n", c.mode.c_str(), problem->c_str(),
                   kvdesk::usage_line(app, "kvdesk-bench").c_str());
      return 2;
    }
    try {
      kvdesk::apply_cpu_isa_choice(isa);
    } catch (const kvdesk::IsaNameError& e) {
      std::fprintf(stderr, "kvdesk-bench %s: %s\n%s\n", c.mode.c_str(), e.what(), kvdesk::usage_line(app, "kvdesk-bench").c_str());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvdesk-bench: error: %s\n", e.what());
      return 1;
    }
    try {
      return run(c, busy_core, argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvdesk-bench: error: %s\n", e.what());
      return 1;
    }
  }
  return 2;
}
