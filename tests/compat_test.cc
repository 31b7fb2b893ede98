// The names 0.2 moved or renamed still work, as CHANGES.md promises, until 0.3.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <type_traits>

#include <gtest/gtest.h>

#include "models/transformer.h"  // DecoderLM, LMConfig: now in models/gpt2.h
#include "models/word2vec.h"
#include "ops/autocast.h"         // refresh_autocast_packs: now in ops/matmul.h
#include "ops/cpu_capability.h"
#include "ops/elementwise.h"
#include "ops/kernels/parallel.h"  // set_num_threads: now in ops/threads.h
#include "text/sentence_encoder.h"  // now pipelines/
#include "text/translator.h"
#include "text/word_eval.h"
#include "train/trainer.h"  // check_run_dir: now in train/run_dir.h

namespace {

TEST(Compat, OldEnumeratorsEqualTheNewOnes) {
  static_assert(tg::DType::Float32 == tg::DType::kFloat32 && tg::DType::BFloat16 == tg::DType::kBFloat16);
  static_assert(tg::Reduction::Mean == tg::Reduction::kMean && tg::Reduction::None == tg::Reduction::kNone);
  static_assert(tg::Activation::Relu == tg::Activation::kRelu && tg::Activation::GeluTanh == tg::Activation::kGeluTanh);
  static_assert(tg::GeluApprox::Tanh == tg::GeluApprox::kTanh);
  static_assert(tg::Projections::Frozen == tg::Projections::kFrozen);
  static_assert(tg::Pooling::Cls == tg::Pooling::kCls);
  static_assert(tg::CpuCapability::Amx == tg::CpuCapability::kAmx);
  EXPECT_STREQ(tg::dtype_name(tg::DType::Float32), tg::dtype_name(tg::kFloat32));
}

TEST(Compat, OldNamesAndHeadersStillDeclareThem) {
  static_assert(std::is_same_v<tg::Vocabulary, tg::WordCounts>);
  static_assert(std::is_class_v<tg::DecoderLM> && std::is_class_v<tg::text::Translator> &&
                std::is_class_v<tg::text::SentenceEncoder>);
  const int before = tg::num_threads();
  tg::set_num_threads(1);
  EXPECT_EQ(tg::num_threads(), 1);
  tg::set_num_threads(before);
  tg::refresh_autocast_packs(tg::Tensor());  // declared through ops/autocast.h still; a no-op without packs
  EXPECT_FALSE(tg::train::check_run_dir("/nonexistent-tapegrad-dir", true, false).ok());
}

}  // namespace
