#include "services/console/live.hpp"

namespace loom::console {

std::string sse_event(const std::string& name, const nlohmann::json& data) {
  // dump() escapes newlines inside strings, so the data is one line.
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string live_stream::tick(const session& who) {
  std::string out;
  auto send_if_changed = [&](const char* name, const result<nlohmann::json>& r, std::string& last) {
    if (!r) {
      const auto e = error_reply(r.err()).body;
      if (e.dump() != last) out += sse_event("error", e);
      last = e.dump();
      return;
    }
    auto text = r->dump();
    if (text == last) return;
    last = std::move(text);
    out += sse_event(name, *r);
  };
  auto pages = api_.cluster(who);
  if (pages) {
    send_if_changed("topology", pages->topology, last_topology_);
    send_if_changed("overview", pages->overview, last_overview_);
  } else {
    send_if_changed("topology", pages.err(), last_topology_);
  }
  if (!job_.empty()) {
    std::size_t next = next_point_;
    auto j = api_.job(who, job_, next_point_, &next);
    if (j) {
      // Compare without the points (new points alone are news too).
      auto pts = (*j)["series"];
      j->erase("series");
      auto text = j->dump();
      if (text != last_job_ || !pts.empty()) {
        last_job_ = std::move(text);
        (*j)["series"] = std::move(pts);
        out += sse_event("job", *j);
      }
      next_point_ = next;
    } else {
      send_if_changed("job", j, last_job_);
    }
  }
  return out;
}

}  // namespace loom::console
