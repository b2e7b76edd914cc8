#include "libs/wire/link_spec.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;

TEST_CASE("the example spec parses into every field it names") {
  auto c = parse_link_spec("bw=10mbit,lat=50ms,jitter=5ms,loss=0.01,outage=20%/5-15s,seed=7");
  REQUIRE(c.ok());
  CHECK(c->bandwidth == doctest::Approx(1.25e6));
  CHECK(c->burst_bytes == 0.0);
  CHECK(c->latency == 50ms);
  CHECK(c->jitter == 5ms);
  CHECK(c->jitter_shape == jitter_dist::uniform);
  CHECK(c->loss.stationary_loss() == doctest::Approx(0.01));
  CHECK(c->loss.p_good_to_bad == doctest::Approx(0.01));  // independent losses by default
  CHECK(c->loss.p_bad_to_good == doctest::Approx(0.99));
  REQUIRE(c->outage_gen.has_value());
  CHECK((*c->outage_gen == outage_generator{0.2, 5s, 15s}));
  CHECK(c->seed == 7);
  CHECK(c->shapes());
  CHECK(validate(*c).ok());
}

TEST_CASE("bandwidth, size and time units scale as documented") {
  CHECK(parse_link_spec("bw=1MB")->bandwidth == 1e6);
  CHECK(parse_link_spec("bw=2MiB")->bandwidth == 2.0 * 1048576);
  CHECK(parse_link_spec("bw=1Gbit")->bandwidth == 1.25e8);
  CHECK(parse_link_spec("bw=800kbit")->bandwidth == doctest::Approx(1e5));
  CHECK(parse_link_spec("bw=1.5kB,burst=64KiB")->burst_bytes == 65536.0);
  CHECK(parse_link_spec("bw=1MB,burst=1000")->burst_bytes == 1000.0);
  CHECK(parse_link_spec("lat=1.5s")->latency == 1500ms);
  CHECK(parse_link_spec("lat=250us")->latency == 250us);
  CHECK(parse_link_spec("lat=2min")->latency == 120s);
  CHECK(parse_link_spec("jitter=3ms,jitter_dist=normal")->jitter_shape == jitter_dist::normal);
}

TEST_CASE("outage generators and fixed down windows take ranges whose first unit may be left out") {
  CHECK((*parse_link_spec("outage=0.1/500ms-2s")->outage_gen == outage_generator{0.1, 500ms, 2s}));
  CHECK((*parse_link_spec("outage=10%/30s")->outage_gen == outage_generator{0.1, 30s, 30s}));
  auto c = parse_link_spec("down=10-12s, down=1min-2min");
  REQUIRE(c.ok());
  CHECK((c->outages == std::vector<outage_window>{{10s, 12s}, {60s, 120s}}));
  auto b = parse_link_spec("loss=10%,loss_burst=4");
  CHECK(b->loss.p_bad_to_good == doctest::Approx(0.25));
  CHECK(b->loss.stationary_loss() == doctest::Approx(0.1));
}

TEST_CASE("an empty spec, blanks or none is the perfect link, and spaces around items are ignored") {
  for (const char* s : {"", "   ", "none"}) {
    auto c = parse_link_spec(s);
    REQUIRE(c.ok());
    CHECK_FALSE(c->shapes());
  }
  auto c = parse_link_spec(" bw = 10mbit , lat=5ms ");
  REQUIRE(c.ok());
  CHECK(c->latency == 5ms);
}

TEST_CASE("a bad spec is refused with an error that quotes it and names what is wrong") {
  const std::map<std::string, std::string> bad = {
      {"bw=10mbps", "bw: unknown unit \"mbps\""},
      {"bw=10", "bw: \"10\" needs a unit"},
      {"bw=0mbit", "bw: must be above 0"},
      {"bw=1e6B", "unknown unit \"e6B\""},
      {"lat=fast", "lat: \"fast\" is not a number"},
      {"lat=-5ms", "lat: \"-5ms\" is not a number"},
      {"lat=5", "lat: \"5\" needs a unit"},
      {"lat=1.2.3ms", "is not a number"},
      {"speed=1", "unknown key \"speed\""},
      {"lat=1ms,lat=2ms", "lat: given twice"},
      {"loss=1.5", "loss: \"1.5\" must be below 1"},
      {"loss=120%", "must be below 1 (100%)"},
      {"loss=0.6,loss_burst=1", "too short for loss rate"},
      {"loss_burst=3", "loss_burst: given without loss"},
      {"loss=1%,loss_burst=0.5", "is not a number of messages >= 1"},
      {"outage=20%", "want FRACTION/BURSTS"},
      {"outage=0%/5s", "fraction must be in (0, 1)"},
      {"outage=20%/15-5s", "reversed"},
      {"down=5s", "want START-END"},
      {"down=5s-5s", "must end after it starts"},
      {"burst=1KiB", "burst: given without bw"},
      {"bw=1MB,burst=1KB", "unknown unit \"KB\""},
      {"jitter_dist=normal", "jitter_dist: given without jitter"},
      {"jitter=1ms,jitter_dist=pareto", "is not uniform or normal"},
      {"seed=-1", "is not an unsigned integer"},
      {"seed=99999999999999999999", "does not fit in 64 bits"},
      {"bw=10mbit,,lat=1ms", "empty item"},
      {"bw=10mbit,", "empty item"},
      {"bw", "\"bw\" is not KEY=VALUE"},
      {"lat=", "lat: has no value"},
  };
  for (const auto& [spec, why] : bad) {
    CAPTURE(spec);
    auto c = parse_link_spec(spec);
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::invalid_argument);
    CHECK(c.err().message.rfind("link spec \"" + spec + "\": ", 0) == 0);
    CHECK(c.err().message.find(why) != std::string::npos);
  }
}

TEST_CASE("LOOM_LINK_SHAPE is read through the caller's env lookup") {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto unset = link_config_from_env(lookup);
  REQUIRE(unset.ok());
  CHECK_FALSE(unset->has_value());
  env["LOOM_LINK_SHAPE"] = "bw=1MB,lat=20ms";
  auto set = link_config_from_env(lookup);
  REQUIRE(set.ok());
  REQUIRE(set->has_value());
  CHECK((*set)->latency == 20ms);
  env["LOOM_LINK_SHAPE"] = "bw=fast";
  auto bad = link_config_from_env(lookup);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.rfind("LOOM_LINK_SHAPE: link spec \"bw=fast\"", 0) == 0);
}

TEST_CASE("a site's link comes from LOOM_LINK_SHAPE_<SITE>, else from LOOM_LINK_SHAPE with the site mixed into the seed") {
  CHECK(link_shape_env_for("site-2") == "LOOM_LINK_SHAPE_SITE_2");
  CHECK(link_shape_env_for("edge.Lyon") == "LOOM_LINK_SHAPE_EDGE_LYON");
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK_FALSE(link_config_for_site(lookup, "site-0").value().has_value());
  env["LOOM_LINK_SHAPE"] = "lat=5ms,outage=20%/1-2s,seed=7";
  const auto a = link_config_for_site(lookup, "site-0").value().value();
  const auto b = link_config_for_site(lookup, "site-1").value().value();
  CHECK(a.latency == 5ms);
  CHECK(a.seed != 7);
  CHECK(a.seed != b.seed);                                          // sites go down at different times
  CHECK(a.seed == link_config_for_site(lookup, "site-0").value()->seed);  // and always at the same ones
  env["LOOM_LINK_SHAPE_SITE_1"] = "down=10s-12s,seed=3";
  const auto own = link_config_for_site(lookup, "site-1").value().value();
  CHECK(own.seed == 3);  // as given
  CHECK(own.latency == 0ms);
  REQUIRE(own.outages.size() == 1);
  env["LOOM_LINK_SHAPE_SITE_1"] = "none";
  CHECK_FALSE(link_config_for_site(lookup, "site-1").value()->shapes());
  env["LOOM_LINK_SHAPE_SITE_1"] = "lat=5";
  auto bad = link_config_for_site(lookup, "site-1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.rfind("LOOM_LINK_SHAPE_SITE_1: link spec \"lat=5\": lat", 0) == 0);
}

TEST_CASE("a service's start-up check names the first LOOM_LINK_SHAPE variable that does not parse") {
  const char* good[] = {"PATH=/bin", "LOOM_LINK_SHAPE=bw=10mbit", "LOOM_LINK_SHAPE_SITE_0=none",
                        "LOOM_LINK_SHAPEX=ignored", nullptr};
  CHECK(check_link_shape_env(good).ok());
  const char* bad[] = {"LOOM_LINK_SHAPE=bw=10mbit", "LOOM_LINK_SHAPE_SITE_3=loss=2", nullptr};
  auto s = check_link_shape_env(bad);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.err().message.rfind("LOOM_LINK_SHAPE_SITE_3: link spec \"loss=2\": loss", 0) == 0);
  // LOOM_LINK_SHAPE_ with no site after it shapes nothing: refused, not ignored.
  const char* no_site[] = {"LOOM_LINK_SHAPE_=lat=1h", nullptr};
  auto e = check_link_shape_env(no_site);
  REQUIRE_FALSE(e.ok());
  CHECK(e.code() == errc::invalid_argument);
  CHECK(e.err().message.rfind("LOOM_LINK_SHAPE_ names no site", 0) == 0);
}
