// kvdesk::Error: the one exception type, for bad input at the edges (a model file, a
// tokenizer, arguments, settings). Its message is for the user: what is wrong and where.
// Bugs use KVDESK_ASSERT (kernels/check.h, brought in here so every layer has both from one
// base header); "no capacity" is a bool or optional, not a throw.
#pragma once
#include <stdexcept>
#include <string>

#include "kernels/check.h"

namespace kvdesk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvdesk
