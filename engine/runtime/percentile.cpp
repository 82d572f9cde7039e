// percentile (see percentile.h).
#include "engine/runtime/percentile.h"

#include <algorithm>
#include <cmath>

namespace kvdesk {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 1.0) * double(values.size() - 1);
  return values[size_t(std::lround(rank))];
}

}  // namespace kvdesk
