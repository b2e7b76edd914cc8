// loom-console: the web console of a cloud (README.md). An HTTPS gateway: every
// page and API call becomes the typed ZeroMQ request the CLI sends, under the
// logged-in browser's token. Wiring only: config.hpp reads the settings,
// console_service.hpp starts the HTTPS server, libs/runtime runs the rest
// (keys, ZAP, Health on its ROUTER, metrics, audit, supervision).
#include "libs/runtime/service.hpp"
#include "services/console/config.hpp"
#include "services/console/console_service.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

int main(int argc, char** argv) {
  using namespace loom;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
  auto cfg = console::load_config({argv, argv + argc}, [](const char* k) -> const char* { return std::getenv(k); }, exe);
  if (!cfg) {
    std::fprintf(stderr, "loom-console: %s\n", cfg.err().message.c_str());
    return 2;
  }
  runtime::service_spec spec;
  spec.name = "console";
  spec.start_extra = [&c = *cfg](runtime::service_env& env) { return console::start(env, c); };
  spec.make_logic = [](runtime::service_env&) { return console::make_logic(); };
  std::vector<char*> args;
  for (auto& a : cfg->runtime_args) args.push_back(a.data());
  return runtime::service_main(static_cast<int>(args.size()), args.data(), spec);
}
