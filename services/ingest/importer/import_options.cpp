#include "services/ingest/importer/import_options.hpp"

#include "libs/textq/policy.hpp"

#include "services/ingest/pipeline/filters/profile.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <unordered_set>

namespace loom::ingest {
namespace {

constexpr std::uint64_t min_budget = std::uint64_t{16} << 20;  // below this the fixed parts dominate
constexpr std::uint64_t min_document = std::uint64_t{64} << 10;  // a page of prose still fits one document

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

status validate_dataset_name(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "dataset name \"" + std::string(name.substr(0, 80)) + "\": " + why +
                                                  " (want 1..64 of [A-Za-z0-9._-], not starting with '.')");
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 64) return bad("longer than 64 characters");
  if (name.front() == '.') return bad("starts with '.'");
  for (char c : name)
    if (!name_char(c)) return bad("has a character outside [A-Za-z0-9._-]");
  return ok_status();
}

status validate(const import_options& o) {
  if (auto st = validate_dataset_name(o.dataset); !st) return st;
  if (o.source.empty()) return make_error(errc::invalid_argument, "import: no source path");
  if (o.datasets_root.empty()) return make_error(errc::invalid_argument, "import: no datasets root");
  if (o.memory_budget < min_budget)
    return make_error(errc::invalid_argument, "import: memory budget " + std::to_string(o.memory_budget) +
                                                  " bytes is below the 16 MiB minimum");
  if (o.shard_target_bytes < 4096)
    return make_error(errc::invalid_argument, "import: shard target " + std::to_string(o.shard_target_bytes) +
                                                  " bytes is below 4 KiB");
  if (o.nodes.empty()) return make_error(errc::invalid_argument, "import: no placement nodes");
  std::unordered_set<std::string> seen;
  for (const auto& n : o.nodes) {
    if (n.empty()) return make_error(errc::invalid_argument, "import: empty node id");
    if (!seen.insert(n).second) return make_error(errc::invalid_argument, "import: node " + n + " named twice");
  }
  if (auto p = profile_by_name(o.profile); !p) return p.err();
  return ok_status();
}

result<std::uint64_t> parse_byte_size(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument, "size \"" + std::string(text) +
                                                  "\": want a number with an optional unit (512MiB, 1GiB, 64M, 2GB)");
  };
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return bad();
    n = n * 10 + d;
    ++i;
  }
  if (i == 0) return bad();
  std::string unit(text.substr(i));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  if (unit.empty() || unit == "b") return n;
  const std::string_view prefixes = "kmgt";
  const std::size_t p = prefixes.find(unit[0]);
  if (p == std::string_view::npos) return bad();
  const std::string rest = unit.substr(1);
  std::uint64_t base;
  if (rest.empty() || rest == "ib") base = 1024;
  else if (rest == "b") base = 1000;
  else return bad();
  std::uint64_t mult = 1;
  for (std::size_t k = 0; k <= p; ++k) mult *= base;
  if (n > std::numeric_limits<std::uint64_t>::max() / mult) return bad();
  return n * mult;
}

budget_plan plan_budget(const import_options& o) {
  budget_plan p;
  const std::uint64_t b = o.memory_budget;
  p.dedup_bytes = b / 2;
  p.shard_target_bytes = std::max<std::uint64_t>(4096, std::min(o.shard_target_bytes, b / 8));
  const std::uint64_t reader_limit = std::min<std::uint64_t>(o.reader.max_line_bytes, o.reader.max_document_bytes);
  p.max_document_bytes = std::min(reader_limit, std::max(min_document, b / 64));
  p.media_tar_bytes = std::max<std::uint64_t>(4096, std::min(o.shard_target_bytes, b / 16));
  p.media_file_bytes = std::min<std::uint64_t>(std::uint64_t{64} << 20, b / 16);
  // A decode holds up to 4 bytes a pixel (RGBA, or 16-bit rows, before RGB8).
  p.media_pixels = std::min<std::uint64_t>(64'000'000, b / 16 / 4);
  // Audio decodes to 16 kHz float (64 KB/s) and writes 16-bit (32 KB/s):
  // ~100 KB per second of sound in flight; 10 min at most (libs/media).
  p.media_seconds = std::min(600.0, static_cast<double>(b / 16) / 100'000.0);
  return p;
}

textq::filter_policy text_filter_policy_for(std::string_view profile) {
  textq::filter_policy p;
  if (profile == "code" || profile == "minimal") p.perplexity = p.quality = false;
  return p;
}

}  // namespace loom::ingest
