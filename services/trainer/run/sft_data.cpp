#include "services/trainer/run/sft_data.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/object.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/trainer/run/text_data.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <span>

namespace loom::trainer {
namespace {

std::string trim(std::string_view s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::string title(const std::string& role) {
  if (role == "system") return "System";
  if (role == "user") return "User";
  return "Assistant";
}

}  // namespace

std::vector<chat_record> records_from_text(std::string_view text) {
  std::vector<std::string> paras;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find("\n\n", pos);
    if (end == std::string_view::npos) end = text.size();
    std::string p = trim(text.substr(pos, end - pos));
    if (p.size() >= 20) paras.push_back(std::move(p));
    pos = end + 2;
  }
  std::vector<chat_record> out;
  for (std::size_t i = 0; i + 1 < paras.size(); ++i)
    out.push_back({{"user", "Continue the text:\n" + paras[i]}, {"assistant", paras[i + 1]}});
  return out;
}

result<std::vector<chat_record>> records_from_jsonl(std::string_view jsonl, const std::string& origin) {
  std::vector<chat_record> out;
  std::size_t pos = 0, line = 0;
  while (pos < jsonl.size()) {
    std::size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    ++line;
    std::string_view l = jsonl.substr(pos, end - pos);
    pos = end + 1;
    if (trim(l).empty()) continue;
    auto bad = [&](const std::string& why) {
      return make_error(errc::invalid_argument, origin + ":" + std::to_string(line) + ": " + why);
    };
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_object() && !j.contains("messages") && j.contains("prompt") && j.contains("chosen")) {
      if (!j["prompt"].is_string() || !j["chosen"].is_string())
        return bad("a preference pair needs string \"prompt\" and \"chosen\"");
      out.push_back({{"user", j["prompt"].get<std::string>()}, {"assistant", j["chosen"].get<std::string>()}});
      continue;
    }
    if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array())
      return bad("expected {\"messages\":[{\"role\",\"content\"}…]} or {\"prompt\",\"chosen\",\"rejected\"}");
    chat_record rec;
    bool has_assistant = false;
    for (const auto& m : j["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !m["content"].is_string())
        return bad("each message needs string \"role\" and \"content\"");
      const std::string role = m["role"].get<std::string>();
      if (role != "system" && role != "user" && role != "assistant") return bad("unknown role \"" + role + "\"");
      has_assistant |= role == "assistant";
      rec.push_back({role, m["content"].get<std::string>()});
    }
    if (!has_assistant) return bad("a record needs at least one assistant message");
    out.push_back(std::move(rec));
  }
  return out;
}

result<std::string> prepare_sft_dataset(const std::string& source, bool from_text, const std::string& cache_dir,
                                        const std::string& tokenizer_path) {
  auto stamp = tokenizer_stamp(tokenizer_path);
  if (!stamp) return stamp.err();
  return cached_shards(source, from_text ? "data.text" : "data.sft", stamp->empty() ? "sft" : "sft " + *stamp, cache_dir,
                       [&](const std::string& text) -> status {
    std::vector<chat_record> records;
    if (from_text) {
      records = records_from_text(text);
    } else {
      auto r = records_from_jsonl(text, source);
      if (!r) return r.err();
      records = std::move(*r);
    }
    if (records.empty())
      return make_error(errc::invalid_argument, source + ": no SFT records (need at least two paragraphs)");
    auto bpe = load_run_tokenizer(tokenizer_path);
    if (!bpe) return bpe.err();
    auto eot = end_of_text_id(*bpe, tokenizer_path);
    if (!eot) return eot.err();
    shards::writer_options opt;
    opt.dir = cache_dir;
    const auto seal = atrest::sealing_keys();  // sealed at rest unless LOOM_AT_REST=off
    opt.seal = seal.get();
    opt.type = shards::dtype::uint32;
    auto w = shards::shard_writer::create(opt);
    if (!w) return w.err();
    std::vector<std::uint32_t> doc, piece;
    for (const auto& rec : records) {
      doc.clear();
      for (const auto& turn : rec) {
        piece.clear();
        bpe->encode_into("### " + title(turn.role) + ":\n", piece);
        for (auto id : piece) doc.push_back(id | sft_masked_bit);
        piece.clear();
        bpe->encode_into(turn.content + "\n\n", piece);
        const bool target = turn.role == "assistant";
        for (auto id : piece) doc.push_back(target ? id : (id | sft_masked_bit));
      }
      doc.push_back(*eot);  // a target: the model learns where an answer ends
      if (auto st = w->append(doc); !st) return st;
    }
    if (auto m = w->finish(); !m) return m.err();
    return ok_status();
  });
}

result<std::string> prepare_sft_from_dataset(const std::string& dataset_dir, const std::string& cache_dir,
                                             const std::string& tokenizer_path) {
  const std::string records = dataset_dir + "/records.jsonl";
  std::error_code ec;
  if (std::filesystem::is_regular_file(records, ec) && std::filesystem::file_size(records, ec) > 0 && !ec)
    return prepare_sft_dataset(records, false, cache_dir, tokenizer_path);

  // Plain documents: decode each (ingest tokenizes with GPT-2, <|endoftext|>
  // before each document) and write its paragraph-pair records as JSONL.
  auto ds = shards::dataset::open(dataset_dir, shards::verify::eager);
  if (!ds) return ds.err();
  auto gpt2 = tokenizer::bpe::load_gpt2();
  if (!gpt2) return gpt2.err();
  std::string jsonl, doc;
  std::size_t n_records = 0;
  std::vector<std::uint32_t> ids, buf(1 << 20);
  auto flush = [&] {
    doc.clear();
    gpt2->decode_into(ids, doc);
    ids.clear();
    for (const auto& rec : records_from_text(doc)) {
      nlohmann::json msgs = nlohmann::json::array();
      for (const auto& t : rec) msgs.push_back({{"role", t.role}, {"content", t.content}});
      jsonl += nlohmann::json{{"messages", msgs}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      jsonl += '\n';
      ++n_records;
    }
  };
  for (std::uint64_t at = 0; at < ds->token_count();) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.size(), ds->token_count() - at);
    if (auto st = ds->read(at, std::span<std::uint32_t>(buf.data(), n)); !st) return st.err();
    at += n;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (buf[i] == gpt2_eot) {
        flush();
      } else if (gpt2->valid_id(buf[i])) {
        ids.push_back(buf[i]);
      } else {
        return make_error(errc::corruption, dataset_dir + ": token " + std::to_string(buf[i]) + " at " +
                                                std::to_string(at - n + i) + " is not a GPT-2 id");
      }
    }
  }
  flush();
  if (n_records == 0)
    return make_error(errc::invalid_argument, "data.dataset " + dataset_dir +
                                                  ": no SFT records: it holds no chat records and no document has "
                                                  "two paragraphs of 20+ characters");
  const std::string source = cache_dir + ".records.jsonl";
  if (auto st = files::make_dirs(std::filesystem::path(source).parent_path().string()); !st) return st.err();
  // Training text: sealed at rest like the shards made from it (unless LOOM_AT_REST=off).
  if (auto st = atrest::write_object(source, jsonl, atrest::sealing_keys().get(), loom::wall_now());
      !st)
    return st.err();
  return prepare_sft_dataset(source, false, cache_dir, tokenizer_path);
}

}  // namespace loom::trainer
