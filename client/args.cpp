#include "client/args.hpp"

namespace loom::cli {

std::optional<std::string> args::get(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> args::all(const std::string& name) const {
  auto it = repeated.find(name);
  return it == repeated.end() ? std::vector<std::string>{} : it->second;
}

std::string args::get_or(const std::string& name, const std::string& fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

result<args> parse(const std::vector<std::string>& argv) {
  args a;
  bool only_positional = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (only_positional || s.size() < 2 || s[0] != '-') {
      a.positional.push_back(s);
      continue;
    }
    if (s == "--") {
      only_positional = true;
      continue;
    }
    std::string name = s.substr(s[1] == '-' ? 2 : 1);
    if (auto eq = name.find('='); eq != std::string::npos) {
      a.options[name.substr(0, eq)] = name.substr(eq + 1);
      a.repeated[name.substr(0, eq)].push_back(name.substr(eq + 1));
      continue;
    }
    if (known_flags.count(name)) {
      a.flags.insert(name);
      continue;
    }
    if (i + 1 >= argv.size()) return make_error(errc::invalid_argument, "option --" + name + " needs a value");
    a.options[name] = argv[++i];
    a.repeated[name].push_back(argv[i]);
  }
  return a;
}

}  // namespace loom::cli
