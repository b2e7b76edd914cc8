// live: one browser's server-sent-event stream. Every tick it asks the
// services (under the session's token, through api.hpp) for the topology,
// the overview and, when the page shows one, a job, and sends an event for
// each that changed since the last it sent:
//   event: topology   data: <GET /api/topology's JSON>
//   event: overview   data: <GET /api/overview's JSON>
//   event: job        data: <GET /api/jobs/ID's JSON, "series" only the new points>
//   event: error      data: {"error": ...}   (the session ended, a refusal)
// A tick is 200 ms, so a change reaches the browser within ~250 ms.
// One object per stream, used by one worker thread.
#pragma once

#include "services/console/api.hpp"

#include <string>

namespace loom::console {

class live_stream {
 public:
  live_stream(api& a, std::string job_id) : api_(a), job_(std::move(job_id)) {}
  // The events of this tick (possibly none: ""), for `who`.
  std::string tick(const session& who);

 private:
  api& api_;
  std::string job_;
  std::size_t next_point_ = 0;
  std::string last_topology_, last_overview_, last_job_;
};

// "event: NAME\ndata: JSON\n\n".
std::string sse_event(const std::string& name, const nlohmann::json& data);

}  // namespace loom::console
