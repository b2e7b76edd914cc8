// Test helpers for the ingest pipeline: files written into a temp dir, gzip via
// zlib, zstd via libzstd, tar via libarchive's writer, Debian's licence texts
// as real prose, and a reader run collected into vectors. Tests and benches only.
#pragma once

#include "libs/files/temp_dir.hpp"
#include "services/ingest/pipeline/readers/reader.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace loom::ingest::testing {

inline constexpr const char* licences_dir = "/usr/share/common-licenses";

inline void write_file(const std::string& path, std::string_view data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A Debian licence text (e.g. "GPL-3"): real prose present on every Debian machine.
inline std::string licence_text(const std::string& name) { return read_all(std::string(licences_dir) + "/" + name); }

inline std::string gzip(std::string_view in) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline std::string zstd(std::string_view in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress");
  out.resize(n);
  return out;
}

// Writes a pax tar at `path`; `filter` "gzip", "zstd" or "" (none).
inline void write_tar(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members,
                      const std::string& filter = "") {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (filter == "gzip") archive_write_add_filter_gzip(a);
  if (filter == "zstd") archive_write_add_filter_zstd(a);
  if (archive_write_open_filename(a, path.c_str()) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
  for (const auto& [name, data] : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

inline std::string random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

struct collected {
  std::vector<document> docs;
  std::vector<rejection> rejects;
  read_stats stats;

  // The rejection for `file_suffix` (and `line` unless 0); nullptr if none.
  const rejection* reject_for(std::string_view file_suffix, std::uint64_t line = 0) const {
    for (const auto& r : rejects)
      if (r.file.size() >= file_suffix.size() && r.file.substr(r.file.size() - file_suffix.size()) == file_suffix &&
          (line == 0 || r.line == line))
        return &r;
    return nullptr;
  }
  std::vector<const document*> docs_from(std::string_view file_suffix) const {
    std::vector<const document*> out;
    for (const auto& d : docs)
      if (d.source.size() >= file_suffix.size() && d.source.substr(d.source.size() - file_suffix.size()) == file_suffix)
        out.push_back(&d);
    return out;
  }
};

inline read_callbacks collect_into(collected& c) {
  read_callbacks cb;
  cb.on_document = [&c](document& d) {
    c.docs.push_back(std::move(d));
    return true;
  };
  cb.on_reject = [&c](const rejection& r) { c.rejects.push_back(r); };
  return cb;
}

inline collected collect(const std::string& path, const reader_options& opt = {}) {
  collected c;
  c.stats = read_path(path, opt, collect_into(c));
  return c;
}

}  // namespace loom::ingest::testing
