// Resolving --isa / KVDESK_ISA to a CpuIsa the kernels can run here.
#include "engine/system/cpu_isa_choice.h"

#include <cstdlib>

namespace kvdesk {
namespace {

// "--isa avx512" or "KVDESK_ISA=avx512": how the user gave the name, for messages.
std::string origin(const std::string& flag, const std::string& name) {
  return flag.empty() ? std::string(kIsaEnvVar) + "=" + name : "--isa " + name;
}

}  // namespace

CpuIsa choose_cpu_isa(const std::string& flag) {
  const char* env = std::getenv(kIsaEnvVar);
  const std::string name = !flag.empty() ? flag : env != nullptr && *env != '\0' ? env : "auto";
  const std::optional<CpuIsa> isa = cpu_isa_from_name(name);
  if (!isa) {
    throw IsaNameError(origin(flag, name) + ": unknown instruction set (choose one of " + kIsaNames + ")");
  }
  if (!cpu_isa_supported(*isa)) {
    throw Error(origin(flag, name) + ": this CPU cannot run " + cpu_isa_name(*isa) + " kernels (the widest it has is " +
                cpu_isa_name(cpu_isa_detected()) + ")");
  }
  return *isa;
}

CpuIsa apply_cpu_isa_choice(const std::string& flag) {
  const CpuIsa isa = choose_cpu_isa(flag);
  cpu_isa_force(isa);
  return isa;
}

}  // namespace kvdesk
