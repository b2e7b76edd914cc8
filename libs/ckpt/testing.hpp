// Test helpers for libs/ckpt: a temp directory under /tmp removed on scope exit.
#pragma once

#include "libs/files/temp_dir.hpp"

#include <string>

namespace loom::ckpt::testing {

class temp_dir : public files::temp_dir {
 public:
  temp_dir() : files::temp_dir("loom-ckpt-test") {}
};

}  // namespace loom::ckpt::testing
