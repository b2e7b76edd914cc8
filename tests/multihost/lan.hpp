// Hosts on a LAN for the multi-host tests (issue 26): every "host" is a
// network namespace with a veth pair to a bridge, and a mount namespace of its
// own with a private tmpfs over <root>/<...>, so no host sees another's files.
// The bridge lives in a namespace of its own (the "switch"): the machine's
// own firewall rules (Docker's FORWARD policy) never see the traffic, and
// cutting a host's link is `ip link set down` on its switch port.
//
// Each host is held by a `sleep` process that owns its namespaces; commands
// run in them through nsenter(1). Everything is made by this object and undone
// in reverse on destruction (processes by pid, namespaces by name); names and
// the subnet come from the test's pid. Root and iproute2/util-linux only: make()
// says why not otherwise, and the test skips visibly.
// Tests only; one thread.
#pragma once

#include "tests/support/harness.hpp"

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace loom::test {

struct lan_host {
  std::string name;     // "cloud"
  std::string ns;       // its network namespace
  std::string ip;       // its address on the LAN
  std::string port_if;  // its port on the switch (in the switch namespace)
  std::string data;     // its data dir: <root>/<name>/data, on its private tmpfs
  pid_t holder = 0;     // the process that holds its namespaces
};

class lan {
 public:
  // Hosts named `names`, addressed .1, .2, ... in this run's /24.
  explicit lan(std::vector<std::string> names);
  ~lan();
  lan(const lan&) = delete;
  lan& operator=(const lan&) = delete;

  // Makes the switch and the hosts. "" when made; else why not (the caller skips).
  std::string make();

  lan_host& host(const std::string& name) { return hosts_.at(name); }
  const std::string& root() const { return root_; }

  // argv[0] (a path) run in `h`'s namespaces with extra environment `env`,
  // bounded by `timeout` (code 124 when over).
  run_result exec(const lan_host& h, std::vector<std::string> argv, std::chrono::seconds timeout = std::chrono::seconds(60),
                  const std::map<std::string, std::string>& env = {});
  // argv in `h`'s network namespace only (it sees the machine's files): PostgreSQL.
  run_result exec_net(const lan_host& h, std::vector<std::string> argv,
                      std::chrono::seconds timeout = std::chrono::seconds(60),
                      const std::map<std::string, std::string>& env = {});
  // `loom ARGS --data-dir <h.data>` in `h`.
  run_result loom(const lan_host& h, std::vector<std::string> args, std::chrono::seconds timeout = std::chrono::seconds(60),
                  const std::map<std::string, std::string>& env = {});
  // A path of `h`'s private files as this process can read them (/proc/<holder>/root/...).
  std::string seen_from_outside(const lan_host& h, const std::string& path) const;

  // What an operator carries from one cloud host to another (a cloud split
  // over hosts, `loom up --only`): `from`'s keys/ and admin.token into `to`'s
  // data dir (made 0700), and `from`'s endpoints.json as a file of `to`'s,
  // whose path (in `to`) copy_endpoints returns.
  void copy_keys(const lan_host& from, const lan_host& to);
  std::string copy_endpoints(const lan_host& from, const lan_host& to);

  // Sets `h`'s switch port up or down (a cut of its only link).
  bool set_link(const lan_host& h, bool up);
  // Bytes the switch port of `h` carried: {from the host, to the host}.
  std::pair<std::uint64_t, std::uint64_t> link_bytes(const lan_host& h);

  // `loom down` in every host that ran one, then what of its data dir still runs (by pid).
  void stop_deployments();

 private:
  std::string root_;  // /tmp/loom-lan-<pid>: every host's tmpfs mounts here
  std::string sw_;    // the switch namespace
  std::string bridge_;
  std::string subnet_;  // "10.A.B."
  std::map<std::string, lan_host> hosts_;
  std::vector<std::string> order_;
  bool made_sw_ = false;
};

// Namespaces of earlier runs of a multi-host test killed before their
// destructors ran (loom-lan-<pid>-*, <pid> gone): removed.
void remove_lan_leftovers();

}  // namespace loom::test
