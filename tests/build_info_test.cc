// What the library records about its own build, and the load-time CPU check's core.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "graph/build_info.h"

namespace {

bool has_all(const char*) { return true; }
bool lacks_avx512(const char* f) { return std::strncmp(f, "avx512", 6) != 0; }
bool has_none(const char*) { return false; }

TEST(BuildInfo, RecordsTheArchAndFeatures) {
  std::string arch = tg::build_arch(), features = tg::build_cpu_features();
  EXPECT_TRUE(arch == "native" || arch == "portable" || arch == "baseline") << arch;
  EXPECT_FALSE(std::string(tg::build_march()).empty());
  // This test is compiled with the library's arch flags, so the compiler's macros say the same.
#ifdef __AVX2__
  EXPECT_NE(features.find("avx2"), std::string::npos) << features;
#else
  EXPECT_EQ(features.find("avx2"), std::string::npos) << features;
#endif
#ifdef __AVX512F__
  EXPECT_NE(features.find("avx512f"), std::string::npos) << features;
#endif
  if (arch == "baseline") {
    EXPECT_EQ(features, "");
  }
  if (arch == "portable") {
    EXPECT_EQ(features.find("avx512"), std::string::npos) << features;
  }
}

TEST(BuildInfo, MissingCpuFeaturesNamesEachOne) {
  char buf[512];
  EXPECT_EQ(tg::detail::missing_cpu_features(buf, sizeof buf, has_all), 0);
  EXPECT_STREQ(buf, "");
  std::string features = tg::build_cpu_features();
  int required = 0;
  for (size_t i = 0; i < features.size(); ++i)
    if (features[i] != ' ' && (i == 0 || features[i - 1] == ' ')) ++required;
  EXPECT_EQ(tg::detail::missing_cpu_features(buf, sizeof buf, has_none), required);
  int avx512 = tg::detail::missing_cpu_features(buf, sizeof buf, lacks_avx512);
  if (features.find("avx512f") != std::string::npos) {
    EXPECT_GE(avx512, 1);
    EXPECT_NE(std::string(buf).find("avx512f"), std::string::npos) << buf;
    EXPECT_EQ(std::string(buf).find("avx2"), std::string::npos) << buf;
  } else {
    EXPECT_EQ(avx512, 0);
  }
}

TEST(BuildInfo, MissingCpuFeaturesNeverOverrunsItsBuffer) {
  char buf[8];
  std::memset(buf, 'x', sizeof buf);
  int n = tg::detail::missing_cpu_features(buf, 6, has_none);  // room for 5 characters
  EXPECT_LT(std::strlen(buf), 6u);
  EXPECT_EQ(buf[6], 'x');
  EXPECT_EQ(buf[7], 'x');
  std::string features = tg::build_cpu_features();
  EXPECT_EQ(n == 0, features.empty());
}

}  // namespace
