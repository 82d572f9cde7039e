// KVDESK_ASSERT: a broken invariant is a bug in kvdesk, never bad user input (that throws
// kvdesk::Error at the edges). It stays on in release builds: a wrong KV slot is worse than a stop.
#pragma once
#include <cstdio>
#include <cstdlib>

#define KVDESK_ASSERT(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "kvdesk: internal error: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
