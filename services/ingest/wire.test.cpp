// The ingest wire seam: every field of a task reaches its TaskInfo, an import
// request keeps import_options' defaults where it names nothing, and a
// catalogue row becomes "damaged" only with a damage text.
#include "services/ingest/wire.hpp"

#include "loom/v1/ingest.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::ingest;

TEST_CASE("every field of a task reaches its TaskInfo") {
  task_info t;
  t.id = "imp-000007";
  t.kind = "import";
  t.tenant = "acme";
  t.dataset = "d";
  t.source = "/data/imports/x";
  t.state = "succeeded";
  t.phase = "done";
  t.message = "m";
  t.files = 1, t.bytes_read = 2, t.documents = 3, t.kept = 4, t.rejected = 5, t.duplicates = 6, t.tokens = 7;
  t.shards = 8, t.bytes_sent = 9, t.elapsed_s = 10.5, t.mb_per_s = 11.5, t.report_json = "{}";
  t.started_unix_ns = 12, t.finished_unix_ns = 13;
  v1::TaskInfo w;
  to_wire(t, &w);
  CHECK(w.id() == "imp-000007");
  CHECK(w.kind() == "import");
  CHECK(w.dataset() == "d");
  CHECK(w.source() == "/data/imports/x");
  CHECK(w.state() == "succeeded");
  CHECK(w.phase() == "done");
  CHECK(w.message() == "m");
  CHECK(w.files() == 1);
  CHECK(w.bytes_read() == 2);
  CHECK(w.documents() == 3);
  CHECK(w.kept() == 4);
  CHECK(w.rejected() == 5);
  CHECK(w.duplicates() == 6);
  CHECK(w.tokens() == 7);
  CHECK(w.shards() == 8);
  CHECK(w.bytes_sent() == 9);
  CHECK(w.elapsed_s() == 10.5);
  CHECK(w.mb_per_s() == 11.5);
  CHECK(w.report_json() == "{}");
  CHECK(w.started_unix_ns() == 12);
  CHECK(w.finished_unix_ns() == 13);
  CHECK(w.tenant() == "acme");
  // Every field of the message is one the task fills.
  CHECK(v1::TaskInfo::descriptor()->field_count() == 22);
}

TEST_CASE("an import request keeps the importer's defaults where it names nothing") {
  v1::ImportDatasetRequest r;
  r.set_path("/data/imports/x");
  r.set_dataset("d");
  import_options o = import_options_from_wire(r);
  const import_options defaults;
  CHECK(o.source == "/data/imports/x");
  CHECK(o.dataset == "d");
  CHECK(o.profile == defaults.profile);
  CHECK(o.memory_budget == defaults.memory_budget);
  CHECK(o.nodes == defaults.nodes);
  CHECK(o.licences.action == licence_policy::mode::report);
  CHECK(o.pii);
  CHECK(o.dedup);
  CHECK(o.reader.jsonl_text_field == defaults.reader.jsonl_text_field);

  r.set_profile("web");
  r.set_memory_bytes(64 << 20);
  r.add_nodes("trainer@h1");
  r.add_deny_licences("GPL-*");
  r.set_no_pii(true);
  r.set_no_dedup(true);
  r.set_text_field("body");
  o = import_options_from_wire(r);
  CHECK(o.profile == "web");
  CHECK(o.memory_budget == 64u << 20);
  CHECK(o.nodes == std::vector<std::string>{"trainer@h1"});
  CHECK(o.licences.action == licence_policy::mode::deny);
  CHECK(o.licences.deny == std::vector<std::string>{"GPL-*"});
  CHECK_FALSE(o.pii);
  CHECK_FALSE(o.dedup);
  CHECK(o.reader.jsonl_text_field == "body");
}

TEST_CASE("a catalogue row is damaged on the wire only with a damage text") {
  dataset_row d;
  d.name = "d";
  d.state = "ready";
  d.version = 3;
  d.rejects = 12;
  d.documents = 10;
  d.tokens = 4000;
  d.tenant = "acme";
  v1::DatasetInfo ok, bad;
  to_wire(d, "/data/datasets/d", "", &ok);
  CHECK(ok.state() == "ready");
  CHECK(ok.damage().empty());
  CHECK(ok.id().value() == "d");
  CHECK(ok.dir() == "/data/datasets/d");
  CHECK(ok.version() == 3);
  CHECK(ok.rejects() == 12);
  to_wire(d, "/data/datasets/d", "shard-000002.bin is missing", &bad);
  CHECK(ok.reason().empty());
  CHECK(ok.tenant() == "acme");
  CHECK(bad.state() == "damaged");
  CHECK(bad.damage() == "shard-000002.bin is missing");
  CHECK(bad.reason() == "shard-000002.bin is missing");
}

TEST_CASE("a dataset without tokens is empty, not ready, and says what its import kept") {
  dataset_row d;
  d.name = "notes";
  d.state = "ready";
  d.version = 2;
  d.import_id = "imp-000007";
  d.rejects = 12;
  v1::DatasetInfo all_rejected, none, blank;
  to_wire(d, "/data/datasets/notes", "", &all_rejected);
  CHECK(all_rejected.state() == "empty");
  CHECK(all_rejected.reason() ==
        "it has no tokens: version 2 (imp-000007) kept no document: all 12 were rejected (`loom data rejects notes` "
        "says why)");
  d.rejects = 0;
  to_wire(d, "/data/datasets/notes", "", &none);
  CHECK(none.state() == "empty");
  CHECK(none.reason() == "it has no tokens: version 2 (imp-000007) kept no document: its source held none");
  d.documents = 3;
  to_wire(d, "/data/datasets/notes", "", &blank);
  CHECK(blank.reason() == "it has no tokens: the 3 documents of version 2 (imp-000007) are empty");
  // Damage says more than emptiness.
  v1::DatasetInfo damaged;
  to_wire(d, "/data/datasets/notes", "manifest.json is missing", &damaged);
  CHECK(damaged.state() == "damaged");
}
