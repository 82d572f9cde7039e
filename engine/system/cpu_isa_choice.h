// Which instruction set the CPU kernels use: the --isa flag of the programs, else the
// KVDESK_ISA environment variable, else the widest the CPU has. An unknown name is the user's
// mistake (a usage error); a known ISA this CPU lacks is refused, never silently narrowed.
#pragma once
#include <string>

#include "engine/error.h"
#include "kernels/dot.h"

namespace kvdesk {

inline constexpr const char* kIsaEnvVar = "KVDESK_ISA";
inline constexpr const char* kIsaNames = "auto, avx2, avxvnni, avx512, ref";

// A name that is none of kIsaNames.
class IsaNameError : public Error {
 public:
  using Error::Error;
};

// The ISA `flag` names, or KVDESK_ISA's when flag is empty, or the detected one when both are
// empty. Throws IsaNameError for an unknown name, Error when this CPU cannot run the ISA.
CpuIsa choose_cpu_isa(const std::string& flag);

// choose_cpu_isa, then pins the kernels (dot, matmul, attention) to it. Returns the ISA.
CpuIsa apply_cpu_isa_choice(const std::string& flag);

}  // namespace kvdesk
