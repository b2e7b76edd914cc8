#include "services/aggregator/checkpoint_inspect.hpp"

#include "libs/auth/identity.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/confine.hpp"
#include "libs/layout/layout.hpp"

#include <filesystem>

namespace loom::aggregator {

status scheduler_only(const std::string& peer, const std::string& principal) {
  const auto p = auth::parse_peer(peer);
  if (p.kind == auth::peer_kind::own_service && p.service == "scheduler") return ok_status();
  return make_error(errc::permission_denied,
                    "InspectCheckpoint is for this deployment's scheduler (its CURVE key), not " +
                        (principal.empty() ? std::string("an anonymous caller") : auth::printable(principal)) +
                        " over " + (peer.empty() ? std::string("no key") : auth::printable(peer)));
}

result<ckpt::snapshot_facts> inspect_checkpoint(const std::string& data_dir, const std::string& checkpoint,
                                                bool manifest_only) {
  const layout::paths paths{data_dir};
  if (!std::filesystem::path(checkpoint).is_absolute())
    return make_error(errc::permission_denied, "checkpoint " + auth::printable(checkpoint) +
                                                   " is not an absolute path under " + paths.jobs());
  // Confined before anything is read or its existence told.
  auto dir = files::confined({paths.jobs()}, checkpoint);
  if (!dir) {
    if (dir.code() == errc::not_found) return make_error(errc::not_found, "checkpoint " + checkpoint + " is not there");
    return make_error(dir.code(), "checkpoint " + dir.err().message);
  }
  auto key = auth::load_token_key(paths.checkpoint_key());
  if (!key) return make_error(key.code(), "the aggregator's checkpoint signing key: " + key.err().message);
  if (manifest_only) {
    if (auto st = ckpt::check_manifest(*dir, *key); !st) return st.err();
    ckpt::snapshot_facts f;
    f.step = *ckpt::parse_step_dir(std::filesystem::path(*dir).filename().string());  // checked by check_manifest
    return f;
  }
  return ckpt::inspect_snapshot(*dir, *key);
}

}  // namespace loom::aggregator
