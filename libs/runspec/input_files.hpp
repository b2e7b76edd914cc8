// input_files: the one rule for every file a run spec makes a service read.
// A path-typed value (schema.hpp) — wherever it sits: data.*, model.init_from,
// align.reference, reward.model, hpo.validation, and any path key added later
// — is judged by its key's file kind:
//
//   confined   it lies inside the allowed roots (files::root_set: the import
//              roots and the deployment's job outputs, layout::job_read_roots),
//              judged by where it leads (links resolved);
//   a file     of the kind the key takes: a regular file (no device, FIFO or
//              socket: /dev/zero is no text), or a directory where the key takes one;
//   capped     a regular file is at most its kind's cap (file_rule::max_bytes, with the reason).
//
// The scheduler applies it to every stage at submit, the trainer again before
// it opens anything (a job stored before the rule, a file changed since), and
// read_input bounds the read itself. Errors name the key, the path and the
// roots or the cap: permission_denied outside the roots, not_found, and
// invalid_argument for the wrong kind of file or one over its cap.
// Stateless apart from the caller's root_set (one owner: not thread-safe).
#pragma once

#include "libs/files/confine.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::runspec {

// The rule for one value of path key `key` ("hpo.validation"): internal for a
// key the schema does not type as a path.
status check_input(files::root_set& roots, std::string_view key, const std::string& path);

// check_input for every (key, path) of `paths` (run_config::input_paths(),
// plus what travels beside a config, such as a trial's hpo.validation): the
// first refusal, its message prefixed by `where` ("stage sft: ") and, for a
// path outside the roots, followed by where a stage may read from.
status check_inputs(files::root_set& roots, const std::vector<std::pair<std::string, std::string>>& paths,
                    const std::string& where = "");

// The bytes of the regular file `path` named by key `key`, refused (as
// check_input) when it is not a regular file or is — or has grown — over the
// key's cap: the read itself never goes beyond the cap. Not confined: call
// check_input (or check_inputs) first.
result<std::string> read_input(std::string_view key, const std::string& path);

// "1 GiB", "16 MiB": a cap as the messages show it.
std::string describe_cap(std::uint64_t bytes);

}  // namespace loom::runspec
