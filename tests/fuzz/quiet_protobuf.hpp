// For fuzz targets whose parser uses protobuf: protobuf logs every string
// field with invalid UTF-8 to stderr, which at fuzzing speed floods the log
// and slows the run ~10x. Dropping its log messages changes no result (the
// parse still fails). Include in exactly one .cpp of a target.
#pragma once

#include <google/protobuf/stubs/logging.h>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
