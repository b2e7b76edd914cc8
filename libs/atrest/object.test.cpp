// A process's keys at rest from its environment (LOOM_AT_REST,
// LOOM_AT_REST_ROTATION_DAYS): on by default, sealing what writers write;
// off seals nothing new but still reads what was sealed; bad values are
// refused naming the variable; read_object and write_object pass plain files
// through and seal or unseal the rest.
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>

using namespace loom;
using namespace loom::atrest;

namespace {

const sys_time t0 = sys_time{} + std::chrono::days(20000);

std::function<const char*(const char*)> env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

struct reset_process {
  ~reset_process() {
    set_process_keys(nullptr);
    set_sealing(true);
  }
};

}  // namespace

TEST_CASE("LOOM_AT_REST on by default seals, off seals nothing new but reads what was sealed") {
  files::temp_dir tmp("atrest-object");
  reset_process reset;
  const std::string dir = tmp.path() + "/keys", path = tmp.path() + "/obj";

  SUBCASE("unset: on, the directory is made, writers seal") {
    auto k = open_process_keys_from_env(dir, env_of({}), t0);
    REQUIRE_MESSAGE(k.ok(), k.err().to_string());
    REQUIRE(*k != nullptr);
    CHECK(std::filesystem::exists(dir + "/kek-000001.key"));
    CHECK(sealing_keys() == *k);
    REQUIRE(write_object(path, "hello", sealing_keys().get(), t0).ok());
    CHECK(is_sealed_file(path));
    CHECK(read_object(path).value() == "hello");

    // Off afterwards (a restart with LOOM_AT_REST=off): new objects plain, old ones readable.
    auto off = open_process_keys_from_env(dir, env_of({{"LOOM_AT_REST", "off"}}), t0);
    REQUIRE(off.ok());
    CHECK(*off == nullptr);
    CHECK(sealing_keys() == nullptr);
    REQUIRE(process_keys() != nullptr);
    CHECK(read_object(path).value() == "hello");
    REQUIRE(write_object(tmp.path() + "/new", "plain", sealing_keys().get(), t0).ok());
    CHECK_FALSE(is_sealed_file(tmp.path() + "/new"));
    CHECK(read_object(tmp.path() + "/new").value() == "plain");
  }
  SUBCASE("off with no key directory: none is made, plain files read") {
    auto off = open_process_keys_from_env(dir, env_of({{"LOOM_AT_REST", "off"}}), t0);
    REQUIRE(off.ok());
    CHECK_FALSE(std::filesystem::exists(dir));
    CHECK(process_keys() == nullptr);
    REQUIRE(files::write_atomic(path, "plain").ok());
    CHECK(read_object(path).value() == "plain");
  }
  SUBCASE("the rotation age comes from LOOM_AT_REST_ROTATION_DAYS") {
    auto k = open_process_keys_from_env(dir, env_of({{"LOOM_AT_REST_ROTATION_DAYS", "7"}}), t0);
    REQUIRE(k.ok());
    CHECK((*k)->rotation() == std::chrono::days(7));
    REQUIRE((*k)->rotate_if_due(t0 + std::chrono::days(6)).ok());
    CHECK((*k)->list().size() == 1);
    REQUIRE((*k)->rotate_if_due(t0 + std::chrono::days(7)).ok());
    CHECK((*k)->list().size() == 2);
  }
}

TEST_CASE("bad LOOM_AT_REST values are refused naming the variable") {
  files::temp_dir tmp("atrest-object");
  reset_process reset;
  for (const auto& [name, value] : std::map<std::string, std::string>{{"LOOM_AT_REST", "yes"},
                                                                      {"LOOM_AT_REST", ""},
                                                                      {"LOOM_AT_REST_ROTATION_DAYS", "0"},
                                                                      {"LOOM_AT_REST_ROTATION_DAYS", "3651"},
                                                                      {"LOOM_AT_REST_ROTATION_DAYS", "30d"},
                                                                      {"LOOM_AT_REST_ROTATION_DAYS", "-1"}}) {
    CAPTURE(name);
    CAPTURE(value);
    auto k = open_process_keys_from_env(tmp.path() + "/keys", env_of({{name, value}}), t0);
    REQUIRE_FALSE(k.ok());
    CHECK(k.code() == errc::invalid_argument);
    CHECK(k.err().message.find(name + "=" + value) == 0);
  }
  CHECK_FALSE(std::filesystem::exists(tmp.path() + "/keys"));
}

TEST_CASE("read_object_stream hands a sealed or plain file's plaintext in pieces, verified, and stops at a bad chunk") {
  files::temp_dir tmp("atrest-object");
  auto k = kek_store::open(tmp.path() + "/keys", {}, t0);
  REQUIRE(k.ok());
  std::string text((3u << 20) + 12345, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 131 + (i >> 9));
  const std::string sealed = tmp.path() + "/sealed", plain = tmp.path() + "/plain";
  REQUIRE(write_object(sealed, text, k->get(), t0).ok());
  REQUIRE(write_object(plain, text, nullptr, t0).ok());
  for (const auto& path : {sealed, plain}) {
    CAPTURE(path);
    std::string back;
    std::size_t pieces = 0;
    auto st = read_object_stream(
        path,
        [&](std::string_view p) {
          back.append(p);
          ++pieces;
          CHECK(p.size() <= default_chunk);
          return ok_status();
        },
        k->get());
    REQUIRE_MESSAGE(st.ok(), st.err().to_string());
    CHECK(back == text);
    CHECK(pieces == 4);
  }
  // A sink's error ends it and comes back.
  auto stopped = read_object_stream(
      sealed, [](std::string_view) { return status(make_error(errc::unavailable, "enough")); }, k->get());
  CHECK(stopped.code() == errc::unavailable);
  // A flipped byte in chunk 2: chunks 0 and 1 come, then the refusal naming the file and the chunk.
  std::string bytes = files::read_file(sealed).value();
  bytes[sealed_header_size + 2 * (default_chunk + sealed_tag_size) + 7] ^= 0x04;
  REQUIRE(files::write_atomic(sealed, bytes).ok());
  std::size_t seen = 0;
  auto bad = read_object_stream(
      sealed,
      [&](std::string_view p) {
        seen += p.size();
        return ok_status();
      },
      k->get());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find(sealed + ": chunk 2 (plaintext bytes 2097152..3145728) fails authentication") == 0);
  CHECK(seen == 2 * default_chunk);
  // Cut short: the last chunk's tag no longer holds.
  REQUIRE(files::write_atomic(sealed, files::read_file(plain).value()).ok());
  REQUIRE(write_object(sealed, text, k->get(), t0).ok());
  bytes = files::read_file(sealed).value();
  REQUIRE(files::write_atomic(sealed, bytes.substr(0, bytes.size() - 3)).ok());
  auto cut = read_object_stream(sealed, [](std::string_view) { return ok_status(); }, k->get());
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.err().message.find(sealed + ": chunk 3") == 0);
}
