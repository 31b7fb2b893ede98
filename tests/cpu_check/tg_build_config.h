// A stand-in for the generated build config: a library "compiled" for instructions that no CPU
// has both of today (AVX512-FP16: Sapphire Rapids and later; VP2INTERSECT: Tiger Lake, Zen 5),
// so the load-time check in graph/cpu_features.cc must refuse to start with its one line.
#define TG_BUILD_ARCH "native"
#define TG_BUILD_MARCH "test"
#define TG_BUILD_CPU_FEATURES(X) X("sse3") X("avx512fp16") X("avx512vp2intersect")
#define TG_BUILD_CPU_FEATURE_LIST "sse3 avx512fp16 avx512vp2intersect"
