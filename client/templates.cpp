#include "client/templates.hpp"

#include "client/input.hpp"
#include "libs/runspec/job_template.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace loom::cli {
namespace {

namespace fs = std::filesystem;

// A template is a page of TOML; past runspec::max_template_bytes it is not
// one, and the scheduler would refuse it: said here, before anything is sent.
result<std::string> read_template(const std::string& path) {
  return read_capped(path, runspec::max_template_bytes, "`loom job submit --template`");
}

// templates/industry/legal/template.toml -> "industry/legal"; templates/x.toml -> "x".
std::string name_in(const fs::path& dir, const fs::path& file) {
  const fs::path rel = file.lexically_relative(dir);
  if (rel.filename() == "template.toml") return rel.parent_path().generic_string();
  return (rel.parent_path() / rel.stem()).generic_string();
}

}  // namespace

std::vector<std::string> template_dirs(const context& c) {
  std::vector<std::string> dirs;
  if (auto t = c.a.get("templates")) dirs.push_back(*t);
  if (const char* e = std::getenv("LOOM_TEMPLATES"); e && *e) dirs.emplace_back(e);
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path().parent_path() / "templates").string());
  dirs.emplace_back("/usr/local/share/edgeloom/templates");
  return dirs;
}

result<found_template> find_template(const context& c, const std::string& name) {
  std::error_code ec;
  // A path: a .toml file, or a name with '/' that is a file here (not a folder
  // such as ./industry/legal, which is looked up as a template name below).
  const bool path = name.ends_with(".toml") || name.starts_with("/") ||
                    (name.find('/') != std::string::npos && fs::exists(name, ec) && !fs::is_directory(name, ec));
  if (path) {
    auto text = read_template(name);
    if (!text) return text.err();
    const fs::path p(name);
    const std::string n = p.filename() == "template.toml" ? p.parent_path().filename().string() : p.stem().string();
    return found_template{n, name, *text};
  }
  std::string tried;
  for (const auto& d : template_dirs(c)) {
    for (const std::string& file : {d + "/" + name + ".toml", d + "/" + name + "/template.toml"}) {
      auto text = read_template(file);
      if (text) return found_template{name, file, *text};
      if (text.code() != errc::not_found) return text.err();
    }
    tried += (tried.empty() ? "" : ", ") + d;
  }
  return make_error(errc::not_found, "no template " + name + " (looked in " + tried + "; `loom templates` lists them)");
}

std::string absolute_override(const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos) return kv;
  const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  // Path keys by their type in the run spec's schema, so a new path key (hpo.validation, reward.model, ...) is one too.
  const bool pathy = runspec::override_names_path(key) && value != "bytes" && value.rfind("${", 0) != 0;
  if (!pathy || value.empty() || value[0] == '/') return kv;
  std::error_code ec;
  return key + "=" + fs::absolute(value, ec).lexically_normal().string();
}

std::vector<found_template> list_templates(const context& c) {
  std::vector<found_template> all;
  std::set<std::string> seen;
  for (const auto& d : template_dirs(c)) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(d, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory() && it->path().filename() == "sample") it.disable_recursion_pending();  // corpora
      else if (it->path().extension() == ".toml") files.push_back(it->path());
    }
    std::vector<std::pair<std::string, fs::path>> named;
    for (const auto& f : files) named.emplace_back(name_in(d, f), f);
    std::sort(named.begin(), named.end());
    for (const auto& [name, f] : named) {
      if (!seen.insert(name).second) continue;
      auto text = read_template(f.string());
      all.push_back(found_template{name, f.string(), text ? *text : std::string()});
    }
  }
  return all;
}

}  // namespace loom::cli
