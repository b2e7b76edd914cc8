#include "libs/wire/curve.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <sys/stat.h>
#include <vector>

namespace loom::wire {
namespace {

constexpr std::size_t z85_key_chars = 40;

// ZMQ_ZAP_ENFORCE_DOMAIN: zmq.h (4.3.4) defines it only under
// ZMQ_BUILD_DRAFT_API, but the library honours it.
constexpr int zap_enforce_domain_option = 93;

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
}

// Key files hold the key and a newline; tolerate trailing whitespace.
std::string trim_right(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

result<std::string> read_key_file(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  std::string key = trim_right(std::move(*text));
  if (!valid_z85_key(key))
    return make_error(errc::invalid_argument,
                      path + ": not a CURVE key (expected 40 Z85 characters, got " +
                          std::to_string(key.size()) + " bytes)");
  return key;
}

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

curve_keypair generate_keypair() {
  std::array<char, z85_key_chars + 1> pub{}, sec{};
  // Fails only when libzmq was built without CURVE: a broken installation.
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) throw zmq::error_t();
  return {std::string(pub.data(), z85_key_chars), std::string(sec.data(), z85_key_chars)};
}

bool valid_z85_key(std::string_view key) {
  // zmq_z85_decode stops at the first NUL: "15 Z85 characters, then 25 NULs"
  // would decode its prefix (12 bytes) and pass for a 40-character key.
  if (key.size() != z85_key_chars || key.find('\0') != std::string_view::npos) return false;
  std::string z(key);  // zmq_z85_decode wants a NUL-terminated string
  std::array<std::uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), z.c_str()) != nullptr;
}

result<std::string> key_bytes(std::string_view z85) {
  if (!valid_z85_key(z85)) return make_error(errc::invalid_argument, "not a CURVE key (40 Z85 characters)");
  std::string z(z85);
  std::string raw(32, '\0');
  zmq_z85_decode(reinterpret_cast<std::uint8_t*>(raw.data()), z.c_str());
  return raw;
}

result<std::string> key_z85(std::string_view raw) {
  if (raw.size() != 32)
    return make_error(errc::invalid_argument, "a CURVE key is 32 bytes, not " + std::to_string(raw.size()));
  std::array<char, z85_key_chars + 1> out{};
  zmq_z85_encode(out.data(), reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size());
  return std::string(out.data(), z85_key_chars);
}

status save_keypair(const std::string& dir, const std::string& name, const curve_keypair& kp) {
  if (!valid_name(name)) return make_error(errc::invalid_argument, "bad key name '" + name + "'");
  if (!valid_z85_key(kp.public_z85) || !valid_z85_key(kp.secret_z85))
    return make_error(errc::invalid_argument, "keypair '" + name + "' is not 2 x 40 Z85 characters");
  if (auto st = files::make_dirs(dir, 0700); !st) return st;
  if (auto st = files::write_atomic(dir + "/" + name + ".key", kp.secret_z85 + "\n", 0600); !st) return st;
  return files::write_atomic(dir + "/" + name + ".pub", kp.public_z85 + "\n", 0644);
}

result<curve_keypair> load_keypair(const std::string& dir, const std::string& name) {
  if (!valid_name(name)) return make_error(errc::invalid_argument, "bad key name '" + name + "'");
  const std::string key_path = dir + "/" + name + ".key";
  struct stat st{};
  if (::stat(key_path.c_str(), &st) != 0)
    return make_error(errc::not_found, key_path + ": no such key file");
  if ((st.st_mode & 0077) != 0)
    return make_error(errc::permission_denied,
                      key_path + ": mode " + octal_mode(st.st_mode) +
                          " lets others read the secret key; run chmod 600 " + key_path);
  auto secret = read_key_file(key_path);
  if (!secret) return secret.err();

  std::array<char, z85_key_chars + 1> pub{};
  if (zmq_curve_public(pub.data(), secret->c_str()) != 0)
    return make_error(errc::invalid_argument, key_path + ": cannot derive a public key");
  curve_keypair kp{std::string(pub.data(), z85_key_chars), std::move(*secret)};

  const std::string pub_path = dir + "/" + name + ".pub";
  if (std::filesystem::exists(pub_path)) {
    auto stored = read_key_file(pub_path);
    if (!stored) return stored.err();
    if (*stored != kp.public_z85)
      return make_error(errc::corruption, pub_path + ": does not match the secret key in " + key_path);
  }
  return kp;
}

result<std::string> load_public_key(const std::string& dir, const std::string& name) {
  if (!valid_name(name)) return make_error(errc::invalid_argument, "bad key name '" + name + "'");
  return read_key_file(dir + "/" + name + ".pub");
}

result<allow_list> load_allow_list(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> pubs;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".pub" && it->is_regular_file()) pubs.push_back(it->path());
  }
  if (ec) return make_error(errc::not_found, dir + ": cannot list key directory: " + ec.message());
  std::sort(pubs.begin(), pubs.end());

  allow_list out;
  for (const auto& p : pubs) {
    auto key = read_key_file(p.string());
    if (!key) return key.err();
    auto [it, inserted] = out.emplace(*key, p.stem().string());
    if (!inserted)
      return make_error(errc::conflict, p.string() + ": same key as " + dir + "/" + it->second + ".pub");
  }
  return out;
}

void make_curve_server(zmq::socket_t& socket, const curve_keypair& server, std::string_view zap_domain) {
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, server.secret_z85);
  socket.set(zmq::sockopt::zap_domain, zap_domain);
  // With the domain enforced, "no ZAP handler" means refuse, not admit all.
  int on = 1;
  if (zmq_setsockopt(socket.handle(), zap_enforce_domain_option, &on, sizeof on) != 0)
    throw zmq::error_t();
}

void make_curve_client(zmq::socket_t& socket, const curve_keypair& mine,
                       std::string_view server_public_z85) {
  socket.set(zmq::sockopt::curve_serverkey, server_public_z85);
  socket.set(zmq::sockopt::curve_publickey, mine.public_z85);
  socket.set(zmq::sockopt::curve_secretkey, mine.secret_z85);
}

std::string peer_user_id(zmq::message_t& msg) {
  const char* v = zmq_msg_gets(msg.handle(), "User-Id");
  return v ? std::string(v) : std::string();
}

}  // namespace loom::wire
