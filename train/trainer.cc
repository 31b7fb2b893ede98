#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "graph/cuda.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "graph/random.h"
#include "models/module_io.h"
#include "ops/autocast.h"
#include "ops/cpu_capability.h"
#include "ops/elementwise.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/threads.h"
#include "io/file.h"
#include "train/interrupt.h"
#include "train/metrics.h"
#include "train/progress.h"

namespace tg::train {

namespace fs = std::filesystem;

// ---- Cross-entropy step ----

StepOutput CrossEntropyStep::operator()(const std::vector<int64_t>& samples) const {
  Tensor y = targets(samples);
  const Tensor x = logits(samples);
  double count = 0;
  if (y.is_cuda()) {
    count = sum(to(ne(y, static_cast<double>(ignore_index)), kFloat64)).item();  // a wait for the GPU
  } else {
    const int64_t* t = y.data<int64_t>();
    for (int64_t i = 0, n = y.numel(); i < n; ++i) count += t[i] != ignore_index;
    if (x.is_cuda()) y = y.to(x.device());  // counted on the host, then to the logits' device (documented)
  }
  Tensor loss = cross_entropy(x, y, {.ignore_index = ignore_index, .label_smoothing = label_smoothing,
                                     .reduction = Reduction::kSum});
  return {loss, count};
}

// ---- Trainer ----

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kMaxSteps: return "max_steps";
    case StopReason::kMaxEpochs: return "max_epochs";
    case StopReason::kTimeBudget: return "time_budget";
    case StopReason::kEarlyStopping: return "early_stopping";
    case StopReason::kStopRequested: return "stop_requested";
    case StopReason::kDiverged: return "diverged";
    case StopReason::kInterrupted: return "interrupted";
  }
  return "?";
}

struct Trainer::Impl {
  std::unique_ptr<Metrics> metrics;
  std::chrono::steady_clock::time_point clock = std::chrono::steady_clock::now();
  double seconds_before = 0;  // training time of the runs this one resumes
  bool grads_final = false;   // the current micro-batch is the step's last: on_grad_ready may run
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::set<std::string> hooked;  // parameters whose post-accumulate hook is registered
  std::unique_ptr<dist::GradientSync> sync;
  std::map<std::string, size_t> sync_index;  // parameter name -> index in sync
  int64_t last_eval_step = -1, last_save_step = -1;
  std::string resumed_from;  // the checkpoint file this run continued from (keep-last-K spares it)
  bool said_parallel = false;  // the data-parallel line was printed
  std::string last_good;     // the newest checkpoint this run wrote or resumed from
};

Trainer::Trainer(Module& model, Optimizer& opt, TrainerOptions options)
    : model_(model), opt_(opt), opts_(std::move(options)), comm_(opts_.comm ? opts_.comm : &dist::world()),
      impl_(std::make_unique<Impl>()) {
  const auto& o = opts_;
  TG_CHECK(o.check_replicas_every >= 0, "Trainer", "check_replicas_every must be >= 0, got {}", o.check_replicas_every);
  TG_CHECK(o.max_steps >= 0 && o.max_epochs >= 0 && o.max_minutes >= 0 && std::isfinite(o.max_minutes), "Trainer",
           "max_steps, max_epochs and max_minutes must be >= 0 (got {}, {}, {})", o.max_steps, o.max_epochs, o.max_minutes);
  TG_CHECK(o.max_steps > 0 || o.max_epochs > 0 || o.max_minutes > 0, "Trainer",
           "set at least one of max_steps, max_epochs, max_minutes (all are 0: training would never stop)");
  TG_CHECK(o.accumulate >= 1, "Trainer", "accumulate must be >= 1, got {}", o.accumulate);
  TG_CHECK(o.clip_grad_norm >= 0 && std::isfinite(o.clip_grad_norm), "Trainer", "clip_grad_norm must be >= 0, got {}",
           o.clip_grad_norm);
  TG_CHECK(o.eval_every >= 0 && o.checkpoint_every >= 0 && o.log_every >= 0 && o.keep_last >= 1, "Trainer",
           "eval_every, checkpoint_every, log_every must be >= 0 and keep_last >= 1 (got {}, {}, {}, {})", o.eval_every,
           o.checkpoint_every, o.log_every, o.keep_last);
  TG_CHECK(o.early_stop.patience >= 1 && o.early_stop.min_delta >= 0, "Trainer",
           "early_stop.patience must be >= 1 and min_delta >= 0 (got {}, {})", o.early_stop.patience, o.early_stop.min_delta);
  TG_CHECK(!o.save_best || !o.early_stop.metric.empty(), "Trainer", "save_best needs early_stop.metric (which metric is best)");
  TG_CHECK(o.precision == kFloat32 || o.precision == kBFloat16, "Trainer", "precision must be float32 or bfloat16, got {}",
           o.precision);
  state_.sampler_seed = o.seed;
  set_precision_record();
  state_.config = o.config;
  if (opts_.config_hash.empty() && !o.config.empty()) {
    std::string all;
    for (const auto& [k, v] : o.config) all += k + '\0' + v + '\n';
    opts_.config_hash = fingerprint(all);
  }
  state_.config_hash = opts_.config_hash;
  state_.tokenizer_fingerprint = o.tokenizer_fingerprint;
}

Trainer::~Trainer() { *impl_->alive = false; }

void Trainer::set_precision_record() {
  state_.precision = dtype_name(opts_.precision);
  state_.cpu_path = opts_.precision == kBFloat16 ? cpu_capability_name(cpu_capability()) : "";
}

double Trainer::elapsed() const {
  return impl_->seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->clock).count();
}

std::string Trainer::checkpoint_path(int64_t step) const { return opts_.run_dir + "/" + checkpoint_name(step); }

std::string Trainer::last_checkpoint() const { return impl_->last_good; }


namespace {
// A checkpoint's position must agree with itself: the step in its file name (when it has the
// pattern's name), the samples consumed (at least one a step), the epoch's share of them.
Status check_position(const std::string& file, const TrainState& st) {
  const int64_t named = checkpoint_step(fs::path(file).filename().string());
  if (named >= 0 && named != st.step)
    return io_error("{}: records step {}, but its name says step {} (an edited or renamed checkpoint)", file, st.step, named);
  if (st.samples < st.step || st.epoch_samples > st.samples)
    return io_error("{}: records step {} after {} samples, {} of them in the current epoch (each step takes at least one "
                    "sample, and an epoch's share cannot exceed the total): an edited checkpoint", file, st.step, st.samples,
                    st.epoch_samples);
  return {};
}

// metrics.jsonl is cut back to the length the checkpoint recorded: that length must end a line of
// the file and the lines before it must be exactly the metrics the checkpoint holds, or the cut
// would drop or keep the wrong lines.
Status check_metrics_cut(const std::string& metrics, const std::string& file, const TrainState& st) {
  const int64_t keep = st.metrics_bytes;
  if (keep < 0) return io_error("{}: records no length of metrics.jsonl (metrics_bytes {}): not a checkpoint of a run folder", file, keep);
  std::string bytes;
  std::error_code ec;
  if (fs::exists(metrics, ec)) {
    Result<std::string> r = read_file(metrics);
    if (!r.ok()) return r.status();
    bytes = std::move(*r);
  }
  if (static_cast<int64_t>(bytes.size()) < keep)
    return io_error("{}: has {} bytes, fewer than the {} recorded in {} (the log was cut or replaced)", metrics, bytes.size(),
                    keep, file);
  if (keep > 0 && bytes[static_cast<size_t>(keep) - 1] != '\n')
    return io_error("{}: byte {} recorded in {} is not the end of a line (not the log this run wrote)", metrics, keep, file);
  Result<History> logged = Metrics::parse(std::string_view(bytes).substr(0, static_cast<size_t>(keep)), metrics);
  if (!logged.ok()) return logged.status();
  History saved;  // the log writes non-finite values as null, which parse skips
  for (const auto& [name, pts] : st.history)
    for (const auto& p : pts)
      if (std::isfinite(p.second)) saved[name].push_back(p);
  if (*logged != saved) {
    auto last = [](const History& h) {
      size_t n = 0;
      double step = 0;
      for (const auto& [name, pts] : h) {
        n += pts.size();
        for (const auto& p : pts) step = std::max(step, p.first);
      }
      return fmt::format("{} values up to step {}", n, step);
    };
    return io_error("{}: its first {} bytes, where {} says to cut it, hold {}, but the checkpoint recorded {} (an edited "
                    "checkpoint, or the log of another run)", metrics, keep, file, last(*logged), last(saved));
  }
  return {};
}
}  // namespace


void Trainer::open_metrics(int64_t keep_bytes) {
  if (opts_.run_dir.empty()) return;
  Result<Metrics> m = Metrics::open(opts_.run_dir + "/metrics.jsonl", keep_bytes);
  if (!m.ok()) throw Error(m.status().message());
  impl_->metrics = std::make_unique<Metrics>(std::move(*m));
}

Status Trainer::start(bool overwrite) {
  TG_CHECK(!started_, "Trainer::start", "the run was already started or resumed");
  dist::clear_error_shared();
  dist::PatientWaits patient(*comm_);  // set-up and process 0's files may take a while
  Status setup = check_same_setup();
  if (!setup.ok()) return setup;
  Status s;
  if (!opts_.run_dir.empty() && comm_->is_main()) {  // only process 0 touches the run folder
    s = make_dirs(opts_.run_dir);
    if (s.ok()) s = check_no_link_out(opts_.run_dir);
    if (s.ok()) s = claim_run_dir(opts_.run_dir);
    if (s.ok()) {
      remove_stale_temporaries(opts_.run_dir);
      s = check_run_dir(opts_.run_dir, false, overwrite);
    }
    if (s.ok()) {
      std::error_code ec;
      for (const auto& p : earlier_run(opts_.run_dir)) fs::remove(p, ec);
      try {
        open_metrics(-1);
      } catch (const Error& e) {
        s = Status::error(e.what());
      }
    }
  }
  TG_RETURN_IF_ERROR(agree(s));
  send_state_from_main();
  started_ = true;
  return {};
}

Status Trainer::agree(Status s) {
  if (!distributed()) return s;
  std::string message = s.ok() ? "" : s.message();
  comm_->broadcast(message, 0, "agreeing on process 0's status");
  if (message.empty()) return {};
  dist::mark_error_shared();
  return Status::error(message);
}

namespace {
// 64-bit FNV-1a over bytes.
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}
}  // namespace

Status Trainer::check_same_setup() {
  if (!distributed()) return {};
  // What must agree, one line each: a mismatch is named by its line.
  std::string structure;
  for (const auto& [n, p] : model_.named_parameters())
    structure += fmt::format("{}{}{}{};", n, p.shape(), dtype_name(p.dtype()), p.requires_grad() ? "" : "f");
  const auto& o = opts_;
  const std::vector<std::pair<std::string, std::string>> items = {
      {"program configuration hash", o.config_hash.empty() ? "none" : o.config_hash},
      {"tokenizer fingerprint", o.tokenizer_fingerprint.empty() ? "none" : o.tokenizer_fingerprint},
      {"model (parameter names and shapes, hashed)", fmt::format("{:016x}", fnv1a(structure.data(), structure.size()))},
      {"optimizer", opt_.type_name()},
      {"trainer limits (max_steps, max_epochs, max_minutes)", fmt::format("{} {} {:g}", o.max_steps, o.max_epochs, o.max_minutes)},
      {"trainer settings (accumulate, clip, eval_every, checkpoint_every, seed)",
       fmt::format("{} {:g} {} {} {}", o.accumulate, o.clip_grad_norm, o.eval_every, o.checkpoint_every, o.seed)},
      {"evaluation and data-parallel settings (eval_each_epoch, eval_at_end, early stopping, bucket bytes, overlap, "
       "check_replicas_every)",
       fmt::format("{} {} {} {} {} {:g} {} {} {}", o.eval_each_epoch, o.eval_at_end, o.early_stop.metric, o.early_stop.maximize,
                   o.early_stop.patience, o.early_stop.min_delta, o.grad_sync.bucket_bytes, o.grad_sync.overlap,
                   o.check_replicas_every)},
      {"run folder", o.run_dir},
      {"precision and bf16 kernel path", state_.precision + " " + state_.cpu_path}};
  std::string mine;
  for (const auto& [k, v] : items) mine += v + "\n";
  std::vector<std::string> all;
  if (const int r = comm_->first_difference(mine, all, "comparing the processes' configurations")) {
    size_t a = 0, b = 0;
    for (const auto& [label, v0] : items) {
      (void)v0;
      const size_t ea = all[0].find('\n', a), eb = all[r].find('\n', b);
      const std::string x = all[0].substr(a, ea - a), y = all[r].substr(b, eb - b);
      if (x != y) {
        dist::mark_error_shared();
        return Status::error(fmt::format("the processes were started differently: process {} has {} '{}', process 0 '{}' "
                                         "(start every process with the same flags, model and data)", r, label, y, x));
      }
      a = ea + 1;
      b = eb + 1;
    }
  }
  return {};
}

void Trainer::send_state_from_main() {
  if (!distributed()) return;
  std::string bytes;
  if (comm_->is_main()) {
    TrainState st = state_;
    st.rngs["default"] = default_generator().state();
    st.seconds = elapsed();
    bytes = serialize_train_state(st, model_, opt_);
  }
  comm_->broadcast(bytes, 0, "sending process 0's parameters and optimizer state");
  if (comm_->is_main()) return;
  Result<TrainState> st = parse_train_state(bytes, "process 0's training state", model_, opt_);
  if (!st.ok()) throw Error(st.status().message());
  state_ = std::move(*st);
  default_generator().set_state(state_.rngs.at("default"));
  impl_->seconds_before = state_.seconds;
  impl_->clock = std::chrono::steady_clock::now();
}

void Trainer::check_replicas() {
  std::string mine;
  std::vector<std::string> names;
  for (const auto& [n, p] : model_.state_dict()) {  // parameters and buffers
    const uint64_t h = fnv1a(p.raw_data(), static_cast<size_t>(p.numel()) * dtype_size(p.dtype()));
    mine.append(reinterpret_cast<const char*>(&h), sizeof h);
    names.push_back(n);
  }
  std::vector<std::string> all;
  if (const int r = comm_->first_difference(mine, all, "comparing the processes' parameters")) {
    size_t i = 0;
    while (i < names.size() && all[r].compare(i * 8, 8, all[0], i * 8, 8) == 0) ++i;
    dist::mark_error_shared();
    throw Error(fmt::format("Trainer: after step {} '{}' differs between process 0 and process {} (the replicas "
                            "diverged: a process-dependent random draw, or an op that is not deterministic)",
                            state_.step, i < names.size() ? names[i] : "?", r));
  }
}

dist::SyncStats Trainer::sync_stats() const { return impl_->sync ? impl_->sync->last_stats() : dist::SyncStats{}; }

Status Trainer::resume(const std::string& path) {
  TG_CHECK(!started_, "Trainer::resume", "the run was already started or resumed");
  dist::clear_error_shared();
  dist::PatientWaits patient(*comm_);  // process 0 reads the checkpoint while the others wait
  Status setup = check_same_setup();
  if (!setup.ok()) return setup;
  // Process 0 reads the checkpoint (the others need not see the run folder) and sends it on.
  Status s = comm_->is_main() ? resume_here(path) : Status{};
  TG_RETURN_IF_ERROR(agree(s));
  if (distributed()) {
    send_state_from_main();
    impl_->last_eval_step = impl_->last_save_step = state_.step;
  }
  started_ = true;
  return {};
}

Status Trainer::resume_here(const std::string& path) {
  std::string file = path;
  if (!opts_.run_dir.empty()) {
    TG_RETURN_IF_ERROR(check_no_link_out(opts_.run_dir));
    TG_RETURN_IF_ERROR(claim_run_dir(opts_.run_dir));
  }
  Result<SafetensorsFile> ckpt = Status::error("no checkpoint read");
  if (file.empty()) {
    // The newest checkpoint of the folder that passes the integrity checks; a corrupt one is set
    // aside as NAME.corrupt, saying so, and the next older one is tried.
    if (opts_.run_dir.empty()) return Status::error("resume: no run_dir and no checkpoint path given");
    remove_stale_temporaries(opts_.run_dir);
    const auto found = checkpoints_in(opts_.run_dir);
    if (found.empty()) return io_error("{}: no checkpoint-*.safetensors to resume from", opts_.run_dir);
    std::vector<std::string> set_aside;
    for (auto it = found.rbegin(); it != found.rend(); ++it) {
      file = opts_.run_dir + "/" + it->second;
      bool corrupt = false;
      ckpt = read_checkpoint(file, &corrupt);
      if (ckpt.ok() || !corrupt) break;
      std::error_code ec;
      fs::rename(file, file + ".corrupt", ec);
      if (ec) return io_error("{} (and it cannot be renamed to {}.corrupt: {})", ckpt.status().message(), it->second, ec.message());
      std::fprintf(stderr, "tapegrad: %s\ntapegrad: set aside as %s.corrupt; trying the checkpoint before it\n",
                   std::string(ckpt.status().message()).c_str(), it->second.c_str());
      set_aside.push_back(it->second);
    }
    if (!ckpt.ok() && set_aside.size() == found.size())
      return io_error("{}: every checkpoint is corrupt ({} set aside as *.corrupt); nothing to resume from", opts_.run_dir,
                      set_aside.size());
    if (ckpt.ok() && !set_aside.empty())
      std::fprintf(stderr, "tapegrad: resuming from %s, the newest checkpoint that passes the checks\n",
                   fs::path(file).filename().string().c_str());
  } else {
    ckpt = read_checkpoint(file);  // named on purpose: refused when corrupt, never renamed
  }
  if (!ckpt.ok()) return ckpt.status();
  Result<TrainState> peek = peek_train_state(*ckpt, file);
  if (!peek.ok()) return peek.status();
  if (!peek->config.empty() || !opts_.config.empty()) {
    std::vector<std::string> differ;
    Metadata all = peek->config;
    all.insert(opts_.config.begin(), opts_.config.end());
    auto value = [](const Metadata& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? std::string("(not set)") : it->second.empty() ? std::string("none") : clip_for_message(it->second, 200);
    };
    auto same = [](const Metadata& a, const Metadata& b, const std::string& k) {  // the whole values, not the clipped ones
      auto x = a.find(k), y = b.find(k);
      return (x == a.end()) == (y == b.end()) && (x == a.end() || x->second == y->second);
    };
    for (const auto& [k, v] : all)
      if (!same(opts_.config, peek->config, k))
        differ.push_back(fmt::format("{} is {} here but {} in the run being resumed", k, value(opts_.config, k), value(peek->config, k)));
    if (!differ.empty())
      return io_error("{}: saved by a run configured differently: {}; resume with the same settings, or start a new run", file,
                      fmt::format("{}", fmt::join(differ, "; ")));
  } else if (peek->config_hash != opts_.config_hash)
    return io_error("{}: saved by a run configured differently (configuration hash {} here, {} in the checkpoint): resume "
                    "with the same settings, or start a new run",
                    file, opts_.config_hash.empty() ? "none" : opts_.config_hash,
                    peek->config_hash.empty() ? "none" : peek->config_hash);
  if (peek->tokenizer_fingerprint != opts_.tokenizer_fingerprint)
    return io_error("{}: trained with another tokenizer (fingerprint {} in the checkpoint, {} for the tokenizer files given)",
                    file, peek->tokenizer_fingerprint.empty() ? "none" : peek->tokenizer_fingerprint,
                    opts_.tokenizer_fingerprint.empty() ? "none" : opts_.tokenizer_fingerprint);
  if (peek->micro_step != 0)
    return io_error("{}: saved in the middle of gradient accumulation (micro_step {}), which this version does not resume", file,
                    peek->micro_step);
  if (!peek->rngs.count("default")) return io_error("{}: metadata 'rng.default' is missing", file);
  TG_RETURN_IF_ERROR(check_position(file, *peek));
  if (!opts_.run_dir.empty()) TG_RETURN_IF_ERROR(check_metrics_cut(opts_.run_dir + "/metrics.jsonl", file, *peek));
  Result<TrainState> st = load_train_state(*ckpt, file, model_, opt_);
  if (!st.ok()) return st.status();
  if (opt_.steps() != st->step)
    return io_error("{}: its step {} disagrees with the optimizer's step count {} stored beside it (an edited or mixed-up "
                    "checkpoint)", file, st->step, opt_.steps());
  const std::string was = st->precision + (st->cpu_path.empty() ? "" : " on the " + st->cpu_path + " path");
  state_ = std::move(*st);
  set_precision_record();
  const std::string now = state_.precision + (state_.cpu_path.empty() ? "" : " on the " + state_.cpu_path + " path");
  if (was != now)
    std::fprintf(stderr, "tapegrad: %s was computed in %s; this run continues in %s, so it will not be bit-identical to "
                 "an uninterrupted run\n", file.c_str(), was.c_str(), now.c_str());
  impl_->resumed_from = fs::path(file).filename().string();
  impl_->last_good = file;
  default_generator().set_state(state_.rngs.at("default"));
  impl_->seconds_before = state_.seconds;
  impl_->clock = std::chrono::steady_clock::now();
  impl_->last_eval_step = impl_->last_save_step = state_.step;
  if (!opts_.run_dir.empty()) {
    try {
      open_metrics(state_.metrics_bytes);
    } catch (const Error& e) {
      return Status::error(e.what());
    }
  }
  return {};
}

void Trainer::log(const std::string& kind, const std::vector<std::pair<std::string, double>>& values) {
  for (const auto& [k, v] : values) state_.history[kind + "/" + k].emplace_back(static_cast<double>(state_.step), v);
  if (impl_->metrics) impl_->metrics->log(kind, state_.step, values).or_throw();
}

std::string Trainer::save_checkpoint() {
  if (opts_.run_dir.empty()) return "";
  const std::string path = checkpoint_path(state_.step);
  const std::string name = fs::path(path).filename().string();
  state_.seconds = elapsed();
  state_.rngs["default"] = default_generator().state();
  state_.metrics_bytes = impl_->metrics ? impl_->metrics->bytes() : -1;
  if (callbacks.before_save) callbacks.before_save(state_);
  impl_->last_save_step = state_.step;
  if (comm_->is_main()) {  // process 0 writes
    save_train_state(path, state_, model_, opt_).or_throw();
    // Keep the newest keep_last checkpoints of the folder, found by their names, and the one this run
    // resumed from. Only after the new one is safely written.
    const auto found = checkpoints_in(opts_.run_dir);
    for (size_t i = 0; i + static_cast<size_t>(opts_.keep_last) < found.size(); ++i) {
      const std::string& file = found[i].second;
      if (file == name || file == impl_->resumed_from) continue;
      std::error_code ec;
      fs::remove(opts_.run_dir + "/" + file, ec);
    }
    if (callbacks.on_checkpoint) callbacks.on_checkpoint(path);
  }
  impl_->last_good = path;
  if (distributed()) {  // the others wait for the write with the patient limit, not a step's
    dist::PatientWaits patient(*comm_);
    comm_->barrier("process 0 writing a checkpoint");
  }
  return path;
}

double Trainer::evaluate_loss(const std::vector<std::vector<int64_t>>& batches, const StepFn& step) {
  NoGradGuard ng;
  std::optional<AutocastGuard> autocast;
  if (opts_.precision == kBFloat16) autocast.emplace(kBFloat16);
  const bool was = model_.is_training();
  model_.eval();
  double sums[2] = {0, 0};  // loss, count; with several processes each takes every size()-th batch
  for (size_t i = static_cast<size_t>(comm_->rank()); i < batches.size(); i += static_cast<size_t>(comm_->size())) {
    StepOutput out = step(batches[i]);
    sums[0] += out.loss_sum.item();
    sums[1] += out.count;
  }
  comm_->all_reduce_sum(sums, 2, "the evaluation loss");
  model_.train(was);
  return sums[1] > 0 ? sums[0] / sums[1] : NAN;
}

bool Trainer::evaluate(const EvalFn& eval, FitResult& result) {
  if (!eval) return false;
  std::map<std::string, double> m;
  {
    NoGradGuard ng;
    std::optional<AutocastGuard> autocast;
    if (opts_.precision == kBFloat16) autocast.emplace(kBFloat16);
    const bool was = model_.is_training();
    model_.eval();
    m = eval();
    model_.train(was);
  }
  if (distributed()) {  // every process evaluates; process 0's numbers decide (early stopping) for all
    dist::PatientWaits patient(*comm_);
    std::string bytes;  // per metric: name length, name, the double's bytes
    for (const auto& [k, v] : m) {
      const uint64_t n = k.size();
      bytes.append(reinterpret_cast<const char*>(&n), sizeof n).append(k).append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    comm_->broadcast(bytes, 0, "sharing the evaluation");
    m.clear();
    for (size_t a = 0; a + sizeof(uint64_t) <= bytes.size();) {
      uint64_t n = 0;
      double v = 0;
      std::memcpy(&n, bytes.data() + a, sizeof n);
      const std::string k = bytes.substr(a + sizeof n, n);
      std::memcpy(&v, bytes.data() + a + sizeof n + n, sizeof v);
      m[k] = v;
      a += sizeof n + n + sizeof v;
    }
  }
  impl_->last_eval_step = state_.step;
  std::vector<std::pair<std::string, double>> values(m.begin(), m.end());
  log("valid", values);
  if (callbacks.on_eval) callbacks.on_eval(state_.step, m);
  const EarlyStopping& es = opts_.early_stop;
  if (es.metric.empty()) return false;
  auto it = m.find(es.metric);
  if (it == m.end()) {
    std::string keys;
    for (const auto& [k, v] : m) keys += (keys.empty() ? "" : ", ") + k;
    throw Error(fmt::format("Trainer: early stopping watches '{}', but evaluation returned only: {}", es.metric,
                            keys.empty() ? "nothing" : keys));
  }
  const double v = it->second;
  const bool better = std::isfinite(v) && (!state_.has_best || (es.maximize ? v > state_.best + es.min_delta
                                                                             : v < state_.best - es.min_delta));
  if (better) {
    state_.best = v;
    state_.has_best = true;
    state_.best_step = state_.step;
    state_.bad_evals = 0;
    if (opts_.save_best && !opts_.run_dir.empty()) {
      if (comm_->is_main())
        save_module(model_, opts_.run_dir + "/best.safetensors",
                    {{"step", std::to_string(state_.step)}, {es.metric, fmt::format("{:.17g}", v)}})
            .or_throw();
      if (distributed()) {
        dist::PatientWaits patient(*comm_);
        comm_->barrier("process 0 writing best.safetensors");
      }
    }
    return false;
  }
  if (++state_.bad_evals < es.patience) return false;
  result.reason = StopReason::kEarlyStopping;
  result.message = fmt::format("early stopping at step {}: {} did not improve for {} evaluations (best {:.6g} at step {})",
                               state_.step, es.metric, state_.bad_evals, state_.best, state_.best_step);
  return true;
}

FitResult Trainer::fit(const Sampler& train, const StepFn& step_fn, const EvalFn& eval) {
  if (!started_) start().or_throw();
  FitResult result;
  std::optional<InterruptGuard> interrupts;
  if (opts_.handle_interrupts) interrupts.emplace();
  const std::vector<Tensor> params = model_.trainable_parameters();
  TG_CHECK(!params.empty(), "Trainer::fit", "the model has no trainable parameters");
  // Gradient buckets over the trainable parameters (rebuilt when that set changed since the last fit).
  std::vector<std::pair<std::string, Tensor>> trainable;
  for (const auto& [name, p] : model_.named_parameters())
    if (p.requires_grad()) trainable.emplace_back(name, p);
  if (distributed()) {
    bool same = impl_->sync && impl_->sync->params().size() == trainable.size();
    for (size_t i = 0; same && i < trainable.size(); ++i) same = impl_->sync->params()[i].first == trainable[i].first;
    if (!same) {
      impl_->sync = std::make_unique<dist::GradientSync>(*comm_, trainable, opts_.grad_sync);
      impl_->sync_index.clear();
      for (size_t i = 0; i < trainable.size(); ++i) impl_->sync_index[trainable[i].first] = i;
    }
  }
  if (callbacks.on_grad_ready || impl_->sync) {
    for (const auto& [name, p] : trainable) {
      if (!impl_->hooked.insert(name).second) continue;  // once per parameter
      Tensor param = p;
      param.register_post_accumulate_grad_hook([this, name = name, alive = impl_->alive](const Tensor& t) {
        if (!*alive || !impl_->grads_final) return;
        if (callbacks.on_grad_ready) callbacks.on_grad_ready(name, t);
        if (impl_->sync) {
          auto it = impl_->sync_index.find(name);
          if (it != impl_->sync_index.end()) impl_->sync->ready(it->second);
        }
      });
    }
  }
  model_.train();
  opt_.zero_grad();
  // On a GPU (the model's parameters there): no host read between reports. The divergence flag
  // lives on the device; the optimizer skips its updates once it is raised (reset on return).
  const Device device = params.front().device();
  const bool on_gpu = device.is_cuda();
  // 0: every step on the CPU; on a GPU every 25th, so that the host reads the loss (and waits for
  // the GPU) once in 25 steps rather than at each.
  const int64_t log_every = opts_.log_every > 0 ? opts_.log_every : on_gpu ? 25 : 1;
  TG_CHECK(!on_gpu || !distributed(), "Trainer::fit", "data-parallel training ({} processes) runs on the CPU; the model is "
           "on {}", comm_->size(), device);
  std::unique_ptr<NonFiniteFlag> flag;
  struct SkipReset {
    Optimizer& opt;
    ~SkipReset() { opt.set_skip_flag(nullptr); }
  } skip_reset{opt_};
  if (on_gpu) {
    flag = std::make_unique<NonFiniteFlag>(device);
    opt_.set_skip_flag(flag.get());
  }
  double gpu_loss = NAN, gpu_norm = NAN;
  bool gpu_fresh = false;
  std::function<void(const char*)> finish_bar;
  // Reads the device flag: when raised, fills `result` with the first bad step (the parameters are
  // those from before it: every later update skipped itself) and returns true.
  auto gpu_diverged = [&]() {
    if (!flag || !flag->raised()) return false;
    const int64_t bad = flag->first_step();
    opt_.zero_grad();
    result.reason = StopReason::kDiverged;
    result.message = fmt::format(
        "training diverged at step {}: its loss or gradient norm was not finite (found on {} at step {}); the optimizer "
        "skipped every update from it on, so the parameters are those of step {}; last good checkpoint: {}",
        bad, device, state_.step, bad - 1, last_checkpoint().empty() ? "none" : last_checkpoint());
    result.step = bad - 1;
    result.last_checkpoint = last_checkpoint();
    if (finish_bar) finish_bar("diverged");
    return true;
  };

  // The epoch's batches, skipping what a resumed run already consumed.
  std::vector<std::vector<int64_t>> batches;
  size_t next = 0;
  auto load_epoch = [&]() {
    batches = train.batches(state_.sampler_seed, state_.epoch);
    TG_CHECK(!batches.empty(), "Trainer::fit", "the sampler gave no batches for epoch {}", state_.epoch);
    next = 0;
    int64_t skipped = 0;
    while (skipped < state_.epoch_samples && next < batches.size()) skipped += static_cast<int64_t>(batches[next++].size());
    TG_CHECK(skipped == state_.epoch_samples, "Trainer::fit",
             "the checkpoint is {} samples into epoch {}, which falls inside a batch of this sampler: resume with the same data "
             "and batch settings", state_.epoch_samples, state_.epoch);
  };
  load_epoch();
  if (distributed() && comm_->is_main() && !impl_->said_parallel && next < batches.size()) {
    // A data-parallel run says so first: otherwise it cannot be told from N independent runs.
    impl_->said_parallel = true;
    const int64_t global = static_cast<int64_t>(batches[next].size()) * opts_.accumulate;
    std::fprintf(stderr, "tapegrad: data-parallel training: %d processes x %d thread%s; a step's global batch is %lld samples (%s%lld a process)\n",
                 comm_->size(), num_threads(), num_threads() == 1 ? "" : "s", static_cast<long long>(global),
                 global % comm_->size() == 0 ? "" : "about ", static_cast<long long>((global + comm_->size() - 1) / comm_->size()));
  }
  if (distributed()) {  // the same data on every process, or the shards would not add up
    std::string order;
    for (const auto& b : batches) order.append(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(int64_t)).push_back(';');
    const uint64_t h = fnv1a(order.data(), order.size());
    const std::string mine = fmt::format("{} batches, {:016x}", batches.size(), h);
    std::vector<std::string> all;
    if (const int r = comm_->first_difference(mine, all, "comparing the processes' data")) {
      dist::mark_error_shared();
      throw Error(fmt::format("Trainer::fit: the processes have different training data: process {} has {}, process 0 {} (give "
                              "every process the same data and batch settings)", r, all[static_cast<size_t>(r)], all[0]));
    }
  }

  // The bar counts steps to max_steps, or else the steps of the current epoch.
  double units = 0, ema = 0, ema_weight = 0;  // the progress line's loss: a debiased moving average
  std::unique_ptr<Progress> progress;
  int64_t bar_start = state_.step;
  auto new_bar = [&] {
    if (!opts_.show_progress || !comm_->is_main()) return;
    if (progress) progress->finish();
    bar_start = state_.step;
    units = 0;
    const int64_t a = opts_.accumulate, left = static_cast<int64_t>(batches.size() - next);
    const int64_t total = opts_.max_steps > 0 ? opts_.max_steps - state_.step : (left + a - 1) / a;
    progress = std::make_unique<Progress>(std::max<int64_t>(total, 1),
                                          opts_.max_steps > 0 ? "train" : fmt::format("epoch {}", state_.epoch + 1), opts_.unit);
  };
  auto limit_reached = [&] {
    if (opts_.max_steps > 0 && state_.step >= opts_.max_steps) {
      result.reason = StopReason::kMaxSteps;
      result.message = fmt::format("reached max_steps {}", opts_.max_steps);
      return true;
    }
    if (opts_.max_epochs > 0 && state_.epoch >= opts_.max_epochs) {
      result.reason = StopReason::kMaxEpochs;
      result.message = fmt::format("finished {} epochs", opts_.max_epochs);
      return true;
    }
    // With several processes, process 0's clock decides for all.
    if (opts_.max_minutes > 0 && comm_->from_main(elapsed() >= opts_.max_minutes * 60)) {
      result.reason = StopReason::kTimeBudget;
      result.message = fmt::format("used the time budget of {:g} minutes", opts_.max_minutes);
      return true;
    }
    return false;
  };
  if (limit_reached()) {  // a finished run resumed: say so rather than show an empty bar
    result.nothing_left = true;
    result.step = state_.step;
    result.last_checkpoint = last_checkpoint();
    if (comm_->is_main())
      std::fprintf(stderr, "tapegrad: nothing left to do: the run (at step %lld, epoch %lld, %.1f min of training) %s already; "
                   "raise that limit to train further\n", static_cast<long long>(state_.step),
                   static_cast<long long>(state_.epoch), state_.seconds / 60, result.message.c_str());
    return result;
  }
  new_bar();
  finish_bar = [&](const char* what) {
    if (progress) progress->finish(what);
  };

  for (;;) {
    if (limit_reached()) break;
    if (next >= batches.size()) {
      load_epoch();
      if (opts_.max_steps == 0) new_bar();
    }

    // One optimizer step: forward and backward of each micro-batch (summed losses), under autocast
    // in bfloat16 (the all-reduce, clipping and the optimizer step run after it, in float32).
    double loss_sum = 0, count = 0;
    Tensor loss_on_device;  // on a GPU: the step's summed loss, read back only when reported
    std::optional<AutocastGuard> autocast;
    if (opts_.precision == kBFloat16) autocast.emplace(kBFloat16);
    for (int64_t m = 0; m < opts_.accumulate && next < batches.size(); ++m) {
      const std::vector<int64_t>& global = batches[next++];
      impl_->grads_final = m + 1 == opts_.accumulate || next == batches.size();
      // This process's share (all of it with one process; possibly none of a batch smaller than the process count).
      const std::vector<int64_t> b = distributed() ? dist::shard(global, comm_->rank(), comm_->size()) : global;
      if (!b.empty()) {
        // Dropout keyed by (seed, step, sample, position): the same masks however the batch is split.
        SampleKeyScope keys(mix_key(state_.sampler_seed, static_cast<uint64_t>(state_.step + 1)), b);
        StepOutput out = step_fn(b);
        TG_CHECK(out.loss_sum.defined() && out.loss_sum.numel() == 1, "Trainer::fit",
                 "the step function must return a one-element loss, got {}",
                 out.loss_sum.defined() ? fmt::format("shape {}", out.loss_sum.shape()) : std::string("an undefined tensor"));
        TG_CHECK(out.count >= 0 && std::isfinite(out.count) && (out.count > 0 || distributed()), "Trainer::fit",
                 "the step function returned count {} (expected > 0)", out.count);
        out.loss_sum.backward();
        if (on_gpu) {
          TG_CHECK(out.loss_sum.device() == device, "Trainer::fit", "the step function's loss is on {}, the model on {}",
                   out.loss_sum.device(), device);
          const Tensor l = to(out.loss_sum.detach().reshape({}), kFloat64);
          loss_on_device = loss_on_device.defined() ? add(loss_on_device, l) : l;
        } else {
          loss_sum += out.loss_sum.item();
        }
        count += out.count;
      }
      impl_->grads_final = false;
      state_.epoch_samples += static_cast<int64_t>(global.size());
      state_.samples += static_cast<int64_t>(global.size());
    }
    autocast.reset();
    if (distributed()) {  // gradients, losses and counts summed over the processes
      impl_->sync->finish();
      double sums[2] = {loss_sum, count};
      comm_->all_reduce_sum(sums, 2, "the step's loss and count");
      loss_sum = sums[0];
      count = sums[1];
      TG_CHECK(count > 0, "Trainer::fit", "the step functions of all processes returned count 0 at step {}", state_.step + 1);
    }
    if (on_gpu) {
      // No host read: the loss and the norm raise the device flag, the optimizer's launch skips
      // itself once it is raised, and the values are read when something reports them.
      flag->check(loss_on_device, state_.step + 1);
      const Tensor norm_t = clip_grad_norm_(params, opts_.clip_grad_norm, flag.get(), state_.step + 1, 1.0 / count);
      if (schedule_) opt_.set_lr(schedule_(state_.step + 1));
      opt_.step();
      opt_.zero_grad();
      ++state_.step;
      const bool epoch_end = next >= batches.size();
      const bool report = state_.step % log_every == 0 || callbacks.on_step || callbacks.should_stop ||
                          (opts_.eval_every > 0 && state_.step % opts_.eval_every == 0) || (epoch_end && opts_.eval_each_epoch) ||
                          (opts_.checkpoint_every > 0 && state_.step % opts_.checkpoint_every == 0) ||
                          interrupt_signal() != 0 || (opts_.max_steps > 0 && state_.step >= opts_.max_steps);
      if (report) {
        if (gpu_diverged()) return result;
        gpu_loss = loss_on_device.item() / count;
        gpu_norm = norm_t.item();
      }
      gpu_fresh = report;
    }
    const double loss = on_gpu ? gpu_loss : loss_sum / count;
    const double norm = on_gpu ? gpu_norm : grad_norm(params) / count;
    if (!on_gpu && (!std::isfinite(loss) || !std::isfinite(norm))) {
      opt_.zero_grad();
      result.reason = StopReason::kDiverged;
      result.message = fmt::format(
          "training diverged at step {}: loss {} and gradient norm {}; stopped before the optimizer step, so the parameters "
          "are those of step {}; last good checkpoint: {}",
          state_.step + 1, loss, norm, state_.step, last_checkpoint().empty() ? "none" : last_checkpoint());
      result.step = state_.step;
      result.last_checkpoint = last_checkpoint();
      if (progress) progress->finish("diverged");
      return result;  // nothing is saved: the state in memory is past the last good step
    }
    if (!on_gpu) {
      double scale = 1.0 / count;
      if (opts_.clip_grad_norm > 0 && norm > opts_.clip_grad_norm) scale *= opts_.clip_grad_norm / (norm + 1e-6);
      scale_grads(params, scale);
      if (schedule_) opt_.set_lr(schedule_(state_.step + 1));
      opt_.step();
      opt_.zero_grad();
      ++state_.step;
    }
    if (distributed() && opts_.check_replicas_every > 0 && state_.step % opts_.check_replicas_every == 0) check_replicas();

    const bool epoch_done = next >= batches.size();
    if (epoch_done) {
      ++state_.epoch;
      state_.epoch_samples = 0;
    }
    StepInfo info{state_.step, state_.epoch, loss, norm, opt_.lr(), count, elapsed()};
    if (state_.step % log_every == 0) {
      std::vector<std::pair<std::string, double>> values{{"loss", loss}, {"lr", opt_.lr()}, {"grad_norm", norm}, {opts_.unit, count}};
      if (on_gpu) values.emplace_back("gpu_peak_mib", static_cast<double>(cuda::memory_stats(device.index).peak_allocated) / (1 << 20));
      log("train", values);
    }
    if (callbacks.on_step) callbacks.on_step(info);
    units += count;
    if (!on_gpu || gpu_fresh) {  // on a GPU the bar's loss moves at the steps whose loss was read
      ema = 0.9 * ema + 0.1 * loss;
      ema_weight = 0.9 * ema_weight + 0.1;
    }
    const double smooth = ema_weight > 0 ? ema / ema_weight : NAN;
    if (progress) {
      progress->update(state_.step - bar_start,
                       std::isnan(smooth) && on_gpu  // on a GPU: no loss read yet
                           ? fmt::format("epoch {}  lr {:.2e}", state_.epoch + (epoch_done ? 0 : 1), opt_.lr())
                           : fmt::format("epoch {}  loss {:.4f}  lr {:.2e}", state_.epoch + (epoch_done ? 0 : 1), smooth,
                                         opt_.lr()),
                       static_cast<int64_t>(units));
    }

    bool stop = false;
    const bool eval_now = (opts_.eval_every > 0 && state_.step % opts_.eval_every == 0) || (epoch_done && opts_.eval_each_epoch);
    if (eval_now) stop = evaluate(eval, result);
    const bool asked = callbacks.should_stop && callbacks.should_stop(info);
    if (comm_->from_main(interrupt_signal() != 0)) {  // process 0's terminal decides for all
      const int sig = comm_->from_main(interrupt_signal() == SIGTERM) ? SIGTERM : SIGINT;
      stop = true;
      result.reason = StopReason::kInterrupted;
      result.signal = sig;
      result.message = fmt::format("interrupted by {} at step {}", sig == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM", state_.step);
    } else if (comm_->any(asked) && !stop) {
      stop = true;
      result.reason = StopReason::kStopRequested;
      result.message = fmt::format("stopped on request at step {}", state_.step);
    }
    if ((opts_.checkpoint_every > 0 && state_.step % opts_.checkpoint_every == 0) ||
        (opts_.checkpoint_every == 0 && eval_now) || stop)
      save_checkpoint();
    if (stop) break;
    fault_point("Trainer::fit: between steps");
  }
  if (on_gpu && gpu_diverged()) return result;  // never evaluate or save a diverged state
  if (opts_.eval_at_end && !result.interrupted() && impl_->last_eval_step != state_.step && state_.step > 0) {
    FitResult ignored;  // training has stopped already: this evaluation only reports
    evaluate(eval, ignored);
  }
  if (impl_->last_save_step != state_.step) save_checkpoint();
  if (progress) progress->finish(fmt::format("loss {:.4f}", ema_weight > 0 ? ema / ema_weight : NAN));
  result.step = state_.step;
  result.last_checkpoint = last_checkpoint();
  return result;
}

}  // namespace tg::train
