// The state of an edge site's link as the cloud shows it (`loom site list`,
// issue 26 item 3). A site reports its own view of the link with every
// heartbeat (libs/wire/link_monitor: up, degraded, down); the cloud also
// knows how long the site has been silent. Silence past one and a half
// heartbeats and half a second makes a reported "up" (or "unknown") degraded;
// silence past the roster's death (three heartbeats) and two seconds makes
// any report down. So a site cut off shows degraded, then down, then its own
// report again once it is heard. Pure; any thread.
#pragma once

#include <chrono>
#include <string>

namespace loom::scheduler {

std::string cloud_link_state(const std::string& reported, std::chrono::milliseconds silent_for,
                             std::chrono::milliseconds heartbeat);

}  // namespace loom::scheduler
