// The global functions a template can call: Jinja2's range, dict, namespace (and cycler-free
// loop.cycle lives in the interpreter) and the two transformers adds, raise_exception and
// strftime_now.
#include <algorithm>
#include <iomanip>
#include <locale>
#include <sstream>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/interpreter.h"

namespace kvdesk::jinja {
namespace {

Value range(const CallArgs& args, Interpreter& in) {
  int64_t bounds[3] = {0, 0, 1};
  if (args.positional.empty() || args.positional.size() > 3) in.fail("range takes 1 to 3 integers");
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) in.fail("range needs integers, not " + std::string(v.type_name()));
  }
  const auto at = [&](size_t i) { return args.positional[i].is_bool() ? int64_t(args.positional[i].as_bool()) : args.positional[i].as_int(); };
  if (args.positional.size() == 1) {
    bounds[1] = at(0);
  } else {
    bounds[0] = at(0);
    bounds[1] = at(1);
    if (args.positional.size() == 3) bounds[2] = at(2);
  }
  const int64_t start = bounds[0];
  const int64_t stop = bounds[1];
  const int64_t step = bounds[2];
  if (step == 0) in.fail("range() step must not be zero");
  // How many items, in unsigned arithmetic so no bound overflows.
  uint64_t count = 0;
  if (step > 0 && stop > start) count = (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
  if (step < 0 && start > stop) count = (uint64_t(start) - uint64_t(stop) - 1) / (uint64_t(-(step + 1)) + 1) + 1;
  in.check_size(size_t(std::min<uint64_t>(count, in.limits().max_items + 1)), false);
  ValueList items;
  items.reserve(size_t(count));
  int64_t value = start;
  for (uint64_t k = 0; k < count; ++k) {
    items.push_back(Value::integer(value));
    if (k + 1 < count) value += step;
  }
  return Value::list(std::move(items));
}

// dict(**kwargs) and namespace(**kwargs), also from a dict passed first.
Value make_dict(const CallArgs& args, bool is_namespace, Interpreter& in) {
  auto d = std::make_shared<Dict>();
  if (!args.positional.empty() && args.positional[0].is_dict()) {
    const size_t n = args.positional[0].dict_ref().entries.size();
    in.charge(n * n / 16);
  }
  d->is_namespace = is_namespace;
  if (!args.positional.empty() && args.positional[0].is_dict()) {
    for (const auto& [k, v] : args.positional[0].dict_ref().entries) d->set(k, v);
  }
  for (const auto& [k, v] : args.named) d->set(Value::string(k), v);
  return Value::dict(d);
}

Value raise_exception(const CallArgs& args, Interpreter& in) {
  in.fail("the template raised an error: " + (args.positional.empty() ? std::string() : args.positional[0].to_text().bytes));
}

Value strftime_now(const CallArgs& args, Interpreter& in) {
  if (args.positional.empty() || !args.positional[0].is_string()) in.fail("strftime_now takes a format string");
  return Value::string(format_date(args.positional[0].str(), in.now()));
}

}  // namespace

std::string format_date(const std::string& format, const std::tm& date) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << std::put_time(&date, format.c_str());
  return out.str();
}

void add_global_functions(Dict& globals) {
  globals.set(Value::string("range"), Value::function("range", range));
  globals.set(Value::string("dict"), Value::function("dict", [](const CallArgs& a, Interpreter& in) { return make_dict(a, false, in); }));
  globals.set(Value::string("namespace"),
              Value::function("namespace", [](const CallArgs& a, Interpreter& in) { return make_dict(a, true, in); }));
  globals.set(Value::string("raise_exception"), Value::function("raise_exception", raise_exception));
  globals.set(Value::string("strftime_now"), Value::function("strftime_now", strftime_now));
}

}  // namespace kvdesk::jinja
