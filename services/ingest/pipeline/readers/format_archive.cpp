// Tar archives through libarchive (ustar, pax, GNU; compressed with gzip, zstd,
// bzip2 or xz, which libarchive undoes itself). The archive is read from a
// byte_source through callbacks, so a tar inside a tar streams too. Each regular
// member goes back through read_named as "archive!member".
#include "services/ingest/pipeline/readers/read_context.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <memory>
#include <vector>

namespace loom::ingest::detail {
namespace {

struct source_client {
  byte_source* src = nullptr;
  std::vector<char> buf = std::vector<char>(128 * 1024);
  bool failed = false;
  error err;
};

la_ssize_t read_cb(struct archive* a, void* client, const void** out) {
  auto* c = static_cast<source_client*>(client);
  auto r = c->src->read(c->buf.data(), c->buf.size());
  if (!r.ok()) {
    c->failed = true;
    c->err = r.err();
    archive_set_error(a, EIO, "%s", r.err().message.c_str());
    return -1;
  }
  *out = c->buf.data();
  return static_cast<la_ssize_t>(*r);
}

// One member's data as a byte_source.
class entry_source final : public byte_source {
 public:
  explicit entry_source(struct archive* a) : a_(a) {}
  result<std::size_t> read(char* buf, std::size_t cap) override {
    la_ssize_t n = archive_read_data(a_, buf, cap);
    if (n < 0) {
      failure_ = reject_reason::corrupt_archive;
      const char* msg = archive_error_string(a_);
      return make_error(errc::corruption, std::string("archive member: ") + (msg ? msg : "read error"));
    }
    return static_cast<std::size_t>(n);
  }

 private:
  struct archive* a_;
};

struct archive_deleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

}  // namespace

void read_archive(read_context& ctx, const std::string& name, byte_source& src, int depth) {
  std::unique_ptr<struct archive, archive_deleter> a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  source_client client;
  client.src = &src;
  auto fail = [&](const std::string& what) {
    if (client.failed && src.failure_reason() != reject_reason::io_error) {
      ctx.reject(name, 0, src.failure_reason(), client.err.message);
      return;
    }
    const char* msg = archive_error_string(a.get());
    ctx.reject(name, 0, client.failed ? reject_reason::io_error : reject_reason::corrupt_archive,
               what + ": " + (msg ? msg : "unreadable"));
  };
  if (archive_read_open(a.get(), &client, nullptr, read_cb, nullptr) != ARCHIVE_OK) {
    fail("not a readable tar archive");
    return;
  }
  std::uint64_t members = 0;
  for (;;) {
    struct archive_entry* e = nullptr;
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      fail(members == 0 ? "not a readable tar archive" : "archive broken after " + std::to_string(members) + " members");
      return;
    }
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    ++members;
    const char* path = archive_entry_pathname(e);
    std::string member = name + "!" + (path ? path : "?");
    entry_source es(a.get());
    read_named(ctx, member, es, depth + 1);
    if (ctx.stopped) return;
  }
  if (members == 0) ctx.reject(name, 0, reject_reason::empty_archive, "archive has no regular files");
}

}  // namespace loom::ingest::detail
