// Data-parallel training, run as `mpirun -np 2` (or 3): every test runs on every process, which
// compare among themselves through tg::dist. The reference is the same training with
// tg::dist::single() (this process alone), computed on each process.
//
// Tolerance: the processes add their shards' losses and gradients in another order than one
// process adding the whole batch, so float32 sums differ in their last bits (about 1e-7 relative
// here); AdamW's normalised updates keep that from growing over 20 steps. Losses must agree to
// 2e-5 relative, which a wrong shard, a missing sample, a per-process mean (instead of the global
// token count) or an unsynchronised dropout mask all exceed by orders of magnitude.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tapegrad.h"

namespace {

namespace fs = std::filesystem;
using tg::Tensor;
using tg::train::Trainer;
using tg::train::TrainerOptions;

tg::dist::Communicator& world() { return tg::dist::world(); }

// A folder every process names the same (process 0's pid).
std::string shared_dir(const std::string& name) {
  int64_t pid = ::getpid();
  world().broadcast(&pid, sizeof pid, 0);
  return (fs::temp_directory_path() / ("tg_dist_" + std::to_string(pid) + "_" + name)).string();
}

// Sequence reversal: 53 samples of 3-7 digits (varied lengths, so shards pad differently).
struct Reversal {
  std::vector<std::vector<int64_t>> seqs;
  Reversal() {
    tg::Generator g(7);
    for (int i = 0; i < 53; ++i) {
      std::vector<int64_t> s(3 + g.next_u64() % 5);
      for (auto& v : s) v = 3 + static_cast<int64_t>(g.next_u64() % 10);
      seqs.push_back(s);
    }
  }
  // src [B, L] padded with 0; tgt_in = BOS(1) + reversed; tgt_out = reversed + EOS(2).
  void batch(const std::vector<int64_t>& ids, Tensor& src, Tensor& tin, Tensor& tout) const {
    size_t L = 0;
    for (int64_t i : ids) L = std::max(L, seqs[static_cast<size_t>(i)].size());
    const int64_t B = static_cast<int64_t>(ids.size()), T = static_cast<int64_t>(L) + 1;
    std::vector<int64_t> s(static_cast<size_t>(B) * L, 0), a(static_cast<size_t>(B * T), 0), b(static_cast<size_t>(B * T), 0);
    for (int64_t r = 0; r < B; ++r) {
      const auto& q = seqs[static_cast<size_t>(ids[static_cast<size_t>(r)])];
      const size_t n = q.size();
      for (size_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(r) * L + j] = q[j];
        a[static_cast<size_t>(r * T) + j + 1] = q[n - 1 - j];
        b[static_cast<size_t>(r * T) + j] = q[n - 1 - j];
      }
      a[static_cast<size_t>(r * T)] = 1;
      b[static_cast<size_t>(r * T) + n] = 2;
    }
    src = tg::from_vector(s, {B, static_cast<int64_t>(L)});
    tin = tg::from_vector(a, {B, T});
    tout = tg::from_vector(b, {B, T});
  }
};

tg::TransformerConfig tiny_config() {
  tg::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 13;
  c.layer = {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.1, .attn_dropout = 0.1};
  c.encoder_layers = c.decoder_layers = 1;
  c.max_len = 32;
  return c;
}

struct Training {
  std::unique_ptr<tg::Transformer> model;
  std::unique_ptr<tg::AdamW> opt;
  std::unique_ptr<Trainer> trainer;
  std::vector<double> losses;
  Training(tg::dist::Communicator& comm, TrainerOptions o, uint64_t init_seed = 3) {
    tg::manual_seed(init_seed);
    model = std::make_unique<tg::Transformer>(tiny_config());
    opt = std::make_unique<tg::AdamW>(model->named_parameters(), tg::AdamOptions{.lr = 3e-3, .weight_decay = 0.01});
    o.comm = &comm;
    o.show_progress = false;
    trainer = std::make_unique<Trainer>(*model, *opt, o);
    trainer->callbacks.on_step = [this](const tg::train::StepInfo& i) { losses.push_back(i.loss); };
  }
  tg::train::FitResult fit(const Reversal& d, int64_t batch) {
    auto step = [&](const std::vector<int64_t>& ids) {
      Tensor src, tin, tout;
      d.batch(ids, src, tin, tout);
      Tensor loss = tg::cross_entropy(model->forward(src, tin), tout, {.ignore_index = 0, .reduction = tg::Reduction::kSum});
      double count = 0;
      for (int64_t v : tout.to_vector<int64_t>()) count += v != 0;
      return tg::train::StepOutput{loss, count};
    };
    auto eval = [&] {
      return std::map<std::string, double>{
          {"valid_loss", trainer->evaluate_loss(tg::train::sequential_batches(53, 5), step)}};
    };
    return trainer->fit(tg::train::ShuffledSampler(53, batch), step, eval);
  }
  std::string param_bytes() const {
    std::string s;
    for (const auto& [n, p] : model->named_parameters())
      s.append(static_cast<const char*>(p.raw_data()), static_cast<size_t>(p.numel()) * tg::dtype_size(p.dtype()));
    return s;
  }
};

::testing::AssertionResult same_losses(const std::vector<double>& got, const std::vector<double>& want, double rtol = 2e-5) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " steps vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rtol * std::max(1.0, std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "step " << i + 1 << ": loss " << got[i] << " vs " << want[i] << " in one process";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_on_every_process(const std::string& bytes) {
  const std::vector<std::string> all = world().all_gather(bytes);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) return ::testing::AssertionFailure() << "process " << r << " differs from process 0";
  return ::testing::AssertionSuccess();
}

TEST(Dist, RunsAsSeveralProcesses) {
  ASSERT_TRUE(tg::dist::built_with_mpi());
  ASSERT_GE(world().size(), 2) << "run this under mpirun -np 2";
  EXPECT_TRUE(world().uses_mpi());
  double v[2] = {1.0 + world().rank(), 1.0};
  world().all_reduce_sum(v, 2);
  const double n = world().size();
  EXPECT_EQ(v[0], n * (n + 1) / 2);
  EXPECT_EQ(v[1], n);
  EXPECT_TRUE(world().any(world().rank() == 1));
  EXPECT_FALSE(world().from_main(world().rank() == 1));
  const auto all = world().all_gather(std::string(static_cast<size_t>(world().rank()) + 1, 'x'));
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r].size(), r + 1);
}

// Dropout on (sublayers and attention weights), batch 7 over the processes (4 + 3 with two), a
// last batch of 4 per epoch, 20 steps: the loss curve of one process.
TEST(Dist, SameLossesAsOneProcessWithDropoutAndUnevenShards) {
  Reversal d;
  Training one(tg::dist::single(), {.max_steps = 20, .eval_every = 10, .seed = 11});
  one.fit(d, 7);
  Training many(world(), {.max_steps = 20, .eval_every = 10, .seed = 11, .check_replicas_every = 5});
  many.fit(d, 7);
  EXPECT_TRUE(same_losses(many.losses, one.losses));
  EXPECT_TRUE(same_on_every_process(many.param_bytes()));
  // Validation loss, sharded across the processes, equals one process's.
  const auto& v1 = one.trainer->history().at("valid/valid_loss");
  const auto& vn = many.trainer->history().at("valid/valid_loss");
  ASSERT_EQ(v1.size(), vn.size());
  for (size_t i = 0; i < v1.size(); ++i) EXPECT_NEAR(vn[i].second, v1[i].second, 2e-5 * v1[i].second);
  // And a different dropout key (another seed) would have shown: the curves are not all alike.
  Training other(tg::dist::single(), {.max_steps = 20, .seed = 12});
  other.fit(d, 7);
  EXPECT_FALSE(same_losses(other.losses, one.losses));
}

// Accumulation 2 and batches smaller than the number of processes (some take no sample).
TEST(Dist, TinyBatchesAndAccumulation) {
  Reversal d;
  Training one(tg::dist::single(), {.max_steps = 12, .accumulate = 2, .seed = 5});
  one.fit(d, 1);
  Training many(world(), {.max_steps = 12, .accumulate = 2, .seed = 5, .grad_sync = {.bucket_bytes = 1024}});
  many.fit(d, 1);
  EXPECT_TRUE(same_losses(many.losses, one.losses));
  EXPECT_TRUE(same_on_every_process(many.param_bytes()));
  const tg::dist::SyncStats st = many.trainer->sync_stats();
  EXPECT_GT(st.buckets, 10);  // 1 KB buckets: many
  if (world().is_main()) {  // some started while backward ran (process 1 has no samples)
    EXPECT_GT(st.started_early, 0);
  }
  EXPECT_GT(st.bytes, 0);
}

// A checkpoint written by N processes resumes in one, and one process's in N; either way the
// curve continues as an uninterrupted run's.
TEST(Dist, CheckpointsResumeAcrossProcessCounts) {
  Reversal d;
  const std::string a = shared_dir("a"), b = shared_dir("b");
  std::vector<double> whole;
  {
    Training ref(tg::dist::single(), {.max_steps = 20, .seed = 9});
    ref.fit(d, 7);
    whole = ref.losses;
  }
  {  // N processes for 10 steps, then one process (process 0) for 10 more
    Training first(world(), {.run_dir = a, .max_steps = 10, .seed = 9});
    first.fit(d, 7);
  }
  world().barrier();
  if (world().is_main()) {
    Training second(tg::dist::single(), {.run_dir = a, .max_steps = 20, .seed = 1234}, /*init_seed=*/77);
    second.trainer->resume().or_throw();
    second.fit(d, 7);
    EXPECT_TRUE(same_losses(second.losses, std::vector<double>(whole.begin() + 10, whole.end())));
  }
  {  // one process (process 0) for 10 steps, then N processes
    if (world().is_main()) {
      Training first(tg::dist::single(), {.run_dir = b, .max_steps = 10, .seed = 9});
      first.fit(d, 7);
    }
    world().barrier();
    Training second(world(), {.run_dir = b, .max_steps = 20, .seed = 1234}, /*init_seed=*/77 + world().rank());
    second.trainer->resume().or_throw();
    second.fit(d, 7);
    EXPECT_TRUE(same_losses(second.losses, std::vector<double>(whole.begin() + 10, whole.end())));
    EXPECT_TRUE(same_on_every_process(second.param_bytes()));
  }
  world().barrier();
  if (world().is_main()) {
    fs::remove_all(a);
    fs::remove_all(b);
  }
}

// Different weights at start (another seed per process) are replaced by process 0's.
TEST(Dist, StartSendsProcessZerosWeights) {
  Reversal d;
  Training many(world(), {.max_steps = 1, .seed = 2}, /*init_seed=*/100 + world().rank());
  ASSERT_TRUE(many.trainer->start().ok());
  EXPECT_TRUE(same_on_every_process(many.param_bytes()));
}

TEST(Dist, DifferentConfigurationsAreRefusedWithOneMessage) {
  Training many(world(), {.max_steps = 1, .seed = 2, .config_hash = "layers=" + std::to_string(2 + world().rank())});
  tg::Status s = many.trainer->start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("process 1 has program configuration hash 'layers=3', process 0 'layers=2'"), std::string::npos)
      << s.message();
  EXPECT_TRUE(tg::dist::error_is_shared());
}

TEST(Dist, ReplicaCheckNamesTheParameterThatDiverged) {
  Reversal d;
  Training many(world(), {.max_steps = 3, .seed = 2, .check_replicas_every = 1});
  many.trainer->start().or_throw();  // sends process 0's weights; then process 1 changes one
  const auto last = many.model->named_parameters().back();
  if (world().rank() == 1) last.second.data<float>()[0] += 1.0f;
  try {
    many.fit(d, 8);  // the updates are the same everywhere, so the difference stays and is caught
    ADD_FAILURE() << "the replica check did not fire";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + last.first + "' differs between process 0 and process 1"), std::string::npos) << m;
    EXPECT_NE(m.find("after step 1"), std::string::npos) << m;
  }
}

// GradientSync alone: tied weights (one gradient from two uses), a parameter only some processes
// use, one no process uses, buckets of a few hundred bytes finishing in any order.
TEST(Dist, GradientSyncSumsEveryGradientOnce) {
  tg::manual_seed(1);
  tg::DecoderLM lm({.vocab = 11, .context = 8, .layer = {.d_model = 8, .heads = 2, .d_ff = 16, .dropout = 0.0}, .layers = 2,
                    .tie_weights = true});
  Tensor extra = tg::zeros({3}).requires_grad_(), unused = tg::zeros({2}).requires_grad_();
  std::vector<std::pair<std::string, Tensor>> params;
  for (const auto& [n, p] : lm.named_parameters()) params.emplace_back(n, p);
  params.emplace_back("extra", extra);
  params.emplace_back("unused", unused);
  tg::dist::GradientSync sync(world(), params, {.bucket_bytes = 300});
  EXPECT_GT(sync.num_buckets(), 5u);
  for (size_t i = 0; i < params.size(); ++i)
    params[i].second.register_post_accumulate_grad_hook([&sync, i](const Tensor&) { sync.ready(i); });
  const int r = world().rank();
  Tensor ids = tg::from_vector(std::vector<int64_t>{1 + r, 2, 3 + r, 4, 5, 6}, {1, 6});
  Tensor loss = tg::sum(lm.forward(ids));
  if (r == 1) loss = tg::add(loss, tg::sum(tg::mul(extra, 2.0)));
  loss.backward();
  // The expected sum: every process's local gradient, all-reduced in one piece.
  std::vector<std::vector<double>> want;
  for (auto& [n, p] : params) {
    std::vector<double> g = p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>(static_cast<size_t>(p.numel()), 0.0);
    world().all_reduce_sum(g.data(), static_cast<int64_t>(g.size()));
    want.push_back(g);
  }
  sync.finish();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    ASSERT_TRUE(params[i].second.grad().defined()) << params[i].first;
    std::vector<double> got = params[i].second.grad().to_vector<double>();
    for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], want[i][j], 1e-5 * (1 + std::fabs(want[i][j]))) << params[i].first;
  }
  EXPECT_EQ(extra.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));  // from process 1 only
  EXPECT_FALSE(unused.grad().defined());                                   // no process used it
  EXPECT_EQ(sync.last_stats().buckets, static_cast<int64_t>(sync.num_buckets()));
}

}  // namespace

// word2vec's sums (tg::dist::Word2VecChangeSum): a hot sum adds every process's change to the hot
// words' rows of both tables and leaves the others' rows alone; a full sum then adds theirs.
TEST(Dist, Word2VecSumsHotRowsOftenAndEveryRowAtFullSums) {
  // Counts 600, 300, 2, 2 of 904 words, no subsampling: with hot_sync_words 10 the first two words
  // are met at least once in 10 words (600 x 10 / 904 >= 1), the last two are not.
  const tg::WordCounts vocab = tg::WordCounts::from_words({"a", "b", "c", "d"}, {600, 300, 2, 2});
  tg::Word2Vec model(vocab, {.dim = 3, .sample = 0, .epochs = 1});
  tg::dist::Word2VecChangeSum sum(world(), model, 1000, {.sync_words = 100, .hot_sync_words = 10});
  ASSERT_EQ(sum.hot_word_count(), 2);
  EXPECT_EQ(sum.syncs(), 1000 / world().size() / 10);
  Tensor in = model.vectors(), out = model.output_vectors();
  const std::vector<float> in0 = in.to_vector<float>(), out0 = out.to_vector<float>();
  const float mine = static_cast<float>(world().rank() + 1);
  const float all = static_cast<float>(world().size() * (world().size() + 1) / 2);
  for (int64_t j = 0; j < 3; ++j) {  // this process's change: rank + 1 to rows 1 ("b", hot) and 3 ("d")
    in.data<float>()[3 + j] += mine;
    in.data<float>()[9 + j] += mine;
    out.data<float>()[3 + j] += 2 * mine;
  }
  sum.sum(in, out, /*full=*/false);
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(in.data<float>()[3 + j], in0[3 + j] + all);
    EXPECT_FLOAT_EQ(out.data<float>()[3 + j], out0[3 + j] + 2 * all);
    EXPECT_FLOAT_EQ(in.data<float>()[9 + j], in0[9 + j] + mine);  // not hot: still this process's own
    EXPECT_FLOAT_EQ(in.data<float>()[j], in0[j]);
  }
  sum.sum(in, out, /*full=*/true);
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(in.data<float>()[3 + j], in0[3 + j] + all);  // summed once, not again
    EXPECT_FLOAT_EQ(in.data<float>()[9 + j], in0[9 + j] + all);
    EXPECT_FLOAT_EQ(out.data<float>()[9 + j], out0[9 + j]);
  }
  EXPECT_TRUE(same_on_every_process(std::string(reinterpret_cast<const char*>(in.data<float>()), 12 * sizeof(float))));
}

// Training through the sums: each process on its sentences, the same vectors on every process at
// the end, every sum called (the last a full one).
TEST(Dist, Word2VecTrainedInPartsEndsTheSameOnEveryProcess) {
  std::vector<std::string> tokens;
  std::vector<int64_t> corpus;
  tg::Generator gen(5);
  const std::vector<std::string> words = {"the", "king", "queen", "man", "woman", "of", "and", "land", "river", "sea"};
  for (int s = 0; s < 400; ++s) {
    for (int i = 0; i < 12; ++i) tokens.push_back(words[static_cast<size_t>(gen.uniform() * gen.uniform() * 10)]);
    tokens.emplace_back("\n");
  }
  std::vector<std::string> text;
  for (const auto& t : tokens)
    if (t != "\n") text.push_back(t);
  const tg::WordCounts vocab = tg::WordCounts::build(text, 1);
  int64_t corpus_words = 0;
  for (const auto& t : tokens) {
    corpus.push_back(t == "\n" ? -1 : vocab.id(t));
    corpus_words += t == "\n" ? 0 : 1;
  }
  tg::Word2Vec model(vocab, {.cbow = true, .dim = 8, .epochs = 2, .batch = 16});
  tg::dist::Word2VecChangeSum sum(world(), model, corpus_words, {.sync_words = 1000, .hot_sync_words = 200});
  EXPECT_GT(sum.hot_word_count(), 0);
  model.train(tg::dist::shard_sentences(corpus, world().rank(), world().size()), {}, sum.sync());
  EXPECT_EQ(sum.calls(), sum.syncs());
  const std::vector<float> in = model.vectors().to_vector<float>(), out = model.output_vectors().to_vector<float>();
  for (float v : in) ASSERT_TRUE(std::isfinite(v));
  EXPECT_TRUE(same_on_every_process(std::string(reinterpret_cast<const char*>(in.data()), in.size() * sizeof(float)) +
                                    std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float))));
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tg::set_num_threads(1);
  tg::dist::world();  // join the other processes before any test
  // Process 0 reports; the others print only their failures, naming themselves.
  struct FailuresOnly : ::testing::EmptyTestEventListener {
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
      if (!r.failed()) return;
      const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "process %d: %s.%s failed at %s:%d\n%s\n", tg::dist::rank(), t ? t->test_suite_name() : "?",
                   t ? t->name() : "?", r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
    }
  };
  if (!tg::dist::is_main()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly);
  }
  int rc = RUN_ALL_TESTS();
  // Every process must pass: the job fails if any failed.
  int64_t worst = rc;
  tg::dist::world().all_reduce_max(&worst, 1);
  if (worst != 0 && rc == 0 && tg::dist::is_main()) std::fprintf(stderr, "another process failed a test\n");
  return static_cast<int>(worst);
}
