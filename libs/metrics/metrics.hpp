// The metrics every EdgeLoom service exposes: prometheus-cpp's registry,
// served over HTTP (GET /metrics) by our own listener (http_listener.hpp:
// bounded connections and timeouts). Owned by the service main; all methods
// are thread-safe (prometheus-cpp metrics are atomic, family maps are locked).
//
// Common metrics, named loom_<service>_<what>_<unit>:
//   requests_total{type,code}           every answered request
//   request_duration_seconds{type}      histogram of handling time
//   restarts_total                      supervisor restarts of the service actor
//   up                                  1 while the service serves
//   dropped_total{reason}               frames dropped without an answer
//   denied_total{reason}                authorization denials
//   audit_spool_depth                   audit records in the spool, not yet confirmed (at scrape)
//   disk_free_bytes, disk_size_bytes    the data directory's file system (at scrape)
//   link_bytes_total{link,type,direction}  request/answer bytes by peer ("local",
//                                       or an edge site's name) and message type:
//                                       what crosses each link (issue 26 item 4)
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
class Registry;
template <typename T> class Family;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace loom::metrics {

class http_listener;

class service_metrics {
 public:
  // Starts serving on `bind` ("127.0.0.1:0" picks a free port). unavailable if the port is taken.
  static result<std::unique_ptr<service_metrics>> start(std::string service, std::string bind);
  // A registry without an HTTP listener (tests, offline tools).
  explicit service_metrics(std::string service);
  ~service_metrics();

  // "127.0.0.1:PORT" the listener listens on; empty without a listener.
  std::string endpoint() const { return endpoint_; }
  const std::string& service() const { return service_; }

  void count_request(std::string_view type, errc code, double seconds);
  void count_restart();
  void count_dropped(std::string_view reason);
  void count_denied(std::string_view reason);
  void set_up(bool up);
  // link_bytes_total{link, type, direction ("in" | "out")} += bytes.
  void count_link(std::string_view link, std::string_view type, std::string_view direction, std::size_t bytes);

  // Service-specific metrics: loom_<service>_<name>, created on first use.
  void add(std::string_view name, const std::map<std::string, std::string>& labels, double delta = 1);
  void set(std::string_view name, const std::map<std::string, std::string>& labels, double value);

  // Runs `fn` before each render (on the listener's thread): gauges read at
  // scrape time. Whatever it reads must outlive the hook: clear_scrape_hooks()
  // before it goes.
  void on_scrape(std::function<void(service_metrics&)> fn);
  void clear_scrape_hooks();

  // Prometheus text exposition of everything registered (tests, `loom status`).
  std::string render();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::string full(std::string_view name) const;

  std::string service_;
  std::string endpoint_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  prometheus::Counter* restarts_;
  prometheus::Gauge* up_;
  prometheus::Family<prometheus::Counter>* dropped_;
  prometheus::Family<prometheus::Counter>* denied_;
  mutable std::mutex mu_;  // guards the two maps below
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges_;
  std::mutex hooks_mu_;  // guards hooks_; taken before mu_, never inside it
  std::vector<std::function<void(service_metrics&)>> hooks_;
  std::unique_ptr<http_listener> listener_;  // last: stopped before anything it reads goes
};

// Sets <service>_disk_free_bytes (available to this user) and
// <service>_disk_size_bytes of the file system holding `path`; nothing if
// statvfs fails.
void set_disk_gauges(service_metrics& m, const std::string& path);

}  // namespace loom::metrics
