// Job templates on this machine: where `loom` looks for them (--templates DIR,
// $LOOM_TEMPLATES, <binary>/../../templates in a build tree, the install
// path), how a name is found (NAME.toml, or NAME/template.toml for a folder
// template such as industry/legal with its sample corpus), and the listing.
// Used by `loom templates`, `loom job submit --template` and `loom data import
// --template`. Main thread only; reads files, nothing else.
#pragma once

#include "client/cli.hpp"

#include <string>
#include <vector>

namespace loom::cli {

struct found_template {
  std::string name;  // "pipeline-tiny", "industry/legal"
  std::string path;  // the .toml file read
  std::string text;
};

std::vector<std::string> template_dirs(const context& c);

// A template by name (looked up in template_dirs) or by path (a .toml file, or
// NAME with a '/' that is a file); not_found naming the directories tried.
result<found_template> find_template(const context& c, const std::string& name);

// Every template in template_dirs (the first of a name wins), sorted by name
// within each directory.
std::vector<found_template> list_templates(const context& c);

// A --set override whose value is a path (text, sft, shards, init_from) made
// absolute: the trainer runs elsewhere.
std::string absolute_override(const std::string& kv);

}  // namespace loom::cli
