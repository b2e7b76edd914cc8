#include "libs/metrics/metrics.hpp"

#include "libs/metrics/http_listener.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

#include <sys/statvfs.h>

namespace loom::metrics {
namespace {
// Request handling spans 50 µs (ping) to seconds (imports, checkpoints).
const prometheus::Histogram::BucketBoundaries duration_buckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}  // namespace

service_metrics::service_metrics(std::string service)
    : service_(std::move(service)), registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &prometheus::BuildCounter()
                   .Name(full("requests_total"))
                   .Help("Requests answered, by request type and status code")
                   .Register(*registry_);
  durations_ = &prometheus::BuildHistogram()
                    .Name(full("request_duration_seconds"))
                    .Help("Time from receipt to reply, by request type")
                    .Register(*registry_);
  restarts_ = &prometheus::BuildCounter()
                   .Name(full("restarts_total"))
                   .Help("Supervisor restarts of the service actor")
                   .Register(*registry_)
                   .Add({});
  up_ = &prometheus::BuildGauge().Name(full("up")).Help("1 while the service serves").Register(*registry_).Add({});
  dropped_ = &prometheus::BuildCounter()
                  .Name(full("dropped_total"))
                  .Help("Frames dropped without an answer, by reason")
                  .Register(*registry_);
  denied_ = &prometheus::BuildCounter()
                 .Name(full("denied_total"))
                 .Help("Requests denied by authorization, by reason")
                 .Register(*registry_);
}

service_metrics::~service_metrics() = default;

result<std::unique_ptr<service_metrics>> service_metrics::start(std::string service, std::string bind) {
  auto m = std::make_unique<service_metrics>(std::move(service));
  auto l = http_listener::start(bind, [raw = m.get()] { return raw->render(); });
  if (!l) return l.err();
  m->listener_ = std::move(*l);
  m->endpoint_ = bind.substr(0, bind.rfind(':')) + ":" + std::to_string(m->listener_->port());
  return m;
}

std::string service_metrics::full(std::string_view name) const {
  return "loom_" + service_ + "_" + std::string(name);
}

void service_metrics::count_request(std::string_view type, errc code, double seconds) {
  requests_->Add({{"type", std::string(type)}, {"code", std::string(to_string(code))}}).Increment();
  durations_->Add({{"type", std::string(type)}}, duration_buckets).Observe(seconds);
}

void service_metrics::count_restart() { restarts_->Increment(); }
void service_metrics::count_dropped(std::string_view reason) { dropped_->Add({{"reason", std::string(reason)}}).Increment(); }
void service_metrics::count_denied(std::string_view reason) { denied_->Add({{"reason", std::string(reason)}}).Increment(); }
void service_metrics::set_up(bool up) { up_->Set(up ? 1 : 0); }

void service_metrics::add(std::string_view name, const std::map<std::string, std::string>& labels, double delta) {
  std::lock_guard lock(mu_);
  auto key = full(name);
  auto& fam = counters_[key];
  if (!fam) fam = &prometheus::BuildCounter().Name(key).Help(key).Register(*registry_);
  fam->Add(labels).Increment(delta);
}

void service_metrics::count_link(std::string_view link, std::string_view type, std::string_view direction,
                                 std::size_t bytes) {
  add("link_bytes_total", {{"link", std::string(link)}, {"type", std::string(type)}, {"direction", std::string(direction)}},
      static_cast<double>(bytes));
}

void service_metrics::set(std::string_view name, const std::map<std::string, std::string>& labels, double value) {
  std::lock_guard lock(mu_);
  auto key = full(name);
  auto& fam = gauges_[key];
  if (!fam) fam = &prometheus::BuildGauge().Name(key).Help(key).Register(*registry_);
  fam->Add(labels).Set(value);
}

void service_metrics::on_scrape(std::function<void(service_metrics&)> fn) {
  std::lock_guard lock(hooks_mu_);
  hooks_.push_back(std::move(fn));
}

void service_metrics::clear_scrape_hooks() {
  std::lock_guard lock(hooks_mu_);
  hooks_.clear();
}

std::string service_metrics::render() {
  {
    std::lock_guard lock(hooks_mu_);
    for (auto& h : hooks_) h(*this);
  }
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, registry_->Collect());
  return out.str();
}

void set_disk_gauges(service_metrics& m, const std::string& path) {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0 || s.f_blocks == 0) return;
  m.set("disk_free_bytes", {}, static_cast<double>(s.f_bavail) * static_cast<double>(s.f_frsize));
  m.set("disk_size_bytes", {}, static_cast<double>(s.f_blocks) * static_cast<double>(s.f_frsize));
}

}  // namespace loom::metrics
