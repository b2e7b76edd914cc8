// cgroup_files: what the pressure gauge (pressure.cpp) and the process box
// (process_box.cpp) both read from /proc and a cgroup hierarchy, in one place:
// a file's text, this process's group, a "key value" line, bytes for people.
// Internal to loom::runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::runtime::cgroup {

// The whole file; nullopt when it cannot be read (absent, no permission).
std::optional<std::string> read(const std::string& path);
// This process's group in the text of /proc/self/cgroup: the v2 line ("0::")
// for controller "", else the v1 line naming `controller`; "" when none.
std::string own(const std::string& self_cgroup, std::string_view controller);
// The number of the line "key N" (memory.stat, memory.events,
// memory.oom_control); 0 when there is none.
std::uint64_t field(const std::string& text, std::string_view key);
// "1.4 GiB", "512 MiB".
std::string bytes_text(std::uint64_t bytes);

}  // namespace loom::runtime::cgroup
