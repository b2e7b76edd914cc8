// Test helpers of the job manager's tests: a manager without a store, a
// roster, an injected clock, trainers and submits. Header-only; tests only.
#pragma once

#include "services/scheduler/jobs/job_manager.hpp"

#include <doctest/doctest.h>

#include <string>

namespace loom::scheduler::testing {

using namespace std::chrono_literals;

struct job_fixture {
  time_point now = time_point{} + 1000s;
  roster nodes;
  job_manager jobs{nullptr, "/jobs"};

  void add_trainer(const std::string& id) {
    node n;
    n.id = id;
    n.service = "trainer";
    n.zone = "local";
    nodes.register_node(n, now);
  }
  const job_rec* submit_template(const std::string& req, const char* tmpl) {
    submit_args a;
    a.template_name = "t";
    a.template_toml = tmpl;
    auto r = jobs.submit(a, req, "alice", now);
    REQUIRE(r.ok());
    return r->first;
  }
};

}  // namespace loom::scheduler::testing
