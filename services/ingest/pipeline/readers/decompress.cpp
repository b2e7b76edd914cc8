#include "services/ingest/pipeline/readers/decompress.hpp"

#include <vector>
#include <zlib.h>
#include <zstd.h>

namespace loom::ingest {
namespace {

// Input buffer of each decoder: large enough that the syscall/inflate overhead
// per call is negligible, small enough to not matter per open file.
constexpr std::size_t in_buffer_bytes = 128 * 1024;

class gzip_source final : public byte_source {
 public:
  explicit gzip_source(byte_source& inner) : inner_(inner), in_(in_buffer_bytes) {
    zs_ = {};
    // 15 + 32: zlib or gzip header, detected automatically.
    ok_init_ = inflateInit2(&zs_, 15 + 32) == Z_OK;
  }
  ~gzip_source() override { inflateEnd(&zs_); }
  gzip_source(const gzip_source&) = delete;
  gzip_source& operator=(const gzip_source&) = delete;

  result<std::size_t> read(char* buf, std::size_t cap) override {
    if (!ok_init_) return fail(reject_reason::corrupt_compression, "gzip: inflateInit2 failed");
    if (done_) return std::size_t{0};
    zs_.next_out = reinterpret_cast<Bytef*>(buf);
    zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(cap, 1u << 30));
    const uInt want = zs_.avail_out;
    while (zs_.avail_out == want) {
      if (zs_.avail_in == 0 && !in_eof_) {
        auto r = inner_.read(in_.data(), in_.size());
        if (!r.ok()) {
          failure_ = inner_.failure_reason();
          return r.err();
        }
        if (*r == 0) in_eof_ = true;
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(*r);
      }
      if (zs_.avail_in == 0 && in_eof_) {
        if (in_member_ || members_ == 0)
          return fail(reject_reason::truncated_compression,
                      "gzip: unexpected end of stream after " + std::to_string(zs_.total_out) +
                          " bytes of the current member");
        done_ = true;
        break;
      }
      if (!in_member_) {
        // Between members: another gzip member may follow; anything else is
        // trailing garbage, which gzip(1) ignores too.
        if (members_ > 0 && zs_.next_in[0] != 0x1f) {
          done_ = true;
          break;
        }
        in_member_ = true;
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        ++members_;
        in_member_ = false;
        inflateReset(&zs_);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return fail(reject_reason::corrupt_compression,
                    std::string("gzip: ") + (zs_.msg ? zs_.msg : "data error"));
      }
    }
    return static_cast<std::size_t>(want - zs_.avail_out);
  }

 private:
  result<std::size_t> fail(reject_reason r, std::string msg) {
    failure_ = r;
    done_ = true;
    return make_error(errc::corruption, std::move(msg));
  }

  byte_source& inner_;
  std::vector<char> in_;
  z_stream zs_;
  bool ok_init_ = false;
  bool in_eof_ = false;
  bool in_member_ = false;
  bool done_ = false;
  std::uint64_t members_ = 0;
};

class zstd_source final : public byte_source {
 public:
  explicit zstd_source(byte_source& inner) : inner_(inner), in_(in_buffer_bytes) {
    dctx_ = ZSTD_createDCtx();
    // Refuse frames that would need a window over 128 MiB: bounded memory.
    if (dctx_) ZSTD_DCtx_setParameter(dctx_, ZSTD_d_windowLogMax, 27);
  }
  ~zstd_source() override { ZSTD_freeDCtx(dctx_); }
  zstd_source(const zstd_source&) = delete;
  zstd_source& operator=(const zstd_source&) = delete;

  result<std::size_t> read(char* buf, std::size_t cap) override {
    if (!dctx_) return fail(reject_reason::corrupt_compression, "zstd: cannot create context");
    if (done_) return std::size_t{0};
    ZSTD_outBuffer out{buf, cap, 0};
    while (out.pos == 0) {
      if (inb_.pos == inb_.size && !in_eof_) {
        auto r = inner_.read(in_.data(), in_.size());
        if (!r.ok()) {
          failure_ = inner_.failure_reason();
          return r.err();
        }
        if (*r == 0) in_eof_ = true;
        inb_ = ZSTD_inBuffer{in_.data(), *r, 0};
      }
      if (inb_.pos == inb_.size && in_eof_) {
        if (last_ == 0) {
          done_ = true;
          break;
        }
        // Flush what the decoder still holds; no progress means the frame is cut.
        std::size_t r = ZSTD_decompressStream(dctx_, &out, &inb_);
        if (ZSTD_isError(r))
          return fail(reject_reason::corrupt_compression, std::string("zstd: ") + ZSTD_getErrorName(r));
        last_ = r;
        if (out.pos > 0) break;
        if (r == 0) {
          done_ = true;
          break;
        }
        return fail(reject_reason::truncated_compression, "zstd: unexpected end of stream (frame incomplete)");
      }
      std::size_t r = ZSTD_decompressStream(dctx_, &out, &inb_);
      if (ZSTD_isError(r))
        return fail(reject_reason::corrupt_compression, std::string("zstd: ") + ZSTD_getErrorName(r));
      last_ = r;
    }
    return out.pos;
  }

 private:
  result<std::size_t> fail(reject_reason r, std::string msg) {
    failure_ = r;
    done_ = true;
    return make_error(errc::corruption, std::move(msg));
  }

  byte_source& inner_;
  std::vector<char> in_;
  ZSTD_inBuffer inb_{nullptr, 0, 0};
  ZSTD_DCtx* dctx_ = nullptr;
  std::size_t last_ = 1;  // ZSTD_decompressStream's hint; 0 = frame complete and flushed
  bool in_eof_ = false;
  bool done_ = false;
};

}  // namespace

compression compression_from_magic(std::string_view h) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(h[i]); };
  if (h.size() >= 2 && b(0) == 0x1f && b(1) == 0x8b) return compression::gzip;
  if (h.size() >= 4 && b(0) == 0x28 && b(1) == 0xb5 && b(2) == 0x2f && b(3) == 0xfd) return compression::zstd;
  return compression::none;
}

std::unique_ptr<byte_source> make_decompressor(compression c, byte_source& inner) {
  switch (c) {
    case compression::gzip: return std::make_unique<gzip_source>(inner);
    case compression::zstd: return std::make_unique<zstd_source>(inner);
    case compression::none: break;
  }
  return nullptr;
}

}  // namespace loom::ingest
