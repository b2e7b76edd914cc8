// Where a command may write an output the user named (`--out PATH`): the
// rules every such command follows (issue 24 item 15), so that no flag can
// make one destroy what it reads or replace a file nobody asked it to:
//   * an output is never one of the command's inputs (the same file, or a
//     file under an input directory): invalid_argument;
//   * an existing file is replaced only with `force` (--force):
//     already_exists otherwise; a directory is never replaced by a file;
//   * `refuse(location)` (the caller's rule for places no command writes,
//     whatever the flags: a data dir's keys, layout::check_output) is asked
//     for both where the name points and, for a symbolic link, where it leads.
// Stateless; thread-safe. The check is made before the command works (a
// refusal costs nothing); the writers publish atomically (temp + rename).
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <string>
#include <vector>

namespace loom::files {

enum class output_kind {
  file,       // one file, replaced only with force
  directory,  // a directory the command fills (its own rule decides what an existing one may hold)
};

struct output_rules {
  output_kind kind = output_kind::file;
  bool force = false;
  // Files and directories the command reads; the output may be none of them.
  std::vector<std::string> inputs;
  // The caller's places no command writes: an error for a canonical location
  // that lies in one, ok otherwise. Unset: none.
  std::function<status(const std::string& canonical)> refuse;
  // How the option is named in messages ("--out").
  std::string option = "--out";
};

// Whether `path` (absolute or relative to the working directory) may be
// written as `rules` say. Errors name the option, the path and the rule.
status check_output(const std::string& path, const output_rules& rules);

// The canonical locations `path` stands for: where its name lies (its parent
// resolved, the last component kept) and, when that is a symbolic link, where
// it leads. One entry when they are the same.
std::vector<std::string> output_locations(const std::string& path);

}  // namespace loom::files
