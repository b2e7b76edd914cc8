#include "services/ingest/importer/spill.hpp"

#include "libs/atrest/sealed.hpp"

#include <cstring>

namespace loom::ingest {
namespace {

struct header {
  std::uint64_t file, record, line, text_bytes;
  std::uint32_t tokens, json_bytes;
  std::uint8_t kind;
  std::uint8_t pad[7];
};
static_assert(sizeof(header) == 48);

}  // namespace

result<spill_writer> spill_writer::create(const std::string& path, shards::dtype width,
                                          std::shared_ptr<atrest::kek_store> seal) {
  auto o = out_stream::create(path, std::size_t{1} << 20, std::move(seal));
  if (!o) return o.err();
  return spill_writer(std::move(*o), width);
}

status spill_writer::write(const spill_meta& m, std::span<const std::uint32_t> tokens, std::string_view record_json) {
  header h{};
  h.file = m.file;
  h.record = m.record;
  h.line = m.line;
  h.text_bytes = m.text_bytes;
  h.tokens = static_cast<std::uint32_t>(tokens.size());
  h.json_bytes = static_cast<std::uint32_t>(record_json.size());
  h.kind = static_cast<std::uint8_t>(m.kind);
  if (tokens.size() > 0xffffffffu || record_json.size() > 0xffffffffu)
    return make_error(errc::invalid_argument, "spill: a document over 4 G tokens or bytes");
  if (auto st = out_.write({reinterpret_cast<const char*>(&h), sizeof h}); !st) return st;
  if (width_ == shards::dtype::uint16) {
    scratch_.resize(tokens.size() * 2);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto v = static_cast<std::uint16_t>(tokens[i]);
      std::memcpy(scratch_.data() + 2 * i, &v, 2);
    }
    if (auto st = out_.write(scratch_); !st) return st;
  } else {
    if (auto st = out_.write({reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes()}); !st) return st;
  }
  return out_.write(record_json);
}

status spill_writer::finish() { return out_.close(false); }

result<spill_reader> spill_reader::open(const std::string& path, shards::dtype width, atrest::kek_store* keys) {
  spill_reader r(width);
  r.path_ = path;
  if (keys) {
    auto s = atrest::sealed_reader::open(path, *keys);
    if (!s) return s.err();
    r.sealed_ = std::move(*s);
  } else {
    auto i = in_stream::open(path);
    if (!i) return i.err();
    r.in_.emplace(std::move(*i));
  }
  return r;
}

spill_reader::spill_reader(spill_reader&&) noexcept = default;
spill_reader& spill_reader::operator=(spill_reader&&) noexcept = default;
spill_reader::~spill_reader() = default;

result<bool> spill_reader::read(void* out, std::size_t n) {
  if (in_) return in_->read(out, n);
  auto got = sealed_->read(out, n);
  if (!got) return got.err();
  if (*got == n) return true;
  if (*got == 0) return false;
  return make_error(errc::corruption, path_ + ": ends part-way through a record");
}

result<bool> spill_reader::next(spilled_doc& d) {
  // The rest of a record: a clean end of file there is a cut-off record.
  auto body = [this](void* out, std::size_t n) -> status {
    if (n == 0) return ok_status();
    auto r = read(out, n);
    if (!r) return r.err();
    if (!*r) return make_error(errc::corruption, "spill: ends inside a record");
    return ok_status();
  };
  header h;
  auto more = read(&h, sizeof h);
  if (!more || !*more) return more;
  d.meta = {h.file, h.record, h.line, h.text_bytes, static_cast<doc_kind>(h.kind)};
  d.tokens.resize(h.tokens);
  if (width_ == shards::dtype::uint16) {
    narrow_.resize(h.tokens);
    if (auto st = body(narrow_.data(), narrow_.size() * 2); !st) return st.err();
    for (std::size_t i = 0; i < narrow_.size(); ++i) d.tokens[i] = narrow_[i];
  } else {
    if (auto st = body(d.tokens.data(), d.tokens.size() * 4); !st) return st.err();
  }
  d.record_json.resize(h.json_bytes);
  if (auto st = body(d.record_json.data(), d.record_json.size()); !st) return st.err();
  return true;
}

}  // namespace loom::ingest
