// Data-parallel training steps through tg::train::Trainer, under `mpirun -np N` (or alone): the
// median step time of configuration A, B or C of bench_train (dropout 0.1 on attention weights too) (the global batch stays the
// configuration's, each process takes batch / N), and what the gradient all-reduce cost: bytes per
// step, the time the step waited for it with buckets started during backward (overlap) and with
// all buckets started after backward (no overlap: the whole communication time). One JSON line
// from process 0. The PyTorch peer is bench/torch_ddp_step.py; bench/dist_peers.sh runs both.
//
//   mpirun -np 2 --bind-to core build/dist_step --config A --steps 30
//   build/dist_step --sweep       # under mpirun: all-reduce time by message size (latency, bandwidth)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tapegrad.h"

namespace {
using tg::Tensor;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

tg::LayerConfig layer(int64_t d, int64_t h, int64_t ff, tg::Activation act = tg::Activation::kRelu, bool norm_first = false) {
  return {.d_model = d, .heads = h, .d_ff = ff, .dropout = 0.1, .attn_dropout = 0.1, .activation = act, .norm_first = norm_first};
}

struct Result {
  double ms = 0, wait_ms = 0, finish_ms = 0;
  int64_t bytes = 0, buckets = 0, early = 0;
};

// Trains warmup + steps steps of the configuration; per-step times from the loop's own callback.
Result run(const std::string& config, int64_t steps, int64_t warmup, bool overlap, int64_t bucket_mb) {
  const bool a = config != "B";  // A and C are encoder-decoders
  const bool c = config == "C";
  const int64_t vocab = c ? 8000 : a ? 1000 : 96, L = c ? 64 : a ? 32 : 128, B = c ? 16 : a ? 32 : 16;
  tg::manual_seed(0);
  std::unique_ptr<tg::Module> model;
  tg::Transformer* ed = nullptr;
  tg::DecoderLM* lm = nullptr;
  if (a) {
    tg::TransformerConfig cfg;
    cfg.src_vocab = cfg.tgt_vocab = vocab;
    cfg.layer = c ? layer(512, 8, 2048) : layer(128, 4, 512);
    cfg.encoder_layers = cfg.decoder_layers = c ? 6 : 2;
    cfg.max_len = 512;
    auto m = std::make_unique<tg::Transformer>(cfg);
    ed = m.get();
    model = std::move(m);
  } else {
    auto m = std::make_unique<tg::DecoderLM>(
        tg::LMConfig{.vocab = vocab, .context = L, .layer = layer(256, 8, 1024, tg::Activation::kGelu, true), .layers = 4,
                     .tie_weights = true});
    lm = m.get();
    model = std::move(m);
  }
  // Samples: random token rows (the same on every process), B per step.
  const int64_t n = B * (steps + warmup);
  Tensor src = tg::randint(1, vocab, {n, L}), tin = tg::randint(1, vocab, {n, L}), tout = tg::randint(1, vocab, {n, L});
  auto rows = [&](const Tensor& t, const std::vector<int64_t>& ids) {
    return tg::index_select(t, 0, tg::from_vector(ids, {static_cast<int64_t>(ids.size())}));
  };
  tg::AdamW opt(model->named_parameters(), {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  tg::train::Trainer trainer(*model, opt, {.max_steps = steps + warmup, .clip_grad_norm = 1.0, .eval_at_end = false,
                                           .show_progress = false, .grad_sync = {.bucket_bytes = bucket_mb << 20, .overlap = overlap}});
  std::vector<double> times, waits, finishes;
  Clock::time_point last = Clock::now();
  Result r;
  trainer.callbacks.on_step = [&](const tg::train::StepInfo& info) {
    const Clock::time_point now = Clock::now();
    if (info.step > warmup) {
      times.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      const tg::dist::SyncStats s = trainer.sync_stats();
      waits.push_back(s.wait_seconds * 1e3);
      finishes.push_back(s.finish_seconds * 1e3);
      r.bytes = s.bytes;
      r.buckets = s.buckets;
      r.early = s.started_early;
    }
    last = now;
  };
  auto step = [&](const std::vector<int64_t>& ids) {
    Tensor logits = a ? ed->forward(rows(src, ids), rows(tin, ids)) : lm->forward(rows(src, ids));
    Tensor y = rows(tout, ids);
    return tg::train::StepOutput{tg::cross_entropy(logits, y, {.reduction = tg::Reduction::kSum}), static_cast<double>(y.numel())};
  };
  trainer.fit(tg::train::ShuffledSampler(n, B), step);
  r.ms = median(times);
  r.wait_ms = median(waits);
  r.finish_ms = median(finishes);
  return r;
}

// All-reduce time by size: the median of 20, for the latency / bandwidth fit.
void sweep() {
  tg::dist::Communicator& c = tg::dist::world();
  for (int64_t bytes = 8; bytes <= (int64_t{64} << 20); bytes *= 4) {
    std::vector<float> v(static_cast<size_t>(bytes / 4), 1.0f);
    std::vector<double> t;
    for (int i = 0; i < 23; ++i) {
      c.barrier();
      const auto t0 = Clock::now();
      c.all_reduce_sum(v.data(), static_cast<int64_t>(v.size()));
      if (i >= 3) t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (c.is_main()) std::printf("{\"sweep\": true, \"ranks\": %d, \"bytes\": %lld, \"us\": %.2f}\n", c.size(),
                                 static_cast<long long>(bytes), median(t));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string config = "A";
    int64_t steps = 30, warmup = 3, bucket_mb = 4;
    bool do_sweep = false;
    tg::cli::Flags f("dist_step", "data-parallel training-step benchmark (run under mpirun -np N)");
    f.add("config", &config, "bench_train's configuration").choices({"A", "B", "C"});
    f.add("steps", &steps, "timed steps").min(1);
    f.add("warmup", &warmup, "untimed steps first").min(0);
    f.add("bucket_mb", &bucket_mb, "gradient bucket size, MB").range(1, 1024);
    f.add("sweep", &do_sweep, "all-reduce time by message size instead");
    f.parse(argc, argv).or_throw();
    if (do_sweep) {
      sweep();
      return 0;
    }
    const Result with = run(config, steps, warmup, true, bucket_mb);
    const Result without = tg::dist::size() > 1 ? run(config, steps, warmup, false, bucket_mb) : Result{};
    if (tg::dist::is_main())
      std::printf("{\"impl\": \"tapegrad\", \"config\": \"%s\", \"ranks\": %d, \"threads\": %d, \"ms_per_step\": %.2f, "
                  "\"grad_bytes\": %lld, \"buckets\": %lld, \"buckets_started_in_backward\": %lld, \"wait_ms\": %.3f, "
                  "\"ms_per_step_no_overlap\": %.2f, \"wait_ms_no_overlap\": %.3f}\n",
                  config.c_str(), tg::dist::size(), tg::num_threads(), with.ms, static_cast<long long>(with.bytes),
                  static_cast<long long>(with.buckets), static_cast<long long>(with.early), with.wait_ms, without.ms,
                  without.wait_ms);
    return 0;
  });
}
