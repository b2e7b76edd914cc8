// The input layout shared by the TOML fuzz targets: TOML text, then
// optionally a NUL byte and "section.key=value" overrides one per line (what
// a submitter sends with --set). Plain helper; no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::fuzz {

struct toml_input {
  std::string_view toml;
  std::vector<std::string> overrides;
};

inline toml_input split_toml_input(const std::uint8_t* data, std::size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  toml_input in{all, {}};
  auto nul = all.find('\0');
  if (nul == std::string_view::npos) return in;
  in.toml = all.substr(0, nul);
  std::string_view rest = all.substr(nul + 1);
  // At most 16: the CLI takes a handful, and more only repeats the same paths.
  while (!rest.empty() && in.overrides.size() < 16) {
    auto nl = rest.find('\n');
    in.overrides.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }
  return in;
}

}  // namespace loom::fuzz
