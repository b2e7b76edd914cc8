#include "services/ingest/importer/output.hpp"

#include <nlohmann/json.hpp>

namespace loom::ingest {
namespace {

using json = nlohmann::ordered_json;

// As services/trainer/run/sft_data.cpp titles roles.
std::string_view title(const std::string& role) {
  if (role == "system") return "System";
  if (role == "user") return "User";
  return "Assistant";
}

void turn(std::string& out, std::string_view who, std::string_view content) {
  out += "### ";
  out += who;
  out += ":\n";
  out += content;
  out += "\n\n";
}

}  // namespace

void render_chat(const document& d, std::string& out) {
  out.clear();
  if (d.kind == doc_kind::sft) {
    for (const auto& t : d.messages) turn(out, title(t.role), t.content);
  } else if (d.kind == doc_kind::preference) {
    turn(out, "User", d.prompt);
    turn(out, "Assistant", d.chosen);
  } else {
    out = d.text;
  }
}

void record_json(const document& d, std::string& out) {
  json j;
  if (d.kind == doc_kind::sft) {
    json msgs = json::array();
    for (const auto& t : d.messages) msgs.push_back({{"role", t.role}, {"content", t.content}});
    j["messages"] = std::move(msgs);
  } else if (d.kind == doc_kind::preference) {
    j["prompt"] = d.prompt;
    j["chosen"] = d.chosen;
    j["rejected"] = d.rejected;
  } else {
    out.clear();
    return;
  }
  out = j.dump(-1, ' ', false, json::error_handler_t::replace);
}

result<output> output::create(const std::string& dir, shards::dtype type, std::uint64_t target_bytes,
                              std::shared_ptr<atrest::kek_store> seal) {
  shards::writer_options w;
  w.dir = dir;
  w.type = type;
  w.target_bytes = target_bytes;
  w.seal = seal.get();
  auto sw = shards::shard_writer::create(std::move(w));
  if (!sw) return sw.err();
  return output(std::move(*sw), dir, type, std::move(seal));
}

status output::emit(std::span<const std::uint32_t> tokens, std::string_view record, std::uint64_t text_bytes) {
  if (auto st = writer_.append(tokens); !st) return st;
  ++documents_;
  text_bytes_ += text_bytes;
  if (record.empty()) return ok_status();
  if (!records_file_) {
    auto f = out_stream::create(dir_ + "/" + std::string(records_file_name), std::size_t{256} << 10, seal_);
    if (!f) return f.err();
    records_file_.emplace(std::move(*f));
  }
  ++records_;
  if (auto st = records_file_->write(record); !st) return st;
  return records_file_->write("\n");
}

result<shards::manifest> output::finish() {
  if (records_file_)
    if (auto st = records_file_->close(true); !st) return st.err();
  return writer_.finish();
}

}  // namespace loom::ingest
