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

  // A trainer with room for the tests' default (GPT-2 small) stages.
  void add_trainer(const std::string& id, std::uint64_t memory_bytes = 16ull << 30, std::uint32_t cores = 8) {
    node n;
    n.id = id;
    n.service = "trainer";
    n.zone = "local";
    n.resources.cpu_cores = cores;
    n.resources.memory_bytes = memory_bytes;
    nodes.register_node(n, now);
  }
  // An operator of tenant "default"; the body hash stands for the request's bytes.
  static caller as(const std::string& req, const std::string& body = "", const std::string& principal = "alice",
                   const std::string& role = "operator", const std::string& tenant = "default") {
    caller c;
    c.principal = principal;
    c.role = role;
    c.tenant = tenant;
    c.request_id = req;
    c.body_sha256 = body;
    c.service_zone = "local";
    return c;
  }
  // Every template needs a data source: the tests' stages train on a text file.
  static submit_args args(const std::string& tmpl, std::vector<std::string> overrides = {}) {
    submit_args a;
    a.template_name = "t";
    a.template_toml = tmpl;
    overrides.insert(overrides.begin(), "text=/data/corpus.txt");
    a.overrides = std::move(overrides);
    return a;
  }
  const job_rec* submit_template(const std::string& req, const char* tmpl) {
    auto r = jobs.submit(args(tmpl), as(req, tmpl), nodes, now);
    REQUIRE(r.ok());
    return r->first;
  }
};

}  // namespace loom::scheduler::testing
