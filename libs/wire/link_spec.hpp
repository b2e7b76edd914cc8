// The compact text form of a link_config, for env vars, config files and
// tests, e.g.  "bw=10mbit,lat=50ms,jitter=5ms,loss=1%,outage=20%/5-15s,seed=7".
// Parsing is strict: an unknown key, a unit missing or unknown, a repeated
// key or a value out of range is an invalid_argument error naming the key
// and quoting the spec. Grammar and model: libs/wire/README.md. Pure functions.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/link_shaper.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace loom::wire {

// Items separated by ',' (spaces around items, keys and values ignored):
//   bw=10mbit        bandwidth: bit kbit mbit gbit (bits/s, SI) or B kB MB GB / KiB MiB GiB (bytes/s)
//   burst=64KiB      token-bucket depth: B kB MB GB KiB MiB GiB, or a bare number of bytes
//   lat=50ms         one-way latency: ns us ms s min h
//   jitter=5ms       +-5 ms uniform, or the standard deviation with jitter_dist=normal
//   jitter_dist=normal
//   loss=0.01 | 1%   long-run fraction of messages lost
//   loss_burst=3     mean run of consecutive losses (Gilbert-Elliott); default: independent
//   outage=20%/5-15s offline 20% of the time in bursts of 5..15 s (seeded); "/10s" = fixed length
//   down=10s-12s     down from 10 s to 12 s after the link starts; may repeat
//   seed=7           seeds loss, jitter and generated outages (default 0)
// "" and "none" are the perfect link.
result<link_config> parse_link_spec(std::string_view spec);

// The variable a service's config reads (through its own env lookup, so
// tests pass a map) to shape its outgoing client links: unset or empty ->
// nullopt; a bad spec -> the parse error, which should stop start-up.
inline constexpr const char* link_shape_env = "LOOM_LINK_SHAPE";
result<std::optional<link_config>> link_config_from_env(const std::function<const char*(const char*)>& env);

// Per site (issue 15): LOOM_LINK_SHAPE_<SITE> (SITE = the site's name upper
// case, every character not A-Z or 0-9 as '_': site-2 -> LOOM_LINK_SHAPE_SITE_2)
// shapes that site's link with its seed as given ("none" exempts the site);
// else LOOM_LINK_SHAPE shapes every site's link, its seed mixed with the site
// name so that sites lose different messages and go down at different times
// (still a pure function of the spec and the name). Errors name the variable.
std::string link_shape_env_for(std::string_view site);
result<std::optional<link_config>> link_config_for_site(const std::function<const char*(const char*)>& env,
                                                        std::string_view site);
// Every LOOM_LINK_SHAPE and LOOM_LINK_SHAPE_* in `envp` (NAME=VALUE, null-
// terminated, like environ) parses: a service checks this at start-up and
// refuses to start with the first bad one (variable and field named).
// LOOM_LINK_SHAPE_ itself (no site after the '_') is one: it would shape nothing.
status check_link_shape_env(const char* const* envp);

}  // namespace loom::wire
