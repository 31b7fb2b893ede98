#pragma once
// The GPU tests' one rule: without a usable GPU each test reports "skipped: no CUDA device" (with
// why), and with TG_REQUIRE_GPU=1 in the environment that skip is a failure instead — so a GPU
// machine's run cannot pass by skipping.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tapegrad.h"

namespace tg::testing {

inline const Device kGpu = Device::cuda(0);  // the device the suite runs on

inline bool gpu_required() {
  const char* e = std::getenv("TG_REQUIRE_GPU");
  return e != nullptr && std::string(e) == "1";
}

}  // namespace tg::testing

#define TG_NEED_GPU()                                                                                         \
  do {                                                                                                       \
    if (!::tg::cuda::available()) {                                                                          \
      if (::tg::testing::gpu_required()) FAIL() << "TG_REQUIRE_GPU=1, but " << ::tg::cuda::unavailable_reason(); \
      GTEST_SKIP() << "skipped: no CUDA device (" << ::tg::cuda::unavailable_reason() << ")";                 \
    }                                                                                                        \
  } while (0)
