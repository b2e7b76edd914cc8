// site_keys: the enrolled edge sites' CURVE public keys as files,
// <data>/keys/sites/<site>.<service>.pub, which every cloud service's
// admission (admission.hpp) and the aggregator's delta socket re-read. The
// scheduler writes them from its sites registry; on a cloud split over hosts
// (`loom up --only`) each other host's services write them from the
// scheduler's SiteKeysReply (key_follower.hpp). One writer per data dir.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

struct site_key {
  std::string site, service, key;  // key: Z85 (40 characters)
};

// A site's service name becomes part of a file name: 1..32 of a-z, 0-9, '-'.
status check_site_service_name(std::string_view service);

// Makes `dir` (created 0700 when missing) hold exactly one file per key,
// <site>.<service>.pub (0600, "KEY\n"), removing any other file; a file that
// already holds its key is left alone. `*changed` (when given) says whether
// anything was written or removed. invalid_argument naming the entry for a
// bad site or service name, a malformed key or two entries with one file
// name — checked before anything is touched; unavailable when the dir cannot
// be written.
status write_site_keys(const std::string& dir, const std::vector<site_key>& keys, bool* changed = nullptr);

}  // namespace loom::runtime
