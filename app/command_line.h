// How every kvdesk program reads its command line (CLI11): --help prints usage and exits 0; a
// usage error is one line saying what is wrong, then the usage line of the (sub)command the
// user chose, naming its required options, and exit status 2.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "engine/engine_types.h"

namespace kvdesk {

// "Usage: kvdesk-cli generate -m,--model TEXT -p,--prompt TEXT [OPTIONS]  (kvdesk-cli generate
// --help for more)": the deepest subcommand the parse selected (even one whose options then
// failed), else the program itself.
std::string usage_line(const CLI::App& app, const std::string& program);

// Parses argv. The exit status to leave with now, or nullopt when the program should go on.
std::optional<int> parse_command_line(CLI::App& app, const std::string& program, int argc, char** argv);

// Validators for numeric options: a finite number above 0 / at least 0 (CLI11's own pass NaN and
// print the range as 300 digits).
inline CLI::Validator finite_number(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value)) return "'" + text + "' is not a number";
        if (allow_zero ? value < 0 : value <= 0) return text + (allow_zero ? " is below 0" : " is not above 0");
        return "";
      },
      allow_zero ? "NUMBER >= 0" : "NUMBER > 0");
}
inline CLI::Validator positive_number() { return finite_number(false); }
inline CLI::Validator non_negative_number() { return finite_number(true); }

// --backend auto|cpu|cuda, the same in every program (header-only: kvdesk_bench registers its
// options from a library).
inline CLI::Option* add_backend_option(CLI::App* cmd, BackendRequest& backend) {
  return cmd
      ->add_option_function<std::string>(
          "--backend",
          [&backend](const std::string& name) {
            backend = name == "cuda" ? BackendRequest::Cuda : name == "cpu" ? BackendRequest::Cpu : BackendRequest::Auto;
          },
          "compute backend: auto (CUDA when a device is usable, else the CPU, saying why), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_str("auto");
}

// --isa auto|avx2|avxvnni|avx512|ref, the same in every program: which instruction set the CPU kernels
// use (engine/system/cpu_isa_choice.h; empty: KVDESK_ISA, else auto). An unknown name is a
// usage error here; a CPU that lacks the ISA is refused when the choice is applied.
inline CLI::Option* add_isa_option(CLI::App* cmd, std::string& isa) {
  return cmd
      ->add_option("--isa", isa,
                   "CPU kernels' instruction set: auto (the widest this CPU has), avx2, avxvnni, avx512 or ref (scalar); "
                   "default: $KVDESK_ISA, else auto")
      ->check(CLI::IsMember({"auto", "avx2", "avxvnni", "avx512", "ref"}));
}

}  // namespace kvdesk
