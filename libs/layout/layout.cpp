#include "libs/layout/layout.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

namespace loom::layout {

bool is_service(std::string_view name) {
  for (auto s : service_names)
    if (s == name) return true;
  return false;
}

std::string binary_of(std::string_view service) { return "loom-" + std::string(service); }

const service_endpoint* endpoints::find(std::string_view service) const {
  auto it = services.find(std::string(service));
  return it == services.end() ? nullptr : &it->second;
}

result<endpoints> read_endpoints(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  try {
    auto j = nlohmann::json::parse(*text);
    endpoints e;
    e.version = j.value("version", 1);
    e.zone = j.value("zone", std::string("local"));
    e.watcher_pid = j.value("watcher_pid", std::int64_t{0});
    for (auto& [name, s] : j.at("services").items()) {
      service_endpoint se;
      se.rpc = s.value("rpc", std::string());
      se.metrics = s.value("metrics", std::string());
      se.pull = s.value("pull", std::string());
      se.pid = s.value("pid", std::int64_t{0});
      e.services[name] = se;
    }
    return e;
  } catch (const std::exception& ex) {
    return make_error(errc::corruption, path + " is not a valid endpoints file: " + ex.what());
  }
}

status write_endpoints(const std::string& path, const endpoints& e) {
  nlohmann::json j;
  j["version"] = e.version;
  j["zone"] = e.zone;
  j["watcher_pid"] = e.watcher_pid;
  j["services"] = nlohmann::json::object();
  for (auto& [name, s] : e.services) {
    nlohmann::json o{{"rpc", s.rpc}, {"metrics", s.metrics}, {"pid", s.pid}};
    if (!s.pull.empty()) o["pull"] = s.pull;
    j["services"][name] = o;
  }
  return files::write_atomic(path, j.dump(2) + "\n", 0644);
}

}  // namespace loom::layout
