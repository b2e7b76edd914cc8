// Objects at rest as their readers and writers see them: a file is either
// sealed (sealed.hpp) or plain, and a reader need not know which — the magic
// says. Where the keys come from: a writer decides whether to seal and passes
// its kek_store; a reader of a sealed file uses the store it is given, else
// the process's (set once at start by a service or CLI that owns a data
// directory: set_process_keys), so the many readers of shards and
// checkpoints need no new parameter. A sealed file met without any store is
// errc::not_found naming the file (as is one whose KEK version is missing).
// Thread-safe: the process's store is guarded; kek_store is thread-safe.
#pragma once

#include "libs/atrest/kek_store.hpp"
#include "libs/status/status.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace loom::atrest {

// The process's key store (nullptr clears it): what readers unseal with.
void set_process_keys(std::shared_ptr<kek_store> keys);
std::shared_ptr<kek_store> process_keys();
// The keys a writer of this process seals new objects with: the process's
// store while sealing is on (the default), null while it is off.
void set_sealing(bool on);
std::shared_ptr<kek_store> sealing_keys();

// Opens the KEK directory `dir` for this process (made when missing, with
// `o`) and sets it as the process's store. Errors name the directory.
result<std::shared_ptr<kek_store>> open_process_keys(const std::string& dir, kek_options o, sys_time now);

// What a process that owns a data directory does at start: LOOM_AT_REST
// "on" (the default, also when unset) or "off", LOOM_AT_REST_ROTATION_DAYS
// 1..3650 (default 30). On: opens `dir` (made when missing) as the process's
// keys, sealing on, and returns them, `on_rotate` called after each
// rotation. Off: sealing off — nothing new is sealed — but an existing `dir`
// is still opened, so what was sealed stays readable; returns null.
// invalid_argument naming the variable for any other value.
result<std::shared_ptr<kek_store>> open_process_keys_from_env(
    const std::string& dir, const std::function<const char*(const char*)>& getenv, sys_time now,
    std::function<void(std::uint32_t version, bool scheduled)> on_rotate = {});

// Whether the file at `path` starts like a sealed object (false when it
// cannot be read).
bool is_sealed_file(const std::string& path);

// The plaintext of the file at `path`: unsealed (tags verified, errors name
// the path) when sealed, as is when plain. `keys` null: the process's store.
result<std::string> read_object(const std::string& path, kek_store* keys = nullptr);
// The same into `out`, the file's bytes read into `scratch` (both reused);
// `sealed` (when given) says whether the file was sealed.
status read_object_into(const std::string& path, std::string& scratch, std::string& out, kek_store* keys = nullptr,
                        bool* sealed = nullptr);

// The plaintext of the file at `path` handed to `sink` piece by piece (1 MiB,
// or a sealed object's chunks, each verified before it is handed over): a
// reader that hashes or scans holds one piece at a time. Errors as
// read_object's; a sink's error ends it and is returned.
status read_object_stream(const std::string& path, const std::function<status(std::string_view)>& sink,
                          kek_store* keys = nullptr);

// Publishes `plain` at `path` atomically: sealed under `keys` (a new data key
// wrapped by keys.for_wrap(now)) when keys is given, plain otherwise.
status write_object(const std::string& path, std::string_view plain, kek_store* keys, sys_time now,
                    mode_t mode = 0644);

}  // namespace loom::atrest
