#include "libs/runtime/site_keys.hpp"

#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"

#include <filesystem>
#include <map>

namespace loom::runtime {
namespace fs = std::filesystem;

status check_site_service_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return make_error(errc::invalid_argument, "a service name is 1..32 characters");
  for (char ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
      return make_error(errc::invalid_argument,
                        "service name " + auth::printable(s) + ": use a-z, 0-9 and -");
  return ok_status();
}

status write_site_keys(const std::string& dir, const std::vector<site_key>& keys, bool* changed) {
  if (changed) *changed = false;
  std::map<std::string, std::string> want;  // file name -> contents
  for (const auto& k : keys) {
    const std::string what = "site key " + auth::printable(k.site) + "." + auth::printable(k.service);
    if (auto st = auth::validate_site_name(k.site); !st)
      return make_error(errc::invalid_argument, what + ": " + st.err().message);
    if (auto st = check_site_service_name(k.service); !st)
      return make_error(errc::invalid_argument, what + ": " + st.err().message);
    if (!wire::valid_z85_key(k.key)) return make_error(errc::invalid_argument, what + ": not a CURVE public key");
    if (!want.emplace(k.site + "." + k.service + ".pub", k.key + "\n").second)
      return make_error(errc::invalid_argument, what + " is named twice");
  }
  if (auto st = files::make_dirs(dir, 0700); !st) return st;
  for (const auto& [name, text] : want) {
    auto old = files::read_file(dir + "/" + name);
    if (old && *old == text) continue;
    if (auto st = files::write_atomic(dir + "/" + name, text, 0600); !st) return st;
    if (changed) *changed = true;
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (want.count(name)) continue;
    if (!fs::remove(it->path(), ec))
      return make_error(errc::unavailable, it->path().string() + ": cannot remove: " + ec.message());
    if (changed) *changed = true;
  }
  if (ec) return make_error(errc::unavailable, dir + ": " + ec.message());
  return ok_status();
}

}  // namespace loom::runtime
