// `loom up --listen ADDR --advertise HOST --ports FIRST-LAST` (issue 26 item
// 1): where this deployment's services listen, the address its endpoints
// name for other hosts, and the port range they all come from (one firewall
// rule). Kept in endpoints.json like --trainers: a later `loom up` without
// them keeps them. Loopback and any free port are the default.
// Called from `loom up`'s main thread.
#pragma once

#include "client/cli.hpp"
#include "libs/layout/network.hpp"

#include <vector>

namespace loom::cli {

// The network of this `up`: `previous` (endpoints.json's) with the options
// given applied. --listen without --advertise advertises the listen address
// (a wildcard needs --advertise). invalid_argument naming the option and its
// value when it is malformed, the combination is unusable, or --listen is not
// an address of this host (nothing could bind there) — all before anything
// is started.
result<layout::network> network_option(const context& c, const layout::network& previous);

// Whether the options change `running` (a deployment already up): a change
// needs `loom down` first, as --trainers does.
bool network_options_given(const context& c);

// `count` distinct ports free on n.listen: from n's range when it has one
// (in order, lowest first), else any free ones. resource_exhausted naming the range
// and how many were needed and free.
result<std::vector<int>> pick_ports(const layout::network& n, int count);

}  // namespace loom::cli
