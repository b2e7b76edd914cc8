#include "libs/metrics/metrics.hpp"

#include <doctest/doctest.h>

TEST_CASE("common metrics carry the service name, type and code") {
  loom::metrics::service_metrics m("scheduler");
  m.count_request("loom.v1.PingRequest", loom::errc::ok, 0.0002);
  m.count_request("loom.v1.PingRequest", loom::errc::ok, 0.0003);
  m.count_request("loom.v1.RegisterNodeRequest", loom::errc::permission_denied, 0.001);
  m.count_restart();
  m.set_up(true);
  m.count_denied("role");
  m.add("jobs_submitted_total", {{"tenant", "a"}}, 2);
  auto text = m.render();
  CHECK(text.find("loom_scheduler_requests_total{code=\"ok\",type=\"loom.v1.PingRequest\"} 2") != std::string::npos);
  CHECK(text.find("code=\"permission_denied\"") != std::string::npos);
  CHECK(text.find("loom_scheduler_request_duration_seconds_count{type=\"loom.v1.PingRequest\"} 2") != std::string::npos);
  CHECK(text.find("loom_scheduler_restarts_total 1") != std::string::npos);
  CHECK(text.find("loom_scheduler_up 1") != std::string::npos);
  CHECK(text.find("loom_scheduler_denied_total{reason=\"role\"} 1") != std::string::npos);
  CHECK(text.find("loom_scheduler_jobs_submitted_total{tenant=\"a\"} 2") != std::string::npos);
}

TEST_CASE("the metrics listener picks a free port when asked for port 0 and refuses a taken one") {
  auto a = loom::metrics::service_metrics::start("audit", "127.0.0.1:0");
  REQUIRE(a.ok());
  auto ep = (*a)->endpoint();
  CHECK(ep.rfind("127.0.0.1:", 0) == 0);
  CHECK(ep != "127.0.0.1:0");
  auto b = loom::metrics::service_metrics::start("audit", ep);
  CHECK_FALSE(b.ok());
  CHECK(b.code() == loom::errc::unavailable);
}

TEST_CASE("a scrape hook sets its gauges before every render, and is gone once cleared") {
  loom::metrics::service_metrics m("trainer");
  double depth = 7;
  m.on_scrape([&depth](loom::metrics::service_metrics& s) { s.set("audit_spool_depth", {}, depth); });
  CHECK(m.render().find("loom_trainer_audit_spool_depth 7") != std::string::npos);
  depth = 1234;
  CHECK(m.render().find("loom_trainer_audit_spool_depth 1234") != std::string::npos);
  m.clear_scrape_hooks();
  depth = 5;
  CHECK(m.render().find("loom_trainer_audit_spool_depth 1234") != std::string::npos);
}

TEST_CASE("the disk gauges give a file system's free and total bytes, free no more than total") {
  loom::metrics::service_metrics m("audit");
  loom::metrics::set_disk_gauges(m, "/tmp");
  const auto text = m.render();
  auto value = [&text](const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size() + 2));
  };
  const double free = value("loom_audit_disk_free_bytes"), size = value("loom_audit_disk_size_bytes");
  CHECK(size > 0);
  CHECK(free >= 0);
  CHECK(free <= size);
  loom::metrics::service_metrics none("audit");
  loom::metrics::set_disk_gauges(none, "/no/such/dir/here");
  CHECK(none.render().find("disk_free_bytes") == std::string::npos);
}
