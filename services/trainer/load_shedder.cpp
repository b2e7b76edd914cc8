#include "services/trainer/load_shedder.hpp"

namespace loom::trainer {

load_shedder::load_shedder(runtime::shed_settings s, runtime::pressure_paths where)
    : gauge_(std::move(s)), where_(std::move(where)) {
  where_.inject = gauge_.settings().inject;
}

std::string load_shedder::observe(bool running, clock::time_point now) {
  auto r = runtime::read_pressure(where_);
  std::lock_guard lock(mu_);
  if (!r) {
    const std::string msg = "pressure not read: " + r.err().message + " (the last level stays)";
    if (msg == last_error_) return "";
    last_error_ = msg;
    return msg;
  }
  last_error_.clear();
  ++readings_;
  gauge_.update(*r, now, running);
  return "";
}

std::string load_shedder::shed_reason() {
  std::lock_guard lock(mu_);
  if (gauge_.level() == runtime::pressure_level::ok || readings_ <= shed_after_) return "";
  // The reading that made this shed was taken before it: the next one to
  // count must come after the micro-batch shrank, a full interval later.
  shed_after_ = readings_ + 1;
  return gauge_.why();
}

poll_facts::pressure_facts load_shedder::facts() const {
  std::lock_guard lock(mu_);
  return {runtime::to_string(gauge_.level()), gauge_.why(), gauge_.last().memory, gauge_.last().cpu};
}

}  // namespace loom::trainer
