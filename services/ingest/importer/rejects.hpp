// rejects.jsonl of a dataset: one JSON line per item that did not make it in,
// in the order the import met them:
//   {"seq":1,"stage":"reader","rule":"corrupt_compression","file":"in/b.gz","line":0,"detail":"..."}
// stage: "reader" (could not be read), "rejected" (a rule), "quarantined"
// (licence policy), "duplicate" (dedup, pass 2: detail names the kept copy).
// line is 1-based, 0 when unknown or the whole file. Invalid UTF-8 in names or
// details is replaced (U+FFFD), so every line is valid JSON.
// A writer belongs to the importing thread; read_rejects is stateless.
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/importer/stream_file.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace loom::ingest {

inline constexpr std::string_view rejects_file_name = "rejects.jsonl";

struct reject_entry {
  std::uint64_t seq = 0;  // 1, 2, ...
  std::string stage, rule, file;
  std::uint64_t line = 0;
  std::string detail;  // at most 512 bytes
};

class rejects_writer {
 public:
  // Sealed at rest under `seal` when given (published on close).
  static result<rejects_writer> create(const std::string& path, std::shared_ptr<atrest::kek_store> seal = nullptr);
  status add(std::string_view stage, std::string_view rule, std::string_view file, std::uint64_t line,
             std::string_view detail);
  status close();  // fsyncs
  std::uint64_t count() const { return seq_; }

 private:
  explicit rejects_writer(out_stream o) : out_(std::move(o)) {}
  out_stream out_;
  std::uint64_t seq_ = 0;
};

// Calls fn for each entry of the rejects file at `path`, at most `limit` of them
// (0 = all); fn returning false stops. corruption naming the line when one is not
// an entry. A sealed file is read as its plaintext (tags verified).
status read_rejects(const std::string& path, std::uint64_t limit, const std::function<bool(reject_entry&&)>& fn);

}  // namespace loom::ingest
