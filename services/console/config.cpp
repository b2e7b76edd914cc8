#include "services/console/config.hpp"

#include <filesystem>

namespace loom::console {

namespace {
error bad(const std::string& why) { return make_error(errc::invalid_argument, why); }
}  // namespace

result<std::pair<std::string, int>> host_port(const std::string& endpoint) {
  std::string s = endpoint;
  if (s.rfind("tcp://", 0) == 0) s = s.substr(6);
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad("'" + endpoint + "': want HOST:PORT");
  std::string host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = s.substr(colon + 1);
  if (port == "*" || port == "0") return std::pair{host, 0};
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return bad("'" + endpoint + "': the port must be 0..65535");
  return std::pair{host, std::stoi(port)};
}

result<console_config> load_config(const std::vector<std::string>& argv, const env_lookup& env,
                                   const std::string& exe_dir) {
  console_config c;
  std::string templates;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    std::string* into = a == "--https" ? &c.https_host : a == "--cert" ? &c.cert : a == "--cert-key" ? &c.cert_key
                        : a == "--templates" ? &templates : nullptr;
    if (!into) {
      c.runtime_args.push_back(a);
      continue;
    }
    if (i + 1 >= argv.size() || argv[i + 1].empty()) return bad(a + " needs a value");
    *into = argv[++i];
  }
  if (!c.https_host.empty()) {
    auto hp = host_port(c.https_host);
    if (!hp) return bad("--https " + hp.err().message);
    c.https_host = hp->first;
    c.https_port = hp->second;
  }
  if (c.cert.empty() != c.cert_key.empty()) return bad("give both --cert and --cert-key, or neither");
  if (!templates.empty()) c.template_dirs.push_back(templates);
  if (const char* e = env("LOOM_TEMPLATES"); e && *e) c.template_dirs.emplace_back(e);
  if (!exe_dir.empty())
    c.template_dirs.push_back((std::filesystem::path(exe_dir).parent_path().parent_path() / "templates").string());
  c.template_dirs.emplace_back("/usr/local/share/edgeloom/templates");
  return c;
}

}  // namespace loom::console
